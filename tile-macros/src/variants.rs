//! The expansion of a kernel with a variant space
//! (`#[tile::kernel(block_m = [64, 128], threads = [128, 256], ..)]`): still one typed
//! launcher, which asks the runtime which variant to launch.
//!
//! ```ignore
//! pub fn k(a: &impl TensorArg<Elem = f16>, ..) -> Result<..>   // or k<D: k::Dtype> with a dtype list
//! pub mod k {
//!     pub struct Config { pub block_m: i64, pub threads: i64 }  // the listed parameters
//!     pub const CONFIGS: &[Config]; pub const LABELS: &[&str];  // the valid variants, default first
//!     // (the default: the combination `default(..)` marks, else the first the filter keeps)
//!     pub mod __v0 { pub static SPEC: KernelSpec = ..; pub static SLOT: .. }  // per dtype: __f16::__v0
//!     pub static SET: VariantSet = ..;                           // the runtime's view, choices
//!     pub fn with(c: Config) -> Chosen, tune() -> Chosen, on(&stream), reports(), ..
//! }
//! ```
//!
//! Each variant launches through `launch_scalars` with its own spec as a constant (one
//! `match` arm each), so a warm launch of any variant takes the inlined warm path.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use tile_core::abi::describe;
use tile_core::frontend::Variant;
use tile_core::ir::{ConstVal, DType};
use tile_core::Compiled;

use crate::expand::{
    const_checks, elem_type, helpers_of, launcher_docs, spec_tokens, Aot, Signature,
};

/// One compiled instance: its dtype (of a dtype-generic kernel), variant and code.
pub struct Built {
    pub dtype: Option<DType>,
    pub variant: Variant,
    pub compiled: Compiled,
}

fn err(m: String) -> TokenStream {
    syn::Error::new(Span::call_site(), m).to_compile_error()
}

/// The launcher of a kernel with a variant space.
pub fn launcher(item: &syn::ItemFn, built: &[Built]) -> TokenStream {
    let p = quote!(::tile::__private);
    let (vis, name) = (&item.vis, &item.sig.ident);
    let Some(first) = built.first() else {
        return quote!();
    };
    let generic = first.dtype.is_some();
    let desc = match describe(&first.compiled) {
        Ok(d) => d,
        Err(m) => return err(m),
    };
    // The variants, in order (every dtype has the same list).
    let variants: Vec<&Variant> = built
        .iter()
        .filter(|b| b.dtype == first.dtype)
        .map(|b| &b.variant)
        .collect();
    let dtypes: Vec<Option<DType>> = {
        let mut v: Vec<Option<DType>> = Vec::new();
        for b in built {
            if !v.contains(&b.dtype) {
                v.push(b.dtype);
            }
        }
        v
    };
    // The signature: a parameter of the type parameter's dtype in every instance is generic.
    let params = &first.compiled.def.params;
    let is_generic: Vec<bool> = (0..params.len())
        .map(|k| {
            generic
                && built.iter().all(|b| {
                    b.compiled
                        .def
                        .params
                        .get(k)
                        .is_some_and(|q| Some(q.dtype) == b.dtype)
                })
        })
        .collect();
    let sig = Signature::with_elems(params, &desc, |k, pd| match is_generic[k] {
        true => quote!(D),
        false => elem_type(pd.dtype, pd.ty_span.start),
    });

    // Config: one field per variant parameter.
    let fields: Vec<(syn::Ident, TokenStream)> = first
        .variant
        .values
        .iter()
        .map(|(n, v)| {
            let t = match v {
                ConstVal::Int(_) => quote!(i64),
                ConstVal::Float(_) => quote!(f64),
                ConstVal::Bool(_) => quote!(bool),
            };
            (format_ident!("{}", n), t)
        })
        .collect();
    let field_decls = fields.iter().map(|(n, t)| {
        let doc = format!("`{n}` of the attribute.");
        quote!(#[doc = #doc] pub #n: #t)
    });
    let config_of = |v: &Variant| {
        let vals = v.values.iter().map(|(n, val)| {
            let n = format_ident!("{}", n);
            let lit = match val {
                ConstVal::Int(i) => {
                    let l = syn::LitInt::new(&format!("{i}i64"), Span::call_site());
                    quote!(#l)
                }
                ConstVal::Float(f) => {
                    let l = syn::LitFloat::new(&format!("{f:?}f64"), Span::call_site());
                    quote!(#l)
                }
                ConstVal::Bool(b) => quote!(#b),
            };
            quote!(#n: #lit)
        });
        quote!(Config { #(#vals),* })
    };
    let configs = variants.iter().map(|v| config_of(v));
    let default = config_of(variants[0]);
    let labels: Vec<String> = variants.iter().map(|v| v.label()).collect();
    let n = variants.len();

    // Per dtype: a module of variant modules, the set, the dispatch.
    let mut mods = Vec::new();
    let mut checks = Vec::new();
    let kernel_name = name.to_string();
    for t in &dtypes {
        let mut vmods = Vec::new();
        let mut arms = Vec::new();
        let mut specs = Vec::new();
        let mut slots = Vec::new();
        for (i, b) in built.iter().filter(|b| b.dtype == *t).enumerate() {
            let desc = match describe(&b.compiled) {
                Ok(d) => d,
                Err(m) => return err(m),
            };
            let aot = Aot::find(&desc);
            let spec = spec_tokens(&desc, &aot);
            let (track, c_extern) = (&aot.track, &aot.c_extern);
            if checks.is_empty() {
                checks.push(const_checks(&b.compiled.def.consts));
            }
            let m = format_ident!("__v{}", i);
            let doc = format!("Variant `{}` of kernel `{name}`.", b.variant.label());
            vmods.push(quote! {
                #[doc = #doc]
                #[doc(hidden)]
                pub mod #m {
                    #track
                    #c_extern
                    pub static SPEC: #p::KernelSpec = #spec;
                    pub static SLOT: #p::KernelSlot = #p::KernelSlot::new();
                }
            });
            arms.push(
                quote!(#i => #p::launch_scalars(&#m::SPEC, &#m::SLOT, stream, args, scalars)),
            );
            specs.push(quote!(&#m::SPEC));
            slots.push(quote!(&#m::SLOT));
        }
        let dname = t.map(|t| t.rust_name()).unwrap_or("");
        let labels_path = match t {
            Some(_) => quote!(super::LABELS),
            None => quote!(LABELS),
        };
        let body = quote! {
            #(#vmods)*
            /// The variants as the runtime sees them, with the choices tuned in this process.
            pub static SET: #p::VariantSet = #p::VariantSet::new(
                #kernel_name, #dname, #labels_path, &[#(#specs),*], &[#(#slots),*],
            );
            /// Launches variant `i`.
            #[inline(always)]
            pub fn launch_variant(
                i: usize,
                stream: ::core::option::Option<&::tile::Stream>,
                args: &[#p::ArgRef<'_>],
                scalars: &[#p::ScalarArg],
            ) -> ::core::result::Result<(), ::tile::Error> {
                match i {
                    #(#arms,)*
                    _ => ::core::result::Result::Err(::tile::Error::Tune {
                        kernel: #kernel_name,
                        message: ::std::format!("no variant {i}"),
                    }),
                }
            }
        };
        match t {
            Some(t) => {
                let m = format_ident!("__{}", t.rust_name());
                let elem = elem_type(*t, Span::call_site());
                mods.push(quote! {
                    #[doc(hidden)]
                    pub mod #m {
                        #body
                    }
                    impl Dtype for #elem {
                        #[inline(always)]
                        fn set() -> &'static #p::VariantSet {
                            &#m::SET
                        }
                        #[inline(always)]
                        fn launch_variant(
                            i: usize,
                            stream: ::core::option::Option<&::tile::Stream>,
                            args: &[#p::ArgRef<'_>],
                            scalars: &[#p::ScalarArg],
                        ) -> ::core::result::Result<(), ::tile::Error> {
                            #m::launch_variant(i, stream, args, scalars)
                        }
                    }
                });
            }
            None => mods.push(body),
        }
    }

    let (args, names, refs) = (&sig.args, &sig.names, &sig.refs);
    let scalars = &sig.scalars;
    let allocs = sig.outs.iter().map(|o| &o.alloc);
    let (ret, ret_val) = (sig.ret(), sig.ret_val());
    let (gen, gen_use, set, dispatch) = match generic {
        true => (
            quote!(<D: Dtype>),
            quote!(::<D>),
            quote!(D::set()),
            quote!(D::launch_variant),
        ),
        false => (quote!(), quote!(), quote!(&SET), quote!(launch_variant)),
    };
    let outer_gen = match generic {
        true => quote!(<D: #name::Dtype>),
        false => quote!(),
    };
    let (spec0, slot0) = match generic {
        true => (quote!(D::set().specs[0]), quote!(D::set().slots[0])),
        false => (quote!(&__v0::SPEC), quote!(&__v0::SLOT)),
    };
    let helpers = helpers_of(gen.clone(), spec0, slot0);
    let dtype_trait = match generic {
        true => {
            let listed: Vec<&str> = dtypes.iter().flatten().map(|t| t.rust_name()).collect();
            let message = format!("kernel `{name}` is not built for `{{Self}}`");
            let label = format!("`{name}` is built for {}", listed.join(", "));
            let note = "its attribute lists the dtypes it is built for (`dtype = [..]`)";
            let doc = format!(
                "The element types kernel `{name}` is built for: {}.",
                listed.join(", ")
            );
            quote! {
                #[doc = #doc]
                #[diagnostic::on_unimplemented(message = #message, label = #label, note = #note)]
                pub trait Dtype: ::tile::Element {
                    #[doc(hidden)]
                    fn set() -> &'static #p::VariantSet;
                    #[doc(hidden)]
                    fn launch_variant(
                        i: usize,
                        stream: ::core::option::Option<&::tile::Stream>,
                        args: &[#p::ArgRef<'_>],
                        scalars: &[#p::ScalarArg],
                    ) -> ::core::result::Result<(), ::tile::Error>;
                }
            }
        }
        false => quote!(),
    };
    let doc =
        format!("Launch helpers, the variants ({n}) and the tuned choices of kernel `{name}`.");
    let listed = labels.join("; ");
    let fn_doc = format!(
        "Launches kernel `{name}`: the variant tuned for these shapes in this process, else \
         the default (`{}`); with `TILE_AUTOTUNE=1`, tunes first. Variants: {listed}. The \
         grid and block below are the default's.",
        labels[0]
    );
    let listed: Vec<DType> = dtypes.iter().flatten().copied().collect();
    let fn_docs = launcher_docs(item, &desc, params, (&is_generic, &listed), Some(fn_doc));
    quote! {
        #(#checks)*

        #fn_docs
        #[allow(clippy::too_many_arguments)]
        #vis fn #name #outer_gen(#(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
            #name::launch_with #gen_use(#p::Pick::Auto, ::core::option::Option::None, #(#names),*)
        }

        #[doc = #doc]
        #[allow(non_snake_case, dead_code)]
        #vis mod #name {
            /// A configuration of the variant space: the value of each listed parameter.
            #[derive(Debug, Clone, Copy, PartialEq)]
            pub struct Config {
                #(#field_decls,)*
            }

            impl Config {
                /// The default variant: the one `default(..)` in the attribute marks, else
                /// the first combination (first values first) that the filter keeps.
                pub const DEFAULT: Config = #default;
            }

            impl ::core::default::Default for Config {
                fn default() -> Config {
                    Config::DEFAULT
                }
            }

            /// Every variant, in order (the first is the default).
            pub const CONFIGS: &[Config] = &[#(#configs),*];
            /// Every variant as `tile inspect --variant` and tuning reports name it.
            pub const LABELS: &[&str] = &[#(#labels),*];

            #dtype_trait

            #(#mods)*

            /// Launches with policy `how` on `stream` (or the tensors' device's default stream).
            #[allow(clippy::too_many_arguments)]
            pub fn launch_with #gen(how: #p::Pick, stream: ::core::option::Option<&::tile::Stream>, #(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
                #(#allocs)*
                let args = [#(#refs),*];
                let scalars: &[#p::ScalarArg] = &[#(#scalars),*];
                let i = #p::pick(#set, how, stream, &args, scalars)?;
                #dispatch(i, stream, &args, scalars)?;
                ::core::result::Result::Ok(#ret_val)
            }

            /// Launches on `stream`, or on the tensors' device's default stream.
            #[allow(clippy::too_many_arguments)]
            pub fn launch_on #gen(stream: ::core::option::Option<&::tile::Stream>, #(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
                launch_with #gen_use(#p::Pick::Auto, stream, #(#names),*)
            }

            /// A launcher with a stream and a policy: `k::on(&s)`, `k::with(config)`,
            /// `k::tune()` (combine: `k::tune().on(&s).launch(..)`).
            #[derive(Clone, Copy)]
            pub struct Launcher<'s> {
                stream: ::core::option::Option<&'s ::tile::Stream>,
                how: ::core::result::Result<#p::Pick, Config>,
            }

            /// Binds an explicit stream: `kernel::on(&stream).launch(..)`.
            pub fn on(stream: &::tile::Stream) -> Launcher<'_> {
                Launcher { stream: ::core::option::Option::Some(stream), how: ::core::result::Result::Ok(#p::Pick::Auto) }
            }

            /// Launches variant `config` (never tuned); a configuration that is not a
            /// variant (not listed, or dropped by the filter) fails at launch.
            pub fn with(config: Config) -> Launcher<'static> {
                let how = match CONFIGS.iter().position(|c| *c == config) {
                    ::core::option::Option::Some(i) => ::core::result::Result::Ok(#p::Pick::Fixed(i)),
                    ::core::option::Option::None => ::core::result::Result::Err(config),
                };
                Launcher { stream: ::core::option::Option::None, how }
            }

            /// Tunes these shapes if no choice exists for them (in this process or in
            /// the disk cache), then launches the chosen variant.
            pub fn tune() -> Launcher<'static> {
                Launcher { stream: ::core::option::Option::None, how: ::core::result::Result::Ok(#p::Pick::Tune) }
            }

            impl<'s> Launcher<'s> {
                /// The same policy on `stream`.
                pub fn on<'t>(self, stream: &'t ::tile::Stream) -> Launcher<'t> {
                    Launcher { stream: ::core::option::Option::Some(stream), how: self.how }
                }

                #[allow(clippy::too_many_arguments)]
                pub fn launch #gen(&self, #(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
                    match self.how {
                        ::core::result::Result::Ok(how) => launch_with #gen_use(how, self.stream, #(#names),*),
                        ::core::result::Result::Err(c) => ::core::result::Result::Err(::tile::Error::Tune {
                            kernel: #kernel_name,
                            message: ::std::format!(
                                "{c:?} is not a variant (not listed, or dropped by the filter); the variants are: {}",
                                LABELS.join("; ")
                            ),
                        }),
                    }
                }
            }

            /// The variants and the choices tuned in this process (`reports()`: each
            /// call shape's table of variants and times).
            pub fn variants #gen() -> &'static #p::VariantSet {
                #set
            }

            /// The tuning reports of this process (tuned here or read from the disk
            /// cache): per shape, every variant's time or why it was skipped.
            pub fn reports #gen() -> ::std::vec::Vec<::std::sync::Arc<#p::TuneReport>> {
                (#set).reports()
            }

            #helpers
        }
    }
}
