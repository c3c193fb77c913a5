//! Whether the warp-specialized pipeline's iterations are split over the
//! blocks of a cluster (`Pipeline::split`), when the kernel asks for it
//! (`T::use_split_k(n)`, `Launch::split_k`).
//!
//! A grid of output tiles that fills the GPU less than once leaves
//! multiprocessors idle, however fast each tile's loop runs (1000 x 1000
//! in 128 x 128 tiles is 64 blocks on 132 multiprocessors). Split, each
//! output tile is `n` blocks launched as one cluster along x: block `r` runs
//! the `r`-th contiguous range of the loop's iterations, then the cluster
//! sums the accumulators through distributed shared memory into its first
//! block, which alone runs the rest of the kernel (the epilogue). The sum is
//! in rank order, so every run gives the same bits.
//!
//! That is the kernel's meaning only when the loop's iterations add into the
//! accumulators and nothing else: the loop's consumers are gemms alone, the
//! accumulators start at zero, and nothing before the loop touches memory
//! (every block of the cluster runs it). The partial sums meet in the shared
//! bytes of the pipeline's stages, free once the loop is over, so they must
//! fit there.

use super::registers_only;
use crate::ir::*;

/// The split of pipeline `var`, or, when the kernel asks for one but this
/// pipeline cannot be split, why (`Pipeline::split_why`).
pub(super) fn split(f: &PrimFunc, var: VarId) -> (Option<Split>, Option<String>) {
    let n = f.launch.split_k;
    let Some(p) = f.schedule.pipelines.get(&var).filter(|_| n >= 2) else {
        return (None, None);
    };
    let none = |why: String| (None, Some(format!("K is not split over {n} blocks: {why}")));
    if !p.warp_specialized {
        return none("only a warp-specialized pipeline (Hopper) is split".into());
    }
    if p.persistent {
        return none("the blocks of a persistent loop walk different tiles".into());
    }
    if p.rotate.is_some() || !p.multicast.is_empty() || !p.multicast_y.is_empty() {
        return none(
            "the pipeline's gemms overlap across iterations or its tiles are shared".into(),
        );
    }
    let top = f.body.items();
    let Some(at) = top
        .iter()
        .position(|s| matches!(s, Stmt::For { var: v, .. } if *v == var))
    else {
        return none("the pipelined loop is not at the kernel's top level".into());
    };
    if let Some(s) = top[..at].iter().find(|s| !registers_only(f, s)) {
        return none(format!(
            "a statement before the loop touches memory, and every block of the cluster would run it: `{}`",
            first_line(f, s)
        ));
    }
    let Stmt::For { body, .. } = top[at] else {
        return none("the pipelined loop is not at the kernel's top level".into());
    };
    let items = body.items();
    let mut accs: Vec<BufId> = Vec::new();
    for s in &items[p.tiles.len().min(items.len())..] {
        match s {
            Stmt::Gemm(g)
                if !g.clear
                    && f.buf(g.c).scope == Scope::Fragment
                    && f.buf(g.c).layout.is_some_and(Layout::is_accumulator)
                    && matches!(f.buf(g.c).dtype, DType::F32 | DType::I32) =>
            {
                if !accs.contains(&g.c) {
                    accs.push(g.c);
                }
            }
            s => {
                return none(format!(
                    "the loop's consumers are not gemms into f32 or i32 fragments alone, and only sums of products split: `{}`",
                    first_line(f, s)
                ))
            }
        }
    }
    // An accumulator read as another gemm's operand would need the running
    // sum, which no block but the last has.
    let operand = items
        .iter()
        .any(|s| matches!(s, Stmt::Gemm(g) if accs.contains(&g.a) || accs.contains(&g.b)));
    if operand {
        return none("an accumulator is also a gemm's operand in the loop".into());
    }
    for &acc in &accs {
        // Each thread moves its registers in 16-byte granules.
        let n = f.buf(acc).const_elems();
        if n % (4 * f.launch.threads) != 0 {
            return none(format!(
                "`{}`'s {n} values are not a multiple of 4 per thread of {}",
                f.buf(acc).name,
                f.launch.threads
            ));
        }
        if !cleared_before(&top[..at], acc) {
            return none(format!(
                "`{}` is not set to zero before the loop (each block's partial sum starts at zero)",
                f.buf(acc).name
            ));
        }
    }
    let sums: i64 = accs.iter().map(|&b| f.buf(b).const_bytes()).sum();
    let stages: i64 = p.tiles.iter().map(|&b| f.buf(b).const_bytes()).sum::<i64>() * p.stages;
    if sums > stages {
        return none(format!(
            "the accumulators' {sums} bytes do not fit the {stages} bytes of the pipeline's stages, where the partial sums meet"
        ));
    }
    (Some(Split { blocks: n, accs }), None)
}

/// Whether the statements before the loop write `acc` only with zeros (a
/// `T::clear`) and never read it.
fn cleared_before(before: &[&Stmt], acc: BufId) -> bool {
    let mut zeroed = false;
    let mut other = false;
    for s in before {
        s.visit(&mut |x| match x {
            Stmt::Store { buf, value, .. } if *buf == acc => match value {
                Expr::Float(v, _) if *v == 0.0 => zeroed = true,
                Expr::Int(0, _) => zeroed = true,
                _ => other = true,
            },
            Stmt::Fill { .. } => other = true,
            _ => {}
        });
        s.visit_exprs(&mut |e| other |= matches!(e, Expr::Load(b, _, _) if *b == acc));
    }
    zeroed && !other
}

/// The first line of a statement as the script prints it.
fn first_line(f: &PrimFunc, s: &Stmt) -> String {
    let text = crate::ir::print::stmt_text(f, s);
    text.lines().next().unwrap_or_default().trim().to_string()
}
