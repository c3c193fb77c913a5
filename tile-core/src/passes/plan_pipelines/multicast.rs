//! Which tiles of a warp-specialized pipeline the blocks of a cluster share
//! (`Pipeline::multicast`, `Pipeline::multicast_y`), when the kernel asks
//! for clusters (`T::use_cluster(nx)` or `T::use_cluster(nx, ny)`,
//! `Launch::cluster` and `Launch::cluster_y`).
//!
//! The launcher runs blocks `nx` along x by `ny` along y as one cluster when
//! they divide the grid's extents (else no clusters, and nothing here
//! applies). A producer's tile may then be loaded once for the blocks of a
//! cluster row (`multicast`: its origin reads no x block index), of a
//! cluster column (`multicast_y`: no y block index), or of the whole
//! cluster (both), each of the `g` blocks loading `1/g` of the tile's rows
//! and multicasting them into all `g`. Along x with `ny = 1`, the row of
//! `T::use_swizzle` with a panel that `nx` divides counts as the same too
//! (consecutive blocks of such a grid walk one row of a panel in groups of
//! `nx`, so the row is the same across a cluster); with `ny > 1` the
//! frontend leaves the swizzle out. The loop's bounds must be the same in
//! all blocks of the cluster, or one block would wait for copies another
//! never issues. A part must be whole 1024-byte swizzle atoms (8 rows of a
//! 128-byte panel), so the tile's rows are a multiple of `8g`. Since each
//! empty barrier then waits for the consumers of every block it fills, the
//! blocks advance in step; dividing the copy engine's requests per block is
//! what pays for that (at a row pitch that is not a multiple of 128 bytes,
//! the engine splits every row of a box into several requests): a GEMM in
//! 4 × 2 clusters asks for a quarter of A's rows and half of B's a block.

use crate::ir::*;
use std::collections::HashMap;

/// What the blocks of a cluster share of one pipeline.
#[derive(Debug, Default)]
pub(super) struct Shared {
    /// Tiles shared along x (by a cluster row).
    pub x: Vec<BufId>,
    /// Tiles shared along y (by a cluster column).
    pub y: Vec<BufId>,
    /// Why nothing is shared when the kernel asks for clusters.
    pub why: Option<String>,
}

/// The tiles of pipeline `var` that a cluster shares, and, when the kernel
/// asks for clusters but none is shared, why (`Pipeline::multicast_why`,
/// which `tile inspect` shows).
pub(super) fn multicast(f: &PrimFunc, var: VarId) -> Shared {
    let (nx, ny) = (f.launch.cluster, f.launch.cluster_y);
    let Some(p) = f.schedule.pipelines.get(&var).filter(|_| nx * ny >= 2) else {
        return Shared::default();
    };
    let shape = match ny {
        1 => format!("{nx}"),
        _ => format!("{nx} x {ny}"),
    };
    let none = |why: String| Shared {
        why: Some(format!("clusters of {shape} share nothing: {why}")),
        ..Shared::default()
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
        nx,
        ny,
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
    let everywhere = |e: &Expr| env.same(e, Axis::X) && env.same(e, Axis::Y);
    if !everywhere(start) || !everywhere(extent) {
        return none("the loop's bounds may differ between the blocks of a cluster".into());
    }
    let (mut out, mut why) = (Shared::default(), Vec::new());
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
                return;
            }
            let along = |axis| src.origin.iter().all(|e| env.same(e, axis));
            let (sx, sy) = (nx > 1 && along(Axis::X), ny > 1 && along(Axis::Y));
            // The largest group whose parts are whole swizzle atoms: the
            // whole cluster, else a row, else a column.
            let fits = |g: i64| shape[0] % (8 * g) == 0 && shape[0] <= 256;
            let pick = [(sx && sy, nx * ny, true, true), (sx, nx, true, false), (sy, ny, false, true)]
                .into_iter()
                .find(|&(ok, g, _, _)| ok && fits(g));
            match pick {
                Some((_, _, x, y)) => {
                    if x {
                        out.x.push(dst.buf);
                    }
                    if y {
                        out.y.push(dst.buf);
                    }
                }
                None if sx || sy => {
                    let g = if sx { nx } else { ny };
                    why.push(format!(
                        "`{name}`'s {} rows are not whole 8-row swizzle atoms per block ({} is not a multiple of {})",
                        shape[0],
                        shape[0],
                        8 * g
                    ))
                }
                None if ny == 1 => why.push(format!(
                    "`{name}`'s origin may differ between the blocks of a cluster (it reads the x block index, \
                     or the row of a swizzle whose panel is not a multiple of {nx})"
                )),
                None => why.push(format!(
                    "`{name}`'s origin may differ between the blocks of a cluster (it reads both block indices)"
                )),
            }
        }
    });
    match out.x.is_empty() && out.y.is_empty() {
        true => none(why.join("; ")),
        false => out,
    }
}

/// A direction in a cluster: the blocks of a row differ in x, those of a
/// column in y.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Axis {
    X,
    Y,
}

struct Env<'f> {
    f: &'f PrimFunc,
    /// The kernel's top-level bindings (the swizzle's among them).
    lets: HashMap<VarId, &'f Expr>,
    /// The pipelined loop's variable: the same in all blocks when the
    /// loop's bounds are.
    loop_var: VarId,
    /// Blocks per cluster along x and along y.
    nx: i64,
    ny: i64,
}

impl Env<'_> {
    /// Whether `e` has the same value in the blocks of a cluster that
    /// differ only along `axis`.
    fn same(&self, e: &Expr, axis: Axis) -> bool {
        let mut ok = true;
        e.visit(&mut |x| {
            if let Expr::Var(v, _) = x {
                ok &= self.same_var(*v, axis);
            }
            // Loads read memory that may differ per block.
            ok &= !matches!(x, Expr::Load(..) | Expr::Thread);
        });
        ok
    }

    fn same_var(&self, v: VarId, axis: Axis) -> bool {
        let l = &self.f.launch;
        // The block index the axis walks differs; the others do not.
        let moving = match axis {
            Axis::X => 0,
            Axis::Y => 1,
        };
        if let Some(i) = l.block_vars.iter().position(|&b| b == v) {
            return i != moving;
        }
        if v == self.loop_var || self.f.dims.contains(&v) || self.f.scalars.contains(&v) {
            return true;
        }
        match self.lets.get(&v) {
            Some(value) => {
                (axis == Axis::X && self.ny == 1 && self.swizzle_row(value))
                    || self.same(value, axis)
            }
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
        let Some(panel) = panel.filter(|p| p % self.nx == 0) else {
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
