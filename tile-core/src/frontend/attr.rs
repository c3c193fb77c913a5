//! The arguments of a kernel attribute, one at a time.
//!
//! `#[tile::kernel(block_m = [64, 128], threads = 128, filter = .., default(..))]`
//! is split at its top-level commas and each argument is parsed on its own
//! (as a `syn::Meta`: `name = value`, `name(..)` or a bare `name`). A mistake
//! in one argument is reported inside that argument, and the others are still
//! read, so a bad filter does not also make every parameter "unknown" in the
//! body. An argument that ends too early (`filter = 3 +`, `filter = for <
//! threads`) is reported at its last token: syn reports the end of its input
//! at the input's scope, which is made the argument's last token here (the
//! argument is parsed as the contents of a group spanned there), never a
//! position outside the attribute.

use crate::diag::{range, Diagnostic};
use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};

/// An argument that does not parse: the name it starts with, if any (so that
/// the frontend can keep quiet about that name's uses), and the error.
pub(super) struct Bad {
    pub name: Option<syn::Ident>,
    pub diag: Diagnostic,
}

/// The arguments of `attr` (an attribute's tokens, or those of a `name(..)`
/// argument), in order, and those that do not parse.
pub(super) fn args(attr: TokenStream) -> (Vec<syn::Meta>, Vec<Bad>) {
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    let mut piece: Vec<TokenTree> = Vec::new();
    let mut pieces: Vec<(Vec<TokenTree>, Option<Span>)> = Vec::new();
    for t in attr {
        match &t {
            TokenTree::Punct(p) if p.as_char() == ',' => {
                pieces.push((std::mem::take(&mut piece), Some(p.span())));
            }
            _ => piece.push(t),
        }
    }
    if !piece.is_empty() {
        pieces.push((piece, None));
    }
    for (tokens, comma) in pieces {
        if tokens.is_empty() {
            // `a = 1,, b = 2` or a leading comma.
            let at = comma.unwrap_or_else(Span::call_site);
            bad.push(Bad {
                name: None,
                diag: Diagnostic::new(
                    at,
                    "expected an argument (`name = value`) before this comma",
                ),
            });
            continue;
        }
        match parse_one(&tokens) {
            Ok(m) => good.push(m),
            Err(e) => {
                let name = match tokens.first() {
                    Some(TokenTree::Ident(i)) => Some(i.clone()),
                    _ => None,
                };
                let what = match name.as_ref().map(|n| n.to_string()) {
                    Some(n) if n == super::variants::FILTER => {
                        "`filter = ..` is a condition over the attribute's parameters \
                         (arithmetic, comparisons, `&&`, `||`, `!`)"
                    }
                    Some(n) if n == super::variants::DEFAULT => {
                        "`default(..)` names a value of each variant parameter it sets \
                         (`default(block_m = 128, threads = 256)`)"
                    }
                    _ => {
                        "expected compile-time parameters as `name = literal, ...` \
                         (e.g. `#[tile::kernel(block_n = 256, threads = 128)]`)"
                    }
                };
                bad.push(Bad {
                    name,
                    diag: Diagnostic::new(e.span(), format!("{what}: {e}")),
                });
            }
        }
    }
    (good, bad)
}

/// One argument: its tokens are parsed as the contents of a group spanned at
/// the last token, so that "unexpected end of input" (and any other error at
/// the end) is reported there.
fn parse_one(tokens: &[TokenTree]) -> syn::Result<syn::Meta> {
    use syn::parse::Parser;
    let last = tokens.last().map_or_else(Span::call_site, |t| t.span());
    let mut g = Group::new(Delimiter::Parenthesis, tokens.iter().cloned().collect());
    g.set_span(last);
    let parser = |input: syn::parse::ParseStream| {
        let content;
        syn::parenthesized!(content in input);
        let m: syn::Meta = content.parse()?;
        if !content.is_empty() {
            return Err(content.error("expected `,` between the attribute's arguments"));
        }
        Ok(m)
    };
    parser.parse2(TokenStream::from(TokenTree::Group(g)))
}

/// The `name = value` of an argument, or an error at it (`name` alone, or
/// `name(..)` where a value is expected).
pub(super) fn name_value(m: &syn::Meta) -> Result<&syn::MetaNameValue, Diagnostic> {
    match m {
        syn::Meta::NameValue(nv) => Ok(nv),
        syn::Meta::Path(p) => Err(Diagnostic::new(
            range(p),
            "expected `= value` after this name (`block_n = 256`, `filter = ..`)",
        )),
        syn::Meta::List(l) => Err(Diagnostic::new(
            range(l),
            format!(
                "expected `name = value` (`block_n = 256`){}",
                match l.path.is_ident(super::variants::DEFAULT) {
                    true => "; `default(..)` marks the default of a variant space",
                    false => "",
                }
            ),
        )),
    }
}

/// The identifier an argument starts with.
pub(super) fn name_of(m: &syn::Meta) -> Option<&syn::Ident> {
    m.path().get_ident()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(attr: TokenStream) -> Vec<String> {
        args(attr).1.into_iter().map(|b| b.diag.message).collect()
    }

    #[test]
    fn each_argument_on_its_own() {
        let (good, bad) = args(quote::quote!(
            a = 1,
            b = [1, 2],
            filter = a < b,
            default(b = 2),
        ));
        assert!(bad.is_empty());
        assert_eq!(good.len(), 4);
        assert!(matches!(&good[3], syn::Meta::List(l) if l.path.is_ident("default")));
        let m = messages(quote::quote!(a = 1, filter = for < threads, b = 2));
        assert_eq!(m.len(), 1);
        assert!(m[0].starts_with("`filter = ..` is a condition"), "{m:?}");
        let m = messages(quote::quote!(a = 1,, filter = 3 +, b = 2 c = 3));
        assert_eq!(m.len(), 3, "{m:?}");
        assert!(m[0].contains("before this comma"), "{m:?}");
        assert!(m[1].contains("end of input"), "{m:?}");
        assert!(m[2].contains("expected `,`"), "{m:?}");
        let (_, bad) = args(quote::quote!(filter = ));
        assert_eq!(
            bad[0].name.as_ref().map(|n| n.to_string()),
            Some("filter".into())
        );
    }
}
