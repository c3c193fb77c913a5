//! The expansion: a typed launcher function plus a module of the same name
//! holding the kernel's static spec, its in-process cache slot and helpers.
//! Generated code names only `::tile::__private::…` and `::tile::…`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use tile_core::ir::{BinOp, DType, Expr, PrimFunc};
use tile_core::Compiled;

pub fn errors(item: &syn::ItemFn, diags: &[tile_core::Diagnostic]) -> TokenStream {
    let errs = diags.iter().map(|d| {
        // Two tokens carrying the range's ends: `new_spanned` underlines from
        // the first to the last.
        let ends = quote::quote_spanned!(d.span.start=> a)
            .into_iter()
            .chain(quote::quote_spanned!(d.span.end=> b));
        syn::Error::new_spanned(ends.collect::<TokenStream>(), &d.message).to_compile_error()
    });
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
            let seg = tp.path.segments.last()?;
            let syn::PathArguments::AngleBracketed(ab) = &seg.arguments else {
                return None;
            };
            let Some(syn::GenericArgument::Type(syn::Type::Path(dt))) = ab.args.first() else {
                return None;
            };
            let dtype = DType::from_rust_name(&dt.path.get_ident()?.to_string())?;
            let (n, t) = (&pi.ident, elem_type(dtype, Span::call_site()));
            match seg.ident.to_string().as_str() {
                "Tensor" => Some(quote!(#n: &::tile::Tensor<#t>)),
                "TensorMut" => Some(quote!(#n: &mut ::tile::Tensor<#t>)),
                _ => None,
            }
        })
        .collect()
}

fn elem_type(t: DType, span: Span) -> TokenStream {
    match t {
        DType::F16 => quote_spanned!(span=> ::tile::__private::f16),
        DType::BF16 => quote_spanned!(span=> ::tile::__private::bf16),
        other => {
            let id = syn::Ident::new(other.rust_name(), span);
            quote!(#id)
        }
    }
}

fn dtype_tokens(t: DType) -> TokenStream {
    let v = format_ident!("{}", format!("{t:?}"));
    quote!(::tile::__private::DType::#v)
}

fn grid_tokens(f: &PrimFunc, e: &Expr) -> Result<TokenStream, String> {
    let g = quote!(::tile::__private::GridExpr);
    Ok(match e {
        Expr::Int(v, _) => quote!(#g::Const(#v)),
        Expr::Var(v, _) => {
            let i = f
                .dims
                .iter()
                .position(|d| d == v)
                .ok_or("grid uses a non-dim variable")? as u32;
            quote!(#g::Dim(#i))
        }
        Expr::Cast(_, a) => grid_tokens(f, a)?,
        Expr::Bin(op, a, b, _) => {
            let (a, b) = (grid_tokens(f, a)?, grid_tokens(f, b)?);
            let v = match op {
                BinOp::Add => quote!(Add),
                BinOp::Sub => quote!(Sub),
                BinOp::Mul => quote!(Mul),
                BinOp::Div => quote!(Div),
                BinOp::Rem => quote!(Mod),
                BinOp::Min => quote!(Min),
                BinOp::Max => quote!(Max),
                _ => return Err("unsupported operator in the grid".into()),
            };
            quote!(#g::#v(&#a, &#b))
        }
        _ => return Err("unsupported grid expression".into()),
    })
}

pub fn launcher(item: &syn::ItemFn, c: &Compiled) -> TokenStream {
    let f = &c.def.func;
    let vis = &item.vis;
    let name = &item.sig.ident;
    let name_str = name.to_string();
    let p = quote!(::tile::__private);

    // Typed parameters of the launcher.
    let mut args = Vec::new();
    let mut names = Vec::new();
    // Outputs the launcher allocates (`Output<..>`): shapes from the inputs.
    let mut outs = Vec::new();
    let first_input = c
        .def
        .params
        .iter()
        .find(|p| !p.alloc)
        .map(|p| p.name.clone());
    for (i, pd) in c.def.params.iter().enumerate() {
        if !pd.alloc {
            continue;
        }
        let n = &pd.name;
        let t = elem_type(pd.dtype, pd.ty_span.start);
        let buf = f.buf(f.params[i]);
        let dims = buf.shape.iter().map(|d| match d {
            Expr::Int(v, _) => {
                let v = *v as usize;
                quote!(#v)
            }
            Expr::Var(v, _) => {
                // The first input carrying the dim (the frontend checked one does).
                let (q, axis) = c
                    .def
                    .params
                    .iter()
                    .zip(&f.params)
                    .filter(|(q, _)| !q.alloc)
                    .find_map(|(q, &qb)| {
                        f.buf(qb)
                            .shape
                            .iter()
                            .position(|e| matches!(e, Expr::Var(x, _) if x == v))
                            .map(|a| (&q.name, a))
                    })
                    .unwrap_or((&pd.name, 0));
                quote!(#q.shape().get(#axis).copied().unwrap_or(0))
            }
            _ => quote!(0usize),
        });
        let device = match &first_input {
            Some(q) => quote!(#q.device()),
            None => quote!(::tile::Device::default()),
        };
        outs.push((
            n.clone(),
            t.clone(),
            quote! {
                let mut #n = ::tile::Tensor::<#t>::empty(
                    &[#(#dims),*],
                    stream.map(|s| s.device()).unwrap_or_else(|| #device),
                )?;
            },
        ));
    }
    let ret = match outs.len() {
        0 => quote!(()),
        1 => {
            let t = &outs[0].1;
            quote!(::tile::Tensor<#t>)
        }
        _ => {
            let ts = outs.iter().map(|o| &o.1);
            quote!((#(::tile::Tensor<#ts>),*))
        }
    };
    let ret_val = match outs.len() {
        0 => quote!(()),
        1 => {
            let n = &outs[0].0;
            quote!(#n)
        }
        _ => {
            let ns = outs.iter().map(|o| &o.0);
            quote!((#(#ns),*))
        }
    };
    let allocs = outs.iter().map(|o| &o.2);
    // One argument reference per kernel parameter, in declaration order.
    let mut refs = Vec::new();
    for pd in &c.def.params {
        let n = &pd.name;
        let t = elem_type(pd.dtype, pd.ty_span.start);
        if pd.alloc {
            refs.push(quote!(#p::ArgRef::output(&mut #n)));
            continue;
        }
        if pd.mutable {
            args.push(quote_spanned!(pd.ty_span.start=> #n: &mut ::tile::Tensor<#t>));
            refs.push(quote!(#p::ArgRef::output(#n)));
        } else {
            args.push(quote_spanned!(pd.ty_span.start=> #n: &::tile::Tensor<#t>));
            refs.push(quote!(#p::ArgRef::input(#n)));
        }
        names.push(n.clone());
    }

    // Static parameter table.
    let params = f.params.iter().enumerate().map(|(i, &b)| {
        let buf = f.buf(b);
        let pname = &buf.name;
        let dt = dtype_tokens(buf.dtype);
        let dims = buf.shape.iter().map(|d| match d {
            Expr::Int(v, _) => quote!(#p::DimSpec::Static(#v)),
            Expr::Var(v, _) => {
                let k = f.dims.iter().position(|x| x == v).unwrap_or(0) as u32;
                quote!(#p::DimSpec::Dyn(#k))
            }
            _ => quote!(#p::DimSpec::Static(0)),
        });
        let out = buf.mutable;
        let align = c.param_align.get(i).copied().unwrap_or(1);
        quote!(#p::ParamSpec { name: #pname, dtype: #dt, shape: &[#(#dims),*], output: #out, align: #align })
    });
    let dim_names = f.dims.iter().map(|&d| f.var(d).name.clone());
    let mut grid = Vec::new();
    for d in 0..3 {
        match f.launch.grid.get(d) {
            Some(e) => match grid_tokens(f, e) {
                Ok(t) => grid.push(t),
                Err(m) => return syn::Error::new(Span::call_site(), m).to_compile_error(),
            },
            None => grid.push(quote!(#p::GridExpr::Const(1))),
        }
    }
    let threads = f.launch.threads as u32;
    let ir = &c.script;
    let (c_key, c_sym, c_src) = (&c.c_key, &c.c_symbol, &c.c_source);
    let (cu_key, cu_entry, cu_src) = (&c.cuda_key, &c.cuda_entry, &c.cuda_source);
    let shared = c.cuda_shared_bytes as u32;

    // Ahead-of-time artifacts placed by the crate's build script, if their
    // keys match this kernel exactly.
    let art = tile_core::build::lookup_artifacts(c_sym, cu_key);
    let track = art.manifest.as_ref().map(|m| {
        let m = m.display().to_string();
        quote!(
            const _: &[u8] = include_bytes!(#m);
        )
    });
    let (c_extern, c_aot) = match &art.c_lib {
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
    let cubins = art.cubins.iter().map(|(arch, path)| {
        let path = path.display().to_string();
        quote!((#arch, include_bytes!(#path) as &[u8]))
    });
    let doc = format!("Launch helpers and the compiled form of kernel `{name_str}`.");

    quote! {
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
            pub static SPEC: #p::KernelSpec = #p::KernelSpec {
                name: #name_str,
                params: &[#(#params),*],
                dims: &[#(#dim_names),*],
                grid: [#(&#grid),*],
                threads: #threads,
                ir: #ir,
                cpu: #p::CpuKernel { key: #c_key, symbol: #c_sym, source: #c_src, aot: #c_aot },
                cuda: #p::CudaKernel { key: #cu_key, entry: #cu_entry, source: #cu_src, cubins: &[#(#cubins),*], shared_bytes: #shared },
            };
            static SLOT: #p::KernelSlot = #p::KernelSlot::new();

            /// Launches on `stream`, or on the tensors' device's default stream.
            #[allow(clippy::too_many_arguments)]
            pub fn launch_on(stream: ::core::option::Option<&::tile::Stream>, #(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
                #(#allocs)*
                #p::launch(&SPEC, &SLOT, stream, &[#(#refs),*])?;
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

            /// The generated device source for a target.
            pub fn source(target: ::tile::Target) -> &'static str {
                #p::kernel_source(&SPEC, target)
            }

            /// The IR script the cache keys are derived from.
            pub fn ir() -> &'static str {
                SPEC.ir
            }

            /// The host side as readable text: the checks in order, the grid, the launch.
            pub fn host_source() -> ::std::string::String {
                #p::host_source(&SPEC)
            }

            /// Writes the device sources, the host side and the IR into `dir`.
            pub fn export_sources(dir: impl ::core::convert::AsRef<::std::path::Path>) -> ::core::result::Result<::std::vec::Vec<::std::path::PathBuf>, ::tile::Error> {
                #p::export_sources(&SPEC, dir.as_ref())
            }

            /// A profiler of this kernel on random inputs (`assert_allclose`, `do_bench`).
            pub fn profiler() -> ::tile::Profiler {
                ::tile::Profiler::new(&SPEC, &SLOT)
            }
        }
    }
}
