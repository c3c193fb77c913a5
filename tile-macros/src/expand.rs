//! The expansion: a typed launcher function plus a module of the same name
//! holding the kernel's static spec, its in-process cache slot and helpers.
//! Generated code names only `::tile::__private::…` and `::tile::…`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use tile_abi::spec::DimSpec;
use tile_abi::{CudaDesc, Grid, KernelDesc};
use tile_core::abi::describe;
use tile_core::frontend::ParamDef;
use tile_core::ir::DType;
use tile_core::Compiled;

pub fn errors(item: &syn::ItemFn, diags: &[tile_core::Diagnostic]) -> TokenStream {
    let errs = diags.iter().map(error_tokens);
    // A fallback launcher with the kernel's signature keeps call sites
    // type-checking, so one mistake in a body is reported once, not again as
    // "wrong number of arguments" wherever the kernel is called.
    let vis = &item.vis;
    let name = &item.sig.ident;
    let args = fallback_args(&item.sig).unwrap_or_default();
    quote! {
        #(#errs)*
        #[allow(dead_code, unused_variables, clippy::too_many_arguments)]
        #vis fn #name(#(#args),*) -> ::core::result::Result<(), ::tile::Error> {
            ::core::unreachable!("this kernel did not compile")
        }
    }
}

/// The expansion of `#[tile::func]`: its errors, or nothing (the helper
/// exists only to be inlined into kernels).
pub fn func_errors(diags: &[tile_core::Diagnostic]) -> TokenStream {
    diags.iter().map(error_tokens).collect()
}

fn error_tokens(d: &tile_core::Diagnostic) -> TokenStream {
    // Two tokens carrying the range's ends: `new_spanned` underlines from
    // the first to the last.
    let ends = quote::quote_spanned!(d.span.start=> a)
        .into_iter()
        .chain(quote::quote_spanned!(d.span.end=> b));
    syn::Error::new_spanned(ends.collect::<TokenStream>(), &d.message).to_compile_error()
}

/// `const` assertions that the values the kernel inlined are Rust's values of
/// the consts it named (they could differ only if name resolution did).
pub(crate) fn const_checks(consts: &[tile_core::frontend::UsedConst]) -> TokenStream {
    use tile_core::ir::ConstVal;
    consts
        .iter()
        .map(|u| {
            let name = format_ident!("{}", u.name);
            let msg = format!(
                "tile: the kernel inlined const `{}` as {}, which is not its value here",
                u.name, u.value
            );
            let cond = match (&u.value, u.dtype) {
                (ConstVal::Float(v), DType::F32) => {
                    let bits = (*v as f32).to_bits();
                    quote!(#name.to_bits() == #bits)
                }
                (ConstVal::Float(v), _) => {
                    let bits = v.to_bits();
                    quote!(#name.to_bits() == #bits)
                }
                (ConstVal::Int(v), t) => {
                    let lit = syn::LitInt::new(&format!("{v}{}", t.rust_name()), Span::call_site());
                    quote!(#name == #lit)
                }
                (ConstVal::Bool(b), _) => quote!(#name == #b),
            };
            quote!(
                const _: () = ::core::assert!(#cond, #msg);
            )
        })
        .collect()
}

/// The typed launcher's docs: the kernel's own doc comments, then `extra`
/// (what a kernel with variants adds), then a generated "Kernel" section:
/// each parameter with its dtype and shape, the dynamic dims, the grid and
/// the block. Parameter `k` with `generic[k]` has the type parameter's
/// dtype, one of `dtypes` (a dtype-generic kernel; both empty otherwise).
pub(crate) fn launcher_docs(
    item: &syn::ItemFn,
    desc: &KernelDesc,
    params: &[ParamDef],
    (generic, dtypes): (&[bool], &[DType]),
    extra: Option<String>,
) -> TokenStream {
    let either: Vec<String> = dtypes.iter().map(|t| dtype_text(*t)).collect();
    let dtype = |k: usize, pd: &ParamDef| match generic.get(k) {
        Some(true) => format!("`D`: {}", either.join(" or ")),
        _ => dtype_text(pd.dtype),
    };
    let own: Vec<&syn::Attribute> = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    // Without docs of its own, the summary line rustdoc shows says what it is.
    let extra = extra.or_else(|| {
        own.is_empty()
            .then(|| format!("Launches kernel `{}`.", item.sig.ident))
    });
    let dim = |d: &DimSpec| match *d {
        DimSpec::Static(v) => v.to_string(),
        DimSpec::Dyn(k) => desc.dims.get(k as usize).cloned().unwrap_or_default(),
    };
    let mut lines: Vec<String> = Vec::new();
    if let Some(e) = extra {
        lines.extend([e, String::new()]);
    }
    lines.push("# Kernel".into());
    lines.push(String::new());
    lines.push("| parameter | dtype | shape | role |".into());
    lines.push("| --- | --- | --- | --- |".into());
    let mut buf = desc.params.iter();
    for (k, pd) in params.iter().enumerate() {
        let (shape, role) = match pd.scalar {
            true => ("scalar".to_string(), "by value"),
            false => {
                let shape = buf
                    .next()
                    .map(|b| b.shape.iter().map(dim).collect::<Vec<_>>().join(", "))
                    .unwrap_or_default();
                let role = match (pd.alloc, pd.mutable) {
                    (true, _) => "output, allocated and returned",
                    (false, true) => "output (written)",
                    (false, false) => "input",
                };
                (format!("`[{shape}]`"), role)
            }
        };
        lines.push(format!(
            "| `{}` | {} | {shape} | {role} |",
            pd.name,
            dtype(k, pd)
        ));
    }
    let dims = match desc.dims.as_slice() {
        [] => "none".to_string(),
        d => d
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let mut grid: Vec<String> = desc.grid.iter().map(|g| grid_text(g, &desc.dims)).collect();
    while grid.len() > 1 && grid.last().is_some_and(|g| g == "1") {
        grid.pop();
    }
    lines.push(String::new());
    lines.push(format!(
        "Dynamic dims: {dims} (each bound at launch from the first tensor that carries it, \
         checked on the others). Grid: `[{}]` blocks of {} threads.",
        grid.join(", "),
        desc.threads
    ));
    let sep = (!own.is_empty()).then(|| quote!(#[doc = ""]));
    let text = lines.join("\n");
    quote!(#(#own)* #sep #[doc = #text])
}

/// A grid extent written over the dynamic dims' names (`ceildiv(N, 128)`).
fn grid_text(g: &Grid, dims: &[String]) -> String {
    use tile_abi::GridOp;
    match g {
        Grid::Const(v) => v.to_string(),
        Grid::Dim(k) => dims.get(*k as usize).cloned().unwrap_or_default(),
        // The frontend writes `T::ceildiv(a, b)` as `((a + b) - 1) / b`.
        Grid::Op(GridOp::Div, num, b) => match &**num {
            Grid::Op(GridOp::Sub, sum, one) if **one == Grid::Const(1) => match &**sum {
                Grid::Op(GridOp::Add, a, b2) if b2 == b => {
                    format!("ceildiv({}, {})", grid_text(a, dims), grid_text(b, dims))
                }
                _ => format!("{} / {}", grid_text(num, dims), grid_text(b, dims)),
            },
            _ => format!("{} / {}", grid_text(num, dims), grid_text(b, dims)),
        },
        Grid::Op(op, a, b) => {
            let (a, b) = (grid_text(a, dims), grid_text(b, dims));
            match op {
                GridOp::Add => format!("({a} + {b})"),
                GridOp::Sub => format!("({a} - {b})"),
                GridOp::Mul => format!("{a} * {b}"),
                GridOp::Div => format!("{a} / {b}"),
                GridOp::Mod => format!("{a} % {b}"),
                GridOp::CeilDiv => format!("ceildiv({a}, {b})"),
                GridOp::Min => format!("min({a}, {b})"),
                GridOp::Max => format!("max({a}, {b})"),
            }
        }
    }
}

/// The launcher parameters read straight from the signature, when it is
/// well-formed enough (the body may still be wrong).
fn fallback_args(sig: &syn::Signature) -> Option<Vec<TokenStream>> {
    let is_output = |input: &syn::FnArg| match input {
        syn::FnArg::Typed(pt) => matches!(&*pt.ty, syn::Type::Path(tp)
            if tp.path.segments.last().is_some_and(|s| s.ident == "Output")),
        _ => false,
    };
    sig.inputs
        .iter()
        .filter(|input| !is_output(input))
        .map(|input| {
            let syn::FnArg::Typed(pt) = input else {
                return None;
            };
            let syn::Pat::Ident(pi) = &*pt.pat else {
                return None;
            };
            let syn::Type::Path(tp) = &*pt.ty else {
                return None;
            };
            let n = &pi.ident;
            // A scalar; of a type parameter's (or an unknown) type: any value.
            if let Some(i) = tp.path.get_ident() {
                return Some(match DType::from_rust_name(&i.to_string()) {
                    Some(t) => {
                        let t = elem_type(t, Span::call_site());
                        quote!(#n: #t)
                    }
                    None => quote!(#n: impl ::core::marker::Copy),
                });
            }
            let seg = tp.path.segments.last()?;
            let syn::PathArguments::AngleBracketed(ab) = &seg.arguments else {
                return None;
            };
            let Some(syn::GenericArgument::Type(syn::Type::Path(dt))) = ab.args.first() else {
                return None;
            };
            // The element of a dtype-generic kernel's tensors is any element type.
            let elem = DType::from_rust_name(&dt.path.get_ident()?.to_string())
                .map(|t| elem_type(t, Span::call_site()));
            match (seg.ident.to_string().as_str(), elem) {
                ("Tensor", Some(t)) => Some(quote!(#n: &impl ::tile::TensorArg<Elem = #t>)),
                ("TensorMut", Some(t)) => {
                    Some(quote!(#n: &mut impl ::tile::TensorArgMut<Elem = #t>))
                }
                ("Tensor", None) => Some(quote!(#n: &impl ::tile::TensorArg)),
                ("TensorMut", None) => Some(quote!(#n: &mut impl ::tile::TensorArgMut)),
                _ => None,
            }
        })
        .collect()
}

/// A dtype as the docs write it (`f16`).
pub(crate) fn dtype_text(t: DType) -> String {
    format!("`{}`", t.rust_name())
}

pub(crate) fn elem_type(t: DType, span: Span) -> TokenStream {
    match t {
        DType::F16 => quote_spanned!(span=> ::tile::__private::f16),
        DType::BF16 => quote_spanned!(span=> ::tile::__private::bf16),
        DType::F8E4M3 => quote_spanned!(span=> ::tile::__private::f8e4m3),
        DType::F8E5M2 => quote_spanned!(span=> ::tile::__private::f8e5m2),
        other => {
            let id = syn::Ident::new(other.rust_name(), span);
            quote!(#id)
        }
    }
}

/// The launcher of a compiled kernel: a typed function, and a module of the same name
/// with its spec, its cache slot and helpers.
pub fn launcher(item: &syn::ItemFn, c: &Compiled) -> TokenStream {
    let desc = match describe(c) {
        Ok(d) => d,
        Err(m) => return syn::Error::new(Span::call_site(), m).to_compile_error(),
    };
    let sig = Signature::new(&c.def.params, &desc);
    let aot = Aot::find(&desc);
    let spec = spec_tokens(&desc, &aot);
    let checks = const_checks(&c.def.consts);
    let docs = launcher_docs(item, &desc, &c.def.params, (&[], &[]), None);
    let m = module(item, &sig, &aot, spec, docs);
    quote!(#checks #m)
}

/// The launcher's side of the parameters.
pub(crate) struct Signature {
    /// Typed parameters of the launcher (every buffer but the `Output<..>`s).
    pub args: Vec<TokenStream>,
    /// Their names, to pass them on.
    pub names: Vec<syn::Ident>,
    /// Outputs the launcher allocates (`Output<..>`), shapes from the inputs.
    pub outs: Vec<Output>,
    /// One argument reference per buffer parameter, in declaration order.
    pub refs: Vec<TokenStream>,
    /// One value per scalar parameter, in declaration order.
    pub scalars: Vec<TokenStream>,
}

pub(crate) struct Output {
    name: syn::Ident,
    elem: TokenStream,
    /// The statement allocating it.
    pub alloc: TokenStream,
}

impl Signature {
    fn new(params: &[ParamDef], desc: &KernelDesc) -> Signature {
        Signature::with_elems(params, desc, |_, pd| elem_type(pd.dtype, pd.ty_span.start))
    }

    /// The signature with parameter `k`'s element type `elem(k, ..)` (a type
    /// parameter's name for the generic parameters of a dtype-generic kernel).
    pub fn with_elems(
        params: &[ParamDef],
        desc: &KernelDesc,
        elem: impl Fn(usize, &ParamDef) -> TokenStream,
    ) -> Signature {
        let p = quote!(::tile::__private);
        let mut sig = Signature {
            args: Vec::new(),
            names: Vec::new(),
            outs: Vec::new(),
            refs: Vec::new(),
            scalars: Vec::new(),
        };
        // Buffers in declaration order, as `desc.params` lists them.
        let bufs: Vec<ParamDef> = params.iter().filter(|p| !p.scalar).cloned().collect();
        let mut i = 0;
        for (k, pd) in params.iter().enumerate() {
            let n = &pd.name;
            let t = elem(k, pd);
            if pd.scalar {
                sig.args.push(quote_spanned!(pd.ty_span.start=> #n: #t));
                sig.scalars.push(quote!(#p::scalar_arg::<#t>(#n)));
                sig.names.push(n.clone());
                continue;
            }
            i += 1;
            let i = i - 1;
            if pd.alloc {
                sig.outs.push(output(&bufs, desc, i, t));
                sig.refs.push(quote!(#p::ArgRef::output(&mut #n)));
                continue;
            }
            // Tensors and borrowed views alike (`tile::TensorArg`).
            if pd.mutable {
                sig.args.push(
                    quote_spanned!(pd.ty_span.start=> #n: &mut impl ::tile::TensorArgMut<Elem = #t>),
                );
                sig.refs.push(quote!(#p::TensorArgMut::arg_mut(#n)));
            } else {
                sig.args.push(
                    quote_spanned!(pd.ty_span.start=> #n: &impl ::tile::TensorArg<Elem = #t>),
                );
                sig.refs.push(quote!(#p::TensorArg::arg(#n)));
            }
            sig.names.push(n.clone());
        }
        sig
    }

    /// The launcher's return type: `()`, one tensor, or a tuple of the outputs.
    pub fn ret(&self) -> TokenStream {
        match self.outs.as_slice() {
            [] => quote!(()),
            [o] => {
                let t = &o.elem;
                quote!(::tile::Tensor<#t>)
            }
            outs => {
                let ts = outs.iter().map(|o| &o.elem);
                quote!((#(::tile::Tensor<#ts>),*))
            }
        }
    }

    /// The launcher's return value, matching [`ret`](Self::ret).
    pub fn ret_val(&self) -> TokenStream {
        match self.outs.as_slice() {
            [] => quote!(()),
            [o] => {
                let n = &o.name;
                quote!(#n)
            }
            outs => {
                let ns = outs.iter().map(|o| &o.name);
                quote!((#(#ns),*))
            }
        }
    }
}

/// Output parameter `i` (an `Output<..>`): allocated on the stream's device, else the
/// first input's, with each dynamic dim read from the first input carrying it (the
/// frontend checked that one does).
fn output(params: &[ParamDef], desc: &KernelDesc, i: usize, elem: TokenStream) -> Output {
    let p = quote!(::tile::__private);
    let name = params[i].name.clone();
    let inputs = || params.iter().zip(&desc.params).filter(|(q, _)| !q.alloc);
    let dims = desc.params[i].shape.iter().map(|d| match *d {
        DimSpec::Static(v) => {
            let v = v as usize;
            quote!(#v)
        }
        DimSpec::Dyn(k) => {
            let (q, axis) = inputs()
                .find_map(|(q, qd)| {
                    let axis = qd.shape.iter().position(|e| *e == DimSpec::Dyn(k))?;
                    Some((&q.name, axis))
                })
                .unwrap_or((&name, 0));
            quote!(#p::TensorArg::arg(&*#q).shape().get(#axis).copied().unwrap_or(0))
        }
    });
    let device = match inputs().next() {
        Some((q, _)) => {
            let q = &q.name;
            quote!(#p::TensorArg::arg(&*#q).device())
        }
        None => quote!(::tile::Device::default()),
    };
    let alloc = quote! {
        let mut #name = ::tile::Tensor::<#elem>::empty(
            &[#(#dims),*],
            stream.map(|s| s.device()).unwrap_or_else(|| #device),
        )?;
    };
    Output { name, elem, alloc }
}

fn dtype_tokens(t: DType) -> TokenStream {
    let v = format_ident!("{}", t.variant_name());
    quote!(::tile::__private::DType::#v)
}

fn grid_tokens(g: &Grid) -> TokenStream {
    let e = quote!(::tile::__private::GridExpr);
    match g {
        Grid::Const(v) => quote!(#e::Const(#v)),
        Grid::Dim(d) => quote!(#e::Dim(#d)),
        Grid::Op(op, a, b) => {
            let (v, a, b) = (
                format_ident!("{}", op.variant_name()),
                grid_tokens(a),
                grid_tokens(b),
            );
            quote!(#e::#v(&#a, &#b))
        }
    }
}

fn dim_tokens(d: DimSpec) -> TokenStream {
    let p = quote!(::tile::__private);
    match d {
        DimSpec::Static(v) => quote!(#p::DimSpec::Static(#v)),
        DimSpec::Dyn(k) => quote!(#p::DimSpec::Dyn(#k)),
    }
}

/// The `KernelSpec` constant of `desc`, with the ahead-of-time artifacts found.
pub(crate) fn spec_tokens(desc: &KernelDesc, aot: &Aot) -> TokenStream {
    let p = quote!(::tile::__private);
    let scalars = desc.scalars.iter().map(|(name, t)| {
        let dt = dtype_tokens(*t);
        quote!(#p::ScalarSpec { name: #name, dtype: #dt })
    });
    let params = desc.params.iter().map(|pd| {
        let (name, out, align) = (&pd.name, pd.output, pd.align);
        let dt = dtype_tokens(pd.dtype);
        let dims = pd.shape.iter().copied().map(dim_tokens);
        quote!(#p::ParamSpec { name: #name, dtype: #dt, shape: &[#(#dims),*], output: #out, align: #align })
    });
    let (name, dims, threads, ir) = (&desc.name, &desc.dims, desc.threads, &desc.ir);
    let grid = desc.grid.iter().map(grid_tokens);
    let (c_key, c_sym, c_src) = (&desc.cpu.key, &desc.cpu.symbol, &desc.cpu.source);
    let c_aot = &aot.c_entry;
    let cuda = cuda_tokens(&desc.cuda, &aot.cubins);
    let hopper = match &desc.cuda_sm90a {
        Some(v) => {
            let k = cuda_tokens(v, &aot.cubins_sm90a);
            quote!(::core::option::Option::Some(#k))
        }
        None => quote!(::core::option::Option::None),
    };
    quote! {
        #p::KernelSpec {
            name: #name,
            params: &[#(#params),*],
            scalars: &[#(#scalars),*],
            dims: &[#(#dims),*],
            grid: [#(&#grid),*],
            threads: #threads,
            ir: #ir,
            cpu: #p::CpuKernel { key: #c_key, symbol: #c_sym, source: #c_src, aot: #c_aot },
            cuda: #cuda,
            cuda_sm90a: #hopper,
        }
    }
}

/// A `CudaKernel` constant: one CUDA source and its embedded cubins.
fn cuda_tokens(d: &CudaDesc, cubins: &[TokenStream]) -> TokenStream {
    let p = quote!(::tile::__private);
    let (key, entry, src, shared) = (&d.key, &d.entry, &d.source, d.shared_bytes);
    quote!(#p::CudaKernel { key: #key, entry: #entry, source: #src, cubins: &[#(#cubins),*], shared_bytes: #shared })
}

/// Ahead-of-time artifacts placed by the crate's build script, if their keys match
/// this kernel exactly.
pub(crate) struct Aot {
    /// Makes the crate rebuild when the build script's manifest changes.
    pub track: TokenStream,
    /// The declaration of the linked C entry point.
    pub c_extern: TokenStream,
    /// `Some(entry)` or `None`.
    c_entry: TokenStream,
    /// `(arch, bytes)` of each embedded cubin.
    cubins: Vec<TokenStream>,
    /// The same for the Hopper specialization.
    cubins_sm90a: Vec<TokenStream>,
}

impl Aot {
    pub fn find(desc: &KernelDesc) -> Aot {
        let p = quote!(::tile::__private);
        let c_sym = &desc.cpu.symbol;
        let art = tile_core::build::lookup_artifacts(c_sym, &desc.cuda.key);
        let track = art.manifest.as_ref().map(|m| {
            let m = m.display().to_string();
            quote!(
                const _: &[u8] = include_bytes!(#m);
            )
        });
        let (c_extern, c_entry) = match &art.c_lib {
            Some(lib) => (
                quote! {
                    #[link(name = #lib, kind = "static")]
                    unsafe extern "C" {
                        #[link_name = #c_sym]
                        fn __tile_cpu_entry(bufs: *const *mut ::core::ffi::c_void, dims: *const i64, grid: *const i64, begin: i64, end: i64);
                    }
                },
                quote!(::core::option::Option::Some(__tile_cpu_entry as #p::CpuEntry)),
            ),
            None => (quote!(), quote!(::core::option::Option::None)),
        };
        let embed = |cubins: &[(String, std::path::PathBuf)]| -> Vec<TokenStream> {
            cubins
                .iter()
                .map(|(arch, path)| {
                    let path = path.display().to_string();
                    quote!((#arch, include_bytes!(#path) as &[u8]))
                })
                .collect()
        };
        let cubins_sm90a = match &desc.cuda_sm90a {
            Some(v) => embed(&tile_core::build::lookup_artifacts(c_sym, &v.key).cubins),
            None => Vec::new(),
        };
        Aot {
            track: quote!(#track),
            c_extern,
            c_entry,
            cubins: embed(&art.cubins),
            cubins_sm90a,
        }
    }
}

/// The typed launcher and its module.
fn module(
    item: &syn::ItemFn,
    sig: &Signature,
    aot: &Aot,
    spec: TokenStream,
    docs: TokenStream,
) -> TokenStream {
    let p = quote!(::tile::__private);
    let (vis, name) = (&item.vis, &item.sig.ident);
    let doc = format!("Launch helpers and the compiled form of kernel `{name}`.");
    let (args, names, refs) = (&sig.args, &sig.names, &sig.refs);
    // Kernels without scalars keep the launch call they always had.
    let launch = match sig.scalars.as_slice() {
        [] => quote!(#p::launch(&SPEC, &SLOT, stream, &[#(#refs),*])),
        scalars => {
            quote!(#p::launch_scalars(&SPEC, &SLOT, stream, &[#(#refs),*], &[#(#scalars),*]))
        }
    };
    let allocs = sig.outs.iter().map(|o| &o.alloc);
    let (ret, ret_val) = (sig.ret(), sig.ret_val());
    let (track, c_extern) = (&aot.track, &aot.c_extern);
    let helpers = helpers();
    quote! {
        #docs
        #[allow(clippy::too_many_arguments)]
        #vis fn #name(#(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
            #name::launch_on(::core::option::Option::None, #(#names),*)
        }

        #[doc = #doc]
        #[allow(non_snake_case, dead_code)]
        #vis mod #name {
            #track
            #c_extern

            /// Everything the runtime needs to check, find and launch this kernel.
            pub static SPEC: #p::KernelSpec = #spec;
            static SLOT: #p::KernelSlot = #p::KernelSlot::new();

            /// Launches on `stream`, or on the tensors' device's default stream.
            #[allow(clippy::too_many_arguments)]
            pub fn launch_on(stream: ::core::option::Option<&::tile::Stream>, #(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
                #(#allocs)*
                #launch?;
                ::core::result::Result::Ok(#ret_val)
            }

            /// A launcher bound to an explicit stream.
            pub struct Launcher<'s>(&'s ::tile::Stream);

            /// Binds an explicit stream: `kernel::on(&stream).launch(..)`.
            pub fn on(stream: &::tile::Stream) -> Launcher<'_> {
                Launcher(stream)
            }

            impl Launcher<'_> {
                #[allow(clippy::too_many_arguments)]
                pub fn launch(&self, #(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
                    launch_on(::core::option::Option::Some(self.0), #(#names),*)
                }
            }

            #helpers
        }
    }
}

/// The module's functions that read the spec and slot: sources, IR, host side, export
/// and profiler.
fn helpers() -> TokenStream {
    helpers_of(quote!(), quote!(&SPEC), quote!(&SLOT))
}

/// [`helpers`] over `spec` and `slot`, generic over `generics` (a dtype-generic
/// kernel's `<D: Dtype>`, whose instance they read).
pub(crate) fn helpers_of(
    generics: TokenStream,
    spec: TokenStream,
    slot: TokenStream,
) -> TokenStream {
    let p = quote!(::tile::__private);
    quote! {
        /// The generated device source for a target.
        pub fn source #generics(target: ::tile::Target) -> &'static str {
            #p::kernel_source(#spec, target)
        }

        /// The IR script the cache keys are derived from.
        pub fn ir #generics() -> &'static str {
            (#spec).ir
        }

        /// The host side as readable text: the checks in order, the grid, the launch.
        pub fn host_source #generics() -> ::std::string::String {
            #p::host_source(#spec)
        }

        /// Writes the device sources, the host side and the IR into `dir`.
        pub fn export_sources #generics(dir: impl ::core::convert::AsRef<::std::path::Path>) -> ::core::result::Result<::std::vec::Vec<::std::path::PathBuf>, ::tile::Error> {
            #p::export_sources(#spec, dir.as_ref())
        }

        /// A profiler of this kernel on random inputs (`assert_allclose`, `do_bench`).
        pub fn profiler #generics() -> ::tile::Profiler {
            ::tile::Profiler::new(#spec, #slot)
        }
    }
}

#[cfg(test)]
mod tests {
    /// The expansion of `src` (one kernel, no variants or dtype list).
    fn expand(attr: proc_macro2::TokenStream, src: &str) -> String {
        let item: syn::ItemFn = syn::parse_str(src).expect("a function");
        let i = tile_core::frontend::instances(attr, &item)
            .expect("instances")
            .remove(0);
        let c = tile_core::frontend::parse_kernel_in(i.attr, &i.item, &Default::default())
            .and_then(tile_core::compile)
            .expect("the kernel compiles");
        super::launcher(&item, &c).to_string()
    }

    /// The doc text before the launcher's `fn`.
    fn docs_of(out: &str, name: &str) -> String {
        let at = out.find(&format!("pub fn {name}")).expect("the launcher");
        out[..at].replace("\\n", "\n")
    }

    #[test]
    fn the_launcher_carries_the_kernels_docs_and_a_generated_section() {
        let out = expand(
            quote::quote!(block_n = 256, threads = 128, W = 4),
            "/// Scales `x` by `temp`.
            pub fn scale(x: Tensor<f32, (N,)>, temp: f32, y: TensorMut<f32, (N, W)>) {
                T::kernel(T::ceildiv(N, block_n), threads, |bx| {
                    for i in T::parallel(block_n) {
                        y[(bx * block_n + i, 0)] = x[bx * block_n + i] * temp;
                    }
                });
            }",
        );
        let docs = docs_of(&out, "scale");
        for want in [
            "Scales `x` by `temp`.",
            "# Kernel",
            "| `x` | `f32` | `[N]` | input |",
            "| `temp` | `f32` | scalar | by value |",
            "| `y` | `f32` | `[N, 4]` | output (written) |",
            "Dynamic dims: `N`",
            "Grid: `[ceildiv(N, 256)]` blocks of 128 threads.",
        ] {
            assert!(
                docs.contains(want),
                "{want:?} not in the launcher's docs:\n{docs}"
            );
        }
        assert!(!docs.contains("Launches kernel"), "{docs}");
    }

    #[test]
    fn a_kernel_without_docs_gets_a_summary_line() {
        let out = expand(
            quote::quote!(threads = 32, R = 2),
            "pub fn fill(y: TensorMut<i32, (R, M)>) {
                T::kernel([2, T::ceildiv(M, 32)], threads, |bx, by| {
                    for i in T::parallel(32) {
                        y[(bx, by * 32 + i)] = 1;
                    }
                });
            }",
        );
        let docs = docs_of(&out, "fill");
        assert!(docs.contains("Launches kernel `fill`."), "{docs}");
        assert!(docs.contains("Grid: `[2, ceildiv(M, 32)]`"), "{docs}");
    }
}
