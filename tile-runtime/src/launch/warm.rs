//! The warm CUDA launch, compiled into each generated launcher.
//!
//! Why it exists: a CUDA launch spends microseconds in the driver, and that work evicts
//! the runtime's data from the core's caches and its branches from the predictors. Taken
//! apart on an H200 host, the general path's argument checks and grid cost about four
//! times as much after a driver call as in a tight loop: every read of the kernel's spec
//! (parameter table, shape lists, grid tree) was a dependent cache miss and every loop
//! over them a cold branch. The spec is a constant, though. [`launch`](super::launch) is
//! `#[inline(always)]`, so in a generated launcher `spec` is that kernel's `static SPEC`
//! and this path, inlined with it, has every spec read folded into the code: the checks
//! unroll into straight compares against immediates, the grid into a few instructions.
//! What is left to read is the tensors, their storages, the slot's entry and the stream.
//!
//! Invariant: this path launches only where the general path would launch the same
//! thing the same way. Anything else (no warm kernel, a failed check, an empty or
//! oversized grid, a stream of another device or the CPU, a capture in progress, a
//! contended lock or a storage passed both as input and output, more buffers or dims
//! than fit on the stack) returns `None` having done nothing, and the general path runs
//! from the start, so errors keep its order and wording. The checks themselves are the
//! general path's, instantiated without error values ([`crate::check::accepts`]).

use super::*;
use crate::check::accepts;
use crate::spec::GridExpr;

/// Launches a warm CUDA kernel, or returns `None` untouched (see the module docs).
#[inline(always)]
pub(super) fn try_cuda(
    spec: &'static KernelSpec,
    slot: &KernelSlot,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    scalars: &[ScalarArg],
) -> Option<Result<()>> {
    let Device::Cuda(ordinal) = args.first()?.device else {
        return None;
    };
    if scalars.len() != spec.scalars.len()
        || scalars.len() > INLINE
        || spec
            .scalars
            .iter()
            .zip(scalars)
            .any(|(s, a)| s.dtype != a.dtype)
    {
        return None;
    }
    let loaded = slot.cuda_loaded(ordinal)?;
    let (n, m) = (spec.dims.len(), args.len());
    if n > INLINE || m > INLINE {
        return None;
    }
    let mut dims = [0i64; INLINE];
    let dims = &mut dims[..n];
    if !accepts(spec, args, dims) {
        return None;
    }
    let mut grid = grid(spec, dims)?;
    // The blocks that split a loop over a cluster (past CUDA's limit: the general path
    // reports it).
    grid[0] = u32::try_from(super::launched_x(loaded, i64::from(grid[0]))?).ok()?;
    let stream = match stream {
        None => &loaded.dev.stream,
        Some(Stream::Cuda(s)) if s.context().ordinal() == ordinal => s,
        Some(_) => return None,
    };
    if graph::any_capture() {
        return None;
    }
    // Try-locks in argument order: they never wait, so no order is needed to rule out
    // deadlock (the general path sorts and waits).
    let mut held: [Option<StorageGuard<'_>>; INLINE] = std::array::from_fn(|_| None);
    for (h, a) in held.iter_mut().zip(args) {
        *h = Some(a.storage.try_lock(a.output)?);
    }
    Some(order_and_enqueue(loaded, stream, dims, scalars, grid, args))
}

/// With every storage locked: orders each on `stream`, then queues the kernel.
#[inline(always)]
pub(super) fn order_and_enqueue(
    loaded: &CudaLoaded,
    stream: &Arc<CudaStream>,
    dims: &[i64],
    scalars: &[ScalarArg],
    grid: [u32; 3],
    args: &[ArgRef<'_>],
) -> Result<()> {
    for a in args {
        a.storage.order(stream, a.output)?;
    }
    enqueue(loaded, stream, dims, scalars, grid, args)
}

/// The grid, if it launches at least one block within CUDA's limits (anything else is
/// left to the general path, which skips or reports it).
#[inline(always)]
pub(super) fn grid(spec: &KernelSpec, dims: &[i64]) -> Option<[u32; 3]> {
    Some([
        extent(spec.grid[0], dims, CUDA_GRID_LIMITS[0])?,
        extent(spec.grid[1], dims, CUDA_GRID_LIMITS[1])?,
        extent(spec.grid[2], dims, CUDA_GRID_LIMITS[2])?,
    ])
}

#[inline(always)]
fn extent(expr: &GridExpr, dims: &[i64], limit: i64) -> Option<u32> {
    let v = expr.eval_inline(dims)?;
    (1..=limit).contains(&v).then_some(v as u32)
}
