//! Which tiles of a warp-specialized pipeline the blocks of a cluster share
//! (`Pipeline::multicast`), when the kernel asks for clusters of `n` = 2, 4
//! or 8 (`T::use_cluster(n)`, `Launch::cluster`).
//!
//! The launcher runs blocks `nk .. nk + n - 1` along x as one cluster when
//! `n` divides the grid's x extent (else no clusters, and nothing here
//! applies). A producer's tile may then be loaded once for all of them,
//! `1/n` of its rows by each block and multicast into every block's shared
//! memory, when its origin is provably the same in all `n` blocks at every
//! iteration: it reads neither x block index nor anything computed from it,
//! except the row of `T::use_swizzle` with a panel that `n` divides
//! (consecutive blocks of such a grid walk one row of a panel in groups of
//! `n`, so the row is the same across a cluster). The loop's bounds must be
//! the same in all blocks too, or one block would wait for copies another
//! never issues. A part must be whole 1024-byte swizzle atoms (8 rows of a
//! 128-byte panel), so the tile's rows are a multiple of `8n`. Since each
//! empty barrier then waits for every block's consumers, the blocks advance
//! in step; dividing the copy engine's requests per block is what pays for
//! that (at a row pitch that is not a multiple of 128 bytes, the engine
//! splits every row of a box into several requests).

use crate::ir::*;
use std::collections::HashMap;

/// The tiles of pipeline `var` that a cluster shares, and, when the kernel
/// asks for clusters but none is shared, why (`Pipeline::multicast_why`,
/// which `tile inspect` shows).
pub(super) fn multicast(f: &PrimFunc, var: VarId) -> (Vec<BufId>, Option<String>) {
    let n = f.launch.cluster;
    let Some(p) = f.schedule.pipelines.get(&var).filter(|_| n >= 2) else {
        return (Vec::new(), None);
    };
    let none = |why: String| {
        (
            Vec::new(),
            Some(format!("clusters of {n} share nothing: {why}")),
        )
    };
    if !p.warp_specialized {
        return none(
            "only a warp-specialized pipeline's bulk tensor copies (Hopper) are shared".into(),
        );
    }
    if p.persistent {
        return none("the blocks of a persistent loop walk different tiles".into());
    }
    if p.rotate.is_some() {
        return none(
            "a rotated pipeline (gemms overlapped across iterations) is not shared".into(),
        );
    }
    let top = f.body.items();
    let lets: HashMap<VarId, &Expr> = top
        .iter()
        .filter_map(|s| match s {
            Stmt::Let { var, value } => Some((*var, value)),
            _ => None,
        })
        .collect();
    let env = Env {
        f,
        lets,
        loop_var: var,
        n,
    };
    let Some(Stmt::For {
        start,
        extent,
        body,
        ..
    }) = top
        .iter()
        .find(|s| matches!(s, Stmt::For { var: v, .. } if *v == var))
    else {
        return none("the pipelined loop is not at the kernel's top level".into());
    };
    if !env.same(start) || !env.same(extent) {
        return none("the loop's bounds may differ between the blocks of a cluster".into());
    }
    let (mut out, mut why) = (Vec::new(), Vec::new());
    body.visit(&mut |s| {
        if let Stmt::Copy {
            src,
            dst,
            inst: CopyInst::Tma { .. },
            ..
        } = s
        {
            if !p.tiles.contains(&dst.buf) {
                return;
            }
            let name = &f.buf(dst.buf).name;
            let shape = f.buf(dst.buf).const_shape().unwrap_or_default();
            if shape.len() != 2 || src.origin.len() != 2 {
                why.push(format!("`{name}` is not a 2-D tile of a 2-D tensor"));
            } else if shape[0] % (8 * n) != 0 || shape[0] > 256 {
                why.push(format!(
                    "`{name}`'s {} rows are not whole 8-row swizzle atoms per block ({} is not a multiple of {})",
                    shape[0],
                    shape[0],
                    8 * n
                ));
            } else if !src.origin.iter().all(|e| env.same(e)) {
                why.push(format!(
                    "`{name}`'s origin may differ between the blocks of a cluster (it reads the x block index, \
                     or the row of a swizzle whose panel is not a multiple of {n})"
                ));
            } else {
                out.push(dst.buf);
            }
        }
    });
    match out.is_empty() {
        true => none(why.join("; ")),
        false => (out, None),
    }
}

struct Env<'f> {
    f: &'f PrimFunc,
    /// The kernel's top-level bindings (the swizzle's among them).
    lets: HashMap<VarId, &'f Expr>,
    /// The pipelined loop's variable: the same in all blocks when the
    /// loop's bounds are.
    loop_var: VarId,
    /// Blocks per cluster.
    n: i64,
}

impl Env<'_> {
    /// Whether `e` has the same value in blocks `nk .. nk + n - 1` along x.
    fn same(&self, e: &Expr) -> bool {
        let mut ok = true;
        e.visit(&mut |x| {
            if let Expr::Var(v, _) = x {
                ok &= self.same_var(*v);
            }
            // Loads read memory that may differ per block.
            ok &= !matches!(x, Expr::Load(..) | Expr::Thread);
        });
        ok
    }

    fn same_var(&self, v: VarId) -> bool {
        let l = &self.f.launch;
        if v == self.loop_var || l.block_vars[1..].contains(&v) {
            return true;
        }
        if self.f.dims.contains(&v) || self.f.scalars.contains(&v) {
            return true;
        }
        if l.block_vars[0] == v {
            return false;
        }
        match self.lets.get(&v) {
            Some(value) => self.swizzle_row(value) || self.same(value),
            None => false,
        }
    }

    /// `T::use_swizzle`'s row, `local / width` with `local = id % group`,
    /// `id = by * gx + bx`, `group = panel * gy` and `width = min(max(gx -
    /// first, 1), panel)`, for a panel that `n` divides (with `gx` a
    /// multiple of `n`, so is every width, and a cluster's `n` consecutive
    /// ids, from a multiple of `n`, fall in one row).
    fn swizzle_row(&self, e: &Expr) -> bool {
        let l = &self.f.launch;
        if l.block_vars.len() != 2 {
            return false;
        }
        let (bx, by, gx, gy) = (l.block_vars[0], l.block_vars[1], &l.grid[0], &l.grid[1]);
        let var = |e: &Expr| match e {
            Expr::Var(v, _) => self.lets.get(v).copied(),
            _ => None,
        };
        let Expr::Bin(BinOp::Div, local, width, _) = e else {
            return false;
        };
        let Some(Expr::Bin(BinOp::Rem, id, group, _)) = var(local) else {
            return false;
        };
        let id_ok = matches!(var(id), Some(Expr::Bin(BinOp::Add, m, x, _))
            if matches!(&**x, Expr::Var(v, _) if *v == bx)
                && matches!(&**m, Expr::Bin(BinOp::Mul, y, g, _)
                    if matches!(&**y, Expr::Var(v, _) if *v == by) && **g == *gx));
        let panel = match var(group) {
            Some(Expr::Bin(BinOp::Mul, p, g, _)) if **g == *gy => p.as_int(),
            _ => None,
        };
        let Some(panel) = panel.filter(|p| p % self.n == 0) else {
            return false;
        };
        // width = min(max(gx - first, 1), panel), first = (id / group) * panel.
        let width_ok = match var(width) {
            Some(Expr::Bin(BinOp::Min, rest, p, _)) if p.as_int() == Some(panel) => match &**rest {
                Expr::Bin(BinOp::Max, d, one, _) if one.as_int() == Some(1) => {
                    matches!(&**d, Expr::Bin(BinOp::Sub, g, first, _)
                            if **g == *gx && matches!(var(first),
                                Some(Expr::Bin(BinOp::Mul, q, p2, _))
                                    if p2.as_int() == Some(panel)
                                        && matches!(&**q, Expr::Bin(BinOp::Div, i2, g2, _)
                                            if **i2 == **id && **g2 == **group)))
                }
                _ => false,
            },
            _ => false,
        };
        id_ok && width_ok
    }
}
