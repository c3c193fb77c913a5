//! The CPU executor: runs a [`CpuEntry`] over every block of the grid.
//!
//! Invariants:
//! - Every linear block index in `0..gx*gy*gz` is run exactly once, in contiguous chunks
//!   (one per worker), and the call returns only when all have finished.
//! - Blocks run on scoped worker threads with a 64 MiB stack, never on the caller's
//!   stack: generated kernels keep whole tiles on the stack, and the caller's stack can
//!   be as small as 2 MiB (test threads). A single-chunk grid still gets one worker.
//! - Buffers are passed as `*const *mut c_void` (declaration order), dims as `int64_t`,
//!   grid as `[gx, gy, gz]` (see the ABI in [`crate::spec`]).

use std::ffi::c_void;

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

// SAFETY: the pointers refer to the caller's argument arrays, which outlive the scope the
// workers run in; the kernel ABI allows concurrent calls on disjoint block ranges (each
// block writes only its own outputs).
unsafe impl Send for Job {}

impl Job {
    fn run(self, begin: i64, end: i64) {
        // SAFETY: see `run_grid`'s contract; `begin..end` is within the grid.
        unsafe { (self.entry)(self.bufs, self.dims, self.grid, begin, end) }
    }
}

/// Splits `total` blocks into at most `workers` contiguous, non-empty chunks.
pub(crate) fn chunks(total: i64, workers: usize) -> Vec<(i64, i64)> {
    if total <= 0 {
        return Vec::new();
    }
    let n = (workers.max(1) as i64).min(total);
    let (base, extra) = (total / n, total % n);
    let mut out = Vec::with_capacity(n as usize);
    let mut begin = 0;
    for i in 0..n {
        let len = base + i64::from(i < extra);
        out.push((begin, begin + len));
        begin += len;
    }
    out
}

/// The number of workers: `requested`, else the machine's available parallelism.
pub(crate) fn worker_count(requested: Option<usize>) -> usize {
    requested
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
        .max(1)
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
