//! The buffers a tuning run writes: saved before the variants run, restored before
//! each one and after the last, and compared with the reference (the first variant
//! that ran).
//!
//! Where the copies live:
//! - On the CPU, and whenever the device path is not available, in host memory: each
//!   buffer's bytes are read once to save it, written back to restore it, and read
//!   again after each variant to compare on the host.
//! - When every written buffer is on the CUDA device of the tuning stream, on that
//!   device: saving, restoring and keeping the reference are device-to-device copies
//!   into scratch allocations, queued on the tuning stream (each ordered after other
//!   streams' conflicting accesses and made under the storage's lock, as a launch
//!   is). The comparison is a kernel (`compare.cu`, compiled once per device with
//!   NVRTC, no headers needed) that finds the first element outside the tolerance;
//!   per variant one 8-byte word per buffer comes back (and, on a mismatch, the two
//!   elements that differ, for the message). The tolerance's scale (max |reference|)
//!   is a kernel too, once per tuning run. Without NVRTC, or when the scratch memory
//!   cannot be allocated, the outputs come back to the host once per variant and are
//!   compared there (or the whole run uses host copies); `TILE_JIT_DIAGNOSTICS=1`
//!   says why.
//!
//! Both paths give the same verdicts: the kernel reads each element as the host
//! comparison does ([`values`]), which the tests check by building `compare.cu`'s
//! element functions with the host C compiler.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr};

use crate::arg::ArgRef;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::stream::Stream;
use crate::tensor::Storage;

/// The comparison kernels' source (also built on the host by the tests).
pub(super) const SOURCE: &str = include_str!("compare.cu");

/// The saved buffers, the reference and how they are compared.
pub(super) struct Outputs<'a> {
    bufs: Vec<&'a ArgRef<'a>>,
    place: Place,
}

enum Place {
    Host {
        saved: Vec<Vec<u8>>,
        reference: Option<Vec<Vec<u8>>>,
    },
    Device(DeviceCopies),
}

struct DeviceCopies {
    stream: Arc<CudaStream>,
    saved: Vec<CudaSlice<u8>>,
    /// The reference on the device (with each buffer's tolerance), or on the host
    /// when there are no comparison kernels or no memory for it.
    reference: Option<Reference>,
    kernels: Option<Arc<Kernels>>,
    /// One word per buffer that the kernels reduce into.
    words: CudaSlice<u64>,
}

enum Reference {
    Device {
        copies: Vec<CudaSlice<u8>>,
        atol: Vec<f64>,
        kernels: Arc<Kernels>,
    },
    Host(Vec<Vec<u8>>),
}

impl<'a> Outputs<'a> {
    /// Saves the buffers of `args` that a launch writes (each memory range once).
    pub(super) fn take(
        args: &'a [ArgRef<'a>],
        stream: &Stream,
        diagnostics: bool,
    ) -> Result<Outputs<'a>> {
        let mut bufs: Vec<&ArgRef<'_>> = Vec::new();
        for a in args.iter().filter(|a| a.output) {
            if !bufs
                .iter()
                .any(|b| b.ptr == a.ptr && b.storage_addr() == a.storage_addr())
            {
                bufs.push(a);
            }
        }
        if let Stream::Cuda(s) = stream {
            if !bufs.is_empty() && bufs.iter().all(|a| a.device == stream.device()) {
                match DeviceCopies::take(&bufs, s, diagnostics) {
                    Ok(d) => {
                        return Ok(Outputs {
                            bufs,
                            place: Place::Device(d),
                        })
                    }
                    Err(e) if diagnostics => {
                        eprintln!("tile autotune: outputs saved on the host: {e}")
                    }
                    Err(_) => {}
                }
            }
        }
        let saved = bufs.iter().map(|a| read_bytes(a)).collect::<Result<_>>()?;
        Ok(Outputs {
            bufs,
            place: Place::Host {
                saved,
                reference: None,
            },
        })
    }

    /// Puts the saved contents back (queued on the tuning stream on a device).
    pub(super) fn restore(&self) -> Result<()> {
        match &self.place {
            Place::Host { saved, .. } => {
                for (a, bytes) in self.bufs.iter().zip(saved) {
                    let (first, _) = byte_span(a);
                    a.storage.write::<u8>(first, bytes)?;
                }
                Ok(())
            }
            Place::Device(d) => {
                bind(&d.stream)?;
                for (a, copy) in self.bufs.iter().zip(&d.saved) {
                    let (first, len) = byte_span(a);
                    let at = (a.storage.base() + first) as u64;
                    copy_on(a.storage, true, at, ptr(copy, &d.stream), len, &d.stream)?;
                }
                Ok(())
            }
        }
    }

    /// Keeps the buffers' current contents as the reference the later variants are
    /// compared with.
    pub(super) fn keep_reference(&mut self) -> Result<()> {
        match &mut self.place {
            Place::Host { reference, .. } => {
                *reference = Some(
                    self.bufs
                        .iter()
                        .map(|a| read_bytes(a))
                        .collect::<Result<_>>()?,
                );
            }
            Place::Device(d) => {
                let on_device = match d.kernels.clone() {
                    Some(k) => d.device_reference(&self.bufs, k).ok(),
                    None => None,
                };
                d.reference = Some(match on_device {
                    Some(r) => r,
                    None => Reference::Host(
                        self.bufs
                            .iter()
                            .map(|a| read_bytes(a))
                            .collect::<Result<_>>()?,
                    ),
                });
            }
        }
        Ok(())
    }

    /// Why the buffers' current contents differ from the reference, or `None` when
    /// every element is within the tolerance (see [`tolerance`]).
    pub(super) fn compare(&self) -> Result<Option<String>> {
        let reference = match &self.place {
            Place::Host { reference, .. } => reference.as_ref(),
            Place::Device(d) => match &d.reference {
                Some(Reference::Device {
                    copies,
                    atol,
                    kernels,
                }) => {
                    return d.compare_on_device(&self.bufs, copies, atol, kernels);
                }
                Some(Reference::Host(r)) => Some(r),
                None => None,
            },
        };
        let Some(want) = reference else {
            return Ok(None);
        };
        let got: Vec<Vec<u8>> = self
            .bufs
            .iter()
            .map(|a| read_bytes(a))
            .collect::<Result<_>>()?;
        Ok(compare(&self.bufs, want, &got))
    }

    /// Where the copies and the comparison are (`TuneReport::checked_on`).
    pub(super) fn place(&self) -> &'static str {
        match &self.place {
            Place::Host { .. } => "host",
            Place::Device(DeviceCopies {
                reference: Some(Reference::Device { .. }),
                ..
            }) => "device",
            Place::Device(_) => "device copies, compared on the host",
        }
    }
}

impl DeviceCopies {
    fn take(bufs: &[&ArgRef<'_>], s: &Arc<CudaStream>, diagnostics: bool) -> Result<DeviceCopies> {
        bind(s)?;
        let mut saved = Vec::with_capacity(bufs.len());
        for a in bufs {
            let (first, len) = byte_span(a);
            let copy = alloc(s, len)?;
            let at = (a.storage.base() + first) as u64;
            copy_on(a.storage, false, ptr(&copy, s), at, len, s)?;
            saved.push(copy);
        }
        let words = s
            .alloc_zeros::<u64>(bufs.len().max(1))
            .map_err(|e| Error::driver("cuMemAlloc", e))?;
        Ok(DeviceCopies {
            stream: Arc::clone(s),
            saved,
            reference: None,
            kernels: kernels(s, diagnostics),
            words,
        })
    }

    /// Copies the buffers into new scratch memory and computes each one's tolerance.
    fn device_reference(&mut self, bufs: &[&ArgRef<'_>], k: Arc<Kernels>) -> Result<Reference> {
        let s = &self.stream;
        bind(s)?;
        let mut copies = Vec::with_capacity(bufs.len());
        for a in bufs {
            let (first, len) = byte_span(a);
            let copy = alloc(s, len)?;
            let at = (a.storage.base() + first) as u64;
            copy_on(a.storage, false, ptr(&copy, s), at, len, s)?;
            copies.push(copy);
        }
        // max |reference| of each buffer whose dtype has a tolerance.
        let words = ptr(&self.words, s);
        memset(words, 0, bufs.len(), s)?;
        for (i, (a, copy)) in bufs.iter().zip(&copies).enumerate() {
            let n = (byte_span(a).1 / elem_size(a.dtype)) as u64;
            if tolerance(a.dtype) > 0.0 && n > 0 {
                let (mut w, mut n, mut code) = (ptr(copy, s), n, dtype_code(a.dtype));
                let mut out = words + 8 * i as u64;
                let mut params = [
                    (&mut w) as *mut u64 as *mut c_void,
                    (&mut n) as *mut u64 as *mut c_void,
                    (&mut code) as *mut i32 as *mut c_void,
                    (&mut out) as *mut u64 as *mut c_void,
                ];
                // SAFETY: the parameters match `tile_tune_absmax`'s signature; `w` holds
                // `n` elements of this dtype and `out` is a word of `self.words`, both
                // allocated on `s` and alive until the stream is synchronized below.
                unsafe { launch(&k.absmax, s, n, &mut params)? };
            }
        }
        let scale = read_words(&self.words, bufs.len(), s)?;
        let atol = bufs
            .iter()
            .zip(scale)
            .map(|(a, bits)| tolerance(a.dtype) * f64::from_bits(bits).max(f64::MIN_POSITIVE))
            .collect();
        Ok(Reference::Device {
            copies,
            atol,
            kernels: k,
        })
    }

    fn compare_on_device(
        &self,
        bufs: &[&ArgRef<'_>],
        copies: &[CudaSlice<u8>],
        atol: &[f64],
        k: &Kernels,
    ) -> Result<Option<String>> {
        let s = &self.stream;
        bind(s)?;
        let words = ptr(&self.words, s);
        memset(words, 0xff, bufs.len(), s)?;
        for (i, ((a, copy), &tol)) in bufs.iter().zip(copies).zip(atol).enumerate() {
            let (first, len) = byte_span(a);
            let n = (len / elem_size(a.dtype)) as u64;
            if n == 0 {
                continue;
            }
            // The kernel reads the buffer: as a launch does, queued under the shared
            // lock and ordered after other streams' writes.
            let _guard = a.storage.lock(false);
            a.storage.order(s, false)?;
            let (mut w, mut g) = (ptr(copy, s), (a.storage.base() + first) as u64);
            let (mut n, mut code, mut tol) = (n, dtype_code(a.dtype), tol);
            let mut out = words + 8 * i as u64;
            let mut params = [
                (&mut w) as *mut u64 as *mut c_void,
                (&mut g) as *mut u64 as *mut c_void,
                (&mut n) as *mut u64 as *mut c_void,
                (&mut code) as *mut i32 as *mut c_void,
                (&mut tol) as *mut f64 as *mut c_void,
                (&mut out) as *mut u64 as *mut c_void,
            ];
            // SAFETY: the parameters match `tile_tune_compare`'s signature; `w` and `g`
            // each hold `n` elements of this dtype (the reference copy and the buffer's
            // span), `out` is a word of `self.words`; all stay alive until the stream is
            // synchronized below.
            unsafe { launch(&k.compare, s, n, &mut params)? };
        }
        let first = read_words(&self.words, bufs.len(), s)?;
        for ((a, copy), (&at, &tol)) in bufs.iter().zip(copies).zip(first.iter().zip(atol)) {
            if at == u64::MAX {
                continue;
            }
            // The two elements, for the message.
            let size = elem_size(a.dtype);
            let (first_byte, _) = byte_span(a);
            let x = copy_back(ptr(copy, s) + at * size as u64, size, s)?;
            let y = a
                .storage
                .read::<u8>(first_byte + at as usize * size, size)?;
            let (x, y) = (
                values(a.dtype, &x).next().unwrap_or(f64::NAN),
                values(a.dtype, &y).next().unwrap_or(f64::NAN),
            );
            return Ok(Some(mismatch(a, at as usize, x, y, tol)));
        }
        Ok(None)
    }
}

/// The comparison kernels of one device.
struct Kernels {
    absmax: CudaFunction,
    compare: CudaFunction,
}

/// The comparison kernels of the stream's device, compiled on first use (`None`, and
/// a diagnostics line, when NVRTC or the module load fails: the host comparison is
/// used then).
fn kernels(s: &Arc<CudaStream>, diagnostics: bool) -> Option<Arc<Kernels>> {
    static TABLE: Mutex<Vec<(usize, Option<Arc<Kernels>>)>> = Mutex::new(Vec::new());
    let ordinal = s.context().ordinal();
    let mut table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, k)) = table.iter().find(|(o, _)| *o == ordinal) {
        return k.clone();
    }
    let built = build_kernels(ordinal);
    if let (Err(e), true) = (&built, diagnostics) {
        eprintln!("tile autotune: outputs compared on the host: {e}");
    }
    let k = built.ok().map(Arc::new);
    table.push((ordinal, k.clone()));
    k
}

const NAME: &str = "tile-autotune-compare";
const ORIGIN: &str = "tile-runtime/src/autotune/compare.cu";

/// `compare.cu` as a cubin for `arch` (NVRTC, no include folders).
fn cubin(arch: &str) -> Result<Vec<u8>> {
    crate::nvrtc::compile(NAME, SOURCE, std::path::Path::new(ORIGIN), arch, &[])
}

fn build_kernels(ordinal: usize) -> Result<Kernels> {
    let dev = crate::cuda::device(ordinal)?;
    let image = cubin(&crate::cuda::nvrtc_arch(dev.cc))?;
    let origin = std::path::Path::new(ORIGIN);
    let load = |entry: &str| crate::cuda::load_function(dev, NAME, image.clone(), entry, origin, 0);
    Ok(Kernels {
        absmax: load("tile_tune_absmax")?,
        compare: load("tile_tune_compare")?,
    })
}

/// Threads per block of the comparison kernels (`TT_THREADS` in `compare.cu`).
const THREADS: u32 = 256;

/// Queues `f` over `n` elements on `s` (a grid-stride loop: a few blocks per SM).
///
/// # Safety
///
/// As [`crate::cuda::launch`].
unsafe fn launch(
    f: &CudaFunction,
    s: &CudaStream,
    n: u64,
    params: &mut [*mut c_void],
) -> Result<()> {
    let blocks = n.div_ceil(THREADS as u64).clamp(1, 4096) as u32;
    // SAFETY: forwarded from the caller.
    unsafe { crate::cuda::launch(f, s, [blocks, 1, 1], THREADS, 0, params) }
}

fn bind(s: &CudaStream) -> Result<()> {
    s.context()
        .bind_to_thread()
        .map_err(|e| Error::driver("cuCtxSetCurrent", e))
}

fn alloc(s: &Arc<CudaStream>, len: usize) -> Result<CudaSlice<u8>> {
    // SAFETY: the bytes are unset until a copy fills them; they are only read after.
    unsafe { s.alloc::<u8>(len.max(1)) }.map_err(|e| Error::driver("cuMemAlloc", e))
}

fn ptr<T>(slice: &CudaSlice<T>, s: &CudaStream) -> u64 {
    let (p, _record) = slice.device_ptr(s);
    p
}

/// Queues a copy of `len` bytes from device address `src` to `dst` on `s`, one end
/// being `storage`'s memory (the destination when `write`): under the storage's lock
/// and ordered after other streams' conflicting accesses, as a launch is.
fn copy_on(
    storage: &Storage,
    write: bool,
    dst: u64,
    src: u64,
    len: usize,
    s: &Arc<CudaStream>,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    let _guard = storage.lock(write);
    storage.order(s, write)?;
    // SAFETY: both ranges are device memory of this context: the storage's span of a
    // checked argument, and a scratch allocation of at least `len` bytes alive until
    // the stream is synchronized (its drop frees it on `s`, after the copy).
    unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, len, s.cu_stream()) }
        .map_err(|e| Error::driver("cuMemcpyDtoDAsync", e))
}

fn memset(words: u64, byte: u8, count: usize, s: &CudaStream) -> Result<()> {
    // SAFETY: `words` is an allocation of at least `count` u64s on `s`'s context.
    unsafe { cudarc::driver::result::memset_d8_async(words, byte, 8 * count, s.cu_stream()) }
        .map_err(|e| Error::driver("cuMemsetD8Async", e))
}

/// The first `count` words, once the stream has finished.
fn read_words(words: &CudaSlice<u64>, count: usize, s: &CudaStream) -> Result<Vec<u64>> {
    let mut out = vec![0u64; count];
    let src = ptr(words, s);
    // SAFETY: `words` holds at least `count` u64s; `out` is synchronized before use.
    unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut out[..], src, s.cu_stream()) }
        .map_err(|e| Error::driver("cuMemcpyDtoHAsync", e))?;
    s.synchronize()
        .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
    Ok(out)
}

/// `len` bytes at device address `src` (scratch memory of `s`'s context).
fn copy_back(src: u64, len: usize, s: &CudaStream) -> Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    // SAFETY: `src` points into a live scratch allocation of at least `len` bytes.
    unsafe { cudarc::driver::result::memcpy_dtoh_async(&mut out[..], src, s.cu_stream()) }
        .map_err(|e| Error::driver("cuMemcpyDtoHAsync", e))?;
    s.synchronize()
        .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
    Ok(out)
}

/// `(first byte from the storage's base, byte count)` of the memory `a` spans.
pub(super) fn byte_span(a: &ArgRef<'_>) -> (usize, usize) {
    if a.shape.contains(&0) {
        return (a.ptr - a.storage.base(), 0);
    }
    let last: isize = a
        .shape
        .iter()
        .zip(a.strides)
        .map(|(&d, &s)| (d as isize - 1) * s.max(0))
        .sum();
    let size = a.dtype.size();
    (a.ptr - a.storage.base(), (last as usize + 1) * size)
}

fn read_bytes(a: &ArgRef<'_>) -> Result<Vec<u8>> {
    let (first, len) = byte_span(a);
    a.storage.read::<u8>(first, len)
}

fn elem_size(t: DType) -> usize {
    t.size().clamp(1, 8)
}

/// The relative tolerance of a dtype: 1e-2 for f16, 3e-2 for bf16, 1e-3 for f32,
/// 1e-9 for f64, exact for integers (variants sum in different orders). f8 allows one
/// unit in the last place of the largest values: a sum rounded differently lands on
/// the neighbouring code, up to 1/8 (e4m3) or 1/4 (e5m2) of the scale apart.
pub(super) fn tolerance(t: DType) -> f64 {
    match t {
        DType::F16 => 1e-2,
        DType::BF16 => 3e-2,
        DType::F32 => 1e-3,
        DType::F64 => 1e-9,
        DType::F8E4M3 => 0.15,
        DType::F8E5M2 => 0.3,
        _ => 0.0,
    }
}

/// How `compare.cu` reads a dtype (`tt_load`).
pub(super) fn dtype_code(t: DType) -> i32 {
    match t {
        DType::Bool | DType::U8 => 0,
        DType::I8 => 1,
        DType::I16 => 2,
        DType::U16 => 3,
        DType::I32 => 4,
        DType::U32 => 5,
        DType::I64 => 6,
        DType::U64 => 7,
        DType::F16 => 8,
        DType::BF16 => 9,
        DType::F32 => 10,
        DType::F64 => 11,
        DType::F8E4M3 => 12,
        DType::F8E5M2 => 13,
        // Not an element dtype (no kernel takes one): its bits.
        DType::F16x2 | DType::BF16x2 => 5,
    }
}

fn mismatch(a: &ArgRef<'_>, k: usize, want: f64, got: f64, atol: f64) -> String {
    let shape: Vec<String> = a.shape.iter().map(|d| d.to_string()).collect();
    format!(
        "output {} element {k} is {got}, expected {want} (tolerance {atol:.3e})",
        shape.join("x")
    )
}

/// Why `got` differs from `want` (the buffers' dtypes say how to read them), or `None`
/// when every element is close: `|a - b| <= tol * max|want|` (see [`tolerance`]). Reads
/// the bytes in place (no copies: outputs can be large).
pub(super) fn compare(bufs: &[&ArgRef<'_>], want: &[Vec<u8>], got: &[Vec<u8>]) -> Option<String> {
    for ((a, w), g) in bufs.iter().zip(want).zip(got) {
        let atol = tolerance(a.dtype) * scale(a.dtype, w).max(f64::MIN_POSITIVE);
        if let Some((k, x, y)) = first_mismatch(a.dtype, w, g, atol) {
            return Some(mismatch(a, k, x, y, atol));
        }
    }
    None
}

/// max |x| over the finite elements (`tile_tune_absmax`).
fn scale(dtype: DType, bytes: &[u8]) -> f64 {
    values(dtype, bytes)
        .filter(|v| v.is_finite())
        .fold(0f64, |m, v| m.max(v.abs()))
}

/// The first element where `want` and `got` differ by more than `atol` (both NaN is
/// the same), with both values (`tile_tune_compare`).
fn first_mismatch(dtype: DType, want: &[u8], got: &[u8], atol: f64) -> Option<(usize, f64, f64)> {
    values(dtype, want)
        .zip(values(dtype, got))
        .enumerate()
        .find(|(_, (x, y))| !((x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= atol))
        .map(|(k, (x, y))| (k, x, y))
}

/// The elements of `bytes` as `f64`s (gaps of a strided buffer included).
pub(super) fn values(dtype: DType, bytes: &[u8]) -> impl Iterator<Item = f64> + '_ {
    let size = elem_size(dtype);
    bytes.chunks_exact(size).map(move |c| {
        let mut b = [0u8; 8];
        b[..size].copy_from_slice(c);
        let u = u64::from_le_bytes(b);
        match dtype {
            DType::Bool | DType::U8 => u as u8 as f64,
            DType::I8 => u as u8 as i8 as f64,
            DType::I16 => u as u16 as i16 as f64,
            DType::U16 => u as u16 as f64,
            DType::I32 => u as u32 as i32 as f64,
            DType::U32 => u as u32 as f64,
            DType::I64 => u as i64 as f64,
            DType::U64 => u as f64,
            DType::F16 => half::f16::from_bits(u as u16).to_f64(),
            DType::BF16 => half::bf16::from_bits(u as u16).to_f64(),
            DType::F32 => f32::from_bits(u as u32) as f64,
            DType::F64 => f64::from_bits(u),
            DType::F8E4M3 => tile_abi::f8::e4m3_to_f64(u as u8),
            DType::F8E5M2 => tile_abi::f8::e5m2_to_f64(u as u8),
            // Not an element dtype (no kernel takes one): its bits.
            DType::F16x2 | DType::BF16x2 => u as u32 as f64,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_each_dtype() {
        let h = half::f16::from_f32(1.5).to_bits().to_le_bytes();
        let all = |t, b: &[u8]| values(t, b).collect::<Vec<f64>>();
        assert_eq!(all(DType::F16, &h), [1.5]);
        assert_eq!(all(DType::I16, &(-3i16).to_le_bytes()), [-3.0]);
        assert_eq!(all(DType::F32, &2.25f32.to_le_bytes()), [2.25]);
        let two: Vec<u8> = [7i32, -1].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(all(DType::I32, &two), [7.0, -1.0]);
        assert_eq!(
            all(DType::F8E4M3, &[0x38, 0xFE, 0x01]),
            [1.0, -448.0, 1.0 / 512.0]
        );
        assert_eq!(all(DType::F8E5M2, &[0x3C, 0x7B]), [1.0, 57344.0]);
        assert!(all(DType::F8E4M3, &[0x7F])[0].is_nan());
        assert_eq!(all(DType::F8E5M2, &[0xFC])[0], f64::NEG_INFINITY);
    }

    /// Where libnvrtc can be loaded (no GPU needed), `compare.cu` compiles for the
    /// architectures the runtime compiles for, with no CUDA headers.
    #[test]
    fn the_comparison_kernels_compile_with_nvrtc_where_it_is_present() {
        for arch in ["sm_90a", "sm_80"] {
            match cubin(arch) {
                Ok(image) => {
                    for entry in ["tile_tune_absmax", "tile_tune_compare"] {
                        let found = image.windows(entry.len()).any(|w| w == entry.as_bytes());
                        assert!(found, "{arch}: no `{entry}` in the cubin");
                    }
                }
                Err(Error::NvrtcUnavailable { .. }) => return,
                Err(e) => panic!("{arch}: {e}"),
            }
        }
    }

    const ALL: [DType; 15] = [
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::F8E4M3,
        DType::F8E5M2,
    ];

    /// The element functions of `compare.cu`, built with the host C compiler, read,
    /// scale and compare every dtype exactly as the host comparison does (random bit
    /// patterns: NaNs, infinities, subnormals and negative zeros included). The kernels
    /// around them (grid-stride loops, the reductions, the launches) need a GPU.
    #[test]
    fn the_device_comparison_reads_elements_as_the_host_does() {
        type Load = unsafe extern "C" fn(*const u8, u64, i32) -> f64;
        type Absmax = unsafe extern "C" fn(*const u8, u64, i32) -> f64;
        type First = unsafe extern "C" fn(*const u8, *const u8, u64, i32, f64) -> u64;
        let dir = std::env::temp_dir().join(format!("tile-compare-cu-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        let (src, lib) = (dir.join("compare.c"), dir.join("libcompare.so"));
        std::fs::write(&src, SOURCE).expect("write compare.c");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let status = std::process::Command::new(&cc)
            .args(["-O1", "-std=c11", "-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(&src)
            .status()
            .expect("run the C compiler");
        assert!(status.success(), "{cc} could not build compare.cu");
        // SAFETY: the library is the file just built; the symbols have these C types.
        let l = unsafe { libloading::Library::new(&lib) }.expect("load it");
        let (load, absmax, first) = unsafe {
            (
                *l.get::<Load>(b"tt_host_load").expect("tt_host_load"),
                *l.get::<Absmax>(b"tt_host_absmax").expect("tt_host_absmax"),
                *l.get::<First>(b"tt_host_first_mismatch")
                    .expect("tt_host_first_mismatch"),
            )
        };
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut byte = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 24) as u8
        };
        let same = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
        for t in ALL {
            let size = elem_size(t);
            let n = 4096;
            let want: Vec<u8> = (0..n * size).map(|_| byte()).collect();
            let code = dtype_code(t);
            for (k, v) in values(t, &want).enumerate() {
                // SAFETY: `want` holds `n` elements of `size` bytes.
                let c = unsafe { load(want.as_ptr(), k as u64, code) };
                assert!(same(c, v), "{t:?} element {k}: C reads {c}, Rust {v}");
            }
            // SAFETY: as above.
            let c = unsafe { absmax(want.as_ptr(), n as u64, code) };
            assert!(
                same(c, scale(t, &want)),
                "{t:?}: {c} vs {}",
                scale(t, &want)
            );
            // A copy with a few elements changed (some by one unit of the last byte).
            for round in 0..20 {
                let mut got = want.clone();
                for _ in 0..round % 4 {
                    let k = (byte() as usize * 16 + byte() as usize) % n;
                    let b = k * size + size - 1;
                    got[b] = match round % 2 {
                        0 => byte(),
                        _ => got[b] ^ 1,
                    };
                }
                let atol = match round % 3 {
                    0 => 0.0,
                    _ => tolerance(t) * scale(t, &want).max(f64::MIN_POSITIVE),
                };
                let rust = first_mismatch(t, &want, &got, atol).map(|(k, _, _)| k as u64);
                // SAFETY: both hold `n` elements.
                let c = unsafe { first(want.as_ptr(), got.as_ptr(), n as u64, code, atol) };
                assert_eq!((c != u64::MAX).then_some(c), rust, "{t:?} round {round}");
            }
        }
        drop(l);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
