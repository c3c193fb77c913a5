//! The expressions a statement holds: visiting and rewriting them.

use super::{Expr, Region, Stmt};

impl Stmt {
    /// Applies `f` to each expression this statement holds itself (not its
    /// children's): values, indices, loop bounds, conditions, regions.
    pub fn map_own_exprs(self, f: &mut dyn FnMut(Expr) -> Expr) -> Stmt {
        let region = |r: Region, f: &mut dyn FnMut(Expr) -> Expr| Region {
            buf: r.buf,
            origin: r.origin.into_iter().map(&mut *f).collect(),
            extent: r.extent.into_iter().map(&mut *f).collect(),
        };
        match self {
            Stmt::Let { var, value } => Stmt::Let {
                var,
                value: f(value),
            },
            Stmt::Local { var, init } => Stmt::Local { var, init: f(init) },
            Stmt::Assign { var, value } => Stmt::Assign {
                var,
                value: f(value),
            },
            Stmt::Store {
                buf,
                idx,
                value,
                loc,
            } => {
                let (idx, value) = index_value(idx, value, f);
                Stmt::Store {
                    buf,
                    idx,
                    value,
                    loc,
                }
            }
            Stmt::AtomicAdd {
                buf,
                idx,
                value,
                loc,
            } => {
                let (idx, value) = index_value(idx, value, f);
                Stmt::AtomicAdd {
                    buf,
                    idx,
                    value,
                    loc,
                }
            }
            Stmt::For {
                var,
                start,
                extent,
                kind,
                body,
                loc,
            } => Stmt::For {
                var,
                start: f(start),
                extent: f(extent),
                kind,
                body,
                loc,
            },
            Stmt::If {
                cond,
                then,
                els,
                loc,
            } => Stmt::If {
                cond: f(cond),
                then,
                els,
                loc,
            },
            Stmt::Print { label, value, loc } => Stmt::Print {
                label,
                value: f(value),
                loc,
            },
            Stmt::Copy {
                src,
                dst,
                loc,
                inst,
                prefer,
                pad,
            } => Stmt::Copy {
                src: region(src, f),
                dst: region(dst, f),
                loc,
                inst,
                prefer,
                pad: pad.map(&mut *f),
            },
            Stmt::AtomicAddTile { src, dst, loc } => Stmt::AtomicAddTile {
                src: region(src, f),
                dst: region(dst, f),
                loc,
            },
            Stmt::Fill { dst, value, loc } => Stmt::Fill {
                dst: region(dst, f),
                value: f(value),
                loc,
            },
            s @ (Stmt::Seq(_)
            | Stmt::Alloc { .. }
            | Stmt::Gemm(_)
            | Stmt::Reduce(_)
            | Stmt::Barrier) => s,
        }
    }

    /// Calls `f` on every expression directly held by this statement tree.
    pub fn visit_exprs(&self, f: &mut dyn FnMut(&Expr)) {
        self.visit(&mut |s| match s {
            Stmt::Let { value, .. } | Stmt::Assign { value, .. } => value.visit(f),
            Stmt::Local { init, .. } => init.visit(f),
            Stmt::Print { value, .. } => value.visit(f),
            Stmt::Store { idx, value, .. } | Stmt::AtomicAdd { idx, value, .. } => {
                idx.iter().for_each(|e| e.visit(f));
                value.visit(f);
            }
            Stmt::For { start, extent, .. } => {
                start.visit(f);
                extent.visit(f);
            }
            Stmt::If { cond, .. } => cond.visit(f),
            Stmt::Copy { src, dst, pad, .. } => {
                for r in [src, dst] {
                    r.origin.iter().chain(&r.extent).for_each(|e| e.visit(f));
                }
                if let Some(p) = pad {
                    p.visit(f);
                }
            }
            Stmt::AtomicAddTile { src, dst, .. } => {
                for r in [src, dst] {
                    r.origin.iter().chain(&r.extent).for_each(|e| e.visit(f));
                }
            }
            Stmt::Fill { dst, value, .. } => {
                dst.origin
                    .iter()
                    .chain(&dst.extent)
                    .for_each(|e| e.visit(f));
                value.visit(f);
            }
            _ => {}
        });
    }
}

/// `f` applied to an index and a value.
fn index_value(idx: Vec<Expr>, value: Expr, f: &mut dyn FnMut(Expr) -> Expr) -> (Vec<Expr>, Expr) {
    (idx.into_iter().map(&mut *f).collect(), f(value))
}
