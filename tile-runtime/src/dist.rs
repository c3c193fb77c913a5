//! Collectives across GPUs: NCCL communicators and the collectives of tensor and data
//! parallelism (all-reduce, all-gather, reduce-scatter, broadcast) on tile tensors and
//! streams, through cudarc's NCCL bindings.
//!
//! ```ignore
//! // One process driving every GPU: one communicator per device, calls grouped.
//! let comms = tile::dist::Comm::for_devices(&Device::all_cuda())?;
//! tile::dist::group(|| {
//!     for (comm, t) in comms.iter().zip(&mut partials) {
//!         comm.all_reduce_in_place(t, ReduceOp::Sum)?;
//!     }
//!     Ok(())
//! })?;
//! // One process per GPU: rank 0 makes the id, the caller hands its bytes to the others.
//! let id = UniqueId::new()?;                       // on rank 0; `id.as_bytes()` to send
//! let comm = Comm::from_rank(&id, rank, world, Device::Cuda(local))?;
//! ```
//!
//! Invariants:
//! - Nothing here panics on a machine without NCCL: cudarc loads `libnccl` lazily and
//!   panics when the library or a symbol is missing, so the library is probed once
//!   (through cudarc's own candidate names, so the probe and the later load agree) and
//!   every NCCL call runs under `catch_unwind`. Without NCCL, constructors return
//!   [`Error::NcclUnavailable`].
//! - A collective checks everything before NCCL sees it (dtype, device, contiguity,
//!   sizes against the world size, root, overlap of its buffers, the stream's device):
//!   a failed check is an [`Error::Collective`] naming the operation, the rank and the
//!   buffer, and queues and writes nothing. NCCL's own failures are [`Error::Nccl`].
//! - dtypes map one to one onto NCCL's (`i8 u8 i32 u32 i64 u64 f16 bf16 f32 f64`, and
//!   the fp8 types from NCCL 2.24); `bool`, `i16` and `u16` have no NCCL type and are
//!   refused rather than moved as other types.
//! - A collective is ordered like a kernel launch: on the stream given with
//!   [`Comm::on`], else the device's default stream; its buffers are locked (shared to
//!   read, exclusive to write) while it is queued, and ordered on that stream after
//!   their uses on other streams (see `crate::sync`).
//! - Inside [`Graph::capture`](crate::Graph::capture) a collective on the capture's
//!   stream (or on the default stream, from the capturing thread) is captured into the
//!   graph, which holds its buffers and communicator. A graph records one device's
//!   stream: collectives in a graph have their peers in other threads or processes (each
//!   capturing its own), or are of one rank.
//! - One process may drive several GPUs ([`Comm::for_devices`]); their calls must then
//!   be issued inside one [`group`] (NCCL waits for every rank of a collective; a lone
//!   call for one of them would wait for the others forever).
//! - `Comm::for_devices(&[Device::Cpu])` is a communicator of one rank on the host (no
//!   NCCL involved): with one rank every collective is a copy, so a program written for
//!   several GPUs runs unchanged, and is checked the same way, on the CPU.

use std::any::Any;
use std::ffi::{c_void, CStr};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::nccl::sys;

use crate::cuda;
use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::graph;
use crate::stream::Stream;
use crate::tensor::{Storage, Tensor};

mod collective;
use collective::Kind;

/// How a reduction combines the ranks' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum of the ranks' values.
    Sum,
    /// The product of the ranks' values.
    Prod,
    /// The largest of the ranks' values.
    Max,
    /// The smallest of the ranks' values.
    Min,
    /// The sum divided by the world size (integer division for integer dtypes).
    Avg,
}

impl ReduceOp {
    fn nccl(self) -> sys::ncclRedOp_t {
        match self {
            ReduceOp::Sum => sys::ncclRedOp_t::ncclSum,
            ReduceOp::Prod => sys::ncclRedOp_t::ncclProd,
            ReduceOp::Max => sys::ncclRedOp_t::ncclMax,
            ReduceOp::Min => sys::ncclRedOp_t::ncclMin,
            ReduceOp::Avg => sys::ncclRedOp_t::ncclAvg,
        }
    }
}

/// NCCL's version code of the first fp8 types (2.24.0).
const FP8_VERSION: i32 = 22400;

/// The loaded NCCL's version code (`major * 10000 + minor * 100 + patch`), or why it
/// cannot be used; computed once.
fn probe() -> &'static std::result::Result<i32, String> {
    static PROBE: OnceLock<std::result::Result<i32, String>> = OnceLock::new();
    PROBE.get_or_init(|| {
        if !library_present() {
            // SAFETY: as above.
            let versioned = unsafe { libloading::Library::new("libnccl.so.2") }.is_ok();
            return Err(if versioned {
                "libnccl.so.2 is on the library search path but libnccl.so, the name it is \
                 loaded by, is not: add a libnccl.so link to it in a folder on LD_LIBRARY_PATH"
                    .into()
            } else {
                "the NCCL library (libnccl.so) is not installed or not on the library search \
                 path (LD_LIBRARY_PATH)"
                    .into()
            });
        }
        let mut version = 0i32;
        // SAFETY: `version` is a local the call writes.
        match catch_unwind(AssertUnwindSafe(|| unsafe {
            sys::ncclGetVersion(&mut version)
        })) {
            Ok(sys::ncclResult_t::ncclSuccess) => Ok(version),
            Ok(r) => Err(format!("ncclGetVersion failed: {r:?}")),
            Err(_) => Err("the NCCL library lacks ncclGetVersion".into()),
        }
    })
}

/// Whether libnccl can be loaded by the name cudarc loads it by.
#[cfg(not(feature = "cuda-dynamic-linking"))]
fn library_present() -> bool {
    // SAFETY: opening the library runs its initialisers, as any NCCL use does; the probe
    // only opens and closes it.
    catch_unwind(|| unsafe { sys::is_culib_present() }).unwrap_or(false)
}

/// Linked (`cuda-dynamic-linking`): the process would not have started without it.
#[cfg(feature = "cuda-dynamic-linking")]
fn library_present() -> bool {
    true
}

fn nccl() -> Result<i32> {
    probe()
        .clone()
        .map_err(|reason| Error::NcclUnavailable { reason })
}

/// Whether the NCCL library can be loaded (never panics).
pub fn nccl_available() -> bool {
    probe().is_ok()
}

/// The loaded NCCL's version, `(major, minor, patch)`.
pub fn nccl_version() -> Result<(u32, u32, u32)> {
    let v = nccl()? as u32;
    Ok((v / 10000, v / 100 % 100, v % 100))
}

/// An NCCL failure, with NCCL's text for `r` and, when there is a communicator, its last
/// error message.
fn nccl_error(
    op: &'static str,
    rank: Option<usize>,
    comm: sys::ncclComm_t,
    r: sys::ncclResult_t,
) -> Error {
    let text = |p: *const std::ffi::c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: NCCL returns NUL-terminated static or per-thread strings.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // SAFETY: plain queries; a missing symbol (an old NCCL) is caught.
    let what = catch_unwind(|| text(unsafe { sys::ncclGetErrorString(r) })).unwrap_or_default();
    let last = catch_unwind(|| text(unsafe { sys::ncclGetLastError(comm) })).unwrap_or_default();
    let mut message = format!("{r:?}");
    if !what.is_empty() {
        message += &format!(": {what}");
    }
    if !last.trim().is_empty() {
        message += &format!(" ({})", last.trim());
    }
    Error::Nccl { op, rank, message }
}

/// Runs an NCCL call: its result, or a panic of cudarc's loader (a missing symbol), as
/// an error of `op`.
fn checked(
    op: &'static str,
    rank: Option<usize>,
    comm: sys::ncclComm_t,
    call: impl FnOnce() -> sys::ncclResult_t,
) -> Result<()> {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(sys::ncclResult_t::ncclSuccess) => Ok(()),
        Ok(r) => Err(nccl_error(op, rank, comm, r)),
        Err(_) => Err(Error::Nccl {
            op,
            rank,
            message: "the NCCL library lacks this entry point (NCCL too old?)".into(),
        }),
    }
}

/// The id every rank of a communicator is created with ([`Comm::from_rank`]): made once
/// (by rank 0, say) and handed to the other ranks as bytes, by whatever means the
/// program has (a file, a socket, MPI).
#[derive(Clone, Copy)]
pub struct UniqueId {
    id: sys::ncclUniqueId,
}

impl UniqueId {
    /// Size of the id in bytes.
    pub const BYTES: usize = 128;

    /// A new id (`ncclGetUniqueId`).
    pub fn new() -> Result<UniqueId> {
        nccl()?;
        let mut id = sys::ncclUniqueId {
            internal: [0; Self::BYTES],
        };
        // SAFETY: `id` is a local of the size NCCL writes.
        checked("ncclGetUniqueId", None, std::ptr::null_mut(), || unsafe {
            sys::ncclGetUniqueId(&mut id)
        })?;
        Ok(UniqueId { id })
    }

    /// The id's bytes, to hand to the other ranks.
    pub fn as_bytes(&self) -> [u8; Self::BYTES] {
        self.id.internal.map(|c| c as u8)
    }

    /// The id another rank made, from its bytes ([`UniqueId::BYTES`] of them).
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId> {
        let Ok(bytes) = <[u8; Self::BYTES]>::try_from(bytes) else {
            return Err(Error::Collective {
                op: "UniqueId::from_bytes",
                rank: 0,
                buffer: "bytes",
                message: format!("{} bytes, an NCCL id has {}", bytes.len(), Self::BYTES),
            });
        };
        Ok(UniqueId {
            id: sys::ncclUniqueId {
                internal: bytes.map(|b| b as std::ffi::c_char),
            },
        })
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UniqueId(..)")
    }
}

/// An NCCL communicator handle, destroyed on drop.
struct RawComm(sys::ncclComm_t);

// SAFETY: NCCL communicators may be used from any thread, one thread at a time; `Inner`
// serialises every call on the handle behind its mutex (and a group's calls come from
// the one thread that runs the group).
unsafe impl Send for RawComm {}
// SAFETY: see `Send`; `&RawComm` gives no access to the handle outside that mutex.
unsafe impl Sync for RawComm {}

enum Backend {
    /// One rank on the host.
    Local,
    Nccl(RawComm),
}

struct Inner {
    backend: Backend,
    rank: usize,
    world: usize,
    device: Device,
    /// Held while a call on the communicator is queued.
    calls: Mutex<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let (Backend::Nccl(raw), Device::Cuda(n)) = (&self.backend, self.device) {
            if let Ok(dev) = cuda::device(n) {
                let _ = dev.ctx.bind_to_thread();
            }
            // Nowhere to report a failure; NCCL finishes the communicator's queued work
            // first. A graph that captured a collective holds the communicator, so it
            // is never destroyed under a graph.
            let raw = raw.0;
            // SAFETY: the handle came from NCCL's init, is owned here and not used after.
            let _ = catch_unwind(|| unsafe { sys::ncclCommDestroy(raw) });
        }
    }
}

/// One rank of a communicator: a device, its rank and the number of ranks (see the
/// module docs).
#[derive(Clone)]
pub struct Comm {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.inner.rank)
            .field("world", &self.inner.world)
            .field("device", &self.inner.device)
            .finish()
    }
}

fn init_error(op: &'static str, rank: usize, buffer: &'static str, message: String) -> Error {
    Error::Collective {
        op,
        rank,
        buffer,
        message,
    }
}

impl Comm {
    fn new(backend: Backend, rank: usize, world: usize, device: Device) -> Comm {
        Comm {
            inner: Arc::new(Inner {
                backend,
                rank,
                world,
                device,
                calls: Mutex::new(()),
            }),
        }
    }

    /// One communicator per device, rank `i` on `devices[i]`, for one process driving
    /// them all (`ncclCommInitAll`). `&[Device::Cpu]` is the one-rank host communicator.
    pub fn for_devices(devices: &[Device]) -> Result<Vec<Comm>> {
        const OP: &str = "ncclCommInitAll";
        if devices.is_empty() {
            return Err(init_error(OP, 0, "devices", "no devices".into()));
        }
        if devices == [Device::Cpu] {
            return Ok(vec![Comm::new(Backend::Local, 0, 1, Device::Cpu)]);
        }
        let mut ordinals = Vec::with_capacity(devices.len());
        for (rank, d) in devices.iter().enumerate() {
            let Device::Cuda(n) = *d else {
                return Err(init_error(
                    OP,
                    rank,
                    "devices",
                    "the CPU is a communicator of one rank only: Comm::for_devices(&[Device::Cpu])"
                        .into(),
                ));
            };
            if devices[..rank].contains(d) {
                return Err(init_error(
                    OP,
                    rank,
                    "devices",
                    format!("{d} is listed twice (NCCL takes one rank per device)"),
                ));
            }
            ordinals.push(i32::try_from(n).map_err(|_| Error::NoSuchDevice {
                ordinal: n,
                count: cuda::probe().count,
            })?);
        }
        nccl()?;
        // The primary contexts NCCL's runtime calls use are the ones tile's run in.
        for &n in &ordinals {
            cuda::device(n as usize)?;
        }
        let mut raw = vec![std::ptr::null_mut(); ordinals.len()];
        // SAFETY: `raw` has room for one handle per device of `ordinals`.
        checked(OP, None, std::ptr::null_mut(), || unsafe {
            sys::ncclCommInitAll(raw.as_mut_ptr(), ordinals.len() as i32, ordinals.as_ptr())
        })?;
        let world = devices.len();
        Ok(raw
            .into_iter()
            .zip(devices)
            .enumerate()
            .map(|(rank, (c, &d))| Comm::new(Backend::Nccl(RawComm(c)), rank, world, d))
            .collect())
    }

    /// Rank `rank` of `world` ranks on `device`, joining the others that were created
    /// with the same `id` (`ncclCommInitRank`; blocks until every rank has joined). For
    /// one process (or thread) per GPU. On the CPU only `world == 1` is possible.
    pub fn from_rank(id: &UniqueId, rank: usize, world: usize, device: Device) -> Result<Comm> {
        const OP: &str = "ncclCommInitRank";
        if world == 0 || rank >= world || i32::try_from(world).is_err() {
            return Err(init_error(
                OP,
                rank,
                "rank",
                format!("rank {rank} of a world of {world}"),
            ));
        }
        let Device::Cuda(n) = device else {
            if world == 1 {
                return Ok(Comm::new(Backend::Local, 0, 1, Device::Cpu));
            }
            return Err(init_error(
                OP,
                rank,
                "device",
                "the CPU is a communicator of one rank only".into(),
            ));
        };
        nccl()?;
        let dev = cuda::device(n)?;
        // NCCL takes the device of the thread's current context.
        dev.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a local the call writes; the id is passed by value.
        checked(OP, Some(rank), std::ptr::null_mut(), || unsafe {
            sys::ncclCommInitRank(&mut raw, world as i32, id.id, rank as i32)
        })?;
        Ok(Comm::new(Backend::Nccl(RawComm(raw)), rank, world, device))
    }

    /// This communicator's rank, in `0..world_size()`.
    pub fn rank(&self) -> usize {
        self.inner.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.inner.world
    }

    /// The device this rank runs on.
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// The collectives of this rank queued on `stream` (a stream of the rank's device).
    pub fn on<'a>(&'a self, stream: &'a Stream) -> OnStream<'a> {
        OnStream { comm: self, stream }
    }

    /// `recv = op(send of every rank)`, element-wise; `send` and `recv` have one shape.
    pub fn all_reduce<T: Element>(
        &self,
        send: &Tensor<T>,
        recv: &mut Tensor<T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.run(None, Kind::AllReduce(op), Some(send), recv)
    }

    /// [`all_reduce`](Self::all_reduce) with the result written over `buf`.
    pub fn all_reduce_in_place<T: Element>(&self, buf: &mut Tensor<T>, op: ReduceOp) -> Result<()> {
        self.run(None, Kind::AllReduce(op), None, buf)
    }

    /// `recv` = every rank's `send`, in rank order: `recv` holds world × `send`'s
    /// elements (any shape; `[world * n, ..]` for a `[n, ..]` send reads naturally).
    pub fn all_gather<T: Element>(&self, send: &Tensor<T>, recv: &mut Tensor<T>) -> Result<()> {
        self.run(None, Kind::AllGather, Some(send), recv)
    }

    /// `recv` = this rank's part of `op(send of every rank)`: `send` holds world ×
    /// `recv`'s elements and rank `r` gets the `r`-th block of them.
    pub fn reduce_scatter<T: Element>(
        &self,
        send: &Tensor<T>,
        recv: &mut Tensor<T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.run(None, Kind::ReduceScatter(op), Some(send), recv)
    }

    /// `buf` = rank `root`'s `buf`, on every rank.
    pub fn broadcast<T: Element>(&self, buf: &mut Tensor<T>, root: usize) -> Result<()> {
        self.run(None, Kind::Broadcast(root), None, buf)
    }
}

/// A communicator's collectives on a given stream ([`Comm::on`]).
#[derive(Debug, Clone, Copy)]
pub struct OnStream<'a> {
    comm: &'a Comm,
    stream: &'a Stream,
}

impl OnStream<'_> {
    /// [`Comm::all_reduce`] on this stream.
    pub fn all_reduce<T: Element>(
        &self,
        send: &Tensor<T>,
        recv: &mut Tensor<T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.comm
            .run(Some(self.stream), Kind::AllReduce(op), Some(send), recv)
    }

    /// [`Comm::all_reduce_in_place`] on this stream.
    pub fn all_reduce_in_place<T: Element>(&self, buf: &mut Tensor<T>, op: ReduceOp) -> Result<()> {
        self.comm
            .run(Some(self.stream), Kind::AllReduce(op), None, buf)
    }

    /// [`Comm::all_gather`] on this stream.
    pub fn all_gather<T: Element>(&self, send: &Tensor<T>, recv: &mut Tensor<T>) -> Result<()> {
        self.comm
            .run(Some(self.stream), Kind::AllGather, Some(send), recv)
    }

    /// [`Comm::reduce_scatter`] on this stream.
    pub fn reduce_scatter<T: Element>(
        &self,
        send: &Tensor<T>,
        recv: &mut Tensor<T>,
        op: ReduceOp,
    ) -> Result<()> {
        self.comm
            .run(Some(self.stream), Kind::ReduceScatter(op), Some(send), recv)
    }

    /// [`Comm::broadcast`] on this stream.
    pub fn broadcast<T: Element>(&self, buf: &mut Tensor<T>, root: usize) -> Result<()> {
        self.comm
            .run(Some(self.stream), Kind::Broadcast(root), None, buf)
    }
}

/// Runs `f` as one NCCL group (`ncclGroupStart` … `ncclGroupEnd`): the collectives it
/// issues on several communicators (one process driving several GPUs) are launched
/// together. The group is ended whatever `f` returns, as NCCL requires; collectives
/// already issued for some ranks then still wait for the others, so check every rank's
/// arguments before issuing any when one could fail. Without NCCL, `f` just runs (only
/// host communicators exist then).
pub fn group<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    if !nccl_available() {
        return f();
    }
    let null = std::ptr::null_mut();
    // SAFETY: no arguments; pairs with the `ncclGroupEnd` below.
    checked("ncclGroupStart", None, null, || unsafe {
        sys::ncclGroupStart()
    })?;
    let r = catch_unwind(AssertUnwindSafe(f));
    // SAFETY: ends the group started above.
    let end = checked("ncclGroupEnd", None, null, || unsafe {
        sys::ncclGroupEnd()
    });
    match r {
        Err(panic) => resume_unwind(panic),
        Ok(Err(e)) => Err(e),
        Ok(Ok(v)) => end.map(|()| v),
    }
}
