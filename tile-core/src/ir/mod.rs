//! The tile IR: one `PrimFunc` per kernel.
//!
//! Invariants (checked by `verify`):
//! - Variables and buffers live in per-function tables and are referred to by
//!   handle (`VarId`, `BufId`); a handle is valid only for its function.
//! - Buffer parameters are `Scope::Global`; every other buffer is declared by an
//!   `Stmt::Alloc` before use, and shared/fragment/local shapes are constants.
//! - Dynamic dims are `int32` variables bound at launch (`PrimFunc::dims`).
//! - Every expression has a dtype (`Expr::dtype`); stores convert explicitly.
//! - Tile ops (`Copy`, `Fill`, `Gemm`) exist only before `lower_tile_ops`;
//!   codegen sees loops, loads and stores.
//!
//! The printer (`print.rs`) turns a function into deterministic script text;
//! the cache key is derived from that text, so debug-only information (spans,
//! comments in the user's source) never reaches it.

pub mod fold;
mod names;
pub mod print;
pub mod read;
mod schedule;
mod walk;

pub use names::NameIndex;

pub use schedule::{NestPlan, Pipeline, Schedule, SharedPool};

use std::fmt;

/// Element and scalar types (the table is the kernel ABI's, shared with the runtime).
pub use tile_abi::DType;

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Device memory; kernel parameters.
    Global,
    /// Per block, visible to all its threads.
    Shared,
    /// Per block logically, distributed over the threads' registers.
    Fragment,
    /// Per thread.
    Local,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Shared => "shared",
            Scope::Fragment => "local.fragment",
            Scope::Local => "local",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(pub u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

/// A scalar variable: loop index, block index, dynamic dim, let binding or
/// mutable local.
#[derive(Debug, Clone, PartialEq)]
pub struct Var {
    pub name: String,
    pub dtype: DType,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Buffer {
    pub name: String,
    pub dtype: DType,
    /// Row-major shape; constants for on-chip buffers.
    pub shape: Vec<Expr>,
    pub scope: Scope,
    /// Written by the kernel (only meaningful for parameters).
    pub mutable: bool,
    /// How elements map to memory or to threads, when not the default
    /// (row-major memory; fragments split over threads in chunks). Set by
    /// passes for the target, or by `T::annotate_layout`.
    pub layout: Option<Layout>,
}

/// Target layouts chosen by passes (CUDA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// A shared tile of 2-byte elements stored in the swizzled order the
    /// tensor-core GEMM reads without bank conflicts (`tl::smem_offset`).
    Swizzled,
    /// A GEMM accumulator fragment: thread `t` holds the elements that
    /// `tl::acc_coord` gives, the warps tiling it `wm` x `wn`.
    Mma { wm: i64, wn: i64 },
}

impl Buffer {
    /// Shape as constants, if every dim is one.
    pub fn const_shape(&self) -> Option<Vec<i64>> {
        self.shape.iter().map(Expr::as_int).collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Truncating division (Rust and C semantics; indices are non-negative).
    Div,
    Rem,
    Min,
    Max,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    pub fn is_cmp(self) -> bool {
        matches!(
            self,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
        )
    }
    pub fn is_logic(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or)
    }
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
}

/// Math intrinsics; each takes and returns one float dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Intrin {
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Abs,
    Tanh,
    Sigmoid,
}

impl Intrin {
    pub fn name(self) -> &'static str {
        match self {
            Intrin::Exp => "exp",
            Intrin::Exp2 => "exp2",
            Intrin::Log => "log",
            Intrin::Log2 => "log2",
            Intrin::Sqrt => "sqrt",
            Intrin::Rsqrt => "rsqrt",
            Intrin::Abs => "abs",
            Intrin::Tanh => "tanh",
            Intrin::Sigmoid => "sigmoid",
        }
    }
    pub fn from_name(s: &str) -> Option<Intrin> {
        Some(match s {
            "exp" => Intrin::Exp,
            "exp2" => Intrin::Exp2,
            "log" => Intrin::Log,
            "log2" => Intrin::Log2,
            "sqrt" => Intrin::Sqrt,
            "rsqrt" => Intrin::Rsqrt,
            "abs" => Intrin::Abs,
            "tanh" => Intrin::Tanh,
            "sigmoid" => Intrin::Sigmoid,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Int(i64, DType),
    Float(f64, DType),
    Bool(bool),
    Var(VarId, DType),
    Load(BufId, Vec<Expr>, DType),
    Bin(BinOp, Box<Expr>, Box<Expr>, DType),
    Not(Box<Expr>),
    Neg(Box<Expr>, DType),
    Cast(DType, Box<Expr>),
    Select(Box<Expr>, Box<Expr>, Box<Expr>, DType),
    Call(Intrin, Vec<Expr>, DType),
    /// The thread index within the block (`T::get_thread_binding`; CUDA only).
    Thread,
}

impl Expr {
    pub fn int(v: i64) -> Expr {
        Expr::Int(v, DType::I32)
    }
    pub fn dtype(&self) -> DType {
        match self {
            Expr::Int(_, t) | Expr::Float(_, t) | Expr::Var(_, t) | Expr::Load(_, _, t) => *t,
            Expr::Bin(_, _, _, t) | Expr::Neg(_, t) | Expr::Select(_, _, _, t) => *t,
            Expr::Call(_, _, t) => *t,
            Expr::Bool(_) | Expr::Not(_) => DType::Bool,
            Expr::Thread => DType::I32,
            Expr::Cast(t, _) => *t,
        }
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Expr::Int(v, _) => Some(*v),
            _ => None,
        }
    }
    // Constructors of IR nodes (`a + b` as an expression), not arithmetic on values.
    #[allow(clippy::should_implement_trait)]
    pub fn add(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Add, a, b)
    }
    #[allow(clippy::should_implement_trait)]
    pub fn mul(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Mul, a, b)
    }
    pub fn and(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::And, a, b)
    }
    pub fn lt(a: Expr, b: Expr) -> Expr {
        Expr::bin(BinOp::Lt, a, b)
    }

    /// Calls `f` on every sub-expression, children first.
    pub fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        match self {
            Expr::Load(_, idx, _) => idx.iter().for_each(|e| e.visit(f)),
            Expr::Bin(_, a, b, _) => {
                a.visit(f);
                b.visit(f);
            }
            Expr::Not(a) | Expr::Neg(a, _) | Expr::Cast(_, a) => a.visit(f),
            Expr::Select(c, a, b, _) => {
                c.visit(f);
                a.visit(f);
                b.visit(f);
            }
            Expr::Call(_, args, _) => args.iter().for_each(|e| e.visit(f)),
            Expr::Int(..) | Expr::Float(..) | Expr::Bool(_) | Expr::Var(..) | Expr::Thread => {}
        }
        f(self)
    }

    /// Rebuilds the expression bottom-up; `f` may replace any node.
    pub fn map(self, f: &mut dyn FnMut(Expr) -> Expr) -> Expr {
        let e = match self {
            Expr::Load(b, idx, t) => Expr::Load(b, idx.into_iter().map(|e| e.map(f)).collect(), t),
            Expr::Bin(op, a, b, _) => Expr::bin(op, a.map(f), b.map(f)),
            Expr::Not(a) => Expr::Not(Box::new(a.map(f))),
            Expr::Neg(a, t) => Expr::Neg(Box::new(a.map(f)), t),
            Expr::Cast(t, a) => a.map(f).cast(t),
            Expr::Select(c, a, b, t) => Expr::Select(
                Box::new(c.map(f)),
                Box::new(a.map(f)),
                Box::new(b.map(f)),
                t,
            ),
            Expr::Call(i, args, t) => {
                Expr::Call(i, args.into_iter().map(|e| e.map(f)).collect(), t)
            }
            e => e,
        };
        f(e)
    }

    /// Substitutes let-bound values (transitively) for their variables.
    pub fn inline_lets(&self, lets: &std::collections::HashMap<VarId, Expr>) -> Expr {
        self.clone().map(&mut |x| match x {
            Expr::Var(v, t) => match lets.get(&v) {
                Some(val) => val.inline_lets(lets),
                None => Expr::Var(v, t),
            },
            x => x,
        })
    }

    /// Whether the expression reads buffer `b`.
    pub fn visit_uses(&self, b: BufId) -> bool {
        let mut found = false;
        self.visit(&mut |e| found |= matches!(e, Expr::Load(x, _, _) if *x == b));
        found
    }

    pub fn uses_var(&self, v: VarId) -> bool {
        let mut found = false;
        self.visit(&mut |e| {
            if let Expr::Var(x, _) = e {
                found |= *x == v;
            }
        });
        found
    }
}

/// Row-major flat offset of `idx` in a buffer of `shape`, folded where constant.
pub fn flatten(shape: &[Expr], idx: &[Expr]) -> Expr {
    let mut pairs = shape.iter().zip(idx);
    let Some((_, first)) = pairs.next() else {
        return Expr::int(0);
    };
    pairs.fold(first.clone(), |acc, (d, x)| {
        Expr::add(Expr::mul(acc, d.clone()), x.clone())
    })
}

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

impl Nest<'_> {
    /// The body as one store, possibly under one bounds guard without
    /// `else`: (guard, store), if it is that.
    pub fn guarded_store(&self) -> Option<(Option<Expr>, Stmt)> {
        let items: Vec<&Stmt> = match self.body {
            Stmt::Seq(v) => v.iter().collect(),
            x => vec![x],
        };
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

/// The launch frame of a kernel (`T::kernel`).
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// Grid extents, 1 to 3, over constants and dynamic dims.
    pub grid: Vec<Expr>,
    /// Block index variables, one per grid dim (x, y, z).
    pub block_vars: Vec<VarId>,
    pub threads: i64,
}

/// A compile-time parameter from the attribute, kept for the script.
#[derive(Debug, Clone, PartialEq)]
pub enum ConstVal {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl fmt::Display for ConstVal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstVal::Int(v) => write!(f, "{v}"),
            ConstVal::Float(v) => write!(f, "{v:?}"),
            ConstVal::Bool(v) => write!(f, "{v}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PrimFunc {
    pub name: String,
    pub consts: Vec<(String, ConstVal)>,
    /// Built for CUDA only (`target = "cuda"`): no C version is generated.
    pub cuda_only: bool,
    /// Buffer parameters, in signature order.
    pub params: Vec<BufId>,
    /// Dynamic dims (int32 vars), in ABI order.
    pub dims: Vec<VarId>,
    pub vars: Vec<Var>,
    pub buffers: Vec<Buffer>,
    pub launch: Launch,
    pub body: Stmt,
    /// Where shared buffers sit in the block's shared memory; empty until
    /// `merge_shared` (CUDA) fills it.
    pub smem: SharedPool,
    /// How loops map to threads and stages; empty until the scheduling
    /// passes (CUDA) fill it.
    pub schedule: Schedule,
    /// The names taken by `vars` and `buffers`, for `new_var` and `new_buf`.
    pub names: NameIndex,
}

impl PrimFunc {
    pub fn var(&self, v: VarId) -> &Var {
        &self.vars[v.0 as usize]
    }
    pub fn buf(&self, b: BufId) -> &Buffer {
        &self.buffers[b.0 as usize]
    }
    /// Adds a variable; names are made unique (`i`, `i_1`, ...) so that the
    /// script and generated code can use them directly.
    pub fn new_var(&mut self, name: &str, dtype: DType) -> VarId {
        let name = self.fresh_name(name);
        let id = VarId(self.vars.len() as u32);
        self.vars.push(Var { name, dtype });
        id
    }
    pub fn new_buf(&mut self, mut b: Buffer) -> BufId {
        b.name = self.fresh_name(&b.name);
        let id = BufId(self.buffers.len() as u32);
        self.buffers.push(b);
        id
    }
    fn fresh_name(&mut self, base: &str) -> String {
        self.names.fresh(base, &self.vars, &self.buffers)
    }
    pub fn script(&self) -> String {
        print::script(self)
    }
}
