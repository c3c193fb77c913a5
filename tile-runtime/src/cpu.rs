//! The CPU executor: runs a [`CpuEntry`] over every block of the grid.
//!
//! Invariants:
//! - Every linear block index in `0..gx*gy*gz` is run exactly once, in contiguous chunks
//!   (at most one per worker), and the call returns only when all have finished.
//! - Blocks run on the workers of a process-wide pool, started on first use, each with a
//!   64 MiB stack, never on the caller's stack: generated kernels keep whole tiles on the
//!   stack, and the caller's stack can be as small as 2 MiB (test threads). A launch
//!   costs a queue push and a wake-up, not a thread start. (Should no worker start, each
//!   launch falls back to scoped threads of the same stack size.)
//! - A worker touches a launch's arguments only after claiming one of its chunks, and the
//!   caller waits until every chunk has run, so the raw argument pointers (into the
//!   caller's frame) are never used after `run_grid` returns.
//! - Buffers are passed as `*const *mut c_void` (declaration order), dims as `int64_t`,
//!   grid as `[gx, gy, gz]` (see the ABI in [`crate::spec`]).

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::spec::CpuEntry;

/// Stack size of each worker thread.
pub const WORKER_STACK: usize = 64 << 20;

/// Raw kernel arguments shared by the workers.
#[derive(Clone, Copy)]
struct Job {
    entry: CpuEntry,
    bufs: *const *mut c_void,
    dims: *const i64,
    grid: *const i64,
}

// SAFETY: the pointers refer to the caller's argument arrays, which outlive every use by
// a worker (see the module invariants); the kernel ABI allows concurrent calls on
// disjoint block ranges (each block writes only its own outputs).
unsafe impl Send for Job {}
// SAFETY: as for `Send`; a `Job` is only read.
unsafe impl Sync for Job {}

impl Job {
    fn run(self, begin: i64, end: i64) {
        // SAFETY: see `run_grid`'s contract; `begin..end` is within the grid.
        unsafe { (self.entry)(self.bufs, self.dims, self.grid, begin, end) }
    }
}

/// Splits `total` blocks into at most `workers` contiguous, non-empty chunks.
pub(crate) fn chunks(total: i64, workers: usize) -> Vec<(i64, i64)> {
    let n = chunk_count(total, workers);
    (0..n).map(|i| chunk(total, n, i)).collect()
}

fn chunk_count(total: i64, workers: usize) -> usize {
    if total <= 0 {
        0
    } else {
        (workers.max(1) as i64).min(total) as usize
    }
}

/// Chunk `i` of `n` over `total` blocks: the first `total % n` chunks get one extra.
fn chunk(total: i64, n: usize, i: usize) -> (i64, i64) {
    let (n, i) = (n as i64, i as i64);
    let (base, extra) = (total / n, total % n);
    let begin = i * base + i.min(extra);
    (begin, begin + base + i64::from(i < extra))
}

/// The number of workers: `requested`, else the machine's available parallelism (read
/// once: it costs file reads and system calls, far more than a launch).
pub(crate) fn worker_count(requested: Option<usize>) -> usize {
    static AVAILABLE: OnceLock<usize> = OnceLock::new();
    requested
        .unwrap_or_else(|| {
            *AVAILABLE.get_or_init(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1)
            })
        })
        .max(1)
}

/// One launch in flight on the pool.
struct Task {
    job: Job,
    total: i64,
    chunks: usize,
    /// Next chunk to claim.
    next: AtomicUsize,
    /// Chunks not yet finished.
    left: AtomicUsize,
    done: Mutex<bool>,
    done_cv: Condvar,
}

impl Task {
    /// Runs chunks until none is left to claim.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            if i >= self.chunks {
                return;
            }
            let (begin, end) = chunk(self.total, self.chunks, i);
            self.job.run(begin, end);
            if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
                let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
                *done = true;
                self.done_cv.notify_all();
            }
        }
    }

    fn wait(&self) {
        // Short kernels finish within microseconds: spin briefly before sleeping, which
        // saves a wake-up (tens of microseconds on a loaded machine).
        if spin_until(|| self.left.load(Ordering::Acquire) == 0) {
            return;
        }
        let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*done {
            done = self.done_cv.wait(done).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Spin iterations before blocking (a few microseconds).
const SPIN: usize = 1 << 12;

/// Spins until `ready` (true) or `SPIN` iterations pass (false), yielding the core now
/// and then so spinning threads never starve the one they wait for.
fn spin_until(ready: impl Fn() -> bool) -> bool {
    for i in 0..SPIN {
        if ready() {
            return true;
        }
        if i % 64 == 63 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
    false
}

struct Pool {
    queue: Mutex<VecDeque<Arc<Task>>>,
    /// Entries in `queue` (read without the lock by spinning workers).
    queued: AtomicUsize,
    /// Workers spinning for work: a launch wakes sleeping workers only for the chunks
    /// these will not take. (A spinner that gives up checks the queue under the lock
    /// before sleeping, so no chunk is left without a worker.)
    spinning: AtomicUsize,
    ready: Condvar,
}

static POOL: Pool = Pool {
    queue: Mutex::new(VecDeque::new()),
    queued: AtomicUsize::new(0),
    spinning: AtomicUsize::new(0),
    ready: Condvar::new(),
};

impl Pool {
    fn worker(&self) {
        loop {
            // Back-to-back launches: look for the next one briefly before sleeping.
            self.spinning.fetch_add(1, Ordering::AcqRel);
            spin_until(|| self.queued.load(Ordering::Acquire) > 0);
            self.spinning.fetch_sub(1, Ordering::AcqRel);
            let task = {
                let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if let Some(t) = q.pop_front() {
                        self.queued.fetch_sub(1, Ordering::AcqRel);
                        break t;
                    }
                    q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            };
            task.work();
        }
    }
}

/// Starts the pool's workers on first use (one per available core, or `requested` if
/// more) and returns how many run (0: none could start).
fn pool_size(requested: usize) -> usize {
    static STARTED: OnceLock<usize> = OnceLock::new();
    *STARTED.get_or_init(|| {
        (0..worker_count(None).max(requested))
            .filter(|_| {
                std::thread::Builder::new()
                    .name("tile-cpu".into())
                    .stack_size(WORKER_STACK)
                    .spawn(|| POOL.worker())
                    .is_ok()
            })
            .count()
    })
}

/// Runs every block of `grid` and waits for all of them.
///
/// # Safety
///
/// `entry` must follow the CPU ABI, `bufs` must hold one pointer per kernel parameter to
/// live memory of the shape the kernel was checked against (and stay valid, and not be
/// accessed by anything else, until this returns), and `dims` must hold every dynamic dim.
pub(crate) unsafe fn run_grid(
    entry: CpuEntry,
    bufs: &[*mut c_void],
    dims: &[i64],
    grid: [i64; 3],
    workers: usize,
) -> Result<()> {
    let total = grid[0]
        .checked_mul(grid[1])
        .and_then(|v| v.checked_mul(grid[2]))
        .unwrap_or(0);
    let job = Job {
        entry,
        bufs: bufs.as_ptr(),
        dims: dims.as_ptr(),
        grid: grid.as_ptr(),
    };
    let size = pool_size(workers);
    if size == 0 {
        return run_scoped(job, total, workers);
    }
    let n = chunk_count(total, workers.min(size));
    if n == 0 {
        return Ok(());
    }
    let task = Arc::new(Task {
        job,
        total,
        chunks: n,
        next: AtomicUsize::new(0),
        left: AtomicUsize::new(n),
        done: Mutex::new(false),
        done_cv: Condvar::new(),
    });
    {
        let mut q = POOL.queue.lock().unwrap_or_else(|e| e.into_inner());
        for _ in 0..n {
            q.push_back(Arc::clone(&task));
        }
        POOL.queued.fetch_add(n, Ordering::AcqRel);
    }
    for _ in 0..n.saturating_sub(POOL.spinning.load(Ordering::Acquire)) {
        POOL.ready.notify_one();
    }
    task.wait();
    Ok(())
}

/// One scoped thread per chunk (used only when the pool could not start).
fn run_scoped(job: Job, total: i64, workers: usize) -> Result<()> {
    let mut spawn_error = None;
    std::thread::scope(|scope| {
        for (begin, end) in chunks(total, workers) {
            let spawned = std::thread::Builder::new()
                .name("tile-cpu".into())
                .stack_size(WORKER_STACK)
                .spawn_scoped(scope, move || job.run(begin, end));
            if let Err(e) = spawned {
                // Out of threads: the chunk cannot be skipped (outputs would be partly
                // written), so report after the others finish.
                spawn_error = Some(e);
            }
        }
    });
    match spawn_error {
        None => Ok(()),
        Some(source) => Err(Error::Thread { source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A kernel that counts how often each block runs and records (bx, by, bz) order.
    unsafe extern "C" fn count_blocks(
        bufs: *const *mut c_void,
        _dims: *const i64,
        grid: *const i64,
        begin: i64,
        end: i64,
    ) {
        // SAFETY: the test passes one buffer of `gx*gy*gz` AtomicU32 and a 3-element grid.
        unsafe {
            let counts = *bufs as *const AtomicU32;
            let (gx, gy) = (*grid, *grid.add(1));
            for l in begin..end {
                let (bx, by, bz) = (l % gx, (l / gx) % gy, l / (gx * gy));
                let back = (bz * gy + by) * gx + bx;
                (*counts.add(back as usize)).fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    #[test]
    fn chunking() {
        assert_eq!(chunks(10, 3), vec![(0, 4), (4, 7), (7, 10)]);
        assert_eq!(chunks(2, 8), vec![(0, 1), (1, 2)]);
        assert_eq!(chunks(5, 0), vec![(0, 5)]);
        assert!(chunks(0, 4).is_empty());
    }

    #[test]
    fn every_block_runs_exactly_once() -> Result<()> {
        for (grid, workers) in [
            ([7, 5, 3], 4),
            ([1, 1, 1], 8),
            ([1000, 1, 1], 3),
            ([3, 1, 2], 1),
        ] {
            let total = (grid[0] * grid[1] * grid[2]) as usize;
            let counts: Vec<AtomicU32> = (0..total).map(|_| AtomicU32::new(0)).collect();
            let bufs = [counts.as_ptr() as *mut c_void];
            // SAFETY: `count_blocks` indexes `counts` within `total`.
            unsafe { run_grid(count_blocks, &bufs, &[], grid, workers)? };
            assert!(
                counts.iter().all(|c| c.load(Ordering::Relaxed) == 1),
                "{grid:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn deep_stack_is_available() -> Result<()> {
        unsafe extern "C" fn big_tile(
            bufs: *const *mut c_void,
            _dims: *const i64,
            _grid: *const i64,
            _begin: i64,
            _end: i64,
        ) {
            // 16 MiB on the stack: more than a default thread has.
            let tile = [1u8; 16 << 20];
            let sum: u64 = std::hint::black_box(&tile).iter().map(|&b| b as u64).sum();
            // SAFETY: the test passes one u64 out-buffer.
            unsafe { *(*bufs as *mut u64) = sum }
        }
        let mut out = 0u64;
        let bufs = [&mut out as *mut u64 as *mut c_void];
        // SAFETY: `big_tile` writes one u64 through the single buffer.
        unsafe { run_grid(big_tile, &bufs, &[], [1, 1, 1], 1)? };
        assert_eq!(out, 16 << 20);
        Ok(())
    }
}
