//! Method syntax for the value builtins: `x.exp()` is `T::exp(x)` and
//! `x.max(0.0)` is `T::max(x, 0.0)`, as a Rust user writes them on floats
//! (with Rust's names for some: `x.ln()`, `x.powf(y)`, `x.mul_add(a, b)`).
//! The call is rewritten into the builtin's, receiver first, and resolved
//! through the table like any other; a method that is not one of these is an
//! error that names the builtin form.

use super::builtins::{self, Call, Lower};
use super::Ctx;
use crate::diag::range;
use crate::ir::Expr;

/// The builtins a method call may name: those whose first argument is the
/// value they act on.
const RECEIVER_FIRST: &[&str] = &[
    "max", "min", "clamp", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "tanh", "sigmoid",
    "erf", "sin", "cos", "pow", "floor", "ceil", "round", "trunc", "fma", "log1p", "expm1",
];

/// Rust's name of a float method → the builtin's.
fn builtin_name(method: &str) -> &str {
    match method {
        "ln" => "log",
        "powf" | "powi" => "pow",
        "mul_add" => "fma",
        "ln_1p" => "log1p",
        "exp_m1" => "expm1",
        m => m,
    }
}

pub(super) fn lower(cx: &mut Ctx, m: &syn::ExprMethodCall) -> Expr {
    let method = m.method.to_string();
    let name = builtin_name(&method);
    let b = builtins::lookup(name).filter(|_| RECEIVER_FIRST.contains(&name));
    let (Some(b), None) = (b, &m.turbofish) else {
        let form = if builtins::lookup(name).is_some() {
            format!("`T::{name}(..)`")
        } else {
            "the `T::` functions".to_string()
        };
        cx.err(
            range(&m.method),
            format!(
                "method `.{method}()` is not a tile function; use {form} (methods work for {})",
                RECEIVER_FIRST.join(", ")
            ),
        );
        return Expr::int(0);
    };
    let ident = syn::Ident::new(name, m.method.span());
    let mut args = syn::punctuated::Punctuated::new();
    args.push((*m.receiver).clone());
    args.extend(m.args.iter().cloned());
    let call = syn::ExprCall {
        attrs: Vec::new(),
        func: Box::new(syn::parse_quote_spanned!(m.method.span()=> T::#ident)),
        paren_token: m.paren_token,
        args,
    };
    let k = Call::new(b, &call);
    match b.lower {
        Lower::Value(lower) if builtins::check_arity(cx, &k) => lower(cx, &k),
        _ => Expr::int(0),
    }
}
