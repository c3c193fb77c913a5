//! Diagnostics: a message over a range of source tokens. The macro turns each
//! into a `compile_error!` underlining that range; build scripts and `tile
//! inspect` print them with their position.

use proc_macro2::Span;
use quote::ToTokens;

/// The first and last token of a piece of syntax. On stable Rust a span of
/// several tokens cannot be joined, so the range keeps both ends (as
/// `syn::Error::new_spanned` does) and the compiler underlines from one to
/// the other.
#[derive(Debug, Clone, Copy)]
pub struct SpanRange {
    pub start: Span,
    pub end: Span,
}

impl SpanRange {
    pub fn call_site() -> SpanRange {
        Span::call_site().into()
    }
}

impl From<Span> for SpanRange {
    fn from(s: Span) -> SpanRange {
        SpanRange { start: s, end: s }
    }
}

/// The range covered by `node`'s tokens.
pub fn range(node: &impl ToTokens) -> SpanRange {
    let mut tokens = node.to_token_stream().into_iter();
    let Some(first) = tokens.next() else {
        return SpanRange::call_site();
    };
    let last = tokens.last().unwrap_or_else(|| first.clone());
    SpanRange {
        start: first.span(),
        end: last.span(),
    }
}

/// Where a diagnostic would point, computed only when one is made: finding
/// a node's range walks all its tokens, so doing it for every node of a
/// large expression would take time quadratic in its size.
#[derive(Clone, Copy)]
pub enum At<'a> {
    Range(SpanRange),
    /// An expression, whose range [`expr_range`] finds.
    Expr(&'a syn::Expr),
    Node(&'a dyn ToTokens),
}

impl At<'_> {
    pub fn range(self) -> SpanRange {
        match self {
            At::Range(r) => r,
            At::Expr(e) => expr_range(e),
            At::Node(n) => {
                let mut ts = proc_macro2::TokenStream::new();
                n.to_tokens(&mut ts);
                range(&ts)
            }
        }
    }
}

impl From<SpanRange> for At<'_> {
    fn from(r: SpanRange) -> Self {
        At::Range(r)
    }
}

impl From<At<'_>> for SpanRange {
    fn from(a: At<'_>) -> SpanRange {
        a.range()
    }
}

/// The range of an expression, found by walking down its left and right
/// edges instead of printing it: printing recurses as deep as the
/// expression nests (a sum of thousands of terms overflows the stack) and
/// takes time in its size.
pub fn expr_range(e: &syn::Expr) -> SpanRange {
    SpanRange {
        start: first_span(e),
        end: last_span(e),
    }
}

/// The range of a statement (see [`expr_range`]).
pub fn stmt_range(s: &syn::Stmt) -> SpanRange {
    match s {
        syn::Stmt::Expr(e, semi) => SpanRange {
            start: first_span(e),
            end: semi.map_or_else(|| last_span(e), |t| t.span),
        },
        syn::Stmt::Local(l) => SpanRange {
            start: l.let_token.span,
            end: l.semi_token.span,
        },
        s => range(s),
    }
}

/// The first token's span of `e`.
fn first_span(mut e: &syn::Expr) -> Span {
    use syn::Expr as E;
    loop {
        e = match e {
            E::Binary(b) => &b.left,
            E::Index(x) => &x.expr,
            E::Cast(x) => &x.expr,
            E::MethodCall(x) => &x.receiver,
            E::Field(x) => &x.base,
            E::Call(x) => &x.func,
            E::Assign(x) => &x.left,
            E::Try(x) => &x.expr,
            E::Await(x) => &x.base,
            E::Range(syn::ExprRange { start: Some(x), .. }) => x,
            E::Unary(x) => return range(&x.op).start,
            E::Paren(x) => return x.paren_token.span.open(),
            E::Array(x) => return x.bracket_token.span.open(),
            E::Tuple(x) => return x.paren_token.span.open(),
            E::Block(x) if x.label.is_none() && x.attrs.is_empty() => {
                return x.block.brace_token.span.open()
            }
            E::If(x) if x.attrs.is_empty() => return x.if_token.span,
            e => return range(e).start,
        };
    }
}

/// The last token's span of `e`.
fn last_span(mut e: &syn::Expr) -> Span {
    use syn::Expr as E;
    loop {
        e = match e {
            E::Binary(b) => &b.right,
            E::Unary(x) => &x.expr,
            E::Assign(x) => &x.right,
            E::Range(syn::ExprRange { end: Some(x), .. }) => x,
            E::Cast(x) => return range(&x.ty).end,
            E::Index(x) => return x.bracket_token.span.close(),
            E::Call(x) => return x.paren_token.span.close(),
            E::MethodCall(x) => return x.paren_token.span.close(),
            E::Paren(x) => return x.paren_token.span.close(),
            E::Array(x) => return x.bracket_token.span.close(),
            E::Tuple(x) => return x.paren_token.span.close(),
            E::Field(x) => return range(&x.member).end,
            E::Block(x) => return x.block.brace_token.span.close(),
            E::If(x) => match &x.else_branch {
                Some((_, els)) => els,
                None => return x.then_branch.brace_token.span.close(),
            },
            e => return range(e).end,
        };
    }
}

#[derive(Debug, Clone)]
pub struct Diagnostic {
    pub span: SpanRange,
    pub message: String,
}

impl Diagnostic {
    pub fn new(span: impl Into<SpanRange>, message: impl Into<String>) -> Self {
        Diagnostic {
            span: span.into(),
            message: message.into(),
        }
    }
}

impl Diagnostic {
    /// An error at a statement's source position (the call site when the
    /// statement has none, e.g. IR read back from text).
    pub fn at(loc: crate::ir::Loc, message: impl Into<String>) -> Self {
        Diagnostic::new(loc.0.unwrap_or_else(SpanRange::call_site), message)
    }
}

impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
