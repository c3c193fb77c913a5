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

mod expr;
mod layout_conflicts;
mod stmt;

use crate::diag::Diagnostic;
use crate::diag::{range, SpanRange as Span};
use crate::ir::*;
use proc_macro2::TokenStream;
use std::collections::HashMap;

/// What the macro needs besides the IR to write the typed launcher.
#[derive(Debug, Clone)]
pub struct KernelDef {
    pub func: PrimFunc,
    pub params: Vec<ParamDef>,
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
}

impl Ctx {
    pub fn err(&mut self, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(span, msg));
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

/// Parses the attribute arguments and the function into a kernel definition.
pub fn parse_kernel(attr: TokenStream, item: &syn::ItemFn) -> Result<KernelDef, Vec<Diagnostic>> {
    let mut cx = Ctx {
        f: PrimFunc {
            name: item.sig.ident.to_string(),
            consts: Vec::new(),
            cuda_only: false,
            params: Vec::new(),
            dims: Vec::new(),
            vars: Vec::new(),
            buffers: Vec::new(),
            launch: Launch {
                grid: Vec::new(),
                block_vars: Vec::new(),
                threads: 128,
            },
            body: Stmt::Seq(Vec::new()),
            smem: SharedPool::default(),
            schedule: Schedule::default(),
        },
        scopes: vec![HashMap::new()],
        diags: Vec::new(),
        parallel_depth: 0,
        nests: HashMap::new(),
        loc: Loc::NONE,
    };
    parse_attr(&mut cx, attr);
    let params = parse_signature(&mut cx, &item.sig);
    parse_body(&mut cx, item);
    if cx.diags.is_empty() {
        crate::verify::verify(&cx.f).map_err(|d| vec![d])?;
        let conflicts = layout_conflicts::check(&cx.f, &cx.nests);
        if !conflicts.is_empty() {
            return Err(conflicts);
        }
        Ok(KernelDef { func: cx.f, params })
    } else {
        Err(cx.diags)
    }
}

fn parse_attr(cx: &mut Ctx, attr: TokenStream) {
    use syn::parse::Parser;
    let parser =
        syn::punctuated::Punctuated::<syn::MetaNameValue, syn::Token![,]>::parse_terminated;
    let args = match parser.parse2(attr) {
        Ok(a) => a,
        Err(e) => {
            cx.err(
                Span::from(e.span()),
                format!(
                    "expected compile-time parameters as `name = literal, ...` \
                     (e.g. `#[tile::kernel(block_n = 256, threads = 128)]`): {e}"
                ),
            );
            return;
        }
    };
    for nv in args {
        let Some(name) = nv.path.get_ident().map(|i| i.to_string()) else {
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

fn parse_signature(cx: &mut Ctx, sig: &syn::Signature) -> Vec<ParamDef> {
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
        if let Some(p) = param_type(cx, &pt.ty, &name) {
            out.push(p);
        }
    }
    // An output's dynamic dims come from the inputs: the launcher needs them
    // to allocate it before anything runs.
    let params = cx.f.params.clone();
    for (k, pd) in out.iter().enumerate().filter(|(_, p)| p.alloc) {
        let Some(&b) = params.get(k) else { continue };
        for d in cx.f.buf(b).shape.clone() {
            let Expr::Var(v, _) = d else { continue };
            let bound = out.iter().zip(&params).any(|(q, &qb)| {
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
    let mutable = match kind.as_str() {
        "Tensor" => false,
        "TensorMut" | "Output" => true,
        _ => {
            cx.err(
                range(&ty),
                format!(
                    "unsupported parameter type: {usage} (scalar parameters are not supported yet)"
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
             f16, bf16, f32, f64",
        );
        return None;
    };
    if matches!(dtype, DType::F8E4M3 | DType::F8E5M2) {
        cx.err(
            range(&args[0]),
            "f8 tensors are not supported by the runtime yet",
        );
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
        let dname = ident.to_string();
        match cx.lookup(&dname) {
            Some(Sym::Const(ConstVal::Int(v))) if v > 0 => shape.push(Expr::int(v)),
            Some(Sym::Const(_)) => {
                cx.err(
                    range(&d),
                    format!("dim `{dname}` must be a positive integer"),
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
    let pname = name.to_string();
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
    })
}

fn parse_body(cx: &mut Ctx, item: &syn::ItemFn) {
    let stmts = &item.block.stmts;
    let launch = stmts.iter().find_map(|s| match s {
        syn::Stmt::Expr(syn::Expr::Call(c), _)
            if expr::t_fn_name(&c.func).as_deref() == Some("kernel") =>
        {
            Some(c)
        }
        _ => None,
    });
    for s in stmts {
        let is_launch = matches!(s, syn::Stmt::Expr(syn::Expr::Call(c), _) if Some(c) == launch);
        if !is_launch {
            cx.err(
                range(&s),
                "a kernel body is exactly one `T::kernel(grid, threads, |bx, ..| { .. })` launch",
            );
        }
    }
    let Some(call) = launch else {
        if stmts.is_empty() {
            cx.err(
                range(&item.block),
                "a kernel body is exactly one `T::kernel(grid, threads, |bx, ..| { .. })` launch",
            );
        }
        return;
    };
    let usage = "`T::kernel(grid, threads, |bx, ..| { .. })` where grid is `gx` or `[gx, gy]` or `[gx, gy, gz]`";
    let args: Vec<&syn::Expr> = call.args.iter().collect();
    if args.len() != 3 {
        cx.err(
            range(&call),
            format!("T::kernel takes 3 arguments, got {}: {usage}", args.len()),
        );
        return;
    }
    let grid_exprs: Vec<&syn::Expr> = match args[0] {
        syn::Expr::Array(a) => a.elems.iter().collect(),
        syn::Expr::Tuple(t) => t.elems.iter().collect(),
        e => vec![e],
    };
    if grid_exprs.is_empty() || grid_exprs.len() > 3 {
        cx.err(
            range(&args[0]),
            format!("the grid has 1 to 3 dims: {usage}"),
        );
        return;
    }
    for g in &grid_exprs {
        let e = expr::lower(cx, g);
        if !e.dtype().is_int() {
            cx.err(range(&g), "grid extents are integers");
        }
        let mut ok = true;
        e.visit(&mut |x| ok &= !matches!(x, Expr::Load(..)));
        if !ok {
            cx.err(
                range(&g),
                "grid extents depend only on compile-time parameters and dims",
            );
        }
        cx.f.launch.grid.push(e.cast(DType::I32));
    }
    let threads_arg = match args[1] {
        syn::Expr::Assign(a) => &*a.right,
        e => e,
    };
    match expr::lower(cx, threads_arg).as_int() {
        Some(t) if (1..=1024).contains(&t) => cx.f.launch.threads = t,
        Some(t) => cx.err(
            range(&threads_arg),
            format!("threads must be in 1..=1024, got {t}"),
        ),
        None => cx.err(
            range(&threads_arg),
            "threads must be a compile-time constant",
        ),
    }
    let syn::Expr::Closure(clo) = args[2] else {
        cx.err(
            range(&args[2]),
            format!("the third argument is the block body closure: {usage}"),
        );
        return;
    };
    if clo.inputs.len() != grid_exprs.len() {
        cx.err(
            range(&clo.inputs),
            format!(
                "the grid has {} dims, so the closure takes {} block indices",
                grid_exprs.len(),
                grid_exprs.len()
            ),
        );
        return;
    }
    cx.push();
    for p in &clo.inputs {
        let name = match p {
            syn::Pat::Ident(pi) => pi.ident.to_string(),
            syn::Pat::Wild(_) => "_".to_string(),
            _ => {
                cx.err(range(&p), "block indices are plain names");
                "_".to_string()
            }
        };
        let v =
            cx.f.new_var(if name == "_" { "b" } else { &name }, DType::I32);
        cx.f.launch.block_vars.push(v);
        if name != "_" {
            cx.bind(&name, Sym::Var(v));
        }
    }
    let body = match &*clo.body {
        syn::Expr::Block(b) => {
            // `T::use_swizzle(panel)` first: rebind the block indices.
            let mut block = b.block.clone();
            let mut prologue = Vec::new();
            if let Some(syn::Stmt::Expr(syn::Expr::Call(c), _)) = block.stmts.first() {
                if expr::t_fn_name(&c.func).as_deref() == Some("use_swizzle") {
                    prologue = swizzle(cx, c);
                    block.stmts.remove(0);
                }
            }
            prologue.extend(stmt::lower_block(cx, &block));
            prologue
        }
        e => {
            cx.err(range(&e), "the block body is a `{ .. }` block");
            Vec::new()
        }
    };
    cx.pop();
    cx.f.body = Stmt::Seq(body);
}

/// `T::use_swizzle(panel)`: block rasterization for L2 reuse. Consecutive
/// blocks walk down a panel of `panel` grid columns before moving right, so
/// the blocks running at once share the operand tiles they read. Binds the
/// block index names to the swizzled indices.
fn swizzle(cx: &mut Ctx, c: &syn::ExprCall) -> Vec<Stmt> {
    let panel = match c.args.iter().collect::<Vec<_>>().as_slice() {
        [p] => expr::lower(cx, p).as_int(),
        _ => None,
    };
    let Some(panel) = panel.filter(|&p| p > 0) else {
        cx.err(
            range(c),
            "`T::use_swizzle(panel)` takes a positive compile-time panel width",
        );
        return Vec::new();
    };
    if cx.f.launch.block_vars.len() != 2 {
        cx.err(range(c), "`T::use_swizzle` needs a 2-D grid `[gx, gy]`");
        return Vec::new();
    }
    let i32v = |v: VarId| Expr::Var(v, DType::I32);
    let (bx, by) = (cx.f.launch.block_vars[0], cx.f.launch.block_vars[1]);
    let (gx, gy) = (cx.f.launch.grid[0].clone(), cx.f.launch.grid[1].clone());
    let mut out = Vec::new();
    let mut let_ = |cx: &mut Ctx, name: &str, value: Expr| -> VarId {
        let v = cx.f.new_var(name, DType::I32);
        out.push(Stmt::Let { var: v, value });
        v
    };
    let id = let_(
        cx,
        "tl_id",
        Expr::add(Expr::mul(i32v(by), gx.clone()), i32v(bx)),
    );
    let group = let_(cx, "tl_group", Expr::mul(Expr::int(panel), gy));
    let first = let_(
        cx,
        "tl_first",
        Expr::mul(
            Expr::bin(BinOp::Div, i32v(id), i32v(group)),
            Expr::int(panel),
        ),
    );
    let width = let_(
        cx,
        "tl_width",
        Expr::bin(
            BinOp::Min,
            Expr::bin(BinOp::Sub, gx, i32v(first)),
            Expr::int(panel),
        ),
    );
    let local = let_(cx, "tl_local", Expr::bin(BinOp::Rem, i32v(id), i32v(group)));
    let sbx = let_(
        cx,
        "bx_swizzled",
        Expr::add(i32v(first), Expr::bin(BinOp::Rem, i32v(local), i32v(width))),
    );
    let sby = let_(
        cx,
        "by_swizzled",
        Expr::bin(BinOp::Div, i32v(local), i32v(width)),
    );
    // The closure's names now mean the swizzled indices.
    let names: Vec<(String, VarId)> = cx
        .scopes
        .last()
        .map(|sc| {
            sc.iter()
                .filter_map(|(n, s)| match s {
                    Sym::Var(v) if *v == bx => Some((n.clone(), sbx)),
                    Sym::Var(v) if *v == by => Some((n.clone(), sby)),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    for (n, v) in names {
        cx.bind(&n, Sym::Var(v));
    }
    out
}

/// Convenience for tests and tools: parses `#[tile::kernel(..)] fn ..` source text
/// holding exactly one kernel.
pub fn parse_kernel_source(src: &str) -> Result<KernelDef, Vec<Diagnostic>> {
    let file: syn::File = syn::parse_str(src)
        .map_err(|e| vec![Diagnostic::new(e.span(), format!("not valid Rust: {e}"))])?;
    for item in &file.items {
        if let syn::Item::Fn(f) = item {
            if let Some(attr) = kernel_attr(&f.attrs) {
                let mut f = f.clone();
                f.attrs.retain(|a| !is_kernel_attr(a));
                return parse_kernel(attr, &f);
            }
        }
    }
    Err(vec![Diagnostic::new(
        Span::call_site(),
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
