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
