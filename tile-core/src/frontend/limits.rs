//! Limits on sizes and extents, checked where the user wrote them so that
//! the passes and backends only ever see sizes they can compute with: every
//! size is a positive `i64` whose products fit, every index and extent fits
//! the 32-bit `int` the generated code computes with, and each on-chip
//! buffer fits where it lives (shared memory, a thread's registers, the CPU
//! worker's stack).

use super::Ctx;
use crate::diag::SpanRange as Span;
use crate::ir::*;
use crate::passes::merge_shared::MAX_SHARED;

/// The largest index, extent or tensor size: indices are 32-bit `int`s.
pub const MAX_INDEX: i64 = i32::MAX as i64;
/// Elements of one on-chip buffer or one `T::parallel` nest.
pub const MAX_TILE_ELEMS: i64 = 1 << 24;
/// Bytes of one `T::alloc_local` array, per thread.
pub const MAX_LOCAL_BYTES: i64 = 64 << 10;
/// 32-bit registers one fragment may take per thread (a thread has 255).
pub const MAX_FRAGMENT_REGS: i64 = 255;
/// Bytes of all on-chip buffers of a block on the CPU, which keeps them on
/// the stack of a worker thread (64 MiB).
pub const MAX_CPU_BLOCK_BYTES: i64 = 16 << 20;
/// Stages of a `T::pipelined` loop.
pub const MAX_STAGES: i64 = 16;

/// Whether `v` fits a 32-bit index; reports `what` at `span` if not.
pub fn index_fits(cx: &mut Ctx, span: Span, v: i64, what: &str) -> bool {
    if (-MAX_INDEX - 1..=MAX_INDEX).contains(&v) {
        return true;
    }
    cx.err(
        span,
        format!("{what} {v} does not fit the 32-bit `int` indices are computed in"),
    );
    false
}

/// The product of `dims`, when it is at most `max`.
pub fn product_within(dims: &[i64], max: i64) -> Option<i64> {
    dims.iter()
        .try_fold(1i64, |acc, &d| acc.checked_mul(d))
        .filter(|&p| p <= max)
}

/// Checks the shape of an on-chip buffer of `scope` (dims are positive
/// constants) against the limits of where it lives, and counts it against
/// the CPU block's stack; reports at `span`.
pub fn check_buffer(
    cx: &mut Ctx,
    span: Span,
    name: &str,
    scope: Scope,
    dtype: DType,
    shape: &[i64],
) -> bool {
    let Some(elems) = product_within(shape, MAX_TILE_ELEMS) else {
        cx.err(
            span,
            format!(
                "`{name}` {shape:?} has more than {MAX_TILE_ELEMS} elements, the most an on-chip \
                 buffer can hold"
            ),
        );
        return false;
    };
    let bytes = elems * dtype.bytes();
    let threads = cx.f.launch.threads;
    let problem = match scope {
        Scope::Shared if bytes > MAX_SHARED => Some(format!(
            "`{name}` needs {bytes} bytes of shared memory; a block can have at most {MAX_SHARED}"
        )),
        Scope::Local if bytes > MAX_LOCAL_BYTES => Some(format!(
            "`{name}` needs {bytes} bytes per thread; a `T::alloc_local` array holds at most \
             {MAX_LOCAL_BYTES} bytes (use shared memory or a fragment for tiles)"
        )),
        Scope::Fragment => {
            let per_thread = (elems + threads - 1) / threads * dtype.bytes();
            let regs = (per_thread + 3) / 4;
            (regs > MAX_FRAGMENT_REGS).then(|| {
                format!(
                    "fragment `{name}` {shape:?} over {threads} threads needs {regs} registers per \
                     thread; a thread has at most {MAX_FRAGMENT_REGS} (use more threads, a smaller \
                     tile or shared memory)"
                )
            })
        }
        _ => None,
    };
    if let Some(msg) = problem {
        cx.err(span, msg);
        return false;
    }
    if !cx.f.cuda_only {
        cx.cpu_block_bytes += bytes;
        if cx.cpu_block_bytes > MAX_CPU_BLOCK_BYTES {
            cx.err(
                span,
                format!(
                    "the block's on-chip buffers reach {} bytes with `{name}`; the CPU backend \
                     keeps them on a worker's stack and allows {MAX_CPU_BLOCK_BYTES} \
                     (`target = \"cuda\"` builds the kernel for CUDA only)",
                    cx.cpu_block_bytes
                ),
            );
            return false;
        }
    }
    true
}
