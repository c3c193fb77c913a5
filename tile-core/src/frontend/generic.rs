//! dtype-generic kernels: `#[tile::kernel(dtype = [f16, bf16], ..)]`.
//!
//! An attribute parameter whose value is a list of dtypes is a type
//! parameter of the kernel: the kernel is one instance per listed dtype, each
//! the function with the parameter's name replaced by that dtype (in the
//! signature and the body, as a generic's uses are) and named
//! `<kernel>_<dtype>`. Every instance is compiled, by the macro and by build
//! scripts alike, so each is built ahead of time; the macro gives them one
//! generic launcher whose element type must be one of the list.

use super::variants::{self, Variant};
use crate::diag::{range, Diagnostic};
use crate::ir::{ConstVal, DType};
use proc_macro2::{Group, TokenStream, TokenTree};
use quote::ToTokens;

/// One instance of a kernel: its attribute and function as the frontend
/// reads them, the dtype it was made for (`None` for a kernel with no
/// type parameter) and the variant it is (`None` for a kernel with no
/// variant space, see `frontend::variants`). A kernel with neither is its own
/// only instance.
pub struct Instance {
    pub dtype: Option<DType>,
    pub variant: Option<Variant>,
    pub attr: TokenStream,
    pub item: syn::ItemFn,
}

/// The instances of a kernel (its attribute arguments and function): one per
/// dtype of its type parameter and valid combination of its variant
/// parameters (dtype outermost), or the kernel itself.
pub fn instances(attr: TokenStream, item: &syn::ItemFn) -> Result<Vec<Instance>, Vec<Diagnostic>> {
    let one = || {
        Ok(vec![Instance {
            dtype: None,
            variant: None,
            attr: attr.clone(),
            item: item.clone(),
        }])
    };
    let (args, bad) = super::attr::args(attr.clone());
    let mut param = None;
    let mut rest = Vec::new();
    let mut fixed = Vec::new();
    let mut varying: Vec<variants::Param> = Vec::new();
    let mut filter = None;
    let mut default: Option<syn::MetaList> = None;
    let mut diags: Vec<Diagnostic> = bad.into_iter().map(|b| b.diag).collect();
    for m in args {
        if let syn::Meta::List(l) = &m {
            if l.path.is_ident(variants::DEFAULT) {
                match default {
                    None => default = Some(l.clone()),
                    Some(_) => {
                        diags.push(Diagnostic::new(range(&m), "a kernel has one `default(..)`"))
                    }
                }
                continue;
            }
        }
        let nv = match super::attr::name_value(&m) {
            Ok(nv) => nv,
            Err(d) => {
                diags.push(d);
                continue;
            }
        };
        if nv.path.is_ident(variants::DEFAULT) {
            diags.push(Diagnostic::new(
                range(&nv.path),
                "`default` marks the default variant of a variant space, written \
                 `default(block_m = 128, threads = 256)`",
            ));
            continue;
        }
        if nv.path.is_ident(variants::FILTER) {
            match filter {
                None => filter = Some(nv.value.clone()),
                Some(_) => diags.push(Diagnostic::new(range(&nv), "a kernel has one `filter`")),
            }
            continue;
        }
        let syn::Expr::Array(list) = &nv.value else {
            if let (Some(id), Some(v)) = (nv.path.get_ident(), variants::literal(&nv.value)) {
                fixed.push((id.to_string(), v));
            }
            rest.push(nv.to_token_stream());
            continue;
        };
        // A list of literals is a variant parameter; a list of dtypes, the type parameter.
        if list
            .elems
            .first()
            .is_some_and(|e| variants::literal(e).is_some())
        {
            let Some(id) = nv.path.get_ident() else {
                diags.push(Diagnostic::new(
                    range(&nv.path),
                    "a variant parameter is named by an identifier (`block_m = [64, 128]`)",
                ));
                continue;
            };
            let mut values: Vec<(ConstVal, syn::Expr)> = Vec::new();
            for e in &list.elems {
                match variants::literal(e) {
                    Some(v) if !values.iter().any(|(w, _)| *w == v) => values.push((v, e.clone())),
                    Some(_) => diags.push(Diagnostic::new(range(e), "this value is listed twice")),
                    None => diags.push(Diagnostic::new(
                        range(e),
                        "a variant parameter lists literals (integers, floats or bools), all of one kind",
                    )),
                }
            }
            let kinds = values.iter().map(|(v, _)| std::mem::discriminant(v));
            if kinds.clone().any(|k| Some(k) != kinds.clone().next()) {
                diags.push(Diagnostic::new(
                    range(list),
                    "a variant parameter lists values of one kind (integers, floats or bools)",
                ));
            }
            varying.push(variants::Param {
                name: id.clone(),
                values,
            });
            continue;
        }
        let mut dtypes = Vec::new();
        for e in &list.elems {
            match super::expr::dtype_of_name(e) {
                Some(t) if !dtypes.contains(&t) => dtypes.push(t),
                Some(_) => diags.push(Diagnostic::new(range(e), "this dtype is listed twice")),
                None => diags.push(Diagnostic::new(
                    range(e),
                    "a type parameter lists dtypes: bool, i8, u8, i16, u16, i32, u32, i64, u64, \
                     f16, bf16, f32, f64 (a variant parameter lists literals: `block_m = [64, 128]`)",
                )),
            }
        }
        if dtypes.is_empty() && diags.is_empty() {
            diags.push(Diagnostic::new(
                range(list),
                "list at least one dtype or value",
            ));
        }
        match (&param, nv.path.get_ident()) {
            (None, Some(id)) => param = Some((id.clone(), dtypes)),
            (Some(_), _) => diags.push(Diagnostic::new(
                range(&nv),
                "a kernel has at most one type parameter",
            )),
            (None, None) => diags.push(Diagnostic::new(
                range(&nv.path),
                "a type parameter is named by an identifier (`dtype = [f16, bf16]`)",
            )),
        }
    }
    if let (Some(f), true) = (&filter, varying.is_empty()) {
        diags.push(Diagnostic::new(
            range(f),
            "`filter` selects among the variants of a variant space, and this kernel lists no values \
             (`block_m = [64, 128]`)",
        ));
    }
    let marked = match (&default, varying.is_empty()) {
        (None, _) => None,
        (Some(d), true) => {
            diags.push(Diagnostic::new(
                range(d),
                "`default(..)` marks the default variant of a variant space, and this kernel \
                 lists no values (`block_m = [64, 128]`)",
            ));
            None
        }
        (Some(d), false) => match variants::default_values(d, &varying, &fixed) {
            Ok(v) => Some((d, v)),
            Err(mut e) => {
                diags.append(&mut e);
                None
            }
        },
    };
    if !diags.is_empty() {
        return Err(diags);
    }
    let combos = match varying.is_empty() {
        true => vec![None],
        false => {
            let mut all = variants::combinations(&varying, &fixed, filter.as_ref())?;
            if let Some((d, values)) = &marked {
                variants::default_first(&mut all, d, values).map_err(|d| vec![d])?;
            }
            all.into_iter().map(Some).collect()
        }
    };
    let dtypes: Vec<Option<(syn::Ident, DType)>> = match param {
        None => vec![None],
        Some((name, dtypes)) => dtypes
            .into_iter()
            .map(|t| Some((name.clone(), t)))
            .collect(),
    };
    if combos == [None] && dtypes == [None] {
        return one();
    }
    let mut out = Vec::new();
    for t in &dtypes {
        let mut base = item.clone();
        if let Some((name, t)) = t {
            let id = syn::Ident::new(t.rust_name(), name.span());
            let tokens = replace_ident(base.to_token_stream(), name, &id);
            if let Ok(mut f) = syn::parse2::<syn::ItemFn>(tokens) {
                f.sig.ident = quote::format_ident!("{}_{}", item.sig.ident, t.rust_name());
                base = f;
            }
        }
        for c in &combos {
            let mut item = base.clone();
            let mut attr = rest.clone();
            if let Some((v, exprs)) = c {
                item.sig.ident = quote::format_ident!("{}__{}", base.sig.ident, v.suffix());
                for (p, e) in varying.iter().zip(exprs) {
                    let n = &p.name;
                    attr.push(quote::quote!(#n = #e));
                }
            }
            out.push(Instance {
                dtype: t.as_ref().map(|(_, t)| *t),
                variant: c.as_ref().map(|(v, _)| v.clone()),
                attr: quote::quote!(#(#attr),*),
                item,
            });
        }
    }
    Ok(out)
}

/// `tokens` with every identifier `from` replaced by `to` (keeping the
/// original's span, so errors point at the user's code).
fn replace_ident(tokens: TokenStream, from: &syn::Ident, to: &syn::Ident) -> TokenStream {
    tokens
        .into_iter()
        .map(|t| match t {
            TokenTree::Ident(i) if i == *from => {
                let mut n = to.clone();
                n.set_span(i.span());
                TokenTree::Ident(n)
            }
            TokenTree::Group(g) => {
                let mut n = Group::new(g.delimiter(), replace_ident(g.stream(), from, to));
                n.set_span(g.span());
                TokenTree::Group(n)
            }
            t => t,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_instance_per_listed_dtype() {
        let item: syn::ItemFn = syn::parse_quote! {
            fn copy_k(a: Tensor<dtype, (N,)>, c: TensorMut<dtype, (N,)>) {
                T::kernel(1, threads, |bx| { c[0] = a[0] + (1 as dtype); });
            }
        };
        let attr = quote::quote!(threads = 32, dtype = [f16, f32]);
        let v = instances(attr, &item).unwrap_or_else(|d| panic!("{}", d[0]));
        let names: Vec<String> = v.iter().map(|i| i.item.sig.ident.to_string()).collect();
        assert_eq!(names, ["copy_k_f16", "copy_k_f32"]);
        assert_eq!(v[0].attr.to_string(), "threads = 32");
        let body = v[1].item.to_token_stream().to_string();
        assert!(
            body.contains("Tensor < f32") && body.contains("as f32"),
            "{body}"
        );
        let bad = instances(quote::quote!(dtype = [f16, f17]), &item);
        assert!(bad.is_err());
    }

    #[test]
    fn dtypes_times_variants_dtype_outermost() {
        let item: syn::ItemFn = syn::parse_quote! {
            fn k(a: Tensor<dtype, (N,)>, c: TensorMut<dtype, (N,)>) {
                T::kernel(1, threads, |bx| { c[0] = a[0]; });
            }
        };
        let attr = quote::quote!(
            dtype = [f16, f32],
            bn = [64, 128],
            threads = [32, 64],
            filter = bn >= 2 * threads
        );
        let v = instances(attr, &item).unwrap_or_else(|d| panic!("{}", d[0]));
        let names: Vec<String> = v.iter().map(|i| i.item.sig.ident.to_string()).collect();
        assert_eq!(
            names,
            [
                "k_f16__bn64_threads32",
                "k_f16__bn128_threads32",
                "k_f16__bn128_threads64",
                "k_f32__bn64_threads32",
                "k_f32__bn128_threads32",
                "k_f32__bn128_threads64",
            ]
        );
        assert_eq!(v[2].attr.to_string(), "bn = 128 , threads = 64");
        assert_eq!(v[5].variant.as_ref().map(|x| x.index), Some(2));
        assert!(instances(quote::quote!(bn = [64, f16]), &item).is_err());
    }

    #[test]
    fn a_marked_default_comes_first() {
        let item: syn::ItemFn = syn::parse_quote! {
            fn k(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
                T::kernel(1, threads, |bx| { c[0] = a[0]; });
            }
        };
        let names = |attr| -> Vec<String> {
            let v = instances(attr, &item).unwrap_or_else(|d| panic!("{}", d[0]));
            for (i, x) in v.iter().enumerate() {
                assert_eq!(x.variant.as_ref().map(|x| x.index), Some(i));
            }
            v.iter().map(|i| i.item.sig.ident.to_string()).collect()
        };
        let all = names(quote::quote!(
            bn = [64, 128],
            threads = [32, 64],
            default(bn = 128, threads = 64)
        ));
        assert_eq!(
            all,
            [
                "k__bn128_threads64",
                "k__bn64_threads32",
                "k__bn64_threads64",
                "k__bn128_threads32"
            ]
        );
        // Naming some parameters: the first kept combination with those values.
        let some = names(quote::quote!(
            bn = [64, 128],
            threads = [32, 64],
            filter = bn * threads > 2048,
            default(threads = 64)
        ));
        assert_eq!(
            some,
            [
                "k__bn64_threads64",
                "k__bn128_threads32",
                "k__bn128_threads64"
            ]
        );
    }
}
