//! What a kernel sees besides its own tokens: the `const`s and the
//! `#[tile::func]` helpers of its module.
//!
//! A procedural macro sees only the item it is applied to, so the kernel's
//! module is read from its source file: by the macro (the file of the
//! attribute's call site), by build scripts and by `tile inspect`, the same
//! items, so all of them derive the same script and key. The rule, as Rust
//! scopes it: the `const` items and `#[tile::func]` functions declared in the
//! same module as the kernel (the file's top level, or the same inline
//! `mod`); not those of other modules or imported with `use`.
//!
//! - A `const NAME: dtype = expr;` (bool, integers, f32, f64) whose `expr` is
//!   a constant of the language (literals, operators, casts, `T::` math on
//!   constants, other such consts) is its value, inlined where the kernel
//!   names it; the macro checks that value against Rust's own with a
//!   `const` assertion, so the two can never differ. Any other const is an
//!   error where the kernel uses it.
//! - A `#[tile::func] fn f(x: f32, ..) -> f32 { let .. ; value }` is inlined
//!   at each call: its parameters are the arguments (of their declared
//!   dtypes), its body `let` bindings and a final value. Its own macro
//!   checks it where it is written (errors at its spans); an error found only
//!   when it is inlined is reported at the call.

use super::{expr, Ctx, Sym};
use crate::diag::{range, At};
use crate::ir::*;

/// The consts and helpers of a kernel's module.
#[derive(Debug, Clone, Default)]
pub struct Env {
    consts: Vec<syn::ItemConst>,
    funcs: Vec<syn::ItemFn>,
}

/// Whether an attribute is `#[tile::func]` or `#[func]`.
pub fn is_func_attr(a: &syn::Attribute) -> bool {
    let names: Vec<String> = a
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    matches!(names.as_slice(), [t, f] if t == "tile" && f == "func")
        || matches!(names.as_slice(), [f] if f == "func")
}

impl Env {
    /// The consts and helpers among one module's items (not nested modules').
    pub fn of_items(items: &[syn::Item]) -> Env {
        let mut env = Env::default();
        for it in items {
            match it {
                syn::Item::Const(c) => env.consts.push(c.clone()),
                syn::Item::Fn(f) if f.attrs.iter().any(is_func_attr) => env.funcs.push(f.clone()),
                _ => {}
            }
        }
        env
    }

    /// The env of the module that declares function `name` (the first such
    /// function, the file's top level first); empty when there is none.
    pub fn for_fn(file: &syn::File, name: &str) -> Env {
        fn find<'a>(items: &'a [syn::Item], name: &str) -> Option<&'a [syn::Item]> {
            let here = items
                .iter()
                .any(|it| matches!(it, syn::Item::Fn(f) if f.sig.ident == name));
            if here {
                return Some(items);
            }
            items.iter().find_map(|it| match it {
                syn::Item::Mod(m) => m.content.as_ref().and_then(|(_, v)| find(v, name)),
                _ => None,
            })
        }
        find(&file.items, name)
            .map(Env::of_items)
            .unwrap_or_default()
    }

    /// The env of function `name` in source text `text` (empty when the text
    /// does not parse).
    pub fn for_fn_in_source(text: &str, name: &str) -> Env {
        syn::parse_file(text)
            .map(|f| Env::for_fn(&f, name))
            .unwrap_or_default()
    }

    pub(super) fn helper(&self, name: &str) -> Option<&syn::ItemFn> {
        self.funcs.iter().find(|f| f.sig.ident == name)
    }

    fn konst(&self, name: &str) -> Option<&syn::ItemConst> {
        self.consts.iter().find(|c| c.ident == name)
    }
}

/// A const the kernel used: name, dtype and value (for the macro's check).
#[derive(Debug, Clone, PartialEq)]
pub struct UsedConst {
    pub name: String,
    pub dtype: DType,
    pub value: ConstVal,
}

/// The value of const `name` of the kernel's module, if there is one: its
/// value, or why the kernel cannot use it.
pub(super) fn const_value(cx: &mut Ctx, name: &str) -> Option<Result<Expr, String>> {
    if let Some(u) = cx.used_consts.iter().find(|u| u.name == name) {
        return Some(Ok(const_expr(&u.value, u.dtype)));
    }
    let c = cx.env.konst(name)?.clone();
    if cx.const_stack.iter().any(|n| n == name) {
        return Some(Err(format!("const `{name}` is defined in terms of itself")));
    }
    let Some(t) = expr::dtype_of_type(&c.ty)
        .filter(|t| t.is_int() || matches!(t, DType::Bool | DType::F32 | DType::F64))
    else {
        return Some(Err(format!(
            "const `{name}` has a type kernels cannot use; consts of bool, integer, f32 and f64 \
             types are inlined"
        )));
    };
    // Evaluated in the module's scope: no kernel names, only other consts.
    let scopes = std::mem::replace(&mut cx.scopes, vec![Default::default()]);
    let depth = std::mem::take(&mut cx.parallel_depth);
    let before = cx.diags.len();
    cx.const_stack.push(name.to_string());
    let mut e = (*c.expr).clone();
    typed_literals(&mut e, t);
    let v = expr::lower(cx, &e);
    cx.const_stack.pop();
    cx.scopes = scopes;
    cx.parallel_depth = depth;
    if cx.diags.len() > before {
        // The first reason, without the lists some messages append.
        let why = cx.diags[before].message.clone();
        let why = why.split(" (").next().unwrap_or_default().to_string();
        cx.diags.truncate(before);
        return Some(Err(format!(
            "const `{name}` cannot be evaluated by the kernel ({why}); a const a kernel uses is \
             computed from literals, operators, casts, `T::` math and other such consts"
        )));
    }
    let value = match (v.cast(t), t) {
        (Expr::Int(v, _), t) if expr::fits(v, t) => ConstVal::Int(v),
        (Expr::Float(v, _), t) => ConstVal::Float(crate::ir::fold::round_float(v, t)),
        (Expr::Bool(b), _) => ConstVal::Bool(b),
        _ => {
            return Some(Err(format!(
                "const `{name}`: the kernel can only inline a value computed from literals \
                 (and other such consts)"
            )))
        }
    };
    cx.used_consts.push(UsedConst {
        name: name.to_string(),
        dtype: t,
        value: value.clone(),
    });
    Some(Ok(const_expr(&value, t)))
}

/// Gives the unsuffixed literals of a const's value the const's type, as
/// Rust infers them (`const BIG: i64 = 1 << 40;` shifts an `i64`): through
/// operators, parentheses, blocks, `if` branches and call arguments, not
/// into casts, comparisons or shift amounts (typed on their own in Rust).
fn typed_literals(e: &mut syn::Expr, t: DType) {
    use syn::Expr as E;
    match e {
        E::Lit(l) => {
            let span = l.lit.span();
            match &l.lit {
                syn::Lit::Int(i) if i.suffix().is_empty() && t.is_int() => {
                    let text = format!("{}{}", i.base10_digits(), t.rust_name());
                    l.lit = syn::Lit::Int(syn::LitInt::new(&text, span));
                }
                syn::Lit::Int(i) if i.suffix().is_empty() && t.is_float() => {
                    let text = format!("{}.0{}", i.base10_digits(), t.rust_name());
                    l.lit = syn::Lit::Float(syn::LitFloat::new(&text, span));
                }
                syn::Lit::Float(f) if f.suffix().is_empty() && t.is_float() => {
                    let d = f.base10_digits();
                    let dot = if d.contains(['.', 'e', 'E']) {
                        ""
                    } else {
                        ".0"
                    };
                    let text = format!("{d}{dot}{}", t.rust_name());
                    l.lit = syn::Lit::Float(syn::LitFloat::new(&text, span));
                }
                _ => {}
            }
        }
        E::Binary(b) => {
            use syn::BinOp as B;
            if matches!(
                b.op,
                B::Lt(_)
                    | B::Le(_)
                    | B::Gt(_)
                    | B::Ge(_)
                    | B::Eq(_)
                    | B::Ne(_)
                    | B::And(_)
                    | B::Or(_)
            ) {
                return;
            }
            typed_literals(&mut b.left, t);
            if !matches!(b.op, B::Shl(_) | B::Shr(_)) {
                typed_literals(&mut b.right, t);
            }
        }
        E::Unary(u) => typed_literals(&mut u.expr, t),
        E::Paren(p) => typed_literals(&mut p.expr, t),
        E::Group(g) => typed_literals(&mut g.expr, t),
        E::Call(c) => c.args.iter_mut().for_each(|a| typed_literals(a, t)),
        _ => {}
    }
}

fn const_expr(v: &ConstVal, t: DType) -> Expr {
    match *v {
        ConstVal::Int(v) => Expr::Int(v, t),
        ConstVal::Float(v) => Expr::Float(v, t),
        ConstVal::Bool(b) => Expr::Bool(b),
    }
}

/// A call `f(args..)` of a `#[tile::func]` helper, inlined; `None` when `f`
/// is not one.
pub(super) fn call(cx: &mut Ctx, c: &syn::ExprCall) -> Option<Expr> {
    let syn::Expr::Path(p) = &*c.func else {
        return None;
    };
    let name = p.path.get_ident()?.to_string();
    let f = cx.env.helper(&name)?.clone();
    if cx.helper_stack.contains(&name) {
        cx.err(
            range(c),
            format!("`{name}` calls itself; helpers are inlined, so they cannot recurse"),
        );
        return Some(Expr::int(0));
    }
    let params = helper_params(cx, &f)?;
    if params.len() != c.args.len() {
        cx.err(
            range(c),
            format!(
                "`{name}` takes {} argument(s), got {}",
                params.len(),
                c.args.len()
            ),
        );
        return Some(Expr::int(0));
    }
    let mut args = Vec::new();
    for ((pname, t), a) in params.iter().zip(&c.args) {
        let v = expr::lower(cx, a);
        let what = format!("parameter `{pname}` of `{name}`");
        args.push((pname.clone(), coerce(cx, At::Expr(a), v, *t, &what)));
    }
    let before = cx.diags.len();
    let v = inline(cx, &f, args);
    // The helper's own macro reports its mistakes at its spans; what shows
    // only here (its tokens may not carry spans of this file) is shown at
    // the call.
    let at = range(c);
    for d in &mut cx.diags[before..] {
        d.span = at;
        d.message = format!("in `#[tile::func] {name}`: {}", d.message);
    }
    Some(v)
}

/// `v` as a value of the parameter's dtype: a constant adapts, anything else
/// must have it.
fn coerce(cx: &mut Ctx, at: At<'_>, v: Expr, t: DType, what: &str) -> Expr {
    let d = v.dtype();
    if d == t {
        return v;
    }
    let adapts = matches!(v, Expr::Int(..)) && t.is_int()
        || matches!(v, Expr::Int(..) | Expr::Float(..)) && t.is_float();
    if adapts {
        return v.cast(t);
    }
    cx.err(
        at,
        format!(
            "{what} is {}, got {d}; convert with `as {}`",
            t.rust_name(),
            t.rust_name()
        ),
    );
    v.cast(t)
}

/// The parameters of a helper (name, dtype); reports a signature the
/// language does not take.
fn helper_params(cx: &mut Ctx, f: &syn::ItemFn) -> Option<Vec<(String, DType)>> {
    let mut out = Vec::new();
    let mut ok = true;
    for input in &f.sig.inputs {
        let param = match input {
            syn::FnArg::Typed(pt) => match (&*pt.pat, expr::dtype_of_type(&pt.ty)) {
                (syn::Pat::Ident(pi), Some(t)) if pi.mutability.is_none() => {
                    Some((super::name_of(&pi.ident), t))
                }
                _ => None,
            },
            _ => None,
        };
        match param {
            Some(p) => out.push(p),
            None => {
                cx.err(
                    range(input),
                    "a `#[tile::func]` parameter is `name: dtype` (bool, an integer or a float type)",
                );
                ok = false;
            }
        }
    }
    if let Some(g) = f.sig.generics.params.first() {
        cx.err(
            range(g),
            "`#[tile::func]` helpers take no generic parameters",
        );
        ok = false;
    }
    ok.then_some(out)
}

/// The helper's value with its parameters bound to `args`: its body's `let`
/// bindings (each a named value), then its final value, converted to the
/// declared return dtype.
fn inline(cx: &mut Ctx, f: &syn::ItemFn, args: Vec<(String, Expr)>) -> Expr {
    let name = f.sig.ident.to_string();
    let ret = match &f.sig.output {
        syn::ReturnType::Type(_, ty) => expr::dtype_of_type(ty),
        syn::ReturnType::Default => None,
    };
    let Some(ret) = ret else {
        cx.err(
            range(&f.sig),
            format!("`#[tile::func] {name}` returns a value of a dtype (`-> f32`)"),
        );
        return Expr::int(0);
    };
    // A helper sees its parameters and the module's consts, not the caller's names.
    let scopes = std::mem::replace(&mut cx.scopes, vec![Default::default()]);
    cx.helper_stack.push(name.clone());
    for (p, v) in args {
        cx.bind(&p, Sym::Value(v));
    }
    let stmts = &f.block.stmts;
    let mut value = None;
    for (k, s) in stmts.iter().enumerate() {
        let last = k + 1 == stmts.len();
        match s {
            syn::Stmt::Local(l) => {
                let bound = match (&l.pat, &l.init) {
                    (syn::Pat::Ident(pi), Some(init)) if pi.mutability.is_none() => {
                        Some((&pi.ident, None, &init.expr))
                    }
                    (syn::Pat::Type(pt), Some(init)) => match &*pt.pat {
                        syn::Pat::Ident(pi) if pi.mutability.is_none() => {
                            Some((&pi.ident, expr::dtype_of_type(&pt.ty), &init.expr))
                        }
                        _ => None,
                    },
                    _ => None,
                };
                match bound {
                    Some((id, t, e)) => {
                        let mut v = expr::lower(cx, e);
                        if let Some(t) = t {
                            let what = format!("`{}`", super::name_of(id));
                            v = coerce(cx, At::Expr(e), v, t, &what);
                        }
                        cx.bind(&super::name_of(id), Sym::Value(v));
                    }
                    None => cx.err(
                        range(l),
                        "a `#[tile::func]` body binds values with `let name = value;` \
                         (no `let mut`: helpers compute a value, they do not store)",
                    ),
                }
            }
            syn::Stmt::Expr(e, None) if last => value = Some((e, expr::lower(cx, e))),
            other => cx.err(
                crate::diag::stmt_range(other),
                "a `#[tile::func]` body is `let` bindings and a final value (no stores, loops \
                 or statements)",
            ),
        }
    }
    cx.helper_stack.pop();
    cx.scopes = scopes;
    match value {
        Some((e, v)) => coerce(cx, At::Expr(e), v, ret, &format!("the value of `{name}`")),
        None => {
            cx.err(
                range(&f.block),
                format!("`#[tile::func] {name}` ends with its value (an expression without `;`)"),
            );
            Expr::Float(0.0, ret)
        }
    }
}

/// Checks a `#[tile::func]` helper on its own, as its macro does: its body
/// lowered with each parameter an unknown value of its dtype. The
/// diagnostics carry the helper's spans.
pub fn check_func(f: &syn::ItemFn, env: &Env) -> Vec<crate::diag::Diagnostic> {
    let mut cx = Ctx::new(super::name_of(&f.sig.ident), env.clone());
    cx.def_name(&f.sig.ident);
    if let Some(params) = helper_params(&mut cx, f) {
        let args = params
            .into_iter()
            .map(|(p, t)| {
                let v = cx.f.new_var(&p, t);
                (p, Expr::Var(v, t))
            })
            .collect();
        inline(&mut cx, f, args);
    }
    cx.diags
}

#[cfg(test)]
mod tests {
    use crate::frontend::parse_kernel_source;

    fn script(src: &str) -> Result<String, Vec<String>> {
        parse_kernel_source(src)
            .map(|d| d.func.script())
            .map_err(|d| d.into_iter().map(|x| x.message).collect())
    }

    const KERNEL: &str = r#"
        #[tile::kernel(threads = 32)]
        fn k(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>, d: TensorMut<i64, (N,)>) {
            T::kernel(1, threads, |bx| {
                c[0] = half_of(a[0]) * SCALE;
                d[0] = BIG + WIDE as i64;
            });
        }"#;

    #[test]
    fn consts_take_their_declared_types_and_helpers_are_inlined() {
        let src = format!(
            "const SCALE: f32 = 0.1;\nconst BIG: i64 = 1 << 40;\nconst WIDE: u8 = 200 + 100 - 60;\n\
             #[tile::func]\nfn half_of(x: f32) -> f32 {{ let h = 0.5; x * h }}\n{KERNEL}"
        );
        let s = script(&src).unwrap_or_else(|e| panic!("{e:?}"));
        // 0.1 rounded to f32, as Rust's `const SCALE: f32` holds it.
        assert!(
            s.contains(&format!("T.float32({:?})", 0.1f32 as f64)),
            "{s}"
        );
        // 2^40 + 240: `200 + 100 - 60` computed as u8 literals are (promoted).
        assert!(s.contains("d[0] = T.int64(1099511628016)"), "{s}");
        assert!(s.contains("((a[0] * T.float32(0.5)) * "), "{s}");
        let def = parse_kernel_source(&src).expect("parses");
        let names: Vec<&str> = def.consts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["SCALE", "BIG", "WIDE"]);
    }

    #[test]
    fn what_the_kernel_cannot_see_is_an_error_at_the_use() {
        let src = format!("const SCALE: &str = \"s\";\nconst BIG: i64 = f();\n{KERNEL}");
        let e = script(&src).expect_err("refused");
        assert!(
            e.iter()
                .any(|m| m.starts_with("const `SCALE` has a type kernels cannot use")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|m| m.starts_with("const `BIG` cannot be evaluated")),
            "{e:?}"
        );
        assert!(
            e.iter()
                .any(|m| m.starts_with("only `T::` functions and the `#[tile::func]`")),
            "{e:?}"
        );
        let cyclic = format!("const SCALE: f32 = SCALE2;\nconst SCALE2: f32 = SCALE;\n{KERNEL}");
        let e = script(&cyclic).expect_err("refused");
        assert!(
            e.iter()
                .any(|m| m.starts_with("const `SCALE` cannot be evaluated")),
            "{e:?}"
        );
    }

    #[test]
    fn a_helper_is_checked_on_its_own() {
        let f: syn::ItemFn = syn::parse_quote! {
            fn h(x: i32, y: f32) -> f32 { let mut z = 1.0; T::exp(x) }
        };
        let msgs: Vec<String> = super::check_func(&f, &Default::default())
            .into_iter()
            .map(|d| d.message)
            .collect();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        let rec: syn::File = syn::parse_quote! {
            #[tile::func]
            fn r(x: f32) -> f32 { r(x) }
        };
        let env = super::Env::of_items(&rec.items);
        let syn::Item::Fn(f) = &rec.items[0] else {
            unreachable!()
        };
        let msgs = super::check_func(f, &env);
        assert!(
            msgs[0].message.contains("cannot recurse"),
            "{}",
            msgs[0].message
        );
    }
}
