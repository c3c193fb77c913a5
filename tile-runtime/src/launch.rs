//! The launch path behind every generated launcher.
//!
//! `launch` = check arguments → evaluate the grid → find the kernel → launch. Finding
//! (see [`crate::find`]) runs once per launcher and device; what it finds is stored in the
//! launcher's [`KernelSlot`], the in-process level of the kernel cache. A warm CUDA
//! launch takes the same steps through [`warm`], compiled into each generated launcher
//! with the kernel's spec as a constant; everything else takes the general path here.
//!
//! Invariants:
//! - A failed check launches nothing and writes nothing; a grid with a zero extent
//!   launches nothing and succeeds.
//! - A warm launch (kernel in the slot) does no disk access, no hashing and no string
//!   formatting; on CUDA it makes no heap allocation for kernels of up to 16 buffers and
//!   16 dynamic dims (a CPU launch allocates one task for the worker pool). Its cost is
//!   the checks, a lock per distinct buffer, one atomic load per device buffer for
//!   stream ordering (more only when buffers change streams, see [`crate::sync`]) and
//!   the launch itself.
//! - Buffers are locked for the launch (shared for inputs, exclusive for outputs, each
//!   storage once, in address order so concurrent launches cannot deadlock). A CPU launch
//!   holds the locks while it runs and returns when it has finished; a CUDA launch is
//!   queued on the stream after ordering each buffer on it.
//! - Inside [`Graph::capture`](crate::Graph::capture) a launch on the capture's stream
//!   (or on the default stream, from the capturing thread) is recorded, not run.
//! - With `TILE_JIT_DIAGNOSTICS=1`, a launch that had to find its kernel prints one line
//!   per phase; warm launches print nothing.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaStream;

use crate::arg::ArgRef;
use crate::check::check_into;
use crate::config::Config;
use crate::cpu;
use crate::cuda;
use crate::device::Device;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::find::{self, print_done};
use crate::graph;
use crate::loaded::CudaLoaded;
use crate::slot::KernelSlot;
use crate::spec::{CpuEntry, KernelSpec, ScalarArg};
use crate::stream::Stream;
use crate::tensor::{Storage, StorageGuard};
use tile_abi::Target;

/// Launches of up to this many buffers (and dynamic dims) need no heap allocation.
const INLINE: usize = 8;

/// CUDA's largest grid extent per axis (x, y, z).
const CUDA_GRID_LIMITS: [i64; 3] = [i32::MAX as i64, 65535, 65535];

/// The generated source of `spec` for `target` (C for the CPU, CUDA C++ for CUDA).
pub fn kernel_source(spec: &'static KernelSpec, target: Target) -> &'static str {
    spec.source(target)
}

/// Launches `spec` with `args` on `stream` (default: the tensors' device's default
/// stream). Called by generated launchers.
///
/// Inlined into each of them, so that a warm CUDA launch runs the warm path
/// (`launch::warm`) with the kernel's spec as a constant; every other launch takes the
/// general path.
#[inline(always)]
pub fn launch(
    spec: &'static KernelSpec,
    slot: &'static KernelSlot,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
) -> Result<()> {
    launch_scalars(spec, slot, stream, args, &[])
}

/// [`launch`] of a kernel with scalar parameters: `scalars` holds their values in
/// declaration order ([`scalar_arg`]).
#[inline(always)]
pub fn launch_scalars(
    spec: &'static KernelSpec,
    slot: &'static KernelSlot,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    scalars: &[ScalarArg],
) -> Result<()> {
    match warm::try_cuda(spec, slot, stream, args, scalars) {
        Some(done) => done,
        None => launch_general(spec, slot, stream, args, scalars),
    }
}

/// The value of a scalar argument as the kernel ABI passes it: its bytes in the low
/// bytes of a `u64`.
pub fn scalar_arg<T: Element>(v: T) -> ScalarArg {
    const { assert!(cfg!(target_endian = "little")) };
    let mut bytes = [0u8; 8];
    let n = std::mem::size_of::<T>().min(8);
    // SAFETY: `Element` types are plain data of `DTYPE.size()` bytes with no padding
    // (its safety contract), so their first `n <= 8` bytes are initialized.
    unsafe { std::ptr::copy_nonoverlapping((&v as *const T).cast::<u8>(), bytes.as_mut_ptr(), n) };
    ScalarArg {
        dtype: T::DTYPE,
        bits: u64::from_le_bytes(bytes),
    }
}

/// The general path: checks (reporting the first failure), grid, finding the kernel,
/// capture, diagnostics, both targets.
#[inline(never)]
fn launch_general(
    spec: &'static KernelSpec,
    slot: &'static KernelSlot,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    scalars: &[ScalarArg],
) -> Result<()> {
    launch_with_scalars(Config::get(), spec, slot, stream, args, scalars)
}

#[cfg(test)]
pub(crate) fn launch_with(
    cfg: &Config,
    spec: &'static KernelSpec,
    slot: &KernelSlot,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
) -> Result<()> {
    launch_with_scalars(cfg, spec, slot, stream, args, &[])
}

pub(crate) fn launch_with_scalars(
    cfg: &Config,
    spec: &'static KernelSpec,
    slot: &KernelSlot,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    scalars: &[ScalarArg],
) -> Result<()> {
    let started = cfg.diagnostics.then(Instant::now);
    // The dims, then the scalars' bits: the CPU ABI's `dims` array.
    let n = spec.dims.len() + scalars.len();
    if n <= INLINE {
        let mut dims = [0i64; INLINE];
        launch_dims(
            cfg,
            spec,
            slot,
            stream,
            args,
            scalars,
            &mut dims[..n],
            started,
        )
    } else {
        let mut dims = vec![0i64; n];
        launch_dims(cfg, spec, slot, stream, args, scalars, &mut dims, started)
    }
}

/// The scalars match the spec's count and dtypes (the typed launcher makes sure of it;
/// the check guards the untyped paths).
fn check_scalars(spec: &KernelSpec, scalars: &[ScalarArg]) -> Result<()> {
    if scalars.len() != spec.scalars.len() {
        return Err(Error::NumArgs {
            kernel: spec.name,
            expected: spec.params.len() + spec.scalars.len(),
            got: spec.params.len() + scalars.len(),
        });
    }
    for (s, a) in spec.scalars.iter().zip(scalars) {
        if s.dtype != a.dtype {
            return Err(Error::DtypeMismatch {
                kernel: spec.name,
                buffer: s.name,
                expected: s.dtype,
                got: a.dtype,
            });
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn launch_dims(
    cfg: &Config,
    spec: &'static KernelSpec,
    slot: &KernelSlot,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    scalars: &[ScalarArg],
    vals: &mut [i64],
    started: Option<Instant>,
) -> Result<()> {
    let (dims, scalar_slots) = vals.split_at_mut(spec.dims.len());
    let mut device = check_into(spec, args, dims)?;
    check_scalars(spec, scalars)?;
    for (slot, a) in scalar_slots.iter_mut().zip(scalars) {
        *slot = a.bits as i64;
    }
    let vals: &[i64] = vals;
    let dims = &vals[..spec.dims.len()];
    if args.is_empty() {
        device = stream.map_or(Device::Cpu, Stream::device);
    }
    if let Some(s) = stream {
        if s.device() != device {
            return Err(Error::StreamDeviceMismatch {
                kernel: spec.name,
                tensors: device,
                stream: s.device(),
            });
        }
    }
    let grid = eval_grid(spec, device, dims)?;
    // Diagnostics only for launches that must find their kernel: warm launches stay quiet.
    let diag = cfg.diagnostics && !slot.is_warm(device);
    if let (true, Some(t)) = (diag, started) {
        eprintln!("tile phase start: check");
        print_done("check", t, "");
    }
    if grid.contains(&0) {
        return Ok(());
    }
    let capture = graph::capture_for(stream, device);
    if capture.is_some() && args.iter().any(|a| a.storage.is_scoped()) {
        return Err(Error::ScopedCapture { kernel: spec.name });
    }
    match device {
        Device::Cpu => {
            let loaded = slot.cpu(spec, cfg)?;
            let workers = cpu::worker_count(cfg.num_threads);
            if let Some(rec) = &capture {
                rec.record_cpu(loaded, args, vals, grid, workers);
                return Ok(());
            }
            find::phase(diag, "launch", || {
                launch_cpu(loaded.entry, vals, grid, args, workers)
            })
        }
        Device::Cuda(ordinal) => {
            let loaded = slot.cuda(spec, ordinal, cfg)?;
            let dev = loaded.dev;
            let (stream, capturing) = match (&capture, stream) {
                (Some(rec), _) => (rec.cuda_stream().unwrap_or(&dev.stream), true),
                (None, Some(Stream::Cuda(s))) => (s, false),
                (None, _) => (&dev.stream, false),
            };
            if let Some(rec) = &capture {
                rec.record_cuda(&loaded.func, args);
            }
            let Some(x) = launched_x(loaded, grid[0]) else {
                return Err(Error::Grid {
                    kernel: spec.name,
                    axis: 0,
                    message: format!(
                        "extent {} times the {} blocks that split its loop is over the CUDA limit {}",
                        grid[0], loaded.split, CUDA_GRID_LIMITS[0]
                    ),
                });
            };
            let grid = [x, grid[1], grid[2]];
            find::phase(diag, "launch", || {
                launch_cuda(loaded, stream, dims, scalars, grid, args, capturing)
            })
        }
    }
}

/// Evaluates the grid; every extent must be non-negative (and within CUDA's limits on a
/// GPU).
fn eval_grid(spec: &KernelSpec, device: Device, dims: &[i64]) -> Result<[i64; 3]> {
    let mut grid = [0i64; 3];
    for (axis, expr) in spec.grid.iter().enumerate() {
        let err = |message: String| Error::Grid {
            kernel: spec.name,
            axis,
            message,
        };
        let v = expr.eval(dims).ok_or_else(|| {
            err(format!(
                "cannot evaluate {expr:?} with dims {dims:?} (division by zero or overflow)"
            ))
        })?;
        if v < 0 {
            return Err(err(format!("extent {v} is negative")));
        }
        let limit = CUDA_GRID_LIMITS[axis];
        if device.is_cuda() && v > limit {
            return Err(err(format!("extent {v} exceeds the CUDA limit {limit}")));
        }
        // Block indices are 32-bit `int`s in generated code (the compiler
        // proves its index arithmetic within that).
        if v > i32::MAX as i64 {
            return Err(err(format!(
                "extent {v} exceeds {}: block indices are 32-bit",
                i32::MAX
            )));
        }
        grid[axis] = v;
    }
    if grid[0]
        .checked_mul(grid[1])
        .and_then(|v| v.checked_mul(grid[2]))
        .is_none()
    {
        return Err(Error::Grid {
            kernel: spec.name,
            axis: 2,
            message: format!("total block count of {grid:?} overflows"),
        });
    }
    Ok(grid)
}

/// A storage locked for a launch.
pub(crate) struct Locked<'a> {
    pub storage: &'a Storage,
    /// Some use of the storage writes it (the lock is exclusive).
    pub write: bool,
    _guard: StorageGuard<'a>,
}

/// Locks each distinct storage of `args` once (exclusive if any use writes it), in
/// address order, and calls `f` with the locks held.
pub(crate) fn with_locked<R>(args: &[ArgRef<'_>], f: impl FnOnce(&[Option<Locked<'_>>]) -> R) -> R {
    let n = args.len();
    if n <= INLINE {
        let mut order = [0usize; INLINE];
        let mut held: [Option<Locked<'_>>; INLINE] = std::array::from_fn(|_| None);
        let k = lock_into(args, &mut order[..n], &mut held);
        f(&held[..k])
    } else {
        let mut order = vec![0usize; n];
        let mut held: Vec<Option<Locked<'_>>> = (0..n).map(|_| None).collect();
        let k = lock_into(args, &mut order, &mut held);
        f(&held[..k])
    }
}

fn lock_into<'a>(
    args: &[ArgRef<'a>],
    order: &mut [usize],
    held: &mut [Option<Locked<'a>>],
) -> usize {
    for (i, o) in order.iter_mut().enumerate() {
        *o = i;
    }
    order.sort_unstable_by_key(|&i| args[i].storage_addr());
    let (n, mut k, mut i) = (order.len(), 0, 0);
    while i < n {
        let first = &args[order[i]];
        let mut write = first.output;
        let mut j = i + 1;
        while j < n && args[order[j]].storage_addr() == first.storage_addr() {
            write |= args[order[j]].output;
            j += 1;
        }
        let storage: &'a Storage = first.storage;
        held[k] = Some(Locked {
            storage,
            write,
            _guard: storage.lock(write),
        });
        k += 1;
        i = j;
    }
    k
}

/// Runs a CPU kernel over `grid` with `args` locked.
pub(crate) fn launch_cpu(
    entry: CpuEntry,
    dims: &[i64],
    grid: [i64; 3],
    args: &[ArgRef<'_>],
    workers: usize,
) -> Result<()> {
    with_locked(args, |_| {
        let n = args.len();
        let run = |bufs: &mut [*mut c_void]| {
            for (b, a) in bufs.iter_mut().zip(args) {
                *b = a.ptr as *mut c_void;
            }
            // SAFETY: the checks established that every buffer is a live, contiguous host
            // allocation of the declared dtype and shape (the storages are borrowed by
            // `args` and locked), every dynamic dim is bound, and the entry follows the
            // CPU ABI of the kernel it was generated for.
            unsafe { cpu::run_grid(entry, bufs, dims, grid, workers) }
        };
        if n <= INLINE {
            let mut bufs = [std::ptr::null_mut(); INLINE];
            run(&mut bufs[..n])
        } else {
            run(&mut vec![std::ptr::null_mut(); n])
        }
    })
}

fn launch_cuda(
    loaded: &CudaLoaded,
    stream: &Arc<CudaStream>,
    dims: &[i64],
    scalars: &[ScalarArg],
    grid: [i64; 3],
    args: &[ArgRef<'_>],
    capturing: bool,
) -> Result<()> {
    with_locked(args, |held| {
        if !capturing {
            for l in held.iter().flatten() {
                l.storage.order(stream, l.write)?;
            }
        }
        // Checked: within CUDA's grid limits.
        let grid = [grid[0] as u32, grid[1] as u32, grid[2] as u32];
        enqueue(loaded, stream, dims, scalars, grid, args)
    })
}

/// The grid's x extent a launch of `loaded` runs: the spec's, times the blocks that split
/// its loop over a cluster (`CudaLoaded::split`, read from its launch plan at load), or
/// `None` past CUDA's limit. Both CUDA paths launch with it.
#[inline(always)]
pub(super) fn launched_x(loaded: &CudaLoaded, x: i64) -> Option<i64> {
    let v = x.checked_mul(i64::from(loaded.split))?;
    (v <= CUDA_GRID_LIMITS[0]).then_some(v)
}

/// Queues the kernel on `stream`: the last step of both CUDA paths, with the checks
/// passed, the storages locked and ordered on `stream` (or held by a capture).
#[inline(always)]
fn enqueue(
    loaded: &CudaLoaded,
    stream: &CudaStream,
    dims: &[i64],
    scalars: &[ScalarArg],
    grid: [u32; 3],
    args: &[ArgRef<'_>],
) -> Result<()> {
    with_cuda_params(args, dims, scalars, |params| {
        crate::tma::with_maps(loaded.tma.as_deref(), args, params, |params| {
            // SAFETY: `params` follows the CUDA ABI of the kernel (one device address
            // per buffer, one int per dynamic dim, then each scalar, whose value's bytes
            // start its `u64` slot, as the parameter's type reads them, then its tensor
            // maps, if any) and points at locals alive across the call; every address is
            // a checked, live, contiguous allocation on this stream's device; the
            // storages are borrowed by `args` (or, in a capture, held by the graph) and
            // were ordered on `stream` by the caller.
            unsafe {
                match loaded
                    .tma
                    .as_deref()
                    .map_or((1, 1), |p| (p.cluster, p.cluster_y))
                {
                    (x, y)
                        if x * y > 1 && grid[0].is_multiple_of(x) && grid[1].is_multiple_of(y) =>
                    {
                        cuda::launch_in_clusters(
                            &loaded.func,
                            stream,
                            grid,
                            loaded.threads,
                            loaded.shared_bytes,
                            [x, y],
                            params,
                        )
                    }
                    _ => cuda::launch(
                        &loaded.func,
                        stream,
                        grid,
                        loaded.threads,
                        loaded.shared_bytes,
                        params,
                    ),
                }
            }
        })
    })
}

/// Calls `f` with the CUDA parameter list of a launch: pointers to one device address
/// per buffer, to one `int` per dynamic dim, then to each scalar's bits, all locals of
/// this call (on the stack up to [`INLINE`] buffers and dims and [`INLINE`] scalars).
#[inline(always)]
pub(crate) fn with_cuda_params<R>(
    args: &[ArgRef<'_>],
    dims: &[i64],
    scalars: &[ScalarArg],
    f: impl FnOnce(&mut [*mut c_void]) -> R,
) -> R {
    let (n, m, k) = (args.len(), dims.len(), scalars.len());
    let fill =
        |ptrs: &mut [u64], ints: &mut [i32], vals: &mut [u64], params: &mut [*mut c_void]| {
            for (p, a) in ptrs.iter_mut().zip(args) {
                *p = a.ptr as u64;
            }
            // Checked: every dim fits an `int`.
            for (i, &d) in ints.iter_mut().zip(dims) {
                *i = d as i32;
            }
            for (v, s) in vals.iter_mut().zip(scalars) {
                *v = s.bits;
            }
            let slots = ptrs
                .iter_mut()
                .map(|p| (p as *mut u64).cast::<c_void>())
                .chain(ints.iter_mut().map(|d| (d as *mut i32).cast::<c_void>()))
                .chain(vals.iter_mut().map(|v| (v as *mut u64).cast::<c_void>()));
            for (slot, p) in params.iter_mut().zip(slots) {
                *slot = p;
            }
            f(params)
        };
    if n <= INLINE && m <= INLINE && k <= INLINE {
        let mut ptrs = [0u64; INLINE];
        let mut ints = [0i32; INLINE];
        let mut vals = [0u64; INLINE];
        let mut params = [std::ptr::null_mut(); 3 * INLINE];
        fill(
            &mut ptrs[..n],
            &mut ints[..m],
            &mut vals[..k],
            &mut params[..n + m + k],
        )
    } else {
        let mut params = vec![std::ptr::null_mut(); n + m + k];
        fill(
            &mut vec![0u64; n],
            &mut vec![0i32; m],
            &mut vec![0u64; k],
            &mut params,
        )
    }
}

mod warm;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod gpu_tests;
#[cfg(test)]
mod support;
#[cfg(test)]
mod tests;
