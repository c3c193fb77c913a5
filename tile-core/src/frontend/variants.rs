//! Variant spaces: `#[tile::kernel(block_m = [64, 128], threads = [128, 256], filter = ..,
//! default(..))]`.
//!
//! An attribute parameter whose value is a list of literals is a variant
//! parameter: the kernel is built once per combination of the listed values
//! (the first list's values vary slowest). `filter = <bool expression>` over
//! the attribute's parameters drops the combinations where it is false, before
//! anything is compiled. Variant 0 is the default: the first combination the
//! filter keeps, or the first kept one with the values that
//! `default(block_m = 128, threads = 256)` names (a parameter it does not
//! name may take any of its values; the others keep their order). A default
//! that names something other than a listed value of a variant parameter, or
//! that the filter drops, is an error at the attribute. A combination that passes the filter and still
//! cannot work (shared memory over the limit, say) is a compile error naming
//! the variant, so a variant space never silently shrinks.
//!
//! Each variant is a kernel of its own (`<kernel>__<param><value>_..`: its
//! own script, key and ahead-of-time artifacts).

use crate::diag::{range, Diagnostic};
use crate::ir::ConstVal;

/// The attribute keyword of the filter.
pub const FILTER: &str = "filter";

/// The attribute keyword of the marked default (`default(block_m = 128)`).
pub const DEFAULT: &str = "default";

/// One combination of a variant space.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// Its position among the valid combinations (0 is the default).
    pub index: usize,
    /// The value of each variant parameter, in the attribute's order.
    pub values: Vec<(String, ConstVal)>,
}

impl Variant {
    /// `block_m=64, threads=128`: how users name it (`tile inspect --variant`).
    pub fn label(&self) -> String {
        let parts: Vec<String> = self
            .values
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        parts.join(", ")
    }

    /// The suffix of the variant's kernel name: `block_m64_threads128`
    /// (`-` → `m`, `.` → `p`, so it stays an identifier).
    pub fn suffix(&self) -> String {
        let parts: Vec<String> = self
            .values
            .iter()
            .map(|(n, v)| {
                let v: String = v
                    .to_string()
                    .chars()
                    .map(|c| match c {
                        '-' => 'm',
                        '.' => 'p',
                        c if c.is_ascii_alphanumeric() => c,
                        _ => '_',
                    })
                    .collect();
                // A raw identifier (`r#match`) names the parameter `match`.
                format!("{}{v}", n.trim_start_matches("r#"))
            })
            .collect();
        parts.join("_")
    }

    /// Whether `spec` (`block_m=64,threads=128`, spaces optional; a subset of
    /// the parameters is enough) names this variant.
    pub fn matches(&self, spec: &str) -> bool {
        spec.split(',').filter(|s| !s.trim().is_empty()).all(|kv| {
            let Some((k, v)) = kv.split_once('=') else {
                return false;
            };
            self.values
                .iter()
                .any(|(n, val)| n == k.trim() && val.to_string() == v.trim())
        })
    }
}

/// A literal value of a variant list (`64`, `-1`, `0.5`, `true`).
pub(super) fn literal(e: &syn::Expr) -> Option<ConstVal> {
    match e {
        syn::Expr::Lit(l) => match &l.lit {
            syn::Lit::Int(i) => i.base10_parse::<i64>().ok().map(ConstVal::Int),
            syn::Lit::Float(f) => f.base10_parse::<f64>().ok().map(ConstVal::Float),
            syn::Lit::Bool(b) => Some(ConstVal::Bool(b.value)),
            _ => None,
        },
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => match literal(&u.expr)? {
            ConstVal::Int(v) => Some(ConstVal::Int(v.checked_neg()?)),
            ConstVal::Float(v) => Some(ConstVal::Float(-v)),
            ConstVal::Bool(_) => None,
        },
        syn::Expr::Group(g) => literal(&g.expr),
        syn::Expr::Paren(p) => literal(&p.expr),
        _ => None,
    }
}

/// A variant parameter: its name and listed values (with their expressions,
/// whose spans errors and the instances' attributes keep).
pub(super) struct Param {
    pub name: syn::Ident,
    pub values: Vec<(ConstVal, syn::Expr)>,
}

/// The valid combinations of `params` (`fixed` are the attribute's other
/// literal parameters, which the filter may read too), each with the
/// expressions of its values.
pub(super) fn combinations(
    params: &[Param],
    fixed: &[(String, ConstVal)],
    filter: Option<&syn::Expr>,
) -> Result<Vec<(Variant, Vec<syn::Expr>)>, Vec<Diagnostic>> {
    let mut out = Vec::new();
    let total: usize = params.iter().map(|p| p.values.len()).product();
    for n in 0..total {
        // Mixed radix, the first parameter slowest.
        let mut rest = n;
        let mut pick = vec![0; params.len()];
        for (k, p) in params.iter().enumerate().rev() {
            pick[k] = rest % p.values.len();
            rest /= p.values.len();
        }
        let values: Vec<(String, ConstVal)> = params
            .iter()
            .zip(&pick)
            .map(|(p, &i)| (p.name.to_string(), p.values[i].0.clone()))
            .collect();
        if let Some(f) = filter {
            let env = |name: &str| {
                values
                    .iter()
                    .chain(fixed)
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
            };
            match eval(f, &env) {
                Ok(ConstVal::Bool(true)) => {}
                Ok(ConstVal::Bool(false)) => continue,
                Ok(_) => {
                    return Err(vec![Diagnostic::new(
                        range(f),
                        "the filter is a condition (a `bool` expression over the attribute's parameters)",
                    )])
                }
                Err(d) => return Err(vec![d]),
            }
        }
        let exprs = params
            .iter()
            .zip(&pick)
            .map(|(p, &i)| p.values[i].1.clone())
            .collect();
        let index = out.len();
        out.push((Variant { index, values }, exprs));
    }
    if out.is_empty() {
        let at = filter
            .map(range)
            .unwrap_or_else(crate::diag::SpanRange::call_site);
        return Err(vec![Diagnostic::new(
            at,
            format!("the filter drops every one of the {total} combinations of the variant space"),
        )]);
    }
    Ok(out)
}

/// The values `default(..)` names (each a listed value of a variant
/// parameter), in its order.
pub(super) fn default_values(
    d: &syn::MetaList,
    params: &[Param],
    fixed: &[(String, ConstVal)],
) -> Result<Vec<(String, ConstVal)>, Vec<Diagnostic>> {
    let (args, bad) = super::attr::args(d.tokens.clone());
    let mut diags: Vec<Diagnostic> = bad.into_iter().map(|b| b.diag).collect();
    let names: Vec<String> = params.iter().map(|p| p.name.to_string()).collect();
    if args.is_empty() && diags.is_empty() {
        diags.push(Diagnostic::new(
            range(d),
            format!(
                "`default(..)` names the default's values: `default({} = ..)`",
                names[0]
            ),
        ));
    }
    let mut out: Vec<(String, ConstVal)> = Vec::new();
    for m in &args {
        let nv = match super::attr::name_value(m) {
            Ok(nv) => nv,
            Err(e) => {
                diags.push(e);
                continue;
            }
        };
        let Some(id) = nv.path.get_ident().map(|i| i.to_string()) else {
            diags.push(Diagnostic::new(
                range(&nv.path),
                "`default(..)` names variant parameters by their identifiers",
            ));
            continue;
        };
        let Some(p) = params.iter().find(|p| p.name == id) else {
            let why = match fixed.iter().any(|(n, _)| *n == id) {
                true => format!("`{id}` has one value, and `default(..)` picks"),
                false => {
                    format!("`{id}` is not a parameter of this attribute; `default(..)` picks")
                }
            };
            diags.push(Diagnostic::new(
                range(&nv.path),
                format!(
                    "{why} among the listed values of the variant parameters ({})",
                    names.join(", ")
                ),
            ));
            continue;
        };
        if out.iter().any(|(n, _)| *n == id) {
            diags.push(Diagnostic::new(
                range(&nv.path),
                format!("`{id}` is named twice in `default(..)`"),
            ));
            continue;
        }
        let listed: Vec<String> = p.values.iter().map(|(v, _)| v.to_string()).collect();
        match literal(&nv.value) {
            Some(v) if p.values.iter().any(|(w, _)| *w == v) => out.push((id, v)),
            Some(v) => diags.push(Diagnostic::new(
                range(&nv.value),
                format!(
                    "`{v}` is not listed for `{id}` (its values: {})",
                    listed.join(", ")
                ),
            )),
            None => diags.push(Diagnostic::new(
                range(&nv.value),
                format!(
                    "a default is one of the literals listed for `{id}` ({})",
                    listed.join(", ")
                ),
            )),
        }
    }
    match diags.is_empty() {
        true => Ok(out),
        false => Err(diags),
    }
}

/// Moves the default (the first combination with `values`) to the front and
/// renumbers; an error at `d` when the filter dropped every such combination.
pub(super) fn default_first(
    all: &mut Vec<(Variant, Vec<syn::Expr>)>,
    d: &syn::MetaList,
    values: &[(String, ConstVal)],
) -> Result<(), Diagnostic> {
    let has = |v: &Variant| {
        values
            .iter()
            .all(|(n, x)| v.values.iter().any(|(m, y)| m == n && y == x))
    };
    let Some(pos) = all.iter().position(|(v, _)| has(v)) else {
        let named: Vec<String> = values.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let every = all.first().map_or(0, |(v, _)| v.values.len());
        let what = match values.len() == every {
            true => format!("the default `{}`", named.join(", ")),
            false => format!("every combination with `{}`", named.join(", ")),
        };
        return Err(Diagnostic::new(
            range(d),
            format!("the filter drops {what}; mark a variant it keeps"),
        ));
    };
    let v = all.remove(pos);
    all.insert(0, v);
    for (i, (v, _)) in all.iter_mut().enumerate() {
        v.index = i;
    }
    Ok(())
}

/// The value of a filter expression: literals, the attribute's parameters,
/// arithmetic, comparisons, `&&`, `||`, `!`, parentheses.
fn eval(e: &syn::Expr, env: &dyn Fn(&str) -> Option<ConstVal>) -> Result<ConstVal, Diagnostic> {
    use syn::{BinOp, Expr, UnOp};
    use ConstVal::{Bool, Float, Int};
    let err = |msg: String| Diagnostic::new(range(e), msg);
    match e {
        Expr::Paren(p) => eval(&p.expr, env),
        Expr::Group(g) => eval(&g.expr, env),
        Expr::Lit(_) => {
            literal(e).ok_or_else(|| err("a filter reads integer, float and bool literals".into()))
        }
        Expr::Path(p) => {
            let Some(id) = p.path.get_ident() else {
                return Err(err("a filter names the attribute's parameters".into()));
            };
            env(&id.to_string()).ok_or_else(|| {
                err(format!(
                    "`{id}` is not a parameter of this attribute (a filter reads the attribute's literal parameters)"
                ))
            })
        }
        Expr::Unary(u) => match (&u.op, eval(&u.expr, env)?) {
            (UnOp::Not(_), Bool(b)) => Ok(Bool(!b)),
            (UnOp::Neg(_), Int(v)) => v
                .checked_neg()
                .map(Int)
                .ok_or_else(|| err("overflow".into())),
            (UnOp::Neg(_), Float(v)) => Ok(Float(-v)),
            _ => Err(err("this operator does not apply to this value".into())),
        },
        Expr::Binary(b) => {
            let (l, r) = (eval(&b.left, env)?, eval(&b.right, env)?);
            let cmp = |o: std::cmp::Ordering| -> Result<ConstVal, Diagnostic> {
                use std::cmp::Ordering::*;
                Ok(Bool(match b.op {
                    BinOp::Eq(_) => o == Equal,
                    BinOp::Ne(_) => o != Equal,
                    BinOp::Lt(_) => o == Less,
                    BinOp::Le(_) => o != Greater,
                    BinOp::Gt(_) => o == Greater,
                    BinOp::Ge(_) => o != Less,
                    _ => return Err(err("this operator does not apply to these values".into())),
                }))
            };
            match (l, r) {
                (Bool(x), Bool(y)) => match b.op {
                    BinOp::And(_) => Ok(Bool(x && y)),
                    BinOp::Or(_) => Ok(Bool(x || y)),
                    _ => cmp(x.cmp(&y)),
                },
                (Int(x), Int(y)) => {
                    let v = match b.op {
                        BinOp::Add(_) => x.checked_add(y),
                        BinOp::Sub(_) => x.checked_sub(y),
                        BinOp::Mul(_) => x.checked_mul(y),
                        BinOp::Div(_) => x.checked_div(y),
                        BinOp::Rem(_) => x.checked_rem(y),
                        _ => return cmp(x.cmp(&y)),
                    };
                    v.map(Int)
                        .ok_or_else(|| err("overflow or division by zero in the filter".into()))
                }
                (x, y) => {
                    let f = |v: &ConstVal| match v {
                        Int(i) => Some(*i as f64),
                        Float(f) => Some(*f),
                        Bool(_) => None,
                    };
                    let (Some(x), Some(y)) = (f(&x), f(&y)) else {
                        return Err(err("a bool and a number cannot be combined".into()));
                    };
                    match b.op {
                        BinOp::Add(_) => Ok(Float(x + y)),
                        BinOp::Sub(_) => Ok(Float(x - y)),
                        BinOp::Mul(_) => Ok(Float(x * y)),
                        BinOp::Div(_) => Ok(Float(x / y)),
                        _ => match x.partial_cmp(&y) {
                            Some(o) => cmp(o),
                            None => Err(err("NaN in the filter".into())),
                        },
                    }
                }
            }
        }
        _ => Err(err(
            "a filter is an expression of literals and the attribute's parameters \
             (arithmetic, comparisons, `&&`, `||`, `!`)"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str, vals: &[i64]) -> Param {
        Param {
            name: syn::Ident::new(name, proc_macro2::Span::call_site()),
            values: vals
                .iter()
                .map(|&v| (ConstVal::Int(v), syn::parse_quote!(#v)))
                .collect(),
        }
    }

    #[test]
    fn first_parameter_varies_slowest_and_the_filter_drops() {
        let ps = [param("bm", &[64, 128]), param("t", &[128, 256])];
        let all = combinations(&ps, &[], None).unwrap_or_else(|d| panic!("{}", d[0]));
        let labels: Vec<String> = all.iter().map(|(v, _)| v.label()).collect();
        assert_eq!(
            labels,
            [
                "bm=64, t=128",
                "bm=64, t=256",
                "bm=128, t=128",
                "bm=128, t=256"
            ]
        );
        let fixed = [("bk".to_string(), ConstVal::Int(64))];
        let f: syn::Expr = syn::parse_quote!(bm * bk <= 4096 || t == 256);
        let some = combinations(&ps, &fixed, Some(&f)).unwrap_or_else(|d| panic!("{}", d[0]));
        let labels: Vec<String> = some.iter().map(|(v, _)| v.label()).collect();
        assert_eq!(labels, ["bm=64, t=128", "bm=64, t=256", "bm=128, t=256"]);
        assert_eq!(some[2].0.index, 2);
        assert_eq!(some[2].0.suffix(), "bm128_t256");
        assert!(some[2].0.matches("bm=128,t=256") && some[2].0.matches(" t = 256"));
        assert!(!some[2].0.matches("bm=64"));
    }

    #[test]
    fn filter_mistakes_are_errors() {
        let ps = [param("bm", &[64, 128])];
        let bad: [syn::Expr; 4] = [
            syn::parse_quote!(bm <= nope),
            syn::parse_quote!(bm + 1),
            syn::parse_quote!(bm > 1000),
            syn::parse_quote!(bm / 0 == 1),
        ];
        let msgs: Vec<String> = bad
            .iter()
            .map(|f| match combinations(&ps, &[], Some(f)) {
                Ok(_) => panic!("accepted"),
                Err(d) => d[0].message.clone(),
            })
            .collect();
        assert!(msgs[0].contains("`nope` is not a parameter"), "{}", msgs[0]);
        assert!(msgs[1].contains("is a condition"), "{}", msgs[1]);
        assert!(msgs[2].contains("drops every one of the 2"), "{}", msgs[2]);
        assert!(msgs[3].contains("division by zero"), "{}", msgs[3]);
    }
}
