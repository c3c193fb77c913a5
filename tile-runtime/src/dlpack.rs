//! DLPack: exchanging tensors with other frameworks (PyTorch, NumPy, JAX, CuPy, ..)
//! without copies.
//!
//! The `#[repr(C)]` types are the DLPack ABI: `DLManagedTensor` (the legacy form, v0.8,
//! still what `__dlpack__()` returns without `max_version`) and
//! `DLManagedTensorVersioned` (v1). Their layout is checked against C declarations of
//! the same structs in the tests.
//!
//! Invariants:
//! - Ownership of a managed tensor always passes: an import takes it whether it succeeds
//!   or not (on failure the producer's deleter has been called), and the consumer of an
//!   export must call its deleter exactly once.
//! - dtypes map one to one ([`to_dl`], [`from_dl`]): no integer is read as a float or a
//!   bool, bf16 is not f16, and f8 formats map to exactly one DLPack code each (tile's
//!   `f8e4m3` is CUDA's `__nv_fp8_e4m3`, the finite-only `kDLFloat8_e4m3fn`; the other
//!   e4m3 codes are refused). Vector types (`lanes != 1`) are refused.
//! - An import is a [`Tensor`] over the producer's memory that calls the producer's
//!   deleter when its last view drops (on a device, after ordering the stream it was
//!   handed over on after every tile launch that used it on other streams). A tensor that
//!   tile exported and gets back is the same tensor again (the same storage and lock).
//! - An export keeps the tensor's storage alive until the consumer calls the deleter, and
//!   orders the storage for the consumer's stream; the consumer accesses the memory
//!   outside tile's locks, as with [`Tensor::data_ptr`].

use std::any::Any;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::stream::Stream;
use crate::tensor::Tensor;
use crate::view::owned_raw;

/// `DLDeviceType` of host memory.
pub const K_DL_CPU: i32 = 1;
/// `DLDeviceType` of CUDA device memory.
pub const K_DL_CUDA: i32 = 2;

/// `DLDataTypeCode` values (the ones tile's dtypes use, and the f8 codes it refuses).
pub mod code {
    /// `kDLInt`: signed integers.
    pub const INT: u8 = 0;
    /// `kDLUInt`: unsigned integers.
    pub const UINT: u8 = 1;
    /// `kDLFloat`: IEEE floats (f16, f32, f64).
    pub const FLOAT: u8 = 2;
    /// `kDLBfloat`: bfloat16.
    pub const BFLOAT: u8 = 4;
    /// `kDLBool`: booleans, one byte each.
    pub const BOOL: u8 = 6;
    /// `kDLFloat8_e3m4` (refused: tile has no such dtype).
    pub const FLOAT8_E3M4: u8 = 7;
    /// `kDLFloat8_e4m3`, the IEEE-like e4m3 with infinities (refused).
    pub const FLOAT8_E4M3: u8 = 8;
    /// `kDLFloat8_e4m3b11fnuz` (refused).
    pub const FLOAT8_E4M3B11FNUZ: u8 = 9;
    /// `kDLFloat8_e4m3fn`, finite-only e4m3: tile's `f8e4m3`.
    pub const FLOAT8_E4M3FN: u8 = 10;
    /// `kDLFloat8_e4m3fnuz` (refused).
    pub const FLOAT8_E4M3FNUZ: u8 = 11;
    /// `kDLFloat8_e5m2`: tile's `f8e5m2`.
    pub const FLOAT8_E5M2: u8 = 12;
    /// `kDLFloat8_e5m2fnuz` (refused).
    pub const FLOAT8_E5M2FNUZ: u8 = 13;
}

/// `DLPACK_FLAG_BITMASK_READ_ONLY` of `DLManagedTensorVersioned::flags`.
pub const FLAG_READ_ONLY: u64 = 1;

/// The DLPack version tile's versioned exports carry.
pub const VERSION: DLPackVersion = DLPackVersion { major: 1, minor: 1 };

/// `DLPackVersion`: the DLPack ABI version of a versioned managed tensor.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version; a consumer refuses a major version it does not know.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLDevice`: where a tensor's memory lives.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDevice {
    /// `DLDeviceType` ([`K_DL_CPU`], [`K_DL_CUDA`], ..).
    pub device_type: i32,
    /// The device ordinal (the CUDA device index; 0 for host memory).
    pub device_id: i32,
}

/// `DLDataType`: an element type.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DLDataType {
    /// `DLDataTypeCode` (see [`code`]).
    pub code: u8,
    /// Bits per lane (8 for `bool`).
    pub bits: u8,
    /// Lanes per element: 1 for scalars (tile refuses vector types).
    pub lanes: u16,
}

/// `DLTensor`: a strided view of memory, borrowed from its managed tensor.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// The allocation's base pointer (a device pointer for CUDA memory); the first
    /// element is at `data + byte_offset`.
    pub data: *mut c_void,
    /// Where the memory lives.
    pub device: DLDevice,
    /// The number of dims.
    pub ndim: i32,
    /// The element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// In elements; may be null (row-major) in legacy tensors.
    pub strides: *mut i64,
    /// Offset in bytes of the first element from `data`.
    pub byte_offset: u64,
}

/// `DLManagedTensor`: the legacy (v0.8) managed tensor, a [`DLTensor`] and its owner.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensor {
    /// The tensor.
    pub dl_tensor: DLTensor,
    /// The producer's own context, for its deleter.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; the consumer calls it exactly once (it may be null).
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// `DLManagedTensorVersioned`: the v1 managed tensor, with a version and flags.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The DLPack version the producer wrote.
    pub version: DLPackVersion,
    /// The producer's own context, for its deleter.
    pub manager_ctx: *mut c_void,
    /// Frees the tensor; the consumer calls it exactly once (it may be null).
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// Bit flags ([`FLAG_READ_ONLY`], ..).
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// The DLPack dtype of a tile dtype.
pub const fn to_dl(dtype: DType) -> DLDataType {
    let (code, bits) = match dtype {
        DType::Bool => (code::BOOL, 8),
        DType::I8 => (code::INT, 8),
        DType::U8 => (code::UINT, 8),
        DType::I16 => (code::INT, 16),
        DType::U16 => (code::UINT, 16),
        DType::I32 => (code::INT, 32),
        DType::U32 => (code::UINT, 32),
        DType::I64 => (code::INT, 64),
        DType::U64 => (code::UINT, 64),
        DType::F16 => (code::FLOAT, 16),
        DType::BF16 => (code::BFLOAT, 16),
        DType::F32 => (code::FLOAT, 32),
        DType::F64 => (code::FLOAT, 64),
        DType::F8E4M3 => (code::FLOAT8_E4M3FN, 8),
        DType::F8E5M2 => (code::FLOAT8_E5M2, 8),
        // Not element dtypes (no tensor holds one); DLPack's two lanes.
        DType::F16x2 => (code::FLOAT, 16),
        DType::BF16x2 => (code::BFLOAT, 16),
    };
    DLDataType {
        code,
        bits,
        lanes: if dtype.is_packed() { 2 } else { 1 },
    }
}

/// The tile dtype of a DLPack dtype: exactly the inverse of [`to_dl`], `None` for
/// anything else.
pub fn from_dl(dt: DLDataType) -> Option<DType> {
    DType::ALL.into_iter().find(|&d| to_dl(d) == dt)
}

fn interop(message: impl Into<String>) -> Error {
    Error::Interop {
        message: message.into(),
    }
}

/// What a tile export owns: the tensor (its storage) and the arrays the `DLTensor`
/// points at. The managed struct comes first, so its address is the box's.
#[repr(C)]
struct Export<M> {
    managed: M,
    tensor: Box<dyn Any + Send + Sync>,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

/// Addresses of tile's exports not yet deleted: how an import recognizes its own (a
/// function pointer comparison with the deleter is not reliable across codegen units).
static LIVE_EXPORTS: Mutex<Vec<(usize, bool)>> = Mutex::new(Vec::new());

fn live_exports() -> std::sync::MutexGuard<'static, Vec<(usize, bool)>> {
    LIVE_EXPORTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `ctx` is a live export of tile's of the given form (versioned or legacy); if
/// so it is no longer counted as live (the caller takes it over).
fn take_own_export(ctx: *mut c_void, versioned: bool) -> bool {
    let mut live = live_exports();
    match live.iter().position(|&p| p == (ctx as usize, versioned)) {
        Some(i) => {
            live.swap_remove(i);
            true
        }
        None => false,
    }
}

fn forget_export(ctx: *mut c_void, versioned: bool) {
    let _ = take_own_export(ctx, versioned);
}

unsafe extern "C" fn delete_export(m: *mut DLManagedTensor) {
    if !m.is_null() {
        forget_export(m.cast(), false);
        // SAFETY: `m` is the first field of a boxed `Export` made by `to_dlpack`, and
        // DLPack calls the deleter once.
        drop(unsafe { Box::from_raw(m.cast::<Export<DLManagedTensor>>()) });
    }
}

unsafe extern "C" fn delete_export_versioned(m: *mut DLManagedTensorVersioned) {
    if !m.is_null() {
        forget_export(m.cast(), true);
        // SAFETY: as `delete_export`, for `to_dlpack_versioned`.
        drop(unsafe { Box::from_raw(m.cast::<Export<DLManagedTensorVersioned>>()) });
    }
}

/// The producer's deleter, called when the imported tensor's storage drops.
struct Release<M: 'static>(NonNull<M>, unsafe extern "C" fn(*mut M));

// SAFETY: DLPack deleters may be called from any thread (the storage may drop on another
// thread than the import); the pointer is only passed back to the deleter.
unsafe impl<M> Send for Release<M> {}
// SAFETY: `&Release` gives no access to the managed tensor.
unsafe impl<M> Sync for Release<M> {}

impl<M> Drop for Release<M> {
    fn drop(&mut self) {
        // SAFETY: the producer's deleter, called once with its own tensor.
        unsafe { (self.1)(self.0.as_ptr()) }
    }
}

/// What an export is made of: the kept tensor, its shape and strides (as the
/// `DLTensor` points at them) and the `DLTensor`.
type DlParts = (Box<dyn Any + Send + Sync>, Vec<i64>, Vec<i64>, DLTensor);

fn dl_device(device: Device) -> DLDevice {
    match device {
        Device::Cpu => DLDevice {
            device_type: K_DL_CPU,
            device_id: 0,
        },
        Device::Cuda(n) => DLDevice {
            device_type: K_DL_CUDA,
            device_id: n as i32,
        },
    }
}

impl<T: Element> Tensor<T> {
    fn dl_parts(&self, stream: &Stream) -> Result<DlParts> {
        if stream.device() != self.device() {
            return Err(interop(format!(
                "to_dlpack: the tensor is on {}, the consumer's stream on {}",
                self.device(),
                stream.device()
            )));
        }
        if let Stream::Cuda(s) = stream {
            // The consumer may write: order it after every tile access so far.
            self.storage().order(s, true)?;
        }
        let mut shape: Vec<i64> = self.shape().iter().map(|&d| d as i64).collect();
        let mut strides: Vec<i64> = self.strides().iter().map(|&s| s as i64).collect();
        let dl = DLTensor {
            data: self.storage().base() as *mut c_void,
            device: dl_device(self.device()),
            ndim: self.ndim() as i32,
            dtype: to_dl(T::DTYPE),
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut_ptr(),
            byte_offset: (self.offset() * std::mem::size_of::<T>()) as u64,
        };
        Ok((Box::new(self.clone()), shape, strides, dl))
    }

    /// Exports a view of this tensor (no copy) as a legacy `DLManagedTensor` for a
    /// consumer that will use it on `stream` (ordered after tile's work so far). The
    /// consumer owns the result and must call its deleter once; until then the storage
    /// stays alive.
    pub fn to_dlpack(&self, stream: &Stream) -> Result<NonNull<DLManagedTensor>> {
        let (tensor, shape, strides, dl_tensor) = self.dl_parts(stream)?;
        let boxed = Box::new(Export {
            managed: DLManagedTensor {
                dl_tensor,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_export),
            },
            tensor,
            shape,
            strides,
        });
        let raw = Box::into_raw(boxed);
        // SAFETY: `raw` is a live box; its context names itself.
        unsafe { (*raw).managed.manager_ctx = raw.cast() };
        live_exports().push((raw as usize, false));
        Ok(NonNull::from(unsafe { &mut (*raw).managed }))
    }

    /// [`to_dlpack`](Self::to_dlpack) as a `DLManagedTensorVersioned` (version
    /// [`VERSION`], no flags).
    pub fn to_dlpack_versioned(
        &self,
        stream: &Stream,
    ) -> Result<NonNull<DLManagedTensorVersioned>> {
        let (tensor, shape, strides, dl_tensor) = self.dl_parts(stream)?;
        let boxed = Box::new(Export {
            managed: DLManagedTensorVersioned {
                version: VERSION,
                manager_ctx: std::ptr::null_mut(),
                deleter: Some(delete_export_versioned),
                flags: 0,
                dl_tensor,
            },
            tensor,
            shape,
            strides,
        });
        let raw = Box::into_raw(boxed);
        // SAFETY: `raw` is a live box; its context names itself.
        unsafe { (*raw).managed.manager_ctx = raw.cast() };
        live_exports().push((raw as usize, true));
        Ok(NonNull::from(unsafe { &mut (*raw).managed }))
    }

    /// Imports a legacy `DLManagedTensor` (no copy). `stream` is where the memory is
    /// ready (the stream the consumer passed to `__dlpack__`; [`Stream::Cpu`] for host
    /// memory). The managed tensor is consumed either way; on error its deleter has run.
    ///
    /// # Safety
    ///
    /// `managed` must be a valid DLPack managed tensor whose memory stays valid until its
    /// deleter is called, on `stream`'s device (for CUDA, in the device's primary
    /// context), and nothing else may write the memory while tile's tensor lives, nor
    /// read it while a tile launch writes it.
    pub unsafe fn from_dlpack(
        managed: NonNull<DLManagedTensor>,
        stream: &Stream,
    ) -> Result<Tensor<T>> {
        let m = managed.as_ptr();
        // SAFETY: a valid managed tensor (the caller's contract).
        let (deleter, ctx) = unsafe { ((*m).deleter, (*m).manager_ctx) };
        if take_own_export(ctx, false) {
            // One of ours: the same tensor again.
            // SAFETY: `ctx` is the `Export` box `to_dlpack` made, passed back once.
            let export = unsafe { Box::from_raw(ctx.cast::<Export<DLManagedTensor>>()) };
            return own(export.tensor);
        }
        let release = deleter.map(|d| Release(managed, d));
        // SAFETY: as above; `release` frees it if the import fails.
        unsafe { import(&(*m).dl_tensor, stream, release.map(|r| Box::new(r) as _)) }
    }

    /// Imports a `DLManagedTensorVersioned` (major version 1). Read-only tensors are
    /// refused (a tile tensor is writable). Consumed either way, as
    /// [`from_dlpack`](Self::from_dlpack).
    ///
    /// # Safety
    ///
    /// As [`from_dlpack`](Self::from_dlpack).
    pub unsafe fn from_dlpack_versioned(
        managed: NonNull<DLManagedTensorVersioned>,
        stream: &Stream,
    ) -> Result<Tensor<T>> {
        let m = managed.as_ptr();
        // SAFETY: a valid managed tensor (the caller's contract); `version`, `deleter`
        // and `manager_ctx` keep their place across major versions.
        let (deleter, ctx, version) = unsafe { ((*m).deleter, (*m).manager_ctx, (*m).version) };
        if take_own_export(ctx, true) {
            // SAFETY: `ctx` is the `Export` box `to_dlpack_versioned` made.
            let export = unsafe { Box::from_raw(ctx.cast::<Export<DLManagedTensorVersioned>>()) };
            return own(export.tensor);
        }
        let release = deleter.map(|d| Release(managed, d));
        if version.major != VERSION.major {
            drop(release);
            return Err(interop(format!(
                "DLPack tensor of version {}.{} (tile reads major version {})",
                version.major, version.minor, VERSION.major
            )));
        }
        // SAFETY: a version-1 tensor, valid by the caller's contract.
        if unsafe { (*m).flags } & FLAG_READ_ONLY != 0 {
            drop(release);
            return Err(interop(
                "DLPack tensor is read-only; tile imports tensors as writable",
            ));
        }
        // SAFETY: as above; `release` frees it if the import fails.
        unsafe { import(&(*m).dl_tensor, stream, release.map(|r| Box::new(r) as _)) }
    }
}

/// The tensor of one of tile's own exports, if it has the asked element type.
fn own<T: Element>(tensor: Box<dyn Any + Send + Sync>) -> Result<Tensor<T>> {
    match tensor.downcast::<Tensor<T>>() {
        Ok(t) => Ok(*t),
        Err(other) => {
            drop(other);
            Err(interop(format!(
                "DLPack tensor exported by tile has another dtype than {}",
                T::DTYPE
            )))
        }
    }
}

/// A tensor over `dl`'s memory owning `keep` (dropped, so released, on failure).
///
/// # Safety
///
/// `dl` must be a valid `DLTensor` whose memory lives as long as `keep`; see
/// [`Tensor::from_dlpack`].
unsafe fn import<T: Element>(
    dl: &DLTensor,
    stream: &Stream,
    keep: Option<Box<dyn Any + Send + Sync>>,
) -> Result<Tensor<T>> {
    let dtype = from_dl(dl.dtype);
    if dtype != Some(T::DTYPE) {
        let DLDataType { code, bits, lanes } = dl.dtype;
        let got = match dtype {
            Some(d) if lanes == 1 => d.to_string(),
            _ => format!("code {code}, {bits} bits, {lanes} lanes"),
        };
        return Err(interop(format!(
            "DLPack dtype mismatch, expected {}, got {got}",
            T::DTYPE
        )));
    }
    let device = match (dl.device.device_type, dl.device.device_id) {
        (K_DL_CPU, _) => Device::Cpu,
        (K_DL_CUDA, n) if n >= 0 => Device::Cuda(n as usize),
        (t, n) => {
            return Err(interop(format!(
                "DLPack device type {t} (id {n}) is not supported (CPU = 1 and CUDA = 2 are)"
            )))
        }
    };
    if device != stream.device() {
        return Err(interop(format!(
            "DLPack tensor is on {device}, the stream given on {}",
            stream.device()
        )));
    }
    let ndim = usize::try_from(dl.ndim).map_err(|_| interop("DLPack tensor has negative ndim"))?;
    let read = |p: *mut i64, what: &str| -> Result<Vec<i64>> {
        if ndim == 0 {
            return Ok(Vec::new());
        }
        if p.is_null() {
            return Err(interop(format!("DLPack tensor has a null {what} array")));
        }
        // SAFETY: a valid DLTensor's arrays hold `ndim` entries.
        Ok(unsafe { std::slice::from_raw_parts(p, ndim) }.to_vec())
    };
    let shape: Vec<usize> = read(dl.shape, "shape")?
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| interop("DLPack tensor has a negative extent")))
        .collect::<Result<_>>()?;
    // An empty tensor's strides mean nothing (NumPy exports zeros): take row-major ones.
    let strides: Vec<isize> = if dl.strides.is_null() || shape.contains(&0) {
        crate::tensor::contiguous_strides(&shape).to_vec()
    } else {
        read(dl.strides, "strides")?
            .into_iter()
            .map(|s| isize::try_from(s).map_err(|_| interop("DLPack stride out of range")))
            .collect::<Result<_>>()?
    };
    let base = (dl.data as usize)
        .checked_add(dl.byte_offset as usize)
        .ok_or_else(|| interop("DLPack data pointer overflows"))?;
    // SAFETY: forwarded from the caller; `keep` owns the producer's tensor.
    unsafe { owned_raw::<T>(base, &shape, &strides, stream, keep) }
}

#[cfg(test)]
mod tests;
