//! Graphs: a sequence of tile launches recorded once and replayed with one submission.
//!
//! ```ignore
//! let g = tile::Graph::capture(&stream, |s| {
//!     k1::on(s).launch(&a, &mut b)?;
//!     k2::on(s).launch(&b, &mut c)?;
//!     Ok(())
//! })?;
//! g.replay()?;
//! ```
//!
//! On CUDA the closure's launches are captured from a private stream into a CUDA graph
//! (`cuStreamBeginCapture` → `cuStreamEndCapture` → `cuGraphInstantiate`) and replayed
//! with `cuGraphLaunch`. On the CPU the launches are recorded (entry point, buffers, dims,
//! grid) and replayed in order. Either way nothing runs while capturing.
//!
//! Invariants:
//! - Inside the closure, a launch is recorded when it names the capture's stream, or when
//!   it names no stream (the default stream) from the capturing thread on the graph's
//!   device: like PyTorch's graph capture, the default stream is the capture stream while
//!   capturing. Launches on other streams run as usual.
//! - Collectives ([`crate::dist`]) on the capture's stream are captured too (NCCL queues
//!   its kernels on the stream it is given); the graph holds their storages and
//!   communicator. CPU graphs record kernels only.
//! - The graph holds an `Arc` of every storage a recorded launch touched (and the loaded
//!   kernel it calls), so buffers outlive the graph even if their tensors are dropped: a
//!   replay can never touch freed memory. A storage is freed when its last tensor and the
//!   last graph holding it are gone (on CUDA after the graph's queued work, see
//!   [`crate::sync`]).
//! - A replay locks every storage of the graph (in address order) and, on CUDA, orders
//!   each on the replay stream before `cuGraphLaunch`, exactly as a launch does.
//! - A graph replays one at a time (a mutex): CUDA executable graphs must not be launched
//!   concurrently from several threads.

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use cudarc::driver::{sys, CudaContext, CudaFunction, CudaStream};
use libloading::Library;

use crate::arg::ArgRef;
use crate::cuda;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::loaded::CpuLoaded;
use crate::spec::CpuEntry;
use crate::stream::Stream;
use crate::tensor::Storage;

/// Captures running now (a launch checks this before looking for one).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
static CAPTURES: Mutex<Vec<Arc<Recorder>>> = Mutex::new(Vec::new());

/// A capture in progress.
pub(crate) struct Recorder {
    device: Device,
    thread: ThreadId,
    cuda_stream: Option<Arc<CudaStream>>,
    state: Mutex<Recorded>,
}

#[derive(Default)]
struct Recorded {
    /// Every storage touched, once, and whether some launch writes it.
    storages: Vec<(Arc<Storage>, bool)>,
    cpu: Vec<CpuLaunch>,
    /// Kernels a CUDA graph calls (their modules must stay loaded).
    functions: Vec<CudaFunction>,
    /// Other objects a recorded operation needs alive (a collective's communicator).
    keep: Vec<Arc<dyn Any + Send + Sync>>,
    launches: usize,
}

impl Recorded {
    /// Index of `storage` in `storages`, adding it (or its write) if needed.
    fn touch(&mut self, storage: &Arc<Storage>, write: bool) -> usize {
        match self
            .storages
            .iter()
            .position(|(s, _)| Arc::ptr_eq(s, storage))
        {
            Some(i) => {
                self.storages[i].1 |= write;
                i
            }
            None => {
                self.storages.push((Arc::clone(storage), write));
                self.storages.len() - 1
            }
        }
    }
}

/// One recorded CPU launch.
struct CpuLaunch {
    entry: CpuEntry,
    _lib: Option<Arc<Library>>,
    /// Per argument: index into the storages, byte offset of its data from the storage
    /// base, and whether it is written.
    args: Vec<(usize, usize, bool)>,
    dims: Vec<i64>,
    grid: [i64; 3],
    workers: usize,
}

impl Recorder {
    /// The stream launches are captured on (CUDA).
    pub fn cuda_stream(&self) -> Option<&Arc<CudaStream>> {
        self.cuda_stream.as_ref()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn record_cuda(&self, func: &CudaFunction, args: &[ArgRef<'_>]) {
        let mut st = self.state();
        for a in args {
            st.touch(a.storage, a.output);
        }
        st.functions.push(func.clone());
        st.launches += 1;
    }

    /// Records an operation that is not a kernel (a collective, see [`crate::dist`])
    /// queued on the capture's stream: the graph holds its storages and `keep`.
    pub fn record_other(
        &self,
        storages: &[(&Arc<Storage>, bool)],
        keep: Arc<dyn Any + Send + Sync>,
    ) {
        let mut st = self.state();
        for (s, write) in storages {
            st.touch(s, *write);
        }
        st.keep.push(keep);
        st.launches += 1;
    }

    pub fn record_cpu(
        &self,
        loaded: &CpuLoaded,
        args: &[ArgRef<'_>],
        dims: &[i64],
        grid: [i64; 3],
        workers: usize,
    ) {
        let mut st = self.state();
        let args = args
            .iter()
            .map(|a| {
                let i = st.touch(a.storage, a.output);
                (i, a.ptr - a.storage.base(), a.output)
            })
            .collect();
        st.cpu.push(CpuLaunch {
            entry: loaded.entry,
            _lib: loaded.lib.clone(),
            args,
            dims: dims.to_vec(),
            grid,
            workers,
        });
        st.launches += 1;
    }
}

/// The capture a launch with `stream` on `device` belongs to, if any (one atomic load
/// when no capture is running).
pub(crate) fn capture_for(stream: Option<&Stream>, device: Device) -> Option<Arc<Recorder>> {
    if !any_capture() {
        return None;
    }
    let list = CAPTURES.lock().unwrap_or_else(|e| e.into_inner());
    let me = std::thread::current().id();
    let found = match stream {
        Some(Stream::Cuda(s)) => list.iter().rev().find(|r| {
            r.cuda_stream
                .as_ref()
                .is_some_and(|c| c.cu_stream() == s.cu_stream())
        }),
        Some(Stream::Cpu) | None => list
            .iter()
            .rev()
            .find(|r| r.thread == me && r.device == device),
    };
    found.cloned()
}

/// Whether a capture is in progress anywhere in the process (one atomic load).
#[inline]
pub(crate) fn any_capture() -> bool {
    ACTIVE.load(Ordering::Acquire) != 0
}

/// Registers a recorder for the duration of a capture (unregistered on drop, panics
/// included).
struct Registration(Arc<Recorder>);

impl Registration {
    fn new(device: Device, cuda_stream: Option<Arc<CudaStream>>) -> Registration {
        let rec = Arc::new(Recorder {
            device,
            thread: std::thread::current().id(),
            cuda_stream,
            state: Mutex::new(Recorded::default()),
        });
        CAPTURES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::clone(&rec));
        ACTIVE.fetch_add(1, Ordering::AcqRel);
        Registration(rec)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut list = CAPTURES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = list.iter().position(|r| Arc::ptr_eq(r, &self.0)) {
            list.remove(i);
            ACTIVE.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// An instantiated CUDA graph.
struct CudaExec {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    ctx: Arc<CudaContext>,
}

// SAFETY: the handles are plain driver objects usable from any thread with the context
// bound; `Graph` serialises every use of them behind a mutex.
unsafe impl Send for CudaExec {}

impl Drop for CudaExec {
    fn drop(&mut self) {
        // In-flight launches of the graph complete first: the driver frees an executable
        // graph asynchronously once its work has finished.
        let _ = self.ctx.bind_to_thread();
        // SAFETY: both handles were created by `capture_cuda`, are owned by this value
        // and destroyed only here.
        unsafe {
            let _ = cudarc::driver::result::graph::exec_destroy(self.exec);
            let _ = cudarc::driver::result::graph::destroy(self.graph);
        }
    }
}

enum Kind {
    Cpu(Vec<CpuLaunch>),
    /// `None` when the capture recorded nothing.
    Cuda(Option<CudaExec>),
}

/// A recorded sequence of tile launches, replayable on its device (see the module docs).
pub struct Graph {
    device: Device,
    stream: Stream,
    kind: Mutex<Kind>,
    storages: Vec<(Arc<Storage>, bool)>,
    _functions: Vec<CudaFunction>,
    _keep: Vec<Arc<dyn Any + Send + Sync>>,
    launches: usize,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("device", &self.device)
            .field("launches", &self.launches)
            .field("buffers", &self.storages.len())
            .finish()
    }
}

impl Graph {
    /// Records the launches `f` makes on the stream it is given (see the module docs)
    /// into a graph that replays on `stream` by default. Nothing runs while capturing;
    /// an error (or panic) in `f` ends the capture and is returned (or resumed).
    pub fn capture(stream: &Stream, f: impl FnOnce(&Stream) -> Result<()>) -> Result<Graph> {
        match stream {
            Stream::Cpu => capture_cpu(f),
            Stream::Cuda(_) => capture_cuda(stream, f),
        }
    }

    /// Replays the graph on the stream it was captured for.
    pub fn replay(&self) -> Result<()> {
        self.replay_on(&self.stream)
    }

    /// Replays the graph on `stream` (a stream of the graph's device). On CUDA the replay
    /// is queued; on the CPU it has finished when this returns.
    pub fn replay_on(&self, stream: &Stream) -> Result<()> {
        if stream.device() != self.device {
            return Err(Error::GraphDevice {
                graph: self.device,
                stream: stream.device(),
            });
        }
        let kind = self.kind.lock().unwrap_or_else(|e| e.into_inner());
        match (&*kind, stream) {
            (Kind::Cpu(launches), _) => self.replay_cpu(launches),
            (Kind::Cuda(None), _) => Ok(()),
            (Kind::Cuda(Some(exec)), Stream::Cuda(s)) => self.replay_cuda(exec, s),
            (Kind::Cuda(Some(_)), Stream::Cpu) => Err(Error::GraphDevice {
                graph: self.device,
                stream: Device::Cpu,
            }),
        }
    }

    /// The device the graph runs on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Number of recorded launches (kernels and collectives).
    pub fn launches(&self) -> usize {
        self.launches
    }

    /// Number of distinct buffers (storages) the graph keeps alive.
    pub fn buffers(&self) -> usize {
        self.storages.len()
    }

    fn replay_cpu(&self, launches: &[CpuLaunch]) -> Result<()> {
        for l in launches {
            let mut order: Vec<usize> = l.args.iter().map(|a| a.0).collect();
            order.sort_unstable_by_key(|&i| Arc::as_ptr(&self.storages[i].0) as usize);
            order.dedup();
            let _guards: Vec<_> = order
                .iter()
                .map(|&i| {
                    let write = l.args.iter().any(|a| a.0 == i && a.2);
                    self.storages[i].0.lock(write)
                })
                .collect();
            let bufs: Vec<*mut std::ffi::c_void> = l
                .args
                .iter()
                .map(|&(i, off, _)| (self.storages[i].0.base() + off) as *mut std::ffi::c_void)
                .collect();
            // SAFETY: the launch was checked when it was recorded; its storages are held
            // by the graph (alive, never moved) and locked above, so every pointer is the
            // same live buffer of the checked shape.
            unsafe { crate::cpu::run_grid(l.entry, &bufs, &l.dims, l.grid, l.workers)? };
        }
        Ok(())
    }

    fn replay_cuda(&self, exec: &CudaExec, stream: &Arc<CudaStream>) -> Result<()> {
        let mut order: Vec<usize> = (0..self.storages.len()).collect();
        order.sort_unstable_by_key(|&i| Arc::as_ptr(&self.storages[i].0) as usize);
        let mut guards = Vec::with_capacity(order.len());
        for &i in &order {
            let (storage, write) = &self.storages[i];
            guards.push(storage.lock(*write));
            storage.order(stream, *write)?;
        }
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        // SAFETY: `exec` is a live executable graph of this context; every buffer it
        // touches is held by the graph and was ordered on `stream` above.
        unsafe { cudarc::driver::result::graph::launch(exec.exec, stream.cu_stream()) }
            .map_err(|e| Error::driver("cuGraphLaunch", e))
    }
}

fn run_capture(
    f: impl FnOnce(&Stream) -> Result<()>,
    s: &Stream,
) -> std::thread::Result<Result<()>> {
    catch_unwind(AssertUnwindSafe(|| f(s)))
}

fn capture_cpu(f: impl FnOnce(&Stream) -> Result<()>) -> Result<Graph> {
    let reg = Registration::new(Device::Cpu, None);
    let r = run_capture(f, &Stream::Cpu);
    let rec = Arc::clone(&reg.0);
    drop(reg);
    match r {
        Err(panic) => resume_unwind(panic),
        Ok(Err(e)) => Err(e),
        Ok(Ok(())) => {
            let st = std::mem::take(&mut *rec.state());
            Ok(Graph {
                device: Device::Cpu,
                stream: Stream::Cpu,
                kind: Mutex::new(Kind::Cpu(st.cpu)),
                storages: st.storages,
                _functions: Vec::new(),
                _keep: st.keep,
                launches: st.launches,
            })
        }
    }
}

fn capture_cuda(origin: &Stream, f: impl FnOnce(&Stream) -> Result<()>) -> Result<Graph> {
    let device = origin.device();
    let Device::Cuda(ordinal) = device else {
        return Err(no_capture_stream());
    };
    let dev = cuda::device(ordinal)?;
    // A private stream: the default stream cannot be captured, and a user stream may be
    // in use by other threads.
    let cs = dev
        .ctx
        .new_stream()
        .map_err(|e| Error::driver("cuStreamCreate", e))?;
    cs.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        .map_err(|e| Error::driver("cuStreamBeginCapture", e))?;
    let reg = Registration::new(device, Some(Arc::clone(&cs)));
    let r = run_capture(f, &Stream::Cuda(Arc::clone(&cs)));
    let rec = Arc::clone(&reg.0);
    drop(reg);
    // Always end the capture, whatever `f` did.
    let ended = cs
        .context()
        .bind_to_thread()
        // SAFETY: `cs` is a live stream in capture mode (begun above).
        .and_then(|()| unsafe { cudarc::driver::result::stream::end_capture(cs.cu_stream()) });
    let destroy = |g: sys::CUgraph| {
        if !g.is_null() {
            // SAFETY: `g` came from `end_capture` and is not used afterwards.
            let _ = unsafe { cudarc::driver::result::graph::destroy(g) };
        }
    };
    let graph = match (r, ended) {
        (Err(panic), ended) => {
            if let Ok(g) = ended {
                destroy(g);
            }
            resume_unwind(panic)
        }
        (Ok(Err(e)), ended) => {
            if let Ok(g) = ended {
                destroy(g);
            }
            return Err(e);
        }
        (Ok(Ok(())), Err(e)) => return Err(Error::driver("cuStreamEndCapture", e)),
        (Ok(Ok(())), Ok(g)) => g,
    };
    let st = std::mem::take(&mut *rec.state());
    let exec = if graph.is_null() || st.launches == 0 {
        destroy(graph);
        None
    } else {
        // SAFETY: `graph` is the valid graph returned by `end_capture`.
        match unsafe {
            cudarc::driver::result::graph::instantiate(graph, sys::CUgraphInstantiate_flags(0))
        } {
            Ok(exec) => Some(CudaExec {
                graph,
                exec,
                ctx: Arc::clone(&dev.ctx),
            }),
            Err(e) => {
                destroy(graph);
                return Err(Error::driver("cuGraphInstantiate", e));
            }
        }
    };
    Ok(Graph {
        device,
        stream: origin.clone(),
        kind: Mutex::new(Kind::Cuda(exec)),
        storages: st.storages,
        _functions: st.functions,
        _keep: st.keep,
        launches: st.launches,
    })
}

fn no_capture_stream() -> Error {
    Error::Spec {
        kernel: "graph",
        message: "a CUDA stream without a CUDA device".into(),
    }
}
