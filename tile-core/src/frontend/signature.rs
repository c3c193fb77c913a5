//! The kernel's signature: the attribute's compile-time parameters and the
//! parameters' tensor types, which fix the dtypes, the static dims and the
//! dynamic dims that the launcher binds.

use super::{limits, Ctx, ParamDef, Sym};
use crate::diag::{range, At};
use crate::ir::*;
use proc_macro2::TokenStream;

pub(super) fn parse_attr(cx: &mut Ctx, attr: TokenStream) {
    // Each argument on its own: a mistake in one is reported there (its last
    // token when it ends too early), and the others are still bound.
    let (args, bad) = super::attr::args(attr);
    for b in bad {
        if let Some(n) = &b.name {
            let name = cx.def_name(n);
            cx.bind(&name, Sym::Poison);
        }
        cx.diags.push(b.diag);
    }
    let args: Vec<syn::MetaNameValue> = args
        .into_iter()
        .filter_map(|m| match super::attr::name_value(&m) {
            Ok(nv) => Some(nv.clone()),
            Err(d) => {
                if let Some(n) = super::attr::name_of(&m) {
                    let name = cx.def_name(n);
                    cx.bind(&name, Sym::Poison);
                }
                cx.diags.push(d);
                None
            }
        })
        .collect();
    for nv in args {
        let Some(name) = nv.path.get_ident().map(|i| cx.def_name(i)) else {
            cx.err(
                range(&nv.path),
                "compile-time parameter names are plain identifiers",
            );
            continue;
        };
        if name == "target" {
            match &nv.value {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) if s.value() == "cuda" => {
                    cx.f.cuda_only = true;
                }
                v => cx.err(range(v), "`target` is \"cuda\" (build this kernel for CUDA only); by default kernels are built for CUDA and the CPU"),
            }
            continue;
        }
        let val = match literal_value(&nv.value) {
            Some(v) => v,
            None => {
                cx.bind(&name, Sym::Poison);
                cx.err(
                    range(&nv.value),
                    format!(
                        "compile-time parameter `{name}` must be a literal (integer, float or bool); \
                         it is fixed when the kernel is compiled"
                    ),
                );
                continue;
            }
        };
        if cx.lookup(&name).is_some() {
            cx.err(
                range(&nv.path),
                format!("compile-time parameter `{name}` is given twice"),
            );
            continue;
        }
        cx.f.consts.push((name.clone(), val.clone()));
        cx.bind(&name, Sym::Const(val));
    }
}

fn literal_value(e: &syn::Expr) -> Option<ConstVal> {
    match e {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => i.base10_parse::<i64>().ok().map(ConstVal::Int),
            syn::Lit::Float(f) => f.base10_parse::<f64>().ok().map(ConstVal::Float),
            syn::Lit::Bool(b) => Some(ConstVal::Bool(b.value)),
            _ => None,
        },
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => match literal_value(&u.expr)? {
            ConstVal::Int(v) => Some(ConstVal::Int(-v)),
            ConstVal::Float(v) => Some(ConstVal::Float(-v)),
            ConstVal::Bool(_) => None,
        },
        syn::Expr::Group(g) => literal_value(&g.expr),
        _ => None,
    }
}

pub(super) fn parse_signature(cx: &mut Ctx, sig: &syn::Signature) -> Vec<ParamDef> {
    if let Some(g) = sig.generics.params.first() {
        cx.err(
            range(&g),
            "kernels take no generic parameters; use compile-time parameters in the attribute",
        );
    }
    if let syn::ReturnType::Type(_, ty) = &sig.output {
        cx.err(
            range(&ty),
            "kernels return nothing; write results into a `TensorMut` parameter",
        );
    }
    if let Some(a) = &sig.asyncness {
        cx.err(range(&a), "kernels cannot be `async`");
    }
    let mut out = Vec::new();
    for input in &sig.inputs {
        let syn::FnArg::Typed(pt) = input else {
            cx.err(
                range(&input),
                "kernels are free functions; `self` is not allowed",
            );
            continue;
        };
        let syn::Pat::Ident(pi) = &*pt.pat else {
            cx.err(range(&pt.pat), "kernel parameters are plain names");
            continue;
        };
        let name = pi.ident.clone();
        match param_type(cx, &pt.ty, &name) {
            Some(p) => out.push(p),
            // Reported once: the body's uses of the name stay quiet.
            None if cx.lookup(&super::name_of(&name)).is_none() => {
                cx.bind(&super::name_of(&name), Sym::Poison)
            }
            None => {}
        }
    }
    // An output's dynamic dims come from the inputs: the launcher needs them
    // to allocate it before anything runs.
    let params = cx.f.params.clone();
    let bufs: Vec<&ParamDef> = out.iter().filter(|p| !p.scalar).collect();
    for (k, pd) in bufs.iter().enumerate().filter(|(_, p)| p.alloc) {
        let Some(&b) = params.get(k) else { continue };
        for d in cx.f.buf(b).shape.clone() {
            let Expr::Var(v, _) = d else { continue };
            let bound = bufs.iter().zip(&params).any(|(q, &qb)| {
                !q.alloc
                    && cx
                        .f
                        .buf(qb)
                        .shape
                        .iter()
                        .any(|e| matches!(e, Expr::Var(x, _) if *x == v))
            });
            if !bound {
                let dn = cx.f.var(v).name.clone();
                cx.err(
                    pd.ty_span,
                    format!(
                        "output `{}` has dim `{dn}`, which no input carries; the launcher allocates \
                         outputs from the inputs' shapes (make `{dn}` a compile-time parameter or pass \
                         the buffer as `TensorMut`)",
                        pd.name
                    ),
                );
            }
        }
    }
    out
}

/// `Tensor<f16, (M, K)>` / `TensorMut<f32, (N,)>`.
fn param_type(cx: &mut Ctx, ty: &syn::Type, name: &syn::Ident) -> Option<ParamDef> {
    let usage = "kernel parameters are `Tensor<dtype, (D0, D1, ..)>` (read), \
                 `TensorMut<dtype, (D0, ..)>` (written) or `Output<dtype, (D0, ..)>` (allocated \
                 by the launcher and returned); a dim is a compile-time parameter or a name for \
                 a dynamic dim";
    let syn::Type::Path(tp) = ty else {
        cx.err(range(&ty), usage);
        return None;
    };
    let Some(seg) = tp.path.segments.last() else {
        cx.err(range(&ty), usage);
        return None;
    };
    let kind = seg.ident.to_string();
    if let Some(dtype) = tp
        .path
        .get_ident()
        .and_then(|i| DType::from_rust_name(&i.to_string()))
    {
        return scalar_param(cx, ty, name, dtype);
    }
    let mutable = match kind.as_str() {
        "Tensor" => false,
        "TensorMut" | "Output" => true,
        _ => {
            cx.err(
                range(&ty),
                format!(
                    "unsupported parameter type: {usage}, or a scalar passed by value (`temp: f32`; \
                     bool, i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64)"
                ),
            );
            return None;
        }
    };
    let syn::PathArguments::AngleBracketed(ab) = &seg.arguments else {
        cx.err(range(&ty), usage);
        return None;
    };
    let args: Vec<_> = ab.args.iter().collect();
    if args.len() != 2 {
        cx.err(range(&ab), usage);
        return None;
    }
    let dtype = match args[0] {
        syn::GenericArgument::Type(syn::Type::Path(p)) => p
            .path
            .get_ident()
            .and_then(|i| DType::from_rust_name(&i.to_string())),
        _ => None,
    };
    let Some(dtype) = dtype else {
        cx.err(
            range(&args[0]),
            "unknown element type; expected one of bool, i8, u8, i16, u16, i32, u32, i64, u64, \
             f16, bf16, f32, f64, f8e4m3, f8e5m2",
        );
        return None;
    };
    if dtype.is_packed() {
        cx.err(range(&args[0]), packed_param(dtype));
        return None;
    }
    let dims: Vec<&syn::Type> = match args[1] {
        syn::GenericArgument::Type(syn::Type::Tuple(t)) => t.elems.iter().collect(),
        syn::GenericArgument::Type(syn::Type::Paren(p)) => vec![&*p.elem],
        other => {
            cx.err(
                range(&other),
                "the shape is a tuple of dims, e.g. `(M, K)` or `(N,)`",
            );
            return None;
        }
    };
    if dims.is_empty() {
        cx.err(range(&args[1]), "tensors have at least one dim");
        return None;
    }
    let mut shape = Vec::new();
    for d in dims {
        let ident = match d {
            syn::Type::Path(p) => p.path.get_ident().cloned(),
            _ => None,
        };
        let Some(ident) = ident else {
            cx.err(
                range(&d),
                "a dim is a compile-time parameter name or a dynamic dim name",
            );
            return None;
        };
        let dname = cx.def_name(&ident);
        match cx.lookup(&dname) {
            Some(Sym::Const(ConstVal::Int(v))) if v > 0 => {
                if !limits::index_fits(cx, At::Node(&d), v, &format!("dim `{dname}` =")) {
                    return None;
                }
                shape.push(Expr::int(v))
            }
            Some(Sym::Const(_)) => {
                cx.err(
                    range(&d),
                    format!("dim `{dname}` must be a positive integer"),
                );
                return None;
            }
            Some(Sym::Var(v)) if cx.f.scalars.contains(&v) => {
                cx.err(
                    range(&d),
                    format!(
                        "`{dname}` is a scalar parameter; a dim is a compile-time parameter or a \
                         dynamic dim name (a dynamic dim is bound from the tensors' shapes)"
                    ),
                );
                return None;
            }
            Some(Sym::Var(v)) => shape.push(Expr::Var(v, DType::I32)),
            Some(Sym::Poison) => shape.push(Expr::int(1)),
            _ => {
                let v = cx.f.new_var(&dname, DType::I32);
                cx.f.dims.push(v);
                cx.bind(&dname, Sym::Var(v));
                shape.push(Expr::Var(v, DType::I32));
            }
        }
    }
    let statics: Vec<i64> = shape.iter().filter_map(Expr::as_int).collect();
    if limits::product_within(&statics, limits::MAX_INDEX).is_none() {
        cx.err(
            range(&args[1]),
            format!(
                "the static dims {statics:?} hold more than {} elements, the most 32-bit indices \
                 reach",
                limits::MAX_INDEX
            ),
        );
        return None;
    }
    let pname = cx.def_name(name);
    if cx.lookup(&pname).is_some() {
        cx.err(
            range(&name),
            format!("`{pname}` is already a compile-time parameter or dim name"),
        );
        return None;
    }
    let b = cx.f.new_buf(Buffer {
        layout: None,
        name: pname.clone(),
        dtype,
        shape,
        scope: Scope::Global,
        mutable,
    });
    cx.f.params.push(b);
    cx.bind(&pname, Sym::Buf(b));
    Some(ParamDef {
        name: name.clone(),
        dtype,
        mutable,
        ty_span: range(&ty),
        alloc: kind == "Output",
        scalar: false,
    })
}

/// `temp: f32`: a value the launcher passes by value, a variable of its dtype
/// in the body (read-only, like an immutable `let`).
fn scalar_param(cx: &mut Ctx, ty: &syn::Type, name: &syn::Ident, dtype: DType) -> Option<ParamDef> {
    if dtype.is_packed() {
        cx.err(range(&ty), packed_param(dtype));
        return None;
    }
    if matches!(dtype, DType::F8E4M3 | DType::F8E5M2) {
        cx.err(
            range(&ty),
            "f8 scalars are not supported; pass an f32 (or f16) and convert it with `as` where \
             an f8 value is needed",
        );
        return None;
    }
    let pname = cx.def_name(name);
    if cx.lookup(&pname).is_some() {
        cx.err(
            range(&name),
            format!("`{pname}` is already a compile-time parameter or dim name"),
        );
        return None;
    }
    let v = cx.f.new_var(&pname, dtype);
    cx.f.scalars.push(v);
    cx.bind(&pname, Sym::Var(v));
    Some(ParamDef {
        name: name.clone(),
        dtype,
        mutable: false,
        ty_span: range(&ty),
        alloc: false,
        scalar: true,
    })
}

/// Why a packed pair cannot be a parameter's dtype.
fn packed_param(t: DType) -> String {
    format!(
        "`{}` is a value inside a kernel (two {} in a register), not a parameter's dtype; pass \
         {} values (or their bits as `u32`) and pack them with `T::pack2` (or `T::bitcast`)",
        t.rust_name(),
        t.lane().rust_name(),
        t.lane().rust_name()
    )
}
