//! Statements, tile ops and their source positions.

use super::*;
use std::fmt;

/// A rectangular piece of a buffer: `origin` per dim, `extent` per dim.
#[derive(Debug, Clone, PartialEq)]
pub struct Region {
    pub buf: BufId,
    pub origin: Vec<Expr>,
    pub extent: Vec<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ForKind {
    Serial,
    /// Element-wise over a tile; thread mapping and vectorization are the
    /// compiler's (`T::parallel`).
    Parallel,
    Unrolled,
    /// Software pipeline with `stages` buffers (`T::pipelined`).
    Pipelined {
        stages: i64,
    },
}

/// The combining operation of a reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
    /// Sum of absolute values.
    AbsSum,
}

impl ReduceOp {
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::AbsSum => "abssum",
        }
    }

    /// The starting value of a reduction in dtype `t`.
    pub fn identity(self, t: DType) -> Expr {
        let (lo, hi) = match t {
            DType::I8 => (i8::MIN as i64, i8::MAX as i64),
            DType::U8 => (0, u8::MAX as i64),
            DType::I16 => (i16::MIN as i64, i16::MAX as i64),
            DType::U16 => (0, u16::MAX as i64),
            DType::I32 => (i32::MIN as i64, i32::MAX as i64),
            DType::U32 => (0, u32::MAX as i64),
            _ => (i64::MIN, i64::MAX),
        };
        match self {
            ReduceOp::Sum | ReduceOp::AbsSum => Expr::Int(0, DType::I32).cast(t),
            ReduceOp::Max if t.is_float() => Expr::Float(f64::NEG_INFINITY, t),
            ReduceOp::Min if t.is_float() => Expr::Float(f64::INFINITY, t),
            ReduceOp::Max => Expr::Int(lo, t),
            ReduceOp::Min => Expr::Int(hi, t),
        }
    }
}

/// `dst = reduce(src, dim)`: `dst` has `src`'s shape without `dim` (a 1-D `src`
/// reduces to `[1]`). With `clear == false` the result is combined into `dst`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reduce {
    pub loc: Loc,
    pub src: BufId,
    pub dst: BufId,
    pub dim: usize,
    pub op: ReduceOp,
    pub clear: bool,
}

/// The instructions a `T::copy` runs on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum CopyInst {
    /// A `T::parallel` nest of loads and stores (`lower_tile_ops` lowers it).
    #[default]
    Loops,
    /// A 2-D tile of a global tensor into a whole swizzled shared tile as one
    /// `tl::copy_tile` of `cp.async` chunks (CUDA). The chunks are 16 bytes
    /// when the tensor is 16-byte aligned and, if `vector_if` lists dynamic
    /// dims, they are multiples of 8 (both tested at run time); element by
    /// element otherwise, and always when `vector_if` is `None`.
    CpAsyncTile { vector_if: Option<Vec<VarId>> },
    /// The same tile copy on Hopper (sm_90a) into a `Layout::WgmmaOperand`
    /// tile of 128-byte panels, or of 64- or 32-byte rows (one panel) where
    /// the copy asks for `instruction = "tma"` (`CopyPref::Tma`), from a
    /// matrix (rank 2): the bulk tensor copy engine can move it as one box
    /// per panel (`tl::tma::load_tile`, a tensor
    /// map the launcher encodes, ragged edges zero-filled by the engine) when
    /// the tensor is 16-byte aligned and the listed dims are multiples of 8
    /// (its row stride then is a multiple of 16 bytes), tested at run time. A
    /// warp-specialized pipeline (`Pipeline::warp_specialized`) issues it so;
    /// elsewhere, and when the run-time test fails, it runs as `CpAsyncTile`.
    Tma { vector_if: Vec<VarId> },
}

/// The instruction a `T::copy` asks for (`instruction = ".."`, as TileLang's
/// copy can be told which instruction to prefer). `lower_tile_ops` and
/// `plan_pipelines` honour it or report why they cannot, at the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CopyPref {
    /// The passes choose.
    #[default]
    Auto,
    /// `"loops"`: a `T::parallel` nest of loads and stores, never a tile copy.
    Loops,
    /// `"cp_async"`: a `cp.async` tile copy (CUDA), never a bulk tensor copy,
    /// so a pipeline it feeds is not warp-specialized.
    CpAsync,
    /// `"tma"`: on Hopper a bulk tensor copy issued by a warp-specialized
    /// pipeline's producer; on other GPUs the `cp.async` tile copy.
    Tma,
}

impl CopyPref {
    pub const NAMES: [(&'static str, CopyPref); 3] = [
        ("loops", CopyPref::Loops),
        ("cp_async", CopyPref::CpAsync),
        ("tma", CopyPref::Tma),
    ];
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("auto", |(n, _)| n)
    }
    pub fn from_name(s: &str) -> Option<CopyPref> {
        Self::NAMES.iter().find(|(n, _)| *n == s).map(|(_, p)| *p)
    }
}

/// The instructions a `T::gemm` runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GemmInst {
    /// A loop nest of multiply-adds (`lower_tile_ops` lowers it).
    #[default]
    Loops,
    /// Tensor cores through `mma.sync` (`tl::gemm_ss`), the warps tiling the
    /// accumulator `wm` x `wn`; the operands are swizzled shared tiles.
    MmaSync { wm: i64, wn: i64 },
    /// Hopper's `wgmma` (`tl::wg::gemm_ss`, sm_90a), `wgs` warpgroups
    /// splitting the accumulator's rows; operands `Layout::WgmmaOperand`.
    Wgmma { wgs: i64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Gemm {
    pub loc: Loc,
    /// How it runs, chosen by `plan_mma` (CUDA); `Loops` until then.
    pub inst: GemmInst,
    pub a: BufId,
    pub b: BufId,
    pub c: BufId,
    pub trans_a: bool,
    pub trans_b: bool,
    pub clear: bool,
    /// Why `plan_mma` did not choose a faster instruction for this target
    /// (`wgmma` on sm_90a, tensor cores anywhere), in words for `tile
    /// inspect`; `None` when it has the fastest or has not been planned.
    pub why: Option<String>,
}

/// Where a statement came from in the user's source, so that an error found
/// by any pass points at the user's code. Never printed and never hashed (two
/// statements that differ only in their `Loc` are equal): the cache key must
/// not change when code moves within a file.
#[derive(Clone, Copy, Default)]
pub struct Loc(pub Option<crate::diag::SpanRange>);

impl Loc {
    /// No source position (statements made by a pass from nothing, or read
    /// back from IR text).
    pub const NONE: Loc = Loc(None);
}

impl PartialEq for Loc {
    fn eq(&self, _: &Loc) -> bool {
        true
    }
}

impl fmt::Debug for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Loc(..)"
        } else {
            "Loc(-)"
        })
    }
}

impl From<crate::diag::SpanRange> for Loc {
    fn from(r: crate::diag::SpanRange) -> Loc {
        Loc(Some(r))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    Seq(Vec<Stmt>),
    /// Immutable binding, visible to the rest of the enclosing sequence.
    Let {
        var: VarId,
        value: Expr,
    },
    /// Mutable scalar, visible to the rest of the enclosing sequence.
    Local {
        var: VarId,
        init: Expr,
    },
    Assign {
        var: VarId,
        value: Expr,
    },
    Store {
        buf: BufId,
        idx: Vec<Expr>,
        value: Expr,
        loc: Loc,
    },
    For {
        var: VarId,
        start: Expr,
        extent: Expr,
        kind: ForKind,
        body: Box<Stmt>,
        loc: Loc,
    },
    If {
        cond: Expr,
        then: Box<Stmt>,
        els: Option<Box<Stmt>>,
        loc: Loc,
    },
    /// Declares an on-chip buffer for the rest of the enclosing sequence.
    Alloc {
        buf: BufId,
        loc: Loc,
    },
    Copy {
        src: Region,
        dst: Region,
        loc: Loc,
        /// How it runs, chosen by `lower_tile_ops`; `Loops` until then.
        inst: CopyInst,
        /// The user's `instruction = ".."`, which that choice must honour.
        prefer: CopyPref,
        /// The user's `pad = v` (dst's dtype): what an element read from
        /// outside the source tensor becomes, instead of 0. A padded copy
        /// is never a tile copy (those fill with zeros).
        pad: Option<Expr>,
    },
    /// `dst += src` element-wise with atomic adds (`T::atomic_add` of a tile).
    AtomicAddTile {
        src: Region,
        dst: Region,
        loc: Loc,
    },
    Fill {
        dst: Region,
        value: Expr,
        loc: Loc,
    },
    Gemm(Gemm),
    /// A reduction of an on-chip tile (lowered to loops for the CPU; a
    /// cooperative block reduction on CUDA).
    Reduce(Reduce),
    /// `buf[idx] += value`, atomic with respect to other blocks and threads.
    AtomicAdd {
        buf: BufId,
        idx: Vec<Expr>,
        value: Expr,
        loc: Loc,
    },
    /// Device printf of a scalar by one thread of each block (`T::print`).
    Print {
        label: String,
        value: Expr,
        loc: Loc,
    },
    /// Block-wide barrier (inserted by passes, CUDA only).
    Barrier,
}

/// The loop variables, extents and body of the perfect `T::parallel` nest
/// starting at a statement (`None` if it is not one).
#[derive(Debug, Clone)]
pub struct Nest<'a> {
    pub vars: Vec<VarId>,
    pub extents: Vec<i64>,
    pub body: &'a Stmt,
}

/// A nest body of one store: the lets before its guard, the guard, the lets
/// under it, the store ([`Nest::one_store`]).
#[derive(Debug, Clone)]
pub struct OneStore<'a> {
    pub pre: Vec<&'a Stmt>,
    pub guard: Option<&'a Expr>,
    pub then: Vec<&'a Stmt>,
    pub store: &'a Stmt,
}

impl<'a> Nest<'a> {
    /// The body as `[let]* if (cond) { [let]* store }`: one bounds guard, no
    /// `else`, no select and no other `if` anywhere (so every load under the
    /// guard is a plain one). (cond, the lets before it, the statements under
    /// it), if it is that.
    pub fn store_guard(&self) -> Option<(&'a Expr, Vec<&'a Stmt>, Vec<&'a Stmt>)> {
        let items = self.body.items();
        let (last, pre) = items.split_last()?;
        let Stmt::If {
            cond,
            then,
            els: None,
            ..
        } = last
        else {
            return None;
        };
        let then = then.items();
        let lets = |s: &&Stmt| matches!(s, Stmt::Let { .. });
        let stores = then
            .iter()
            .filter(|s| matches!(s, Stmt::Store { .. }))
            .count();
        let mut select = false;
        self.body
            .visit_exprs(&mut |e| select |= matches!(e, Expr::Select(..)));
        let plain = pre.iter().all(lets)
            && then
                .iter()
                .all(|s| matches!(s, Stmt::Let { .. } | Stmt::Store { .. }))
            && stores == 1
            && !select;
        plain.then_some((cond, pre.to_vec(), then))
    }

    /// The body as `[let]* store` or `[let]* if (cond) { [let]* store }`
    /// (selects allowed): the parts a scalar nest needs to evaluate each
    /// iteration's stored value apart from its store (`NestPlan::batch`).
    pub fn one_store(&self) -> Option<OneStore<'a>> {
        let items = self.body.items();
        let (last, pre) = items.split_last()?;
        let lets = |s: &&Stmt| matches!(s, Stmt::Let { .. });
        if !pre.iter().all(lets) {
            return None;
        }
        let (guard, then) = match last {
            Stmt::If {
                cond,
                then,
                els: None,
                ..
            } => (Some(cond), then.items()),
            s => (None, vec![*s]),
        };
        let (store, then_lets) = then.split_last()?;
        (matches!(store, Stmt::Store { .. }) && then_lets.iter().all(lets)).then(|| OneStore {
            pre: pre.to_vec(),
            guard,
            then: then_lets.to_vec(),
            store,
        })
    }

    /// The body as one store, possibly under one bounds guard without
    /// `else`: (guard, store), if it is that.
    pub fn guarded_store(&self) -> Option<(Option<Expr>, Stmt)> {
        let items = self.body.items();
        let (cond, store) = match items.as_slice() {
            [Stmt::If {
                cond,
                then,
                els: None,
                ..
            }] => match &**then {
                Stmt::Seq(v) if v.len() == 1 => (Some(cond.clone()), v[0].clone()),
                s => (Some(cond.clone()), s.clone()),
            },
            [s] => (None, (*s).clone()),
            _ => return None,
        };
        Some((cond, store))
    }
}

impl Stmt {
    /// The statements of a sequence, or the statement itself when it is not
    /// one (a loop or branch body, the kernel body, as a list).
    pub fn items(&self) -> Vec<&Stmt> {
        match self {
            Stmt::Seq(v) => v.iter().collect(),
            x => vec![x],
        }
    }

    /// The perfect nest of parallel loops starting here: loops over constant
    /// extents from 0, outermost first.
    pub fn parallel_nest(&self) -> Option<Nest<'_>> {
        let (mut vars, mut extents, mut cur) = (Vec::new(), Vec::new(), self);
        while let Stmt::For {
            var,
            start,
            extent,
            kind: ForKind::Parallel,
            body,
            ..
        } = cur
        {
            if start.as_int() != Some(0) {
                return None;
            }
            vars.push(*var);
            extents.push(extent.as_int()?);
            cur = body;
        }
        (!vars.is_empty()).then_some(Nest {
            vars,
            extents,
            body: cur,
        })
    }

    /// Applies `f` to each direct child statement (sequence items, loop and
    /// branch bodies) and keeps everything else, `loc` included. The one place
    /// that knows which variants hold statements: passes rewrite trees with
    /// this and `fold` instead of rebuilding every variant by hand.
    pub fn map_children(self, f: &mut dyn FnMut(Stmt) -> Stmt) -> Stmt {
        match self {
            Stmt::Seq(v) => Stmt::Seq(v.into_iter().map(&mut *f).collect()),
            Stmt::For {
                loc,
                var,
                start,
                extent,
                kind,
                body,
            } => Stmt::For {
                loc,
                var,
                start,
                extent,
                kind,
                body: Box::new(f(*body)),
            },
            Stmt::If {
                loc,
                cond,
                then,
                els,
            } => Stmt::If {
                loc,
                cond,
                then: Box::new(f(*then)),
                els: els.map(|e| Box::new(f(*e))),
            },
            s => s,
        }
    }

    /// Rebuilds the tree bottom-up: `f` sees each statement after its
    /// children were rebuilt, and may replace it.
    pub fn fold(self, f: &mut dyn FnMut(Stmt) -> Stmt) -> Stmt {
        let s = self.map_children(&mut |c| c.fold(f));
        f(s)
    }

    /// The statement's source position (`Loc::NONE` for `Seq`, `Let`,
    /// `Local`, `Assign`, `Barrier`).
    pub fn loc(&self) -> Loc {
        match self {
            Stmt::For { loc, .. }
            | Stmt::If { loc, .. }
            | Stmt::Alloc { loc, .. }
            | Stmt::Copy { loc, .. }
            | Stmt::AtomicAddTile { loc, .. }
            | Stmt::Fill { loc, .. }
            | Stmt::Store { loc, .. }
            | Stmt::AtomicAdd { loc, .. }
            | Stmt::Print { loc, .. } => *loc,
            Stmt::Gemm(g) => g.loc,
            Stmt::Reduce(r) => r.loc,
            Stmt::Seq(_) | Stmt::Let { .. } | Stmt::Local { .. } | Stmt::Assign { .. } => Loc::NONE,
            Stmt::Barrier => Loc::NONE,
        }
    }

    fn loc_mut(&mut self) -> Option<&mut Loc> {
        match self {
            Stmt::For { loc, .. }
            | Stmt::If { loc, .. }
            | Stmt::Alloc { loc, .. }
            | Stmt::Copy { loc, .. }
            | Stmt::AtomicAddTile { loc, .. }
            | Stmt::Fill { loc, .. }
            | Stmt::Store { loc, .. }
            | Stmt::AtomicAdd { loc, .. }
            | Stmt::Print { loc, .. } => Some(loc),
            Stmt::Gemm(g) => Some(&mut g.loc),
            Stmt::Reduce(r) => Some(&mut r.loc),
            _ => None,
        }
    }

    /// Gives every statement of the tree that has no source position `loc`:
    /// what a pass does to the statements it makes from one user statement
    /// (a tile copy lowered to a loop nest reports errors at the copy).
    pub fn inherit_loc(self, loc: Loc) -> Stmt {
        if loc.0.is_none() {
            return self;
        }
        self.fold(&mut |mut s| {
            if let Some(l) = s.loc_mut() {
                if l.0.is_none() {
                    *l = loc;
                }
            }
            s
        })
    }

    /// Calls `f` on every statement, parents first.
    pub fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Stmt)) {
        f(self);
        match self {
            Stmt::Seq(v) => v.iter().for_each(|s| s.visit(f)),
            Stmt::For { body, .. } => body.visit(f),
            Stmt::If { then, els, .. } => {
                then.visit(f);
                if let Some(e) = els {
                    e.visit(f);
                }
            }
            _ => {}
        }
    }
}
