//! Expressions: literals, names, arithmetic, comparisons, casts, indexing and
//! the `T::` math functions, with dtype checking.
//!
//! Typing rules: a constant (literal or compile-time parameter) takes the type
//! of the other operand; two float types meet at the wider one; two integer
//! types at the wider one; integer with float is an error (write `as`).

use super::builtins::{self, Lower, Position};
use super::{Ctx, Sym};
use crate::diag::{range, At, SpanRange as Span};
use crate::ir::fold::{int_op, NoFold};
use crate::ir::*;

/// `T::name` → `name`.
pub fn t_fn_name(e: &syn::Expr) -> Option<String> {
    let syn::Expr::Path(p) = e else { return None };
    let segs: Vec<&syn::PathSegment> = p.path.segments.iter().collect();
    match segs.as_slice() {
        [t, f] if t.ident == "T" => Some(f.ident.to_string()),
        _ => None,
    }
}

/// The turbofish type of `T::name::<ty>`, if any.
pub fn t_fn_turbofish(e: &syn::Expr) -> Option<&syn::Type> {
    let syn::Expr::Path(p) = e else { return None };
    let seg = p.path.segments.last()?;
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(ab) => match ab.args.first()? {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

pub fn dtype_of_type(t: &syn::Type) -> Option<DType> {
    match t {
        syn::Type::Path(p) => DType::from_rust_name(&p.path.get_ident()?.to_string()),
        _ => None,
    }
}

/// A dtype given as an argument (`f16` in `T::alloc_shared([m], f16)`).
pub fn dtype_of_name(e: &syn::Expr) -> Option<DType> {
    match e {
        syn::Expr::Path(p) => DType::from_rust_name(&p.path.get_ident()?.to_string()),
        _ => None,
    }
}

fn is_const(e: &Expr) -> bool {
    matches!(e, Expr::Int(..) | Expr::Float(..))
}

/// Brings two operands to one dtype, or reports why they cannot meet.
/// Whether integer `v` is representable in `t` (floats take any integer).
pub fn fits(v: i64, t: DType) -> bool {
    match t {
        DType::I8 => i8::try_from(v).is_ok(),
        DType::U8 => u8::try_from(v).is_ok(),
        DType::I16 => i16::try_from(v).is_ok(),
        DType::U16 => u16::try_from(v).is_ok(),
        DType::I32 => i32::try_from(v).is_ok(),
        DType::U32 => u32::try_from(v).is_ok(),
        DType::U64 => v >= 0,
        _ => true,
    }
}

/// Converts an integer constant to `to`, reporting one that does not fit.
fn int_const_to(cx: &mut Ctx, span: At<'_>, c: Expr, to: DType) -> Expr {
    if let Expr::Int(v, _) = c {
        if to.is_int() && !fits(v, to) {
            cx.err(span, format!("the integer {v} does not fit in {to}"));
        }
    }
    c.cast(to)
}

pub fn unify(cx: &mut Ctx, span: At<'_>, a: Expr, b: Expr) -> (Expr, Expr) {
    let (ta, tb) = (a.dtype(), b.dtype());
    if ta == tb {
        return (a, b);
    }
    // A value of a pair's half dtype meets the pair in both halves.
    if ta.is_packed() && tb == ta.lane() {
        return (a, b.cast(ta));
    }
    if tb.is_packed() && ta == tb.lane() {
        return (a.cast(tb), b);
    }
    // A constant meets a packed pair as that value in both halves.
    let adapt = |c: &Expr, to: DType| -> bool {
        match c {
            Expr::Int(..) => to.is_int() || to.is_float() || to.is_packed(),
            Expr::Float(..) => to.is_float() || to.is_packed(),
            _ => false,
        }
    };
    // Two constants: an int32 one (the type of an unsuffixed literal) takes
    // the other's type (`-9223372036854775807 - 1` is int64).
    if is_const(&a) && is_const(&b) && tb == DType::I32 && adapt(&b, ta) {
        return (a, int_const_to(cx, span, b, ta));
    }
    if is_const(&a) && adapt(&a, tb) {
        return (int_const_to(cx, span, a, tb), b);
    }
    if is_const(&b) && adapt(&b, ta) {
        return (a, int_const_to(cx, span, b, ta));
    }
    let wider = |x: DType, y: DType| if x.bytes() >= y.bytes() { x } else { y };
    if ta.is_float() && tb.is_float() {
        let t = if ta.bytes() == tb.bytes() {
            DType::F32
        } else {
            wider(ta, tb)
        };
        return (a.cast(t), b.cast(t));
    }
    if ta.is_int() && tb.is_int() {
        let t = wider(ta, tb);
        return (a.cast(t), b.cast(t));
    }
    cx.err(
        span,
        if ta.is_packed() || tb.is_packed() {
            format!(
                "mismatched types {ta} and {tb}: a pair meets a pair of its dtype, a value of its \
                 half's dtype or a constant; put a value in both halves with `T::splat::<{}>(x)`",
                if ta.is_packed() { ta } else { tb }.rust_name()
            )
        } else {
            format!("mismatched types {ta} and {tb}; convert one side with `as`")
        },
    );
    (a, b)
}

/// Converts a value for storing into a buffer or variable of type `to`.
pub fn convert_for_store(cx: &mut Ctx, span: At<'_>, v: Expr, to: DType, what: &str) -> Expr {
    let from = v.dtype();
    if from == to {
        return v;
    }
    let ok = match &v {
        Expr::Int(..) => to.is_int() || to.is_float() || to.is_packed(),
        Expr::Float(..) => to.is_float() || to.is_packed(),
        _ => (from.is_float() && to.is_float()) || (from.is_int() && to.is_int()),
    };
    if ok {
        int_const_to(cx, span, v, to)
    } else if to.is_packed() || from.is_packed() {
        cx.err(
            span,
            format!(
                "cannot store a {from} value into {what} of type {to}; a pair is made with \
                 `T::pack2(lo, hi)` or `T::splat::<{}>(x)` and its halves read with `T::low(v)` \
                 and `T::high(v)`",
                if to.is_packed() { to } else { from }.rust_name()
            ),
        );
        v
    } else {
        cx.err(
            span,
            format!(
                "cannot store a {from} value into {what} of type {to}; convert with `as {}`",
                to.rust_name()
            ),
        );
        v
    }
}

pub fn lower(cx: &mut Ctx, e: &syn::Expr) -> Expr {
    // Poison spreads up from a part to the expressions that contain it, and
    // not across to its siblings.
    let outer = std::mem::replace(&mut cx.poisoned, false);
    let v = lower_node(cx, e);
    cx.poisoned |= outer;
    v
}

fn lower_node(cx: &mut Ctx, e: &syn::Expr) -> Expr {
    let span = At::Expr(e);
    match e {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => {
                let (t, v) = (i.suffix(), i.base10_parse::<i64>());
                // An unsuffixed literal is int32, or int64 when it needs to be;
                // a suffixed one must fit its type.
                let t = match (t, &v) {
                    ("", Ok(v)) if !fits(*v, DType::I32) => Some(DType::I64),
                    ("", _) => Some(DType::I32),
                    (s, _) => DType::from_rust_name(s).filter(|t| !t.is_packed()),
                };
                match (t, v) {
                    (Some(t), Ok(v)) if t.is_float() => {
                        float_lit(cx, span, Expr::Int(v, DType::I64).cast(t), false)
                    }
                    (Some(t), Ok(v)) if !fits(v, t) => {
                        cx.err(span, format!("the integer {v} does not fit in {t}"));
                        Expr::Int(0, t)
                    }
                    (Some(t), Ok(v)) => Expr::Int(v, t),
                    (Some(t), Err(_)) if t.is_int() => {
                        cx.err(span, format!("the integer {i} does not fit in {t}"));
                        Expr::Int(0, t)
                    }
                    _ => {
                        cx.err(span, "unsupported integer literal");
                        Expr::int(0)
                    }
                }
            }
            syn::Lit::Float(f) => {
                let t = match f.suffix() {
                    "" => Some(DType::F32),
                    s => DType::from_rust_name(s).filter(|t| !t.is_packed()),
                };
                let digits = f.base10_digits();
                match (t, digits.parse::<f64>()) {
                    // `1.5f32` is the f32 nearest the decimal (parsed as such,
                    // not through f64).
                    (Some(DType::F32), Ok(_)) if !f.suffix().is_empty() => {
                        let v = digits.parse::<f32>().map_or(f64::NAN, f64::from);
                        float_lit(cx, span, Expr::Float(v, DType::F32), false)
                    }
                    // An unsuffixed literal keeps its decimal value until it
                    // meets a type (see `ir::fold`).
                    (Some(t), Ok(v)) if t.is_float() && f.suffix().is_empty() => {
                        float_lit(cx, span, Expr::Float(v, t), true)
                    }
                    (Some(t), Ok(v)) if t.is_float() => {
                        let v = match t {
                            DType::F16 => half::f16::from_f64(v).to_f64(),
                            DType::BF16 => half::bf16::from_f64(v).to_f64(),
                            _ => v,
                        };
                        float_lit(cx, span, Expr::Float(v, t), false)
                    }
                    _ => {
                        cx.err(span, "unsupported float literal");
                        Expr::Float(0.0, DType::F32)
                    }
                }
            }
            syn::Lit::Bool(b) => Expr::Bool(b.value),
            _ => {
                cx.err(
                    span,
                    "only integer, float and bool literals are supported in kernels",
                );
                Expr::int(0)
            }
        },
        syn::Expr::Paren(p) => lower(cx, &p.expr),
        syn::Expr::Group(g) => lower(cx, &g.expr),
        syn::Expr::Path(p) => {
            if t_fn_name(e).is_some() || p.path.get_ident().is_none() {
                cx.err(span, "expected a value; a path is not a value here");
                return Expr::int(0);
            }
            name(
                cx,
                p.path.get_ident().map(super::name_of).unwrap_or_default(),
                span,
            )
        }
        syn::Expr::Binary(b) => binary(cx, b, e),
        syn::Expr::Unary(u) => {
            let a = lower(cx, &u.expr);
            match u.op {
                syn::UnOp::Neg(_) => match a {
                    a if a.dtype() == DType::Bool
                        || !(a.dtype().is_signed() || a.dtype().is_packed()) =>
                    {
                        cx.err(span, format!("cannot negate a {} value", a.dtype()));
                        a
                    }
                    Expr::Int(v, t) => match crate::ir::fold::int_neg(v, t) {
                        Ok(n) => Expr::Int(n, t),
                        Err(_) => {
                            cx.err(span, format!("negating {v} overflows {t}"));
                            Expr::Int(v, t)
                        }
                    },
                    Expr::Float(v, t) => Expr::Float(-v, t),
                    a => {
                        let a = computed(a);
                        let t = a.dtype();
                        Expr::Neg(Box::new(a), t)
                    }
                },
                // `!x` on an integer flips its bits: `x ^ (0 - 1)` in x's
                // promoted type (all ones), which is C's `~x`.
                syn::UnOp::Not(_) if a.dtype().is_int() => {
                    let t = a.dtype();
                    let ones = Expr::bin(BinOp::Sub, Expr::Int(0, t), Expr::Int(1, t));
                    Expr::bin(BinOp::BitXor, a, ones)
                }
                syn::UnOp::Not(_) => {
                    if a.dtype() != DType::Bool {
                        cx.err(span, "`!` applies to bool conditions and integers");
                    }
                    match a {
                        Expr::Bool(b) => Expr::Bool(!b),
                        a => Expr::Not(Box::new(a)),
                    }
                }
                _ => {
                    cx.err(span, "unsupported unary operator in a kernel");
                    a
                }
            }
        }
        syn::Expr::Cast(c) => {
            let a = lower(cx, &c.expr);
            match dtype_of_type(&c.ty) {
                Some(t) if t.is_packed() || a.dtype().is_packed() => {
                    cx.err(
                        span,
                        "`as` does not convert to or from a packed pair: make one with \
                         `T::pack2(lo, hi)` or `T::splat::<f16x2>(x)`, and read its halves with \
                         `T::low(v)` and `T::high(v)`",
                    );
                    a
                }
                Some(t) => {
                    if t == DType::Bool || a.dtype() == DType::Bool {
                        cx.err(
                            span,
                            "casts to or from bool are not supported; compare instead",
                        );
                    }
                    a.cast(t)
                }
                None => {
                    cx.err(range(&c.ty), "cast to an unknown element type");
                    a
                }
            }
        }
        syn::Expr::Index(ix) => {
            let (buf, idx) = index(cx, ix);
            match buf {
                Some(b) => {
                    let t = cx.f.buf(b).dtype;
                    Expr::Load(b, idx, t)
                }
                None => Expr::int(0),
            }
        }
        syn::Expr::Call(c) => call(cx, c),
        syn::Expr::If(i) => {
            // `if c { a } else { b }` as a value is `T::if_then_else`.
            let cond = lower(cx, &i.cond);
            let then = block_value(cx, &i.then_branch);
            let els = match &i.else_branch {
                Some((_, e)) => match &**e {
                    syn::Expr::Block(b) => block_value(cx, &b.block),
                    e => lower(cx, e),
                },
                None => {
                    cx.err(span, "an `if` used as a value needs an `else`");
                    then.clone()
                }
            };
            select(cx, span, cond, then, els)
        }
        syn::Expr::Block(b) => block_value(cx, &b.block),
        syn::Expr::MethodCall(m) => super::methods::lower(cx, m),
        other => {
            cx.err(
                range(&other),
                format!("unsupported expression in a kernel: {}", describe(other)),
            );
            Expr::int(0)
        }
    }
}

/// A float literal: one that does not fit its type (its value rounds to
/// infinity) is an error, as in Rust. An unsuffixed literal (`adapts`) only
/// has to fit `f64`: it takes the type of what it meets.
fn float_lit(cx: &mut Ctx, span: At<'_>, e: Expr, adapts: bool) -> Expr {
    if let Expr::Float(v, t) = e {
        let t_final = if adapts { DType::F64 } else { t };
        if crate::ir::fold::round_float(v, t_final).is_infinite() {
            cx.err(
                span,
                format!("the literal does not fit in {t_final} (it would be infinite)"),
            );
            return Expr::Float(0.0, t);
        }
    }
    e
}

fn block_value(cx: &mut Ctx, b: &syn::Block) -> Expr {
    match b.stmts.as_slice() {
        [syn::Stmt::Expr(e, None)] => lower(cx, e),
        _ => {
            cx.err(range(&b), "a value block holds exactly one expression");
            Expr::int(0)
        }
    }
}

pub fn describe(e: &syn::Expr) -> &'static str {
    match e {
        syn::Expr::Closure(_) => "closures are only the body of `T::kernel`",
        syn::Expr::Loop(_) => "`loop` (use `for .. in T::serial(n)`)",
        syn::Expr::While(_) => "`while` (use `for .. in T::serial(n)`)",
        syn::Expr::Match(_) => "`match` (use `if`/`else`)",
        syn::Expr::Macro(_) => "macros",
        syn::Expr::Reference(_) => "references",
        syn::Expr::Struct(_) => "struct literals",
        syn::Expr::Return(_) => "`return`",
        syn::Expr::Break(_) => "`break`",
        syn::Expr::Continue(_) => "`continue`",
        syn::Expr::Range(_) => "ranges outside `for`",
        syn::Expr::Array(_) | syn::Expr::Tuple(_) => "arrays and tuples outside shapes and indices",
        syn::Expr::Field(_) => "field access",
        syn::Expr::Async(_) | syn::Expr::Await(_) => "async code",
        syn::Expr::Unsafe(_) => "`unsafe` blocks",
        _ => "this Rust construct",
    }
}

fn name(cx: &mut Ctx, n: String, span: At<'_>) -> Expr {
    match cx.lookup(&n) {
        // Typed as an unsuffixed literal would be.
        Some(Sym::Const(ConstVal::Int(v))) if !fits(v, DType::I32) => Expr::Int(v, DType::I64),
        Some(Sym::Const(ConstVal::Int(v))) => Expr::int(v),
        Some(Sym::Const(ConstVal::Float(v))) => Expr::Float(v, DType::F32),
        Some(Sym::Const(ConstVal::Bool(v))) => Expr::Bool(v),
        Some(Sym::Var(v)) | Some(Sym::Mut(v)) => Expr::Var(v, cx.f.var(v).dtype),
        Some(Sym::Poison) => {
            cx.poisoned = true;
            Expr::int(1)
        }
        Some(Sym::Value(v)) => v,
        Some(Sym::Buf(_)) => {
            cx.err(
                span,
                format!("`{n}` is a buffer; index it (`{n}[i]`) to read an element"),
            );
            Expr::int(0)
        }
        None => match super::env::const_value(cx, &n) {
            Some(Ok(v)) => v,
            Some(Err(why)) => {
                cx.err(span, why);
                Expr::int(0)
            }
            None => {
                cx.err(span, format!("cannot find `{n}` in this kernel (not a parameter, dim, compile-time parameter, local, or a const of the kernel's module)"));
                Expr::int(0)
            }
        },
    }
}

fn binary(cx: &mut Ctx, b: &syn::ExprBinary, e: &syn::Expr) -> Expr {
    use syn::BinOp as B;
    let span = At::Expr(e);
    let op = match b.op {
        B::Add(_) => BinOp::Add,
        B::Sub(_) => BinOp::Sub,
        B::Mul(_) => BinOp::Mul,
        B::Div(_) => BinOp::Div,
        B::Rem(_) => BinOp::Rem,
        B::Lt(_) => BinOp::Lt,
        B::Le(_) => BinOp::Le,
        B::Gt(_) => BinOp::Gt,
        B::Ge(_) => BinOp::Ge,
        B::Eq(_) => BinOp::Eq,
        B::Ne(_) => BinOp::Ne,
        B::And(_) => BinOp::And,
        B::Or(_) => BinOp::Or,
        B::BitAnd(_) => BinOp::BitAnd,
        B::BitOr(_) => BinOp::BitOr,
        B::BitXor(_) => BinOp::BitXor,
        B::Shl(_) => BinOp::Shl,
        B::Shr(_) => BinOp::Shr,
        _ => {
            cx.err(
                range(&b.op),
                "unsupported operator in an expression (compound assignment is a statement)",
            );
            return Expr::int(0);
        }
    };
    let l = lower(cx, &b.left);
    let r = lower(cx, &b.right);
    arith(cx, span, op, l, r)
}

/// A value as arithmetic takes it: f8 values compute in f32 (neither CUDA nor
/// C has f8 arithmetic; every f8 value is exact in f32), so `a + b` of two f8
/// values is an f32 sum, rounded to f8 only where it is stored into f8.
pub fn computed(e: Expr) -> Expr {
    if e.dtype().is_f8() {
        e.cast(DType::F32)
    } else {
        e
    }
}

pub fn arith(cx: &mut Ctx, span: At<'_>, op: BinOp, l: Expr, r: Expr) -> Expr {
    if op.is_bit() {
        return bits(cx, span, op, l, r);
    }
    if op.is_logic() {
        if l.dtype() != DType::Bool || r.dtype() != DType::Bool {
            cx.err(span, format!("`{}` needs bool operands", op.symbol()));
        }
        return Expr::bin(op, l, r);
    }
    if l.dtype().is_packed() || r.dtype().is_packed() {
        return packed_arith(cx, span, op, l, r);
    }
    if l.dtype() == DType::Bool || r.dtype() == DType::Bool {
        if !(matches!(op, BinOp::Eq | BinOp::Ne) && l.dtype() == r.dtype()) {
            cx.err(
                span,
                format!("`{}` does not apply to bool values", op.symbol()),
            );
        }
        return Expr::bin(op, l, r);
    }
    if op == BinOp::Rem && (l.dtype().is_float() || r.dtype().is_float()) {
        cx.err(span, "`%` applies to integers");
    }
    let (l, r) = unify(cx, span, l, r);
    let (l, r) = (computed(l), computed(r));
    if matches!(op, BinOp::Div | BinOp::Rem) && r.dtype().is_int() && r.as_int() == Some(0) {
        cx.err(span, "division by zero");
        return l;
    }
    if let (Expr::Int(x, t), Expr::Int(y, _)) = (&l, &r) {
        if let Err(NoFold::Undefined(why)) = int_op(op, *x, *t, *y, *t) {
            // Narrower integers compute in C's 32-bit `int`.
            let shown = if *t == DType::I64 {
                DType::I64
            } else {
                DType::I32
            };
            cx.err(
                span,
                format!(
                    "{why}: `{x} {} {y}` does not fit in {shown}, the type it is computed in",
                    op.symbol()
                ),
            );
        }
    }
    Expr::bin(op, l, r)
}

/// `+ - * /`, `T::max` and `T::min` of packed pairs, half by half (one
/// `HADD2`, `HFMA2`, .. on CUDA). Both sides are pairs of one dtype, or one
/// is a constant, which stands in both halves.
fn packed_arith(cx: &mut Ctx, span: At<'_>, op: BinOp, l: Expr, r: Expr) -> Expr {
    let t = if l.dtype().is_packed() {
        l.dtype()
    } else {
        r.dtype()
    };
    if !matches!(
        op,
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Max | BinOp::Min
    ) {
        cx.err(
            span,
            format!(
                "`{}` does not apply to {t} pairs (they add, subtract, multiply, divide, \
                 `T::fma`, `T::max` and `T::min` half by half); compare or convert the halves, \
                 `T::low(v)` and `T::high(v)`",
                op.symbol()
            ),
        );
        return l;
    }
    let (l, r) = unify(cx, span, l, r);
    if l.dtype() != r.dtype() {
        return l;
    }
    Expr::bin(op, l, r)
}

/// `& | ^ << >>`: C's bit operations on integers; on bools `&`, `|` and `^`
/// are the logical operations (without short-circuit, as in Rust).
fn bits(cx: &mut Ctx, span: At<'_>, op: BinOp, l: Expr, r: Expr) -> Expr {
    let (tl, tr) = (l.dtype(), r.dtype());
    if tl == DType::Bool && tr == DType::Bool {
        let logic = match op {
            BinOp::BitAnd => BinOp::And,
            BinOp::BitOr => BinOp::Or,
            BinOp::BitXor => BinOp::Ne,
            _ => {
                cx.err(span, format!("`{}` applies to integers", op.symbol()));
                return l;
            }
        };
        return Expr::bin(logic, l, r);
    }
    if !tl.is_int() || !tr.is_int() {
        let t = if tl.is_int() { tr } else { tl };
        cx.err(
            span,
            format!(
                "`{}` applies to integers, got {t} (bit operations have no float form; \
                 cast with `as` first)",
                op.symbol()
            ),
        );
        return l;
    }
    let (l, r) = if matches!(op, BinOp::Shl | BinOp::Shr) {
        // The amount's type does not change the result's (C and Rust alike).
        (l, r.cast(tl))
    } else {
        unify(cx, span, l, r)
    };
    if let (Expr::Int(x, t), Expr::Int(y, _)) = (&l, &r) {
        if let Err(NoFold::Undefined(why)) = int_op(op, *x, *t, *y, *t) {
            cx.err(
                span,
                format!(
                    "{why}: `{x} {} {y}` is undefined in {}, the type it is computed in",
                    op.symbol(),
                    if t.bytes() == 8 { *t } else { DType::I32 }
                ),
            );
            return l;
        }
    }
    Expr::bin(op, l, r)
}

pub fn select(cx: &mut Ctx, span: At<'_>, c: Expr, a: Expr, b: Expr) -> Expr {
    if c.dtype() != DType::Bool {
        cx.err(span, "the condition must be a bool");
    }
    let (a, b) = unify(cx, span, a, b);
    if let Expr::Bool(v) = c {
        return if v { a } else { b };
    }
    let t = a.dtype();
    Expr::Select(Box::new(c), Box::new(a), Box::new(b), t)
}

/// `buf[i]`, `buf[(i, j)]`, `buf[[i, j]]` → buffer and index expressions.
pub fn index(cx: &mut Ctx, ix: &syn::ExprIndex) -> (Option<BufId>, Vec<Expr>) {
    if let syn::Expr::Index(inner) = strip(&ix.expr) {
        // `x[i][j]`: a buffer is indexed once, with all its indices.
        let mut parts = vec![&*ix.index];
        let mut base = inner;
        parts.push(&*base.index);
        while let syn::Expr::Index(i) = strip(&base.expr) {
            base = i;
            parts.push(&*base.index);
        }
        parts.reverse();
        let idx: Vec<String> = parts
            .iter()
            .map(|p| quote::ToTokens::to_token_stream(p).to_string())
            .collect();
        let name = quote::ToTokens::to_token_stream(&base.expr).to_string();
        cx.err(
            range(ix),
            format!(
                "index a buffer once with all its indices: `{name}[({})]`, not `{name}[..][..]`",
                idx.join(", ")
            ),
        );
        return (None, Vec::new());
    }
    let buf = buffer_ref(cx, &ix.expr);
    let parts = elems(&ix.index);
    let mut idx = Vec::new();
    let mut fits = true;
    for p in &parts {
        let e = lower(cx, p);
        if !e.dtype().is_int() {
            cx.err(
                range(&p),
                format!("indices are integers, got {}", e.dtype()),
            );
        }
        if let Some(v) = e.as_int() {
            fits &= super::limits::index_fits(cx, At::Expr(p), v, "the index");
        }
        idx.push(e.cast(DType::I32));
    }
    let Some(b) = buf.filter(|_| fits) else {
        return (None, idx);
    };
    let rank = cx.f.buf(b).shape.len();
    if rank != idx.len() {
        let name = cx.f.buf(b).name.clone();
        cx.err(
            range(&ix.index),
            format!(
                "`{name}` has {rank} dim(s) but is indexed with {} index(es)",
                idx.len()
            ),
        );
        return (None, idx);
    }
    let in_bounds = parts
        .iter()
        .zip(&idx)
        .enumerate()
        .all(|(d, (p, i))| const_index_ok(cx, b, d, i, At::Expr(p)));
    (in_bounds.then_some(b), idx)
}

fn strip(e: &syn::Expr) -> &syn::Expr {
    match e {
        syn::Expr::Paren(p) => strip(&p.expr),
        syn::Expr::Group(g) => strip(&g.expr),
        e => e,
    }
}

/// Whether a constant index (or origin) `i` of dim `d` of `b` is in bounds
/// (non-negative, below a constant dim); reports one that is not. Other
/// indices are checked at run time (global memory) or trusted.
pub fn const_index_ok(cx: &mut Ctx, b: BufId, d: usize, i: &Expr, span: At<'_>) -> bool {
    let Some(v) = i.as_int() else { return true };
    let buf = cx.f.buf(b);
    let dim = buf.shape.get(d).and_then(Expr::as_int);
    if v >= 0 && dim.is_none_or(|n| v < n) {
        return true;
    }
    let what = match dim {
        Some(n) => format!("dim {d} of `{}` has {n} elements", buf.name),
        None => format!("indices of `{}` are not negative", buf.name),
    };
    cx.err(span, format!("index {v} is out of bounds: {what}"));
    false
}

pub fn buffer_ref(cx: &mut Ctx, e: &syn::Expr) -> Option<BufId> {
    let id = match e {
        syn::Expr::Path(p) => p.path.get_ident().map(super::name_of),
        _ => None,
    };
    let Some(n) = id else {
        cx.err(range(&e), "expected a buffer name");
        return None;
    };
    match cx.lookup(&n) {
        Some(Sym::Buf(b)) => Some(b),
        Some(Sym::Poison) => {
            cx.poisoned = true;
            None
        }
        Some(_) => {
            cx.err(range(&e), format!("`{n}` is a scalar, not a buffer"));
            None
        }
        None => {
            cx.err(
                range(&e),
                format!("cannot find buffer `{n}` in this kernel"),
            );
            None
        }
    }
}

/// A call of a builtin or a `#[tile::func]` helper in an expression.
fn call(cx: &mut Ctx, c: &syn::ExprCall) -> Expr {
    if let Some(v) = super::env::call(cx, c) {
        return v;
    }
    let Some(k) = builtins::resolve(cx, c) else {
        return Expr::int(0);
    };
    match k.builtin.lower {
        Lower::Value(lower) if builtins::check_arity(cx, &k) => lower(cx, &k),
        Lower::Value(_) => Expr::int(0),
        _ => {
            builtins::misplaced(cx, &k, Position::Value);
            Expr::int(0)
        }
    }
}

/// The parts of a list argument (`[a, b]`, `(a, b)`), or the argument alone.
pub fn elems(e: &syn::Expr) -> Vec<&syn::Expr> {
    match e {
        syn::Expr::Array(a) => a.elems.iter().collect(),
        syn::Expr::Tuple(t) => t.elems.iter().collect(),
        e => vec![e],
    }
}

/// Whether `b` may be written; an input (`Tensor`) is reported at `span`.
pub fn check_writable(cx: &mut Ctx, b: BufId, span: Span) -> bool {
    let buf = cx.f.buf(b);
    if buf.scope == Scope::Global && !buf.mutable {
        let name = buf.name.clone();
        cx.err(
            span,
            format!("`{name}` is an input (`Tensor`); declare it `TensorMut` to write to it"),
        );
        return false;
    }
    true
}
