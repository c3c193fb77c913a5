//! Frontend: a `#[tile::kernel(...)]` function (syn AST) → `PrimFunc`.
//!
//! The Rust body is never compiled as Rust: it is read as tile-language syntax.
//! Every mistake becomes a `Diagnostic` at the offending span; the frontend
//! keeps going after an error so one build reports every mistake of a body.
//!
//! Name resolution, innermost first: locals (loop indices, lets, buffers),
//! block indices, dynamic dims, compile-time parameters from the attribute.
//! A shape dim in the signature that names a compile-time parameter is static;
//! any other identifier is a dynamic dim bound at launch.

//!
//! Files: `builtins` is the table of `T::` functions that every call is
//! resolved through; `signature` reads the attribute and parameters; `kernel`
//! the `T::kernel` launch; `stmt` statements and `expr` expressions; the
//! builtins are lowered in `alloc`, `tile_ops`, `loops`, `values` and `misc`
//! (`methods` turns `x.exp()` into `T::exp(x)`);
//! `layout_conflicts` checks the finished IR for fragment layouts that cannot
//! both hold.

mod alloc;
mod attr;
mod builtins;
mod env;
mod expr;
mod generic;
mod kernel;
mod layout_conflicts;
mod limits;
mod loops;
mod methods;
mod misc;
mod reductions;
mod signature;
mod stmt;
mod tile_ops;
mod values;
mod variants;

use crate::diag::Diagnostic;
use crate::diag::{range, SpanRange as Span};
use crate::ir::*;
use proc_macro2::TokenStream;
use std::collections::HashMap;

pub use env::{check_func, is_func_attr, Env, UsedConst};
pub use generic::{instances, Instance};
pub use variants::Variant;

/// What the macro needs besides the IR to write the typed launcher.
#[derive(Debug, Clone)]
pub struct KernelDef {
    pub func: PrimFunc,
    pub params: Vec<ParamDef>,
    /// The module's consts the body used, with the values inlined (the
    /// macro checks them against Rust's).
    pub consts: Vec<UsedConst>,
}

#[derive(Debug, Clone)]
pub struct ParamDef {
    pub name: syn::Ident,
    pub dtype: DType,
    pub mutable: bool,
    /// An `Output<..>`: the launcher allocates it and returns it.
    pub alloc: bool,
    /// The span of the parameter's type, for launcher type errors.
    pub ty_span: Span,
    /// A scalar passed by value (`temp: f32`), not a tensor.
    pub scalar: bool,
}

#[derive(Debug, Clone)]
pub(crate) enum Sym {
    Const(ConstVal),
    /// A dim var, block index or immutable let.
    Var(VarId),
    /// A `let mut` scalar.
    Mut(VarId),
    Buf(BufId),
    /// A name whose definition was already reported as an error; its uses
    /// stay quiet so one mistake is reported once.
    Poison,
    /// A value bound by name in a `#[tile::func]` helper (a parameter or a
    /// `let`), inlined where it is used.
    Value(Expr),
}

pub(crate) struct Ctx {
    pub f: PrimFunc,
    pub scopes: Vec<HashMap<String, Sym>>,
    pub diags: Vec<Diagnostic>,
    /// Loop variables of enclosing `T::parallel` loops.
    pub parallel_depth: usize,
    /// Each `T::parallel` nest's header, for diagnostics about the whole nest.
    pub nests: layout_conflicts::NestSpans,
    /// The user statement being lowered: every IR statement made from it
    /// carries it, so that later passes report errors there.
    pub loc: Loc,
    /// Bytes of the on-chip buffers allocated so far (`limits`).
    pub cpu_block_bytes: i64,
    /// The module's consts and helpers.
    pub env: Env,
    /// Consts evaluated so far, and those being evaluated (cycles).
    pub used_consts: Vec<UsedConst>,
    pub const_stack: Vec<String>,
    /// Helpers being inlined (recursion).
    pub helper_stack: Vec<String>,
    /// Whether the expression or statement being lowered read a name whose
    /// definition was already reported (`Sym::Poison`): its own errors would
    /// only restate that one (a wrong type, a missing buffer), so `err`
    /// drops them. Scoped by `expr::lower` and `stmt::lower_stmt`.
    pub poisoned: bool,
}

/// The name an identifier stands for: `r#fn` is `fn` (and `r#x` is `x`, as
/// in Rust).
pub(crate) fn name_of(i: &syn::Ident) -> String {
    syn::ext::IdentExt::unraw(i).to_string()
}

impl Ctx {
    pub fn new(name: String, env: Env) -> Ctx {
        Ctx {
            f: PrimFunc::empty(name, 128),
            scopes: vec![HashMap::new()],
            diags: Vec::new(),
            parallel_depth: 0,
            nests: HashMap::new(),
            loc: Loc::NONE,
            cpu_block_bytes: 0,
            env,
            used_consts: Vec::new(),
            const_stack: Vec::new(),
            helper_stack: Vec::new(),
            poisoned: false,
        }
    }

    /// The name a binding (parameter, dim, block index, loop variable, let)
    /// introduces; generated C and CUDA use it, so it must be ASCII.
    pub fn def_name(&mut self, i: &syn::Ident) -> String {
        let n = name_of(i);
        if !n.is_ascii() {
            self.err(
                range(i),
                format!("`{n}`: names in kernels are ASCII (the generated C and CUDA use them)"),
            );
        }
        n
    }
    pub fn err(&mut self, span: impl Into<Span>, msg: impl Into<String>) {
        if !self.poisoned {
            self.diags.push(Diagnostic::new(span.into(), msg));
        }
    }
    pub fn lookup(&self, name: &str) -> Option<Sym> {
        self.scopes.iter().rev().find_map(|s| s.get(name).cloned())
    }
    pub fn bind(&mut self, name: &str, sym: Sym) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(name.to_string(), sym);
        }
    }
    pub fn push(&mut self) {
        self.scopes.push(HashMap::new());
    }
    pub fn pop(&mut self) {
        self.scopes.pop();
    }
}

/// Parses the attribute arguments and the function into a kernel definition
/// (with no consts or helpers in scope: see [`parse_kernel_in`]).
pub fn parse_kernel(attr: TokenStream, item: &syn::ItemFn) -> Result<KernelDef, Vec<Diagnostic>> {
    parse_kernel_in(attr, item, &Env::default())
}

/// [`parse_kernel`] with the consts and `#[tile::func]` helpers of the
/// kernel's module ([`Env`]).
pub fn parse_kernel_in(
    attr: TokenStream,
    item: &syn::ItemFn,
    env: &Env,
) -> Result<KernelDef, Vec<Diagnostic>> {
    let mut cx = Ctx::new(name_of(&item.sig.ident), env.clone());
    cx.def_name(&item.sig.ident);
    signature::parse_attr(&mut cx, attr);
    let params = signature::parse_signature(&mut cx, &item.sig);
    kernel::parse_body(&mut cx, item);
    if cx.diags.is_empty() {
        crate::verify::verify(&cx.f).map_err(|d| vec![d])?;
        let conflicts = layout_conflicts::check(&cx.f, &cx.nests);
        if !conflicts.is_empty() {
            return Err(conflicts);
        }
        Ok(KernelDef {
            func: cx.f,
            params,
            consts: cx.used_consts,
        })
    } else {
        Err(cx.diags)
    }
}

/// A `T::` builtin of the language, as documented for tools.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinDoc {
    /// `copy` for `T::copy`.
    pub name: &'static str,
    /// Where it stands: "a statement", "a loop (`for i in ..`)", "a value", ..
    pub kind: &'static str,
    /// How a call is written, in backticks.
    pub usage: &'static str,
    /// What it does, in one line.
    pub doc: &'static str,
}

/// Every `T::` builtin, in the order the language lists them.
pub fn builtins() -> impl Iterator<Item = BuiltinDoc> {
    builtins::documented()
}

/// Convenience for tests and tools: parses `#[tile::kernel(..)] fn ..` source text
/// holding exactly one kernel (the first instance of a dtype-generic one).
pub fn parse_kernel_source(src: &str) -> Result<KernelDef, Vec<Diagnostic>> {
    let mut file: syn::File = syn::parse_str(src)
        .map_err(|e| vec![Diagnostic::new(e.span(), format!("not valid Rust: {e}"))])?;
    let env = Env::of_items(&file.items);
    for item in file.items.iter_mut() {
        if let syn::Item::Fn(f) = item {
            if let Some(attr) = kernel_attr(&f.attrs) {
                // Taken out of the file, not cloned (a large kernel's tree is big).
                let mut f = std::mem::replace(
                    f,
                    syn::parse_quote!(
                        fn taken() {}
                    ),
                );
                f.attrs.retain(|a| !is_kernel_attr(a));
                let first = instances(attr, &f)?.into_iter().next();
                return match first {
                    Some(i) => parse_kernel_in(i.attr, &i.item, &env),
                    None => Err(vec![Diagnostic::new(range(&f), "no instance")]),
                };
            }
        }
    }
    let span = range(&file);
    Err(vec![Diagnostic::new(
        span,
        "no #[tile::kernel] function found",
    )])
}

/// Whether an attribute is `#[tile::kernel(..)]` or `#[kernel(..)]`.
pub fn is_kernel_attr(a: &syn::Attribute) -> bool {
    let p = a.path();
    let names: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
    matches!(names.as_slice(), [t, k] if t == "tile" && k == "kernel")
        || matches!(names.as_slice(), [k] if k == "kernel")
}

/// The argument tokens of a kernel attribute (empty for `#[tile::kernel]`).
pub fn kernel_attr(attrs: &[syn::Attribute]) -> Option<TokenStream> {
    attrs
        .iter()
        .find(|a| is_kernel_attr(a))
        .map(|a| match &a.meta {
            syn::Meta::List(l) => l.tokens.clone(),
            _ => TokenStream::new(),
        })
}

#[cfg(test)]
mod tests {
    use super::parse_kernel_source;
    use crate::ir::Stmt;

    /// Every statement the frontend makes that can carry a source position
    /// carries one, including those it builds itself for a builtin (the loops
    /// of `T::cumsum`, `T::print` of a buffer, `T::persistent`).
    #[test]
    fn every_statement_has_a_position() {
        let src = r#"
            #[tile::kernel(b = 64, threads = 128)]
            fn k(a: Tensor<f16, (b, b)>, x: Tensor<f32, (b,)>, c: TensorMut<f32, (b, b)>) {
                T::kernel([1, 1], threads, |bx, by| {
                    T::use_swizzle(2);
                    let a_s = T::alloc_shared::<f16>([b, b]);
                    let acc = T::alloc_fragment::<f32>([b, b]);
                    let row = T::alloc_fragment::<f32>([b]);
                    let v = T::alloc_var::<f32>(1.0);
                    T::annotate_layout(a_s, T::swizzled);
                    T::copy(a, a_s);
                    T::clear(acc);
                    T::gemm(a_s, a_s, acc, transpose_b = true);
                    T::reduce_max(acc, row, dim = 1);
                    T::cumsum(acc, acc, dim = 1);
                    T::fill(row, T::infinity::<f32>());
                    for k in T::pipelined(4, 2) {
                        for i in T::serial(k, 4) {
                            if i > 1 {
                                v += T::exp(x[i]);
                            } else {
                                T::print(v, "v");
                            }
                        }
                    }
                    for (i, j) in T::parallel([b, b]) {
                        c[(i, j)] = acc[(i, j)] + row[i];
                    }
                    for t in T::persistent(4, 2, bx) {
                        T::atomic_add(c[(t, 0)], 1.0);
                    }
                    for u in T::unroll(2) {
                        T::atomic_add(c.at([u, 0]), row);
                    }
                    T::print(row);
                });
            }"#;
        let def = parse_kernel_source(src).unwrap_or_else(|d| panic!("{}", d[0]));
        let mut missing = Vec::new();
        def.func.body.visit(&mut |s| {
            let positioned = !matches!(
                s,
                Stmt::Seq(_)
                    | Stmt::Let { .. }
                    | Stmt::Local { .. }
                    | Stmt::Assign { .. }
                    | Stmt::Barrier
            );
            if positioned && s.loc().0.is_none() {
                missing.push(format!("{s:?}"));
            }
        });
        assert!(
            missing.is_empty(),
            "statements without a position: {missing:#?}"
        );
    }
}
