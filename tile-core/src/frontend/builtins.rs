//! The `T::` builtins: the one table that names the language's functions.
//!
//! Each entry says where a builtin may stand and which function lowers it
//! (`Lower`), how many arguments it takes (`Arity`), how a call is written
//! (`usage`, quoted in messages) and what it does (`doc`). Every `T::name` of
//! a kernel is resolved here, so an unknown name, a builtin used where its kind
//! cannot stand, and a wrong argument count are reported from the table, in
//! the table's words; the lowering functions see only calls of the right
//! shape. The README's language section names exactly these builtins (checked
//! by the tests at the end).

use super::expr::{t_fn_name, t_fn_turbofish};
use super::loops::ForSite;
use super::{alloc, kernel, loops, misc, reductions, tile_ops, values, Ctx};
use crate::diag::{range, SpanRange as Span};
use crate::ir::{BinOp, Expr, ForKind, Intrin, Layout, ReduceOp, Scope, Stmt};

pub(super) struct Builtin {
    pub name: &'static str,
    pub lower: Lower,
    pub arity: Arity,
    /// How a call is written, in backticks (`T::copy(src, dst)`).
    pub usage: &'static str,
    pub doc: &'static str,
}

/// Where a builtin stands, with the function that lowers a call of it there.
/// Calls reach these functions with a valid argument count.
#[derive(Clone, Copy)]
pub(super) enum Lower {
    /// The kernel body, `T::kernel(grid, threads, |bx, ..| { .. })`.
    Kernel(fn(&mut Ctx, &Call<'_>)),
    /// The first statement of the kernel body only; gives the statements
    /// that open the body.
    Prologue(fn(&mut Ctx, &Call<'_>) -> Vec<Stmt>),
    /// `let name = T::f(..);`: binds `name`.
    Alloc(fn(&mut Ctx, &Call<'_>, &str, &mut Vec<Stmt>)),
    /// A statement `T::f(..);`.
    Stmt(fn(&mut Ctx, &Call<'_>, &mut Vec<Stmt>)),
    /// The iterator of `for .. in T::f(..) { .. }`: lowers the whole loop.
    Loop(fn(&mut Ctx, &Call<'_>, &ForSite<'_>, &mut Vec<Stmt>)),
    /// A value.
    Value(fn(&mut Ctx, &Call<'_>) -> Expr),
    /// A layout, named (not called) as the argument of `T::annotate_layout`.
    Layout(Layout),
}

impl Lower {
    /// What a builtin of this kind is, in words.
    pub fn kind(self) -> &'static str {
        match self {
            Lower::Kernel(_) => "the kernel",
            Lower::Prologue(_) => "the opening statements of the kernel body",
            Lower::Alloc(_) => "an allocation (`let x = ..`)",
            Lower::Stmt(_) => "a statement",
            Lower::Loop(_) => "a loop (`for i in ..`)",
            Lower::Value(_) => "a value",
            Lower::Layout(_) => "a layout (an argument of `T::annotate_layout`)",
        }
    }
}

/// How many arguments a call takes (`max: None`: no upper bound).
#[derive(Clone, Copy)]
pub(super) struct Arity {
    min: usize,
    max: Option<usize>,
}

const fn exactly(n: usize) -> Arity {
    Arity {
        min: n,
        max: Some(n),
    }
}

const fn between(min: usize, max: usize) -> Arity {
    Arity {
        min,
        max: Some(max),
    }
}

const fn at_least(min: usize) -> Arity {
    Arity { min, max: None }
}

impl Arity {
    fn admits(self, n: usize) -> bool {
        n >= self.min && self.max.is_none_or(|m| n <= m)
    }

    fn describe(self) -> String {
        let args = |n: usize| match n {
            1 => "1 argument".to_string(),
            n => format!("{n} arguments"),
        };
        match (self.min, self.max) {
            (0, Some(0)) => "no arguments".into(),
            (0, Some(1)) => "at most 1 argument".into(),
            (a, Some(b)) if a == b => args(a),
            (a, Some(b)) if b == a + 1 => format!("{a} or {}", args(b)),
            (a, Some(b)) => format!("{a} to {}", args(b)),
            (a, None) => format!("at least {}", args(a)),
        }
    }
}

/// A row of the table.
const fn row(
    name: &'static str,
    arity: Arity,
    lower: Lower,
    usage: &'static str,
    doc: &'static str,
) -> Builtin {
    Builtin {
        name,
        lower,
        arity,
        usage,
        doc,
    }
}

/// The table, one builtin a row: name, arity, lowering, usage, doc. Its
/// order is the order in which messages list the builtins.
#[rustfmt::skip]
static BUILTINS: &[Builtin] = &[
    row("kernel",             exactly(3),     Lower::Kernel(kernel::launch),                                                       "`T::kernel(grid, threads, |bx, ..| { .. })` where grid is `gx` or `[gx, gy]` or `[gx, gy, gz]`", "the kernel: a grid of blocks of `threads` threads, each running the closure"),
    row("alloc_shared",       between(1, 2),  Lower::Alloc(|cx, k, name, out| alloc::buffer(cx, k, name, Scope::Shared, out)),     "`T::alloc_shared::<dtype>([d0, d1, ..])` or `T::alloc_shared([d0, ..], dtype)`", "a shared-memory tile of a compile-time shape"),
    row("alloc_fragment",     between(1, 2),  Lower::Alloc(|cx, k, name, out| alloc::buffer(cx, k, name, Scope::Fragment, out)),   "`T::alloc_fragment::<dtype>([d0, d1, ..])` or `T::alloc_fragment([d0, ..], dtype)`", "a register tile distributed over the block's threads"),
    row("alloc_local",        between(1, 2),  Lower::Alloc(|cx, k, name, out| alloc::buffer(cx, k, name, Scope::Local, out)),      "`T::alloc_local::<dtype>([d0, d1, ..])` or `T::alloc_local([d0, ..], dtype)`", "a per-thread array"),
    row("alloc_var",          between(0, 1),  Lower::Alloc(alloc::var),                                                            "`T::alloc_var::<dtype>(init)`", "a mutable scalar (zero without `init`)"),
    row("copy",               between(2, 4),  Lower::Stmt(tile_ops::copy),                                                         "`T::copy(src, dst)` plus optional `instruction = \"tma\" | \"cp_async\" | \"loops\"` and `pad = v`", "copies a tile; `buf.at([i, j])` gives an origin, the other side the shape; elements read from outside the source tensor are `pad` (default 0)"),
    row("clear",              exactly(1),     Lower::Stmt(|cx, k, out| tile_ops::fill(cx, k, None, out)),                          "`T::clear(buffer)`", "sets every element of a buffer to zero"),
    row("fill",               exactly(2),     Lower::Stmt(|cx, k, out| tile_ops::fill(cx, k, Some(k.args[1]), out)),               "`T::fill(buffer, value)`", "sets every element of a buffer to a value"),
    row("gemm",               between(3, 6),  Lower::Stmt(tile_ops::gemm),                                                         "`T::gemm(a, b, c)` plus optional `transpose_a = ..`, `transpose_b = ..`, `clear_accum = ..`", "`c += a * b` on on-chip tiles (tensor cores on CUDA where they apply)"),
    row("reduce_sum",         between(2, 4),  Lower::Stmt(|cx, k, out| reductions::reduce(cx, k, ReduceOp::Sum, out)),               "`T::reduce_sum(src, dst, dim = -1, clear = true)`", "sums a 1-D or 2-D tile along a dim"),
    row("reduce_max",         between(2, 4),  Lower::Stmt(|cx, k, out| reductions::reduce(cx, k, ReduceOp::Max, out)),               "`T::reduce_max(src, dst, dim = -1, clear = true)`", "the maximum of a 1-D or 2-D tile along a dim"),
    row("reduce_min",         between(2, 4),  Lower::Stmt(|cx, k, out| reductions::reduce(cx, k, ReduceOp::Min, out)),               "`T::reduce_min(src, dst, dim = -1, clear = true)`", "the minimum of a 1-D or 2-D tile along a dim"),
    row("reduce_abssum",      between(2, 4),  Lower::Stmt(|cx, k, out| reductions::reduce(cx, k, ReduceOp::AbsSum, out)),            "`T::reduce_abssum(src, dst, dim = -1, clear = true)`", "sums the absolute values of a 1-D or 2-D tile along a dim"),
    row("cumsum",             between(2, 4),  Lower::Stmt(reductions::cumsum),                                                       "`T::cumsum(src, dst, dim = 0, reverse = false)`", "inclusive prefix sums of a 1-D or 2-D tile along a dim"),
    row("atomic_add",         exactly(2),     Lower::Stmt(tile_ops::atomic_add),                                                   "`T::atomic_add(dst[idx], value)` or `T::atomic_add(dst.at([..]), tile)`", "adds atomically into global or shared memory, one element or a tile"),
    row("parallel",           at_least(1),    Lower::Loop(loops::parallel),                                                        "`T::parallel(n)` or `T::parallel([m, n])`", "element-wise over a tile: the iterations are spread over the block's threads"),
    row("serial",             between(1, 2),  Lower::Loop(|cx, k, site, out| loops::counted(cx, k, site, ForKind::Serial, out)),   "`T::serial(n)` or `T::serial(start, end)`", "a sequential loop"),
    row("unroll",             between(1, 2),  Lower::Loop(|cx, k, site, out| loops::counted(cx, k, site, ForKind::Unrolled, out)), "`T::unroll(n)` or `T::unroll(start, end)`", "a sequential loop, unrolled"),
    row("pipelined",          between(1, 2),  Lower::Loop(loops::pipelined),                                                       "`T::pipelined(n, num_stages)`", "a software pipeline: copies into shared tiles are issued `num_stages - 1` iterations ahead"),
    row("persistent",         exactly(3),     Lower::Loop(loops::persistent),                                                      "`T::persistent(domain, wave_size, index)`, e.g. `T::persistent([gx, gy], num_blocks, bx)`", "the tiles of a domain handed out to a fixed number of blocks (a persistent kernel)"),
    row("use_cluster",        between(1, 2),  Lower::Prologue(kernel::cluster),                                                    "`T::use_cluster(n)` or `T::use_cluster(nx, ny)`", "blocks nk..nk+n-1 along x (or nx by ny blocks) run as a cluster on Hopper, sharing the pipelined tile copies they all make"),
    row("use_split_k",        exactly(1),     Lower::Prologue(kernel::split_k),                                                    "`T::use_split_k(n)`", "on Hopper, the warp-specialized pipeline's iterations are split over a cluster of n blocks (1, 2, 4 or 8) whose accumulators are summed into the first, which alone runs the rest"),
    row("use_swizzle",        exactly(1),     Lower::Prologue(kernel::swizzle),                                                    "`T::use_swizzle(panel)`", "block rasterization for L2 reuse: consecutive blocks walk down a panel of grid columns"),
    row("annotate_layout",    exactly(2),     Lower::Stmt(misc::annotate_layout),                                                  "`T::annotate_layout(shared_buffer, T::swizzled)`", "stores a shared tile in another layout (where elements live, never what is computed)"),
    row("swizzled",           exactly(0),     Lower::Layout(Layout::Swizzled),                                                     "`T::annotate_layout(shared_buffer, T::swizzled)`", "the bank-conflict-free layout of a 2-byte shared tile"),
    row("print",              between(1, 2),  Lower::Stmt(misc::print),                                                            "`T::print(value)`, `T::print(value, \"label\")` or `T::print(buffer)`", "device printf from one thread of each block"),
    row("get_thread_binding", between(0, 1),  Lower::Value(values::thread_binding),                                                "`T::get_thread_binding()`", "the thread index in the block (CUDA only)"),
    row("ceildiv",            exactly(2),     Lower::Value(values::ceildiv),                                                       "`T::ceildiv(a, b)`", "integer division rounding up"),
    row("max",                exactly(2),     Lower::Value(|cx, k| values::binary(cx, k, BinOp::Max)),                             "`T::max(a, b)`", "the larger of two values"),
    row("min",                exactly(2),     Lower::Value(|cx, k| values::binary(cx, k, BinOp::Min)),                             "`T::min(a, b)`", "the smaller of two values"),
    row("exp",                exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Exp)),                              "`T::exp(x)`", "e to the power x"),
    row("exp2",               exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Exp2)),                             "`T::exp2(x)`", "2 to the power x"),
    row("log",                exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Log)),                              "`T::log(x)`", "the natural logarithm"),
    row("log2",               exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Log2)),                             "`T::log2(x)`", "the base-2 logarithm"),
    row("sqrt",               exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Sqrt)),                             "`T::sqrt(x)`", "the square root"),
    row("rsqrt",              exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Rsqrt)),                            "`T::rsqrt(x)`", "one over the square root"),
    row("abs",                exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Abs)),                              "`T::abs(x)`", "the absolute value (floats and signed integers)"),
    row("tanh",               exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Tanh)),                             "`T::tanh(x)`", "the hyperbolic tangent"),
    row("sigmoid",            exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Sigmoid)),                          "`T::sigmoid(x)`", "1 / (1 + e^-x)"),
    row("erf",                exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Erf)),                              "`T::erf(x)`", "the error function"),
    row("sin",                exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Sin)),                              "`T::sin(x)`", "the sine (radians)"),
    row("cos",                exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Cos)),                              "`T::cos(x)`", "the cosine (radians)"),
    row("pow",                exactly(2),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Pow)),                              "`T::pow(x, y)`", "x to the power y"),
    row("floor",              exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Floor)),                            "`T::floor(x)`", "the largest integer value not above x"),
    row("ceil",               exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Ceil)),                             "`T::ceil(x)`", "the smallest integer value not below x"),
    row("round",              exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Round)),                            "`T::round(x)`", "the nearest integer value, half-way cases away from zero"),
    row("trunc",              exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Trunc)),                            "`T::trunc(x)`", "the integer part of x (rounds toward zero)"),
    row("fma",                exactly(3),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Fma)),                              "`T::fma(a, b, c)`", "`a * b + c` with one rounding"),
    row("log1p",              exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Log1p)),                            "`T::log1p(x)`", "ln(1 + x), accurate near 0"),
    row("expm1",              exactly(1),     Lower::Value(|cx, k| values::math(cx, k, Intrin::Expm1)),                            "`T::expm1(x)`", "e^x - 1, accurate near 0"),
    row("bitcast",            exactly(1),     Lower::Value(values::bitcast),                                                       "`T::bitcast::<f32>(x)`", "the bits of `x` read as another dtype of the same size"),
    row("clamp",              exactly(3),     Lower::Value(values::clamp),                                                         "`T::clamp(x, lo, hi)`", "x limited to `lo..=hi` (`T::min(T::max(x, lo), hi)`)"),
    row("pack2",              exactly(2),     Lower::Value(values::pack2),                                                         "`T::pack2(lo, hi)`", "the packed pair (`f16x2`, `bf16x2`) of two f16 or two bf16 values, `lo` in the low 16 bits"),
    row("splat",              exactly(1),     Lower::Value(values::splat),                                                         "`T::splat::<f16x2>(x)`", "the packed pair with `x` in both halves"),
    row("low",                exactly(1),     Lower::Value(|cx, k| values::half_of(cx, k, Intrin::Low)),                           "`T::low(v)`", "the first half (low 16 bits) of a packed pair"),
    row("high",               exactly(1),     Lower::Value(|cx, k| values::half_of(cx, k, Intrin::High)),                          "`T::high(v)`", "the second half of a packed pair"),
    row("padded",             exactly(2),     Lower::Value(values::padded),                                                        "`T::padded(x[i], pad)`", "`x[i]`, or `pad` where the index is outside the tensor `x` (a guarded read is 0 there otherwise)"),
    row("if_then_else",       exactly(3),     Lower::Value(values::if_then_else),                                                  "`T::if_then_else(cond, a, b)`", "`a` where `cond` holds, else `b` (as `if cond { a } else { b }`)"),
    row("infinity",           between(0, 1),  Lower::Value(values::infinity),                                                      "`T::infinity::<f32>()`", "positive infinity of a float dtype"),
    row("max_value",          between(0, 1),  Lower::Value(values::max_value),                                                     "`T::max_value::<f16>()`", "the largest finite value of a dtype"),
];

/// The table entry of `T::name`.
pub(super) fn lookup(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// The table for tools: `(name, kind, usage, doc)` of every builtin.
pub(super) fn documented() -> impl Iterator<Item = super::BuiltinDoc> {
    BUILTINS.iter().map(|b| super::BuiltinDoc {
        name: b.name,
        kind: b.lower.kind(),
        usage: b.usage,
        doc: b.doc,
    })
}

/// The builtin a call `T::name(..)` names, if it is one.
pub(super) fn builtin_of(c: &syn::ExprCall) -> Option<&'static Builtin> {
    lookup(&t_fn_name(&c.func)?)
}

/// One call of a builtin.
pub(super) struct Call<'a> {
    pub builtin: &'static Builtin,
    pub expr: &'a syn::ExprCall,
    pub args: Vec<&'a syn::Expr>,
}

impl<'a> Call<'a> {
    pub fn new(builtin: &'static Builtin, expr: &'a syn::ExprCall) -> Call<'a> {
        Call {
            builtin,
            expr,
            args: expr.args.iter().collect(),
        }
    }
    pub fn name(&self) -> &'static str {
        self.builtin.name
    }
    pub fn usage(&self) -> &'static str {
        self.builtin.usage
    }
    /// The whole call, where most mistakes in it are reported.
    pub fn span(&self) -> Span {
        range(self.expr)
    }
    /// The type of `T::name::<ty>(..)`, if any.
    pub fn turbofish(&self) -> Option<&'a syn::Type> {
        t_fn_turbofish(&self.expr.func)
    }
}

/// The builtin a call names; a call of anything else is reported.
pub(super) fn resolve<'a>(cx: &mut Ctx, c: &'a syn::ExprCall) -> Option<Call<'a>> {
    let Some(name) = t_fn_name(&c.func) else {
        cx.err(
            range(&c.func),
            format!(
                "only `T::` functions and the `#[tile::func]` helpers of the kernel's module can \
                 be called in a kernel ({})",
                function_list()
            ),
        );
        return None;
    };
    let Some(b) = lookup(&name) else {
        cx.err(
            range(&c.func),
            format!(
                "unknown function `T::{name}`; the tile language has {}",
                function_list()
            ),
        );
        return None;
    };
    Some(Call::new(b, c))
}

/// Whether a call's argument count is one its builtin takes; reports it if not.
pub(super) fn check_arity(cx: &mut Ctx, k: &Call) -> bool {
    let (arity, got) = (k.builtin.arity, k.args.len());
    if arity.admits(got) {
        return true;
    }
    cx.err(
        k.span(),
        format!(
            "`T::{}` takes {}, got {got}: {}",
            k.name(),
            arity.describe(),
            k.usage()
        ),
    );
    false
}

/// Where a call stands in the kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Position {
    /// A statement `T::f(..);`.
    Stmt,
    /// Part of an expression.
    Value,
    /// The iterator of a `for` loop.
    Loop,
}

/// Reports a builtin called where its kind cannot stand.
pub(super) fn misplaced(cx: &mut Ctx, k: &Call, at: Position) {
    let n = k.name();
    let (span, msg) = match (at, k.builtin.lower) {
        (Position::Loop, _) => (
            range(&k.expr.func),
            format!(
                "`T::{n}` is not a loop; loops iterate over {}",
                loop_list(None)
            ),
        ),
        (_, Lower::Loop(_)) => (
            k.span(),
            format!("`T::{n}` is a loop: `for i in T::{n}(..) {{ .. }}`"),
        ),
        (_, Lower::Alloc(_)) => (
            k.span(),
            format!("bind the allocation to a name: `let buf = T::{n}(..);`"),
        ),
        (_, Lower::Layout(_)) => (
            k.span(),
            format!("`T::{n}` is a layout, not a function: {}", k.usage()),
        ),
        (Position::Stmt, Lower::Value(_)) => (k.span(), format!("the value of `T::{n}` is unused")),
        (Position::Stmt, Lower::Kernel(_)) => (
            k.span(),
            format!("`T::{n}` is the whole kernel body and cannot be nested"),
        ),
        (Position::Stmt, Lower::Prologue(_)) => (
            k.span(),
            format!(
                "{} must open the kernel body, before any other statement",
                k.usage()
            ),
        ),
        _ => (
            range(&k.expr.func),
            format!("`T::{n}` is a statement, not a value"),
        ),
    };
    cx.err(span, msg);
}

/// Every callable builtin, `T::kernel, T::alloc_shared, ..`.
pub(super) fn function_list() -> String {
    BUILTINS
        .iter()
        .filter(|b| !matches!(b.lower, Lower::Layout(_)))
        .map(|b| format!("T::{}", b.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "`T::parallel`, .. or `T::persistent`", with `extra` as the last choice.
pub(super) fn loop_list(extra: Option<&str>) -> String {
    let mut v: Vec<String> = BUILTINS
        .iter()
        .filter(|b| matches!(b.lower, Lower::Loop(_)))
        .map(|b| format!("`T::{}`", b.name))
        .collect();
    v.extend(extra.map(String::from));
    or_list(&v)
}

/// The layout a `T::name` path names, if it is one.
pub(super) fn layout_of(e: &syn::Expr) -> Option<Layout> {
    match lookup(&t_fn_name(e)?)?.lower {
        Lower::Layout(l) => Some(l),
        _ => None,
    }
}

/// "the supported one is `T::swizzled`" (or the list, when there are several).
pub(super) fn layouts_phrase() -> String {
    let v: Vec<String> = BUILTINS
        .iter()
        .filter(|b| matches!(b.lower, Lower::Layout(_)))
        .map(|b| format!("`T::{}`", b.name))
        .collect();
    match v.as_slice() {
        [one] => format!("the supported one is {one}"),
        _ => format!("the supported ones are {}", or_list(&v)),
    }
}

/// `a, b or c`.
fn or_list(v: &[String]) -> String {
    match v {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The `T::name`s a text mentions.
    fn mentions(text: &str) -> BTreeSet<String> {
        let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let mut out = BTreeSet::new();
        for (i, _) in text.match_indices("T::") {
            if text[..i].chars().next_back().is_some_and(ident) {
                continue;
            }
            let name: String = text[i + 3..].chars().take_while(|&c| ident(c)).collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
        out
    }

    fn read(rel: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn table() -> BTreeSet<String> {
        BUILTINS.iter().map(|b| b.name.to_string()).collect()
    }

    /// The README's "The language" section lists what a kernel can call: it
    /// must name every builtin, and nothing the frontend does not know.
    #[test]
    fn readme_language_section_names_exactly_the_builtins() {
        let readme = read("../README.md");
        let start = readme
            .find("## The language (what works today)")
            .expect("README has a section \"The language (what works today)\"");
        let section = &readme[start..];
        let end = section[3..].find("\n## ").map_or(section.len(), |e| e + 3);
        let named = mentions(&section[..end]);
        let table = table();
        let missing: Vec<_> = table.difference(&named).collect();
        let unknown: Vec<_> = named.difference(&table).collect();
        assert!(
            missing.is_empty() && unknown.is_empty(),
            "README.md, \"The language\": builtins not listed: {missing:?}; \
             named but not builtins: {unknown:?} (the table is in tile-core/src/frontend/builtins.rs)"
        );
    }

    /// The facade's docs (`T` is not a Rust item there) name only builtins.
    #[test]
    fn facade_docs_name_only_builtins() {
        let named = mentions(&read("../src/lib.rs"));
        let table = table();
        let unknown: Vec<_> = named.difference(&table).collect();
        assert!(unknown.is_empty(), "src/lib.rs names {unknown:?}");
    }

    #[test]
    fn table_is_well_formed() {
        assert_eq!(
            table().len(),
            BUILTINS.len(),
            "a name is in the table twice"
        );
        for b in BUILTINS {
            assert!(
                b.usage.starts_with('`') && b.usage.contains(&format!("T::{}", b.name)),
                "the usage of `T::{}` shows a call of it in backticks",
                b.name
            );
            assert!(!b.doc.is_empty(), "`T::{}` has no doc", b.name);
            assert!(
                b.arity.max.is_none_or(|m| m >= b.arity.min),
                "`T::{}`: empty arity",
                b.name
            );
        }
    }

    /// The messages of a kernel body's mistakes.
    fn errors(body: &str) -> Vec<String> {
        let src = format!(
            r#"#[tile::kernel(n = 64, threads = 64)]
            fn k(a: Tensor<f32, (n,)>, c: TensorMut<f32, (n,)>) {{
                T::kernel(1, threads, |bx| {{ {body} }});
            }}"#
        );
        match crate::frontend::parse_kernel_source(&src) {
            Ok(_) => Vec::new(),
            Err(d) => d.into_iter().map(|d| d.message).collect(),
        }
    }

    #[test]
    fn builtins_where_their_kind_cannot_stand() {
        let loops = "`T::parallel`, `T::serial`, `T::unroll`, `T::pipelined` or `T::persistent`";
        let cases = [
            (
                "T::exp(1.0);",
                "the value of `T::exp` is unused".to_string(),
            ),
            (
                "let x = T::copy(a, c);",
                "`T::copy` is a statement, not a value".into(),
            ),
            (
                "for i in T::copy(a, c) {}",
                format!("`T::copy` is not a loop; loops iterate over {loops}"),
            ),
            (
                "T::alloc_local::<f32>([4]);",
                "bind the allocation to a name: `let buf = T::alloc_local(..);`".into(),
            ),
            (
                "c[0] = T::serial(4);",
                "`T::serial` is a loop: `for i in T::serial(..) { .. }`".into(),
            ),
            (
                "T::swizzled();",
                "`T::swizzled` is a layout, not a function: \
                 `T::annotate_layout(shared_buffer, T::swizzled)`"
                    .into(),
            ),
            (
                "T::kernel(1, 1, |b| {});",
                "`T::kernel` is the whole kernel body and cannot be nested".into(),
            ),
            (
                "T::print(1.0); T::use_swizzle(2);",
                "`T::use_swizzle(panel)` must open the kernel body, before any other statement"
                    .into(),
            ),
            (
                "for i in 0..=4 {} for i in a {}",
                format!("loops iterate over {}", loop_list(Some("`a..b`"))),
            ),
        ];
        for (body, want) in cases {
            let got = errors(body);
            assert_eq!(got.last(), Some(&want), "{body}: {got:?}");
        }
        let unknown = errors("for i in T::sync(4) {}");
        assert_eq!(
            unknown,
            [format!(
                "unknown function `T::sync`; the tile language has {}",
                function_list()
            )]
        );
        assert!(function_list().starts_with("T::kernel, T::alloc_shared, "));
        assert!(!function_list().contains("T::swizzled"));
    }

    #[test]
    fn argument_counts_are_checked_from_the_table() {
        let cases = [
            (
                "T::clear(c, 1.0);",
                "`T::clear` takes 1 argument, got 2: `T::clear(buffer)`",
            ),
            (
                "c[0] = T::exp();",
                "`T::exp` takes 1 argument, got 0: `T::exp(x)`",
            ),
            (
                "for i in T::parallel() {}",
                "`T::parallel` takes at least 1 argument, got 0: \
                 `T::parallel(n)` or `T::parallel([m, n])`",
            ),
            (
                "let v = T::alloc_var::<f32>(1.0, 2.0);",
                "`T::alloc_var` takes at most 1 argument, got 2: `T::alloc_var::<dtype>(init)`",
            ),
        ];
        for (body, want) in cases {
            assert_eq!(errors(body), [want], "{body}");
        }
    }

    #[test]
    fn arity_messages() {
        assert_eq!(exactly(0).describe(), "no arguments");
        assert_eq!(exactly(1).describe(), "1 argument");
        assert_eq!(between(0, 1).describe(), "at most 1 argument");
        assert_eq!(between(1, 2).describe(), "1 or 2 arguments");
        assert_eq!(between(3, 6).describe(), "3 to 6 arguments");
        assert_eq!(at_least(1).describe(), "at least 1 argument");
        assert_eq!(
            loop_list(Some("`a..b`")),
            "`T::parallel`, `T::serial`, `T::unroll`, `T::pipelined`, `T::persistent` or `a..b`"
        );
    }
}
