//! The launch path behind every generated launcher.
//!
//! `launch` = check arguments → evaluate the grid → find the kernel → launch:
//! - find, CPU: the entry linked at build time (`spec.cpu.aot`) unless `TILE_NO_AOT=1`,
//!   else the disk cache (`kernels/<key>`), else compile the C source with the system
//!   compiler and publish it;
//! - find, CUDA: the cubin embedded for the device's architecture unless `TILE_NO_AOT=1`,
//!   else the disk cache (`cuda-binaries/<key>-<arch>`), else NVRTC and publish.
//!
//! Invariants:
//! - A failed check launches nothing and writes nothing; a grid with a zero extent
//!   launches nothing and succeeds.
//! - What was found is stored in the launcher's [`KernelSlot`] (per device for CUDA), so
//!   a later launch does no disk access, no hashing and no string formatting: its cost is
//!   the checks, a lock per distinct buffer and the launch itself.
//! - Buffers are locked for the launch (shared for inputs, exclusive for outputs, each
//!   storage once, in address order so concurrent launches cannot deadlock). A CPU launch
//!   holds the locks while it runs and returns when it has finished; a CUDA launch is
//!   queued on the stream, with cudarc's buffer events recorded so other streams order
//!   their reads and writes after it.
//! - With `TILE_JIT_DIAGNOSTICS=1`, a launch that had to find its kernel prints one line
//!   per phase (check, lookup, compile, load, launch); warm launches print nothing.

use std::ffi::c_void;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{CudaFunction, DevicePtr, DevicePtrMut, SyncOnDrop};
use libloading::Library;

use crate::cache::{valid_key, DiskCache, Staging};
use crate::cc;
use crate::check::{check_args, Bound};
use crate::config::Config;
use crate::cpu;
use crate::cuda;
use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::nvrtc;
use crate::spec::{CpuEntry, KernelSpec};
use crate::stream::Stream;
use crate::tensor::{Storage, StorageGuard, Tensor};

/// A code generation target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Cpu,
    Cuda,
}

impl Target {
    /// The target that runs on `device`.
    pub const fn of(device: Device) -> Target {
        match device {
            Device::Cpu => Target::Cpu,
            Device::Cuda(_) => Target::Cuda,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::Cpu => "cpu",
            Target::Cuda => "cuda",
        })
    }
}

/// The generated source of `spec` for `target` (C for the CPU, CUDA C++ for CUDA).
pub fn kernel_source(spec: &'static KernelSpec, target: Target) -> &'static str {
    match target {
        Target::Cpu => spec.cpu.source,
        Target::Cuda => spec.cuda.source,
    }
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
    pub(crate) storage: &'a Storage,
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
    /// Loaded from this disk cache entry.
    DiskCache(PathBuf),
    /// Compiled in this process (published to this entry, or a temporary folder).
    Compiled(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Aot => f.write_str("the ahead-of-time artifact"),
            Origin::DiskCache(p) => write!(f, "the disk cache at {}", p.display()),
            Origin::Compiled(p) => write!(f, "a fresh compile at {}", p.display()),
        }
    }
}

struct CpuLoaded {
    entry: CpuEntry,
    /// Keeps the JIT-compiled library mapped while `entry` can be called.
    _lib: Option<Library>,
    origin: Origin,
}

struct CudaLoaded {
    func: CudaFunction,
    origin: Origin,
}

/// Per-launcher cache of found kernels: the in-process level of the kernel cache.
///
/// Generated launchers hold one in a `static`; what it loads stays loaded for the
/// process lifetime.
pub struct KernelSlot {
    /// Serialises the slow path so one process compiles a kernel once.
    init: Mutex<()>,
    cpu: OnceLock<CpuLoaded>,
    /// Indexed by CUDA ordinal.
    cuda: OnceLock<Box<[OnceLock<CudaLoaded>]>>,
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
            Device::Cuda(n) => self
                .cuda
                .get()
                .and_then(|t| t.get(n))
                .and_then(OnceLock::get)
                .map(|l| &l.origin),
        }
    }

    /// Whether the kernel for `device` is already loaded (the next launch is warm).
    fn is_warm(&self, device: Device) -> bool {
        self.origin(device).is_some()
    }

    fn cpu(&self, spec: &'static KernelSpec, cfg: &Config) -> Result<&CpuLoaded> {
        if let Some(l) = self.cpu.get() {
            return Ok(l);
        }
        let _guard = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = self.cpu.get() {
            return Ok(l);
        }
        self.finds.fetch_add(1, Ordering::Relaxed);
        let loaded = find_cpu(spec, cfg)?;
        Ok(self.cpu.get_or_init(|| loaded))
    }

    fn cuda(
        &self,
        spec: &'static KernelSpec,
        ordinal: usize,
        dev: &cuda::DeviceState,
        cfg: &Config,
    ) -> Result<&CudaLoaded> {
        let count = cuda::probe().count;
        let table = self
            .cuda
            .get_or_init(|| (0..count).map(|_| OnceLock::new()).collect());
        let cell = table
            .get(ordinal)
            .ok_or(Error::NoSuchDevice { ordinal, count })?;
        if let Some(l) = cell.get() {
            return Ok(l);
        }
        let _guard = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = cell.get() {
            return Ok(l);
        }
        self.finds.fetch_add(1, Ordering::Relaxed);
        let loaded = find_cuda(spec, dev, cfg)?;
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

/// Runs `f` as diagnostics phase `name` (prints start/done lines when `on`).
fn phase<R>(on: bool, name: &str, f: impl FnOnce() -> R) -> R {
    if !on {
        return f();
    }
    eprintln!("tile phase start: {name}");
    let t = Instant::now();
    let r = f();
    print_done(name, t);
    r
}

fn print_done(name: &str, since: Instant) {
    eprintln!(
        "tile phase done: {name} elapsed={:.3}ms",
        since.elapsed().as_secs_f64() * 1e3
    );
}

/// Launches `spec` with `args` on `stream` (default: the tensors' device's default
/// stream). Called by generated launchers.
pub fn launch(
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
    let check_start = cfg.diagnostics.then(Instant::now);
    let mut bound = check_args(spec, args)?;
    if args.is_empty() {
        bound.device = stream.map_or(Device::Cpu, Stream::device);
    }
    if let Some(s) = stream {
        if s.device() != bound.device {
            return Err(Error::StreamDeviceMismatch {
                kernel: spec.name,
                tensors: bound.device,
                stream: s.device(),
            });
        }
    }
    let grid = eval_grid(spec, &bound)?;
    // Diagnostics only for launches that must find their kernel: warm launches stay quiet.
    let diag = cfg.diagnostics && !slot.is_warm(bound.device);
    if let (true, Some(t)) = (diag, check_start) {
        eprintln!("tile phase start: check");
        print_done("check", t);
    }
    if grid.contains(&0) {
        return Ok(());
    }
    match bound.device {
        Device::Cpu => {
            let loaded = slot.cpu(spec, cfg)?;
            phase(diag, "launch", || {
                launch_cpu(cfg, loaded, &bound, grid, args)
            })
        }
        Device::Cuda(ordinal) => {
            let dev = cuda::device(ordinal)?;
            let loaded = slot.cuda(spec, ordinal, dev, cfg)?;
            let stream = match stream {
                Some(Stream::Cuda(s)) => s,
                _ => &dev.stream,
            };
            phase(diag, "launch", || {
                launch_cuda(spec, &loaded.func, stream, &bound, grid, args)
            })
        }
    }
}

/// Evaluates the grid; every extent must be non-negative (and within CUDA's limits on a
/// GPU).
fn eval_grid(spec: &KernelSpec, bound: &Bound) -> Result<[i64; 3]> {
    let mut grid = [0i64; 3];
    for (axis, expr) in spec.grid.iter().enumerate() {
        let err = |message: String| Error::Grid {
            kernel: spec.name,
            axis,
            message,
        };
        let v = expr.eval(&bound.dims).ok_or_else(|| {
            err(format!(
                "cannot evaluate {expr:?} with dims {:?} (division by zero or overflow)",
                bound.dims
            ))
        })?;
        if v < 0 {
            return Err(err(format!("extent {v} is negative")));
        }
        let limit = if axis == 0 { i32::MAX as i64 } else { 65535 };
        if bound.device.is_cuda() && v > limit {
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

/// Locks each distinct storage of `args` once (exclusive if any use writes it), in
/// address order.
fn lock_storages<'a>(args: &[ArgRef<'a>]) -> Vec<StorageGuard<'a>> {
    let mut uses: Vec<(usize, bool, &'a Storage)> = args
        .iter()
        .map(|a| (a.storage as *const Storage as usize, a.output, a.storage))
        .collect();
    uses.sort_by_key(|u| u.0);
    let mut guards = Vec::with_capacity(uses.len());
    let mut i = 0;
    while i < uses.len() {
        let (addr, mut write, storage) = uses[i];
        let mut j = i + 1;
        while j < uses.len() && uses[j].0 == addr {
            write |= uses[j].1;
            j += 1;
        }
        guards.push(storage.lock(write));
        i = j;
    }
    guards
}

fn launch_cpu(
    cfg: &Config,
    loaded: &CpuLoaded,
    bound: &Bound,
    grid: [i64; 3],
    args: &[ArgRef<'_>],
) -> Result<()> {
    let _guards = lock_storages(args);
    let bufs: Vec<*mut c_void> = args.iter().map(|a| a.ptr as *mut c_void).collect();
    // SAFETY: the checks established that every buffer is a live, contiguous host
    // allocation of the declared dtype and shape (the storages are borrowed by `args` and
    // locked above), every dynamic dim is bound, and the entry follows the CPU ABI of the
    // kernel it was generated for.
    unsafe {
        cpu::run_grid(
            loaded.entry,
            &bufs,
            &bound.dims,
            grid,
            cpu::worker_count(cfg.num_threads),
        )
    }
}

fn launch_cuda(
    spec: &KernelSpec,
    func: &CudaFunction,
    stream: &cudarc::driver::CudaStream,
    bound: &Bound,
    grid: [i64; 3],
    args: &[ArgRef<'_>],
) -> Result<()> {
    let mut guards = lock_storages(args);
    // Make `stream` wait for earlier conflicting work on other streams; the returned
    // records run after the launch is queued (dropped below), marking the buffers as read
    // or written by this stream.
    let records: Vec<SyncOnDrop<'_>> = guards
        .iter_mut()
        .filter_map(|g| match g {
            StorageGuard::CudaRead(s) => Some(s.device_ptr(stream).1),
            StorageGuard::CudaWrite(s) => Some(s.device_ptr_mut(stream).1),
            StorageGuard::HostRead(_) | StorageGuard::HostWrite(_) => None,
        })
        .collect();
    let mut ptrs: Vec<u64> = args.iter().map(|a| a.ptr as u64).collect();
    // Checked: every dim fits an `int`.
    let mut dims: Vec<i32> = bound.dims.iter().map(|&d| d as i32).collect();
    let mut params: Vec<*mut c_void> = ptrs
        .iter_mut()
        .map(|p| (p as *mut u64).cast::<c_void>())
        .chain(dims.iter_mut().map(|d| (d as *mut i32).cast::<c_void>()))
        .collect();
    // Checked: within CUDA's grid limits.
    let grid = [grid[0] as u32, grid[1] as u32, grid[2] as u32];
    // SAFETY: `params` follows the CUDA ABI of `spec` (one device address per buffer,
    // then one int per dynamic dim) and points at locals alive across the call; every
    // address is a checked, live, contiguous allocation on this stream's device; the
    // storages stay alive (borrowed by `args`) and their events are recorded on `stream`
    // when `records` drops, after the launch is queued.
    let r = unsafe { cuda::launch(func, stream, grid, spec.threads, &mut params) };
    drop(records);
    drop(guards);
    r
}

/// A freshly built entry: published in the disk cache, or a temporary build folder
/// (removed when this drops, after loading).
struct Built {
    dir: PathBuf,
    _temp: Option<Staging>,
}

/// Runs `build` in a staging folder (the cache's, or a temporary one without a cache),
/// then publishes it as `rel`. A failed build keeps its folder so the error's paths
/// stay readable.
fn build_entry(
    cache: Option<&DiskCache>,
    stage_name: &str,
    rel: &str,
    build: impl FnOnce(&mut Staging) -> Result<()>,
) -> Result<Built> {
    let mut staging = match cache {
        Some(c) => c.stage(stage_name)?,
        None => Staging::temp()?,
    };
    if let Err(e) = build(&mut staging) {
        staging.keep();
        return Err(e);
    }
    match cache {
        Some(c) => Ok(Built {
            dir: staging.publish(c, rel)?,
            _temp: None,
        }),
        None => Ok(Built {
            dir: staging.dir().to_path_buf(),
            _temp: Some(staging),
        }),
    }
}

fn find_cpu(spec: &'static KernelSpec, cfg: &Config) -> Result<CpuLoaded> {
    let (diag, k, name) = (cfg.diagnostics, &spec.cpu, spec.name);
    let rel = format!("kernels/{}", k.key);
    let load = |dir: &Path, origin: Origin| {
        phase(diag, "load", || {
            let (lib, entry) = cc::load(name, &dir.join(cc::LIBRARY_FILE), k.symbol)?;
            Ok::<_, Error>(CpuLoaded {
                entry,
                _lib: Some(lib),
                origin,
            })
        })
    };
    let (aot, cache, hit) = phase(diag, "lookup", || -> Result<_> {
        if let (false, Some(entry)) = (cfg.no_aot, k.aot) {
            return Ok((Some(entry), None, None));
        }
        check_key(spec, k.key)?;
        let cache = open_cache(cfg);
        let hit = match &cache {
            Some(c) => c.lookup(&rel, &[cc::SOURCE_FILE, cc::LIBRARY_FILE])?,
            None => None,
        };
        Ok((None, cache, hit))
    })?;
    let loaded = if let Some(entry) = aot {
        CpuLoaded {
            entry,
            _lib: None,
            origin: Origin::Aot,
        }
    } else if let Some(dir) = hit {
        load(&dir, Origin::DiskCache(dir.clone()))?
    } else {
        let built = phase(diag, "compile", || {
            build_entry(cache.as_ref(), k.key, &rel, |s| {
                s.write(cc::SOURCE_FILE, k.source.as_bytes())?;
                cc::compile(cfg.cc.as_deref(), name, s)
            })
        })?;
        load(&built.dir, Origin::Compiled(built.dir.clone()))?
    };
    if diag {
        eprintln!("tile kernel {name}: cpu binary from {}", loaded.origin);
    }
    Ok(loaded)
}

fn find_cuda(
    spec: &'static KernelSpec,
    dev: &cuda::DeviceState,
    cfg: &Config,
) -> Result<CudaLoaded> {
    const SOURCE: &str = "kernel.cu";
    const CUBIN: &str = "kernel.cubin";
    let (diag, k, name) = (cfg.diagnostics, &spec.cuda, spec.name);
    let arch = cuda::nvrtc_arch(dev.cc);
    let rel = format!("cuda-binaries/{}-{arch}", k.key);
    let load = |image: Vec<u8>, origin: Origin, path: PathBuf| {
        phase(diag, "load", || {
            let func = cuda::load_function(dev, name, image, k.entry, &path)?;
            Ok::<_, Error>(CudaLoaded { func, origin })
        })
    };
    let (embedded, cache, hit) = phase(diag, "lookup", || -> Result<_> {
        if !cfg.no_aot {
            for want in cuda::cubin_archs(dev.cc) {
                if let Some(&(a, bytes)) = k.cubins.iter().find(|(a, _)| *a == want) {
                    return Ok((Some((a, bytes)), None, None));
                }
            }
        }
        check_key(spec, k.key)?;
        let cache = open_cache(cfg);
        let hit = match &cache {
            Some(c) => c.lookup(&rel, &[SOURCE, CUBIN])?,
            None => None,
        };
        Ok((None, cache, hit))
    })?;
    let loaded = if let Some((a, bytes)) = embedded {
        let path = PathBuf::from(format!("<embedded {a} cubin>"));
        load(bytes.to_vec(), Origin::Aot, path)?
    } else if let Some(dir) = hit {
        let path = dir.join(CUBIN);
        let bytes = std::fs::read(&path).map_err(|e| Error::cache(&path, e))?;
        load(bytes, Origin::DiskCache(dir), path)?
    } else {
        let mut cubin = Vec::new();
        let built = phase(diag, "compile", || {
            let candidates = nvrtc::include_candidates(|v| std::env::var(v).ok());
            let includes = nvrtc::include_dirs(candidates)?;
            build_entry(cache.as_ref(), &format!("{}-{arch}", k.key), &rel, |s| {
                s.write(SOURCE, k.source.as_bytes())?;
                cubin = nvrtc::compile(name, k.source, &s.path(SOURCE), &arch, &includes)?;
                s.write(CUBIN, &cubin)
            })
        })?;
        load(
            cubin,
            Origin::Compiled(built.dir.clone()),
            built.dir.join(CUBIN),
        )?
    };
    if diag {
        eprintln!(
            "tile kernel {name}: cuda binary ({arch}) from {}",
            loaded.origin
        );
    }
    Ok(loaded)
}

fn check_key(spec: &KernelSpec, key: &str) -> Result<()> {
    if valid_key(key) {
        Ok(())
    } else {
        Err(Error::Spec {
            kernel: spec.name,
            message: format!("cache key {key:?} is not a hex digest"),
        })
    }
}

/// The disk cache, unless disabled. A cache that cannot be opened (read-only home, ...)
/// degrades to building in a temporary folder: caching must not make a launch fail.
fn open_cache(cfg: &Config) -> Option<DiskCache> {
    if cfg.disable_cache {
        return None;
    }
    match DiskCache::open(&cfg.cache_root) {
        Ok(c) => Some(c),
        Err(e) => {
            if cfg.diagnostics {
                eprintln!("tile: disk cache unavailable, building in a temporary folder: {e}");
            }
            None
        }
    }
}

#[cfg(test)]
mod gpu_tests;
#[cfg(test)]
mod tests;
