//! Which tiles of a warp-specialized pipeline the two blocks of a cluster
//! share (`Pipeline::multicast`), when the kernel asks for clusters of two
//! (`T::use_cluster(2)`, `Launch::cluster`).
//!
//! The launcher runs blocks `2k` and `2k + 1` along x as one cluster when
//! the grid's x extent is even (else no clusters, and nothing here applies).
//! A producer's tile may then be loaded once for both, half of its rows by
//! each block and multicast into both blocks' shared memory, when its
//! origin is provably the same in both blocks at every iteration: it reads
//! neither x block index nor anything computed from it, except the row of
//! `T::use_swizzle` with an even panel (consecutive blocks of an even grid
//! walk one row of an even-width panel in pairs, so the row is the same for
//! `2k` and `2k + 1`). The loop's bounds must be the same in both blocks
//! too, or one block would wait for copies the other never issues. Since
//! each empty barrier then waits for both blocks' consumers, the two blocks
//! advance in step; halving the copy engine's requests per block is what
//! pays for that (at a row pitch that is not a multiple of 128 bytes, the
//! engine splits every row of a box into several requests).

use crate::ir::*;
use std::collections::HashMap;

pub(super) fn multicast(f: &PrimFunc, var: VarId) -> Vec<BufId> {
    let Some(p) = f.schedule.pipelines.get(&var) else {
        return Vec::new();
    };
    if f.launch.cluster != 2 || !p.warp_specialized || p.persistent || p.rotate.is_some() {
        return Vec::new();
    }
    let top: Vec<&Stmt> = match &f.body {
        Stmt::Seq(v) => v.iter().collect(),
        x => vec![x],
    };
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
        return Vec::new();
    };
    if !env.same(start) || !env.same(extent) {
        return Vec::new();
    }
    let mut out = Vec::new();
    body.visit(&mut |s| {
        if let Stmt::Copy {
            src,
            dst,
            inst: CopyInst::Tma { .. },
            ..
        } = s
        {
            let shape = f.buf(dst.buf).const_shape().unwrap_or_default();
            let halves = shape.len() == 2 && shape[0] % 16 == 0 && shape[0] <= 256;
            if halves
                && src.origin.len() == 2
                && p.tiles.contains(&dst.buf)
                && src.origin.iter().all(|e| env.same(e))
            {
                out.push(dst.buf);
            }
        }
    });
    out
}

struct Env<'f> {
    f: &'f PrimFunc,
    /// The kernel's top-level bindings (the swizzle's among them).
    lets: HashMap<VarId, &'f Expr>,
    /// The pipelined loop's variable: the same in both blocks when the
    /// loop's bounds are.
    loop_var: VarId,
}

impl Env<'_> {
    /// Whether `e` has the same value in blocks `2k` and `2k + 1` along x.
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
    /// first, 1), panel)`, for an even panel.
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
        let Some(panel) = panel.filter(|p| p % 2 == 0) else {
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
