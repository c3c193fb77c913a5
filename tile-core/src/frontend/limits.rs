//! Limits on sizes and extents, checked where the user wrote them so that
//! the passes and backends only ever see sizes they can compute with: every
//! size is a positive `i64` whose products fit, every index and extent fits
//! the 32-bit `int` the generated code computes with, and each on-chip
//! buffer fits where it lives (a thread's registers, the CPU worker's
//! stack; shared memory is `merge_shared`'s, which sees every tile's live
//! range).

use super::Ctx;
use crate::diag::{At, SpanRange as Span};
use crate::ir::*;

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
/// How deep a statement's expressions may nest (operators, parentheses,
/// calls, blocks): the compiler walks expressions recursively.
pub const MAX_NESTING: usize = 256;

/// How deep `s` nests, counted without recursion (so a statement nested
/// far too deep is measured, not a stack overflow), up to `limit + 1`.
pub fn nesting(s: &syn::Stmt, limit: usize) -> usize {
    use syn::Expr as E;
    let mut stack: Vec<(&syn::Expr, usize)> = Vec::new();
    let mut deepest = 0;
    push_stmts(&mut stack, std::slice::from_ref(s), 1);
    while let Some((e, d)) = stack.pop() {
        deepest = deepest.max(d);
        if deepest > limit {
            break;
        }
        let d = d + 1;
        match e {
            E::Binary(x) => stack.extend([(&*x.left, d), (&*x.right, d)]),
            E::Assign(x) => stack.extend([(&*x.left, d), (&*x.right, d)]),
            E::Index(x) => stack.extend([(&*x.expr, d), (&*x.index, d)]),
            E::Unary(x) => stack.push((&x.expr, d)),
            E::Paren(x) => stack.push((&x.expr, d)),
            E::Group(x) => stack.push((&x.expr, d)),
            E::Cast(x) => stack.push((&x.expr, d)),
            E::Field(x) => stack.push((&x.base, d)),
            E::Reference(x) => stack.push((&x.expr, d)),
            E::Call(x) => {
                stack.push((&x.func, d));
                stack.extend(x.args.iter().map(|a| (a, d)));
            }
            E::MethodCall(x) => {
                stack.push((&x.receiver, d));
                stack.extend(x.args.iter().map(|a| (a, d)));
            }
            E::Array(x) => stack.extend(x.elems.iter().map(|a| (a, d))),
            E::Tuple(x) => stack.extend(x.elems.iter().map(|a| (a, d))),
            E::Range(x) => stack.extend(x.start.iter().chain(&x.end).map(|a| (&**a, d))),
            E::If(x) => {
                stack.push((&x.cond, d));
                push_stmts(&mut stack, &x.then_branch.stmts, d);
                if let Some((_, els)) = &x.else_branch {
                    stack.push((els, d));
                }
            }
            E::Block(x) => push_stmts(&mut stack, &x.block.stmts, d),
            E::ForLoop(x) => {
                stack.push((&x.expr, d));
                push_stmts(&mut stack, &x.body.stmts, d);
            }
            E::Closure(x) => stack.push((&x.body, d)),
            _ => {}
        }
    }
    deepest
}

/// Whether `v` fits a 32-bit index; reports `what` at `span` if not.
pub fn index_fits(cx: &mut Ctx, span: At<'_>, v: i64, what: &str) -> bool {
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

/// Pushes the expressions of `stmts` at depth `d`.
fn push_stmts<'a>(stack: &mut Vec<(&'a syn::Expr, usize)>, stmts: &'a [syn::Stmt], d: usize) {
    for s in stmts {
        match s {
            syn::Stmt::Expr(e, _) => stack.push((e, d)),
            syn::Stmt::Local(l) => {
                if let Some(i) = &l.init {
                    stack.push((&i.expr, d));
                }
            }
            _ => {}
        }
    }
}
