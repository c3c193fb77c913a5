//! Expressions: constants, variables, loads, operators, casts, intrinsics.

use super::*;

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
    /// Integer bit operations (C's, on the promoted operands).
    BitAnd,
    BitOr,
    BitXor,
    /// Shifts: the amount must lie in `0..bits` of the promoted type, and a
    /// signed left shift must not overflow (C leaves both undefined).
    Shl,
    Shr,
}

impl BinOp {
    /// Every operator, in the order the script reader tries them.
    pub const ALL: [BinOp; 20] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Rem,
        BinOp::Min,
        BinOp::Max,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::And,
        BinOp::Or,
        BinOp::BitAnd,
        BinOp::BitOr,
        BinOp::BitXor,
        BinOp::Shl,
        BinOp::Shr,
    ];
    pub fn is_bit(self) -> bool {
        matches!(
            self,
            BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr
        )
    }
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
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
        }
    }
}

/// Math intrinsics; each takes [`arity`](Intrin::arity) values of one float
/// dtype and returns that dtype, except [`Intrin::Bitcast`].
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
    Erf,
    Sin,
    Cos,
    Floor,
    Ceil,
    /// Half-way cases away from zero (C's `round`, Rust's `f32::round`).
    Round,
    Trunc,
    Log1p,
    Expm1,
    /// `pow(x, y)`.
    Pow,
    /// `fma(a, b, c)` = `a * b + c`, rounded once.
    Fma,
    /// The bits of a value read as the call's dtype, of the same size
    /// (`T::bitcast::<f32>(0x3f800000u32)` is 1.0): any non-bool dtypes.
    Bitcast,
    /// `pack2(lo, hi)`: the packed pair (`f16x2`, `bf16x2`) of two halves.
    Pack2,
    /// `low(v)`: the first half of a packed pair (its low 16 bits).
    Low,
    /// `high(v)`: the second half of a packed pair.
    High,
    /// `padded(v, pad)`: `v`, or `pad` where a global load in `v` is out of
    /// bounds (`T::copy(.., pad = ..)`, `T::padded(x[i], ..)`). Not a
    /// function: `inject_bounds` turns it into a select on the loads' bounds
    /// (or into `v` where they are proven), and no call survives that pass.
    Padded,
}

impl Intrin {
    pub const ALL: [Intrin; 25] = [
        Intrin::Exp,
        Intrin::Exp2,
        Intrin::Log,
        Intrin::Log2,
        Intrin::Sqrt,
        Intrin::Rsqrt,
        Intrin::Abs,
        Intrin::Tanh,
        Intrin::Sigmoid,
        Intrin::Erf,
        Intrin::Sin,
        Intrin::Cos,
        Intrin::Floor,
        Intrin::Ceil,
        Intrin::Round,
        Intrin::Trunc,
        Intrin::Log1p,
        Intrin::Expm1,
        Intrin::Pow,
        Intrin::Fma,
        Intrin::Bitcast,
        Intrin::Pack2,
        Intrin::Low,
        Intrin::High,
        Intrin::Padded,
    ];
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
            Intrin::Erf => "erf",
            Intrin::Sin => "sin",
            Intrin::Cos => "cos",
            Intrin::Floor => "floor",
            Intrin::Ceil => "ceil",
            Intrin::Round => "round",
            Intrin::Trunc => "trunc",
            Intrin::Log1p => "log1p",
            Intrin::Expm1 => "expm1",
            Intrin::Pow => "pow",
            Intrin::Fma => "fma",
            Intrin::Bitcast => "bitcast",
            Intrin::Pack2 => "pack2",
            Intrin::Low => "low",
            Intrin::High => "high",
            Intrin::Padded => "padded",
        }
    }
    /// How many values it takes.
    pub fn arity(self) -> usize {
        match self {
            Intrin::Pow | Intrin::Padded | Intrin::Pack2 => 2,
            Intrin::Fma => 3,
            _ => 1,
        }
    }
    pub fn from_name(s: &str) -> Option<Intrin> {
        Intrin::ALL.into_iter().find(|i| i.name() == s)
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
        let e = self.map_children(&mut |c| c.map(f));
        f(e)
    }

    /// Rebuilds the node from its children, each replaced by `f` (one level:
    /// a pass that treats some nodes differently recurses through `f`).
    pub fn map_children(self, f: &mut dyn FnMut(Expr) -> Expr) -> Expr {
        match self {
            Expr::Load(b, idx, t) => Expr::Load(b, idx.into_iter().map(&mut *f).collect(), t),
            Expr::Bin(op, a, b, _) => Expr::bin(op, f(*a), f(*b)),
            Expr::Not(a) => Expr::Not(Box::new(f(*a))),
            Expr::Neg(a, t) => Expr::Neg(Box::new(f(*a)), t),
            Expr::Cast(t, a) => f(*a).cast(t),
            Expr::Select(c, a, b, t) => {
                Expr::Select(Box::new(f(*c)), Box::new(f(*a)), Box::new(f(*b)), t)
            }
            Expr::Call(i, args, t) => Expr::Call(i, args.into_iter().map(&mut *f).collect(), t),
            e => e,
        }
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
