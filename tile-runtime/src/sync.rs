//! Ordering of device buffers across CUDA streams.
//!
//! cudarc can order every buffer access with a pair of events per allocation, but once a
//! context has a second stream it records one event and waits on another for every
//! buffer of every launch, even when all of them use one stream: several driver calls per
//! launch. The runtime turns that tracking off for its contexts (see [`crate::cuda`]) and
//! keeps this lazier bookkeeping per storage instead.
//!
//! Invariants:
//! - `home` holds the handle of the one stream that made every access since the last
//!   hand-off, or [`MIXED`]. An access on the home stream costs one atomic load: stream
//!   order already places it after everything before it.
//! - An access on another stream takes the slow path, under the mutex: a read waits for
//!   the last write (unless this stream already did), a write waits for the last write
//!   and for every read since. "Waits" = an event recorded on the other stream now (so it
//!   covers all work queued there so far, a superset of the access) and waited on here.
//! - Whenever `home` names a stream, `state` holds an `Arc` of that stream, so the handle
//!   cannot be reused by a new stream while it is compared against.
//! - The streams may belong to different devices (a peer copy reads its source on the
//!   destination's stream): an event is recorded on a stream of its own context and may
//!   be waited on by any stream.
//! - Accesses on a stream that is being captured into a graph are not ordered here (a
//!   captured stream may not wait on events recorded outside the capture); the graph
//!   orders its buffers when it is replayed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaEvent, CudaStream};

use crate::error::{Error, Result};

/// `home` when more than one stream has touched the storage since the last write.
const MIXED: usize = usize::MAX;

fn handle(s: &CudaStream) -> usize {
    s.cu_stream() as usize
}

/// Cross-stream state of one device storage.
///
/// `repr(C)` with `home` first: every launch reads `home`, and the storage places this
/// struct so that `home` shares a cache line with the other fields a launch reads (see
/// `tensor::Storage`); `state` is only touched on the slow path.
#[repr(C)]
pub(crate) struct StreamSync {
    home: AtomicUsize,
    state: Mutex<State>,
}

struct State {
    /// Stream of the last write (the allocating stream at first).
    writer: Option<Arc<CudaStream>>,
    /// Streams that read since the last write and already waited for it.
    readers: Vec<Arc<CudaStream>>,
    /// Reused for every hand-off (created on the first one).
    event: Option<CudaEvent>,
}

const _: () = assert!(std::mem::offset_of!(StreamSync, home) == 0);

impl StreamSync {
    /// State of a storage just allocated (and possibly written) on `stream`.
    pub fn new(stream: &Arc<CudaStream>) -> StreamSync {
        StreamSync {
            home: AtomicUsize::new(handle(stream)),
            state: Mutex::new(State {
                writer: Some(Arc::clone(stream)),
                readers: Vec::new(),
                event: None,
            }),
        }
    }

    /// Orders an access (a read, or a write when `write`) about to be queued on `stream`
    /// after every earlier conflicting access on other streams.
    #[inline]
    pub fn order(&self, stream: &Arc<CudaStream>, write: bool) -> Result<()> {
        let h = handle(stream);
        if self.home.load(Ordering::Acquire) == h {
            return Ok(());
        }
        self.order_slow(stream, h, write)
    }

    #[inline(never)]
    fn order_slow(&self, stream: &Arc<CudaStream>, h: usize, write: bool) -> Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let State {
            writer,
            readers,
            event,
        } = &mut *st;
        if write {
            let others = writer
                .iter()
                .chain(readers.iter())
                .filter(|s| handle(s) != h);
            for other in others {
                hand_off(event, other, stream)?;
            }
            *writer = Some(Arc::clone(stream));
            readers.clear();
            self.home.store(h, Ordering::Release);
        } else {
            let seen = writer.as_ref().is_none_or(|w| handle(w) == h)
                || readers.iter().any(|r| handle(r) == h);
            if !seen {
                if let Some(w) = writer.as_ref() {
                    hand_off(event, w, stream)?;
                }
            }
            if !readers.iter().any(|r| handle(r) == h) {
                readers.push(Arc::clone(stream));
            }
            let single = writer.as_ref().is_none_or(|w| handle(w) == h)
                && readers.iter().all(|r| handle(r) == h);
            self.home
                .store(if single { h } else { MIXED }, Ordering::Release);
        }
        Ok(())
    }
}

/// Makes `to` wait for everything queued on `from` so far.
fn hand_off(event: &mut Option<CudaEvent>, from: &CudaStream, to: &CudaStream) -> Result<()> {
    // An event is recorded on a stream of its own context: a storage handed between
    // devices (a peer copy reads it on another GPU's stream) needs a new one.
    let ev = match event {
        Some(ev) if ev.context() == from.context() => ev,
        _ => event.insert(
            from.context()
                .new_event(None)
                .map_err(|e| Error::driver("cuEventCreate", e))?,
        ),
    };
    ev.record(from)
        .map_err(|e| Error::driver("cuEventRecord", e))?;
    to.wait(ev)
        .map_err(|e| Error::driver("cuStreamWaitEvent", e))
}
