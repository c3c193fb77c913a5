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
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{CudaFunction, CudaStream};
use libloading::Library;

use crate::check::check_into;
use crate::config::Config;
use crate::cpu;
use crate::cuda;
use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::find::{self, print_done};
use crate::graph;
use crate::spec::{CpuEntry, KernelSpec};
use crate::stream::Stream;
use crate::tensor::{Storage, StorageGuard, Tensor};
pub use tile_abi::Target;

/// Launches of up to this many buffers (and dynamic dims) need no heap allocation.
const INLINE: usize = 8;

/// CUDA's largest grid extent per axis (x, y, z).
const CUDA_GRID_LIMITS: [i64; 3] = [i32::MAX as i64, 65535, 65535];

impl From<Device> for Target {
    /// The target that runs on `device`.
    fn from(device: Device) -> Target {
        match device {
            Device::Cpu => Target::Cpu,
            Device::Cuda(_) => Target::Cuda,
        }
    }
}

/// The generated source of `spec` for `target` (C for the CPU, CUDA C++ for CUDA).
pub fn kernel_source(spec: &'static KernelSpec, target: Target) -> &'static str {
    spec.source(target)
}

/// One argument of a launch: a tensor seen through the host ABI.
pub struct ArgRef<'a> {
    pub(crate) dtype: DType,
    pub(crate) shape: &'a [usize],
    pub(crate) strides: &'a [isize],
    /// Host address or CUDA device address of the first element.
    pub(crate) ptr: usize,
    pub(crate) device: Device,
    pub(crate) output: bool,
    pub(crate) storage: &'a Arc<Storage>,
}

impl<'a> ArgRef<'a> {
    /// A buffer the kernel only reads.
    pub fn input<T: Element>(t: &'a Tensor<T>) -> ArgRef<'a> {
        ArgRef {
            dtype: T::DTYPE,
            shape: t.shape(),
            strides: t.strides(),
            ptr: t.data_ptr(),
            device: t.device(),
            output: false,
            storage: t.storage(),
        }
    }

    /// A buffer the kernel writes.
    pub fn output<T: Element>(t: &'a mut Tensor<T>) -> ArgRef<'a> {
        ArgRef {
            output: true,
            ..ArgRef::input(t)
        }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn shape(&self) -> &[usize] {
        self.shape
    }

    pub fn strides(&self) -> &[isize] {
        self.strides
    }

    /// Host address or CUDA device address of the first element.
    pub fn ptr(&self) -> usize {
        self.ptr
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn is_output(&self) -> bool {
        self.output
    }

    fn storage_addr(&self) -> usize {
        Arc::as_ptr(self.storage) as usize
    }
}

impl fmt::Debug for ArgRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArgRef")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("device", &self.device)
            .field("output", &self.output)
            .finish()
    }
}

/// Where a launcher's kernel binary came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Linked (CPU) or embedded (CUDA) at build time.
    Aot,
    /// Loaded from this disk cache entry (`kernels/<key>`).
    DiskCache(PathBuf),
    /// Loaded from this device binary cache entry (`cuda-binaries/<key>`), the kernel
    /// entry being rebuilt around it (the device source was unchanged).
    BinaryCache(PathBuf),
    /// Compiled in this process (published to this entry, or a temporary folder).
    Compiled(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Aot => f.write_str("the ahead-of-time artifact"),
            Origin::DiskCache(p) => write!(f, "the disk cache at {}", p.display()),
            Origin::BinaryCache(p) => write!(f, "the device binary cache at {}", p.display()),
            Origin::Compiled(p) => write!(f, "a fresh compile at {}", p.display()),
        }
    }
}

pub(crate) struct CpuLoaded {
    pub entry: CpuEntry,
    /// Keeps the JIT-compiled library mapped while `entry` can be called (graphs that
    /// recorded `entry` hold a clone too).
    pub lib: Option<Arc<Library>>,
    pub origin: Origin,
}

/// A kernel loaded on one device, with what a warm launch needs from the spec and the
/// device table copied next to the function handle: `repr(C)` keeps these first, and
/// the origin (never read by a launch) is boxed so the whole entry, with its `OnceLock`
/// state, fits the cache line of a [`CudaCell`]. One line then replaces reads of the
/// spec's tail, the probe and the device table after the driver has evicted them.
#[repr(C)]
pub(crate) struct CudaLoaded {
    pub func: CudaFunction,
    /// `spec.threads`.
    pub threads: u32,
    /// `spec.cuda.shared_bytes`.
    pub shared_bytes: u32,
    /// The device's context and default stream.
    pub dev: &'static cuda::DeviceState,
    pub origin: Box<Origin>,
}

impl CudaLoaded {
    pub(crate) fn new(
        spec: &KernelSpec,
        dev: &'static cuda::DeviceState,
        func: CudaFunction,
        origin: Origin,
    ) -> CudaLoaded {
        CudaLoaded {
            func,
            threads: spec.threads,
            shared_bytes: spec.cuda.shared_bytes,
            dev,
            origin: Box::new(origin),
        }
    }
}

/// One CUDA device's entry of a [`KernelSlot`], on a cache line of its own (see
/// [`CudaLoaded`]).
#[repr(align(64))]
struct CudaCell(OnceLock<CudaLoaded>);

/// Per-launcher cache of found kernels: the in-process level of the kernel cache.
///
/// Generated launchers hold one in a `static`; what it loads stays loaded for the
/// process lifetime.
pub struct KernelSlot {
    /// Serialises the slow path so one process compiles a kernel once.
    init: Mutex<()>,
    cpu: OnceLock<CpuLoaded>,
    /// Indexed by CUDA ordinal.
    cuda: OnceLock<Box<[CudaCell]>>,
    /// How many times the slow path found a kernel (for tests and diagnostics).
    finds: AtomicU32,
}

impl KernelSlot {
    pub const fn new() -> KernelSlot {
        KernelSlot {
            init: Mutex::new(()),
            cpu: OnceLock::new(),
            cuda: OnceLock::new(),
            finds: AtomicU32::new(0),
        }
    }

    /// Where the kernel for `device` came from, once it has been found.
    pub fn origin(&self, device: Device) -> Option<&Origin> {
        match device {
            Device::Cpu => self.cpu.get().map(|l| &l.origin),
            Device::Cuda(n) => self.cuda_loaded(n).map(|l| &*l.origin),
        }
    }

    #[inline]
    fn cuda_loaded(&self, ordinal: usize) -> Option<&CudaLoaded> {
        self.cuda
            .get()
            .and_then(|t| t.get(ordinal))
            .and_then(|c| c.0.get())
    }

    /// Whether the kernel for `device` is already loaded (the next launch is warm).
    fn is_warm(&self, device: Device) -> bool {
        self.origin(device).is_some()
    }

    pub(crate) fn cpu(&self, spec: &'static KernelSpec, cfg: &Config) -> Result<&CpuLoaded> {
        if let Some(l) = self.cpu.get() {
            return Ok(l);
        }
        let _guard = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = self.cpu.get() {
            return Ok(l);
        }
        self.finds.fetch_add(1, Ordering::Relaxed);
        let loaded = find::find_cpu(spec, cfg)?;
        Ok(self.cpu.get_or_init(|| loaded))
    }

    /// The kernel for CUDA device `ordinal`, found on first use. A warm call reads only
    /// the slot (the device state is in the entry); a cold one first looks up the device,
    /// so a missing driver or device is reported before anything is found.
    pub(crate) fn cuda(
        &self,
        spec: &'static KernelSpec,
        ordinal: usize,
        cfg: &Config,
    ) -> Result<&CudaLoaded> {
        if let Some(l) = self.cuda_loaded(ordinal) {
            return Ok(l);
        }
        let dev = cuda::device(ordinal)?;
        let count = cuda::probe().count;
        let table = self
            .cuda
            .get_or_init(|| (0..count).map(|_| CudaCell(OnceLock::new())).collect());
        let cell = &table
            .get(ordinal)
            .ok_or(Error::NoSuchDevice { ordinal, count })?
            .0;
        let _guard = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = cell.get() {
            return Ok(l);
        }
        self.finds.fetch_add(1, Ordering::Relaxed);
        let loaded = find::find_cuda(spec, dev, cfg)?;
        Ok(cell.get_or_init(|| loaded))
    }
}

impl Default for KernelSlot {
    fn default() -> KernelSlot {
        KernelSlot::new()
    }
}

impl fmt::Debug for KernelSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelSlot")
            .field("cpu", &self.cpu.get().map(|l| &l.origin))
            .field("finds", &self.finds.load(Ordering::Relaxed))
            .finish()
    }
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
    match warm::try_cuda(spec, slot, stream, args) {
        Some(done) => done,
        None => launch_general(spec, slot, stream, args),
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
) -> Result<()> {
    launch_with(Config::get(), spec, slot, stream, args)
}

pub(crate) fn launch_with(
    cfg: &Config,
    spec: &'static KernelSpec,
    slot: &KernelSlot,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
) -> Result<()> {
    let started = cfg.diagnostics.then(Instant::now);
    let n = spec.dims.len();
    if n <= INLINE {
        let mut dims = [0i64; INLINE];
        launch_dims(cfg, spec, slot, stream, args, &mut dims[..n], started)
    } else {
        let mut dims = vec![0i64; n];
        launch_dims(cfg, spec, slot, stream, args, &mut dims, started)
    }
}

fn launch_dims(
    cfg: &Config,
    spec: &'static KernelSpec,
    slot: &KernelSlot,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    dims: &mut [i64],
    started: Option<Instant>,
) -> Result<()> {
    let mut device = check_into(spec, args, dims)?;
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
    match device {
        Device::Cpu => {
            let loaded = slot.cpu(spec, cfg)?;
            let workers = cpu::worker_count(cfg.num_threads);
            if let Some(rec) = &capture {
                rec.record_cpu(loaded, args, dims, grid, workers);
                return Ok(());
            }
            find::phase(diag, "launch", || {
                launch_cpu(loaded.entry, dims, grid, args, workers)
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
            find::phase(diag, "launch", || {
                launch_cuda(loaded, stream, dims, grid, args, capturing)
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
        enqueue(loaded, stream, dims, grid, args)
    })
}

/// Queues the kernel on `stream`: the last step of both CUDA paths, with the checks
/// passed, the storages locked and ordered on `stream` (or held by a capture).
#[inline(always)]
fn enqueue(
    loaded: &CudaLoaded,
    stream: &CudaStream,
    dims: &[i64],
    grid: [u32; 3],
    args: &[ArgRef<'_>],
) -> Result<()> {
    with_cuda_params(args, dims, |params| {
        // SAFETY: `params` follows the CUDA ABI of the kernel (one device address per
        // buffer, then one int per dynamic dim) and points at locals alive across the
        // call; every address is a checked, live, contiguous allocation on this stream's
        // device; the storages are borrowed by `args` (or, in a capture, held by the
        // graph) and were ordered on `stream` by the caller.
        unsafe {
            cuda::launch(
                &loaded.func,
                stream,
                grid,
                loaded.threads,
                loaded.shared_bytes,
                params,
            )
        }
    })
}

/// Calls `f` with the CUDA parameter list of a launch: pointers to one device address
/// per buffer, then to one `int` per dynamic dim, all locals of this call (on the stack
/// up to [`INLINE`] of each).
#[inline(always)]
pub(crate) fn with_cuda_params<R>(
    args: &[ArgRef<'_>],
    dims: &[i64],
    f: impl FnOnce(&mut [*mut c_void]) -> R,
) -> R {
    let (n, m) = (args.len(), dims.len());
    let fill = |ptrs: &mut [u64], ints: &mut [i32], params: &mut [*mut c_void]| {
        for (p, a) in ptrs.iter_mut().zip(args) {
            *p = a.ptr as u64;
        }
        // Checked: every dim fits an `int`.
        for (i, &d) in ints.iter_mut().zip(dims) {
            *i = d as i32;
        }
        let slots = ptrs
            .iter_mut()
            .map(|p| (p as *mut u64).cast::<c_void>())
            .chain(ints.iter_mut().map(|d| (d as *mut i32).cast::<c_void>()));
        for (slot, p) in params.iter_mut().zip(slots) {
            *slot = p;
        }
        f(params)
    };
    if n <= INLINE && m <= INLINE {
        let mut ptrs = [0u64; INLINE];
        let mut ints = [0i32; INLINE];
        let mut params = [std::ptr::null_mut(); 2 * INLINE];
        fill(&mut ptrs[..n], &mut ints[..m], &mut params[..n + m])
    } else {
        let mut params = vec![std::ptr::null_mut(); n + m];
        fill(&mut vec![0u64; n], &mut vec![0i32; m], &mut params)
    }
}

mod warm;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod gpu_tests;
#[cfg(test)]
mod tests;
