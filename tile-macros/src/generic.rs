//! The expansion of a dtype-generic kernel (`#[tile::kernel(dtype = [f16, bf16])]`):
//! one generic launcher over a trait that exactly the listed element types
//! implement, each with the spec and slot of its own compiled instance.
//!
//! ```ignore
//! pub fn k<D: k::Dtype>(a: &impl TensorArg<Elem = D>, ..) -> Result<..>
//! pub mod k {
//!     pub trait Dtype: Element { .. }          // f16 and bf16 only
//!     pub mod __f16 { pub static SPEC: KernelSpec = ..; pub static SLOT: .. }
//!     impl Dtype for f16 { .. }                // reads __f16::SPEC
//!     pub fn launch_on<D: Dtype>(..), on(&stream).launch::<D>(..), source::<D>(..), ..
//! }
//! ```
//!
//! Each instance is a kernel of its own (`k_f16`: its own script, key and
//! ahead-of-time artifacts); calling with another element type fails to
//! compile, with a message naming the kernel and its dtypes.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote};
use tile_core::abi::describe;
use tile_core::ir::DType;
use tile_core::Compiled;

use crate::expand::{
    const_checks, elem_type, helpers_of, launcher_docs, spec_tokens, Aot, Signature,
};

/// The launcher of a kernel compiled once per dtype of its type parameter.
pub fn launcher(item: &syn::ItemFn, instances: &[(DType, Compiled)]) -> TokenStream {
    let p = quote!(::tile::__private);
    let (vis, name) = (&item.vis, &item.sig.ident);
    let Some((_, first)) = instances.first() else {
        return quote!();
    };
    let desc = match describe(first) {
        Ok(d) => d,
        Err(m) => return syn::Error::new(Span::call_site(), m).to_compile_error(),
    };
    // A parameter of the type parameter's dtype in every instance is generic.
    let params = &first.def.params;
    let generic: Vec<bool> = (0..params.len())
        .map(|k| {
            instances
                .iter()
                .all(|(t, c)| c.def.params.get(k).is_some_and(|q| q.dtype == *t))
        })
        .collect();
    let sig = Signature::with_elems(params, &desc, |k, pd| match generic[k] {
        true => quote!(D),
        false => elem_type(pd.dtype, pd.ty_span.start),
    });
    let mut mods = Vec::new();
    let mut checks = Vec::new();
    for (t, c) in instances {
        let desc = match describe(c) {
            Ok(d) => d,
            Err(m) => return syn::Error::new(Span::call_site(), m).to_compile_error(),
        };
        let aot = Aot::find(&desc);
        let spec = spec_tokens(&desc, &aot);
        let (track, c_extern) = (&aot.track, &aot.c_extern);
        let m = format_ident!("__{}", t.rust_name());
        let elem = elem_type(*t, Span::call_site());
        let doc = format!("The `{}` instance of kernel `{name}`.", t.rust_name());
        checks.push(const_checks(&c.def.consts));
        mods.push(quote! {
            #[doc = #doc]
            #[doc(hidden)]
            pub mod #m {
                #track
                #c_extern
                /// Everything the runtime needs to check, find and launch this instance.
                pub static SPEC: #p::KernelSpec = #spec;
                pub static SLOT: #p::KernelSlot = #p::KernelSlot::new();
            }
            impl Dtype for #elem {
                #[inline(always)]
                fn spec() -> &'static #p::KernelSpec {
                    &#m::SPEC
                }
                #[inline(always)]
                fn slot() -> &'static #p::KernelSlot {
                    &#m::SLOT
                }
            }
        });
    }
    let listed: Vec<&str> = instances.iter().map(|(t, _)| t.rust_name()).collect();
    let message = format!("kernel `{name}` is not built for `{{Self}}`");
    let label = format!("`{name}` is built for {}", listed.join(", "));
    let note = "its attribute lists the dtypes it is built for (`dtype = [..]`)";
    let trait_doc = format!(
        "The element types kernel `{name}` is built for: {}.",
        listed.join(", ")
    );
    let dtypes: Vec<DType> = instances.iter().map(|(t, _)| *t).collect();
    let fn_docs = launcher_docs(item, &desc, params, (&generic, &dtypes), None);
    let (args, names, refs) = (&sig.args, &sig.names, &sig.refs);
    let launch = match sig.scalars.as_slice() {
        [] => quote!(#p::launch(D::spec(), D::slot(), stream, &[#(#refs),*])),
        scalars => {
            quote!(#p::launch_scalars(D::spec(), D::slot(), stream, &[#(#refs),*], &[#(#scalars),*]))
        }
    };
    let allocs = sig.outs.iter().map(|o| &o.alloc);
    let (ret, ret_val) = (sig.ret(), sig.ret_val());
    let helpers = helpers_of(quote!(<D: Dtype>), quote!(D::spec()), quote!(D::slot()));
    let doc = format!(
        "Launch helpers and the compiled instances of kernel `{name}` ({}).",
        listed.join(", ")
    );
    quote! {
        #(#checks)*

        #fn_docs
        #[allow(clippy::too_many_arguments)]
        #vis fn #name<D: #name::Dtype>(#(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
            #name::launch_on::<D>(::core::option::Option::None, #(#names),*)
        }

        #[doc = #doc]
        #[allow(non_snake_case, dead_code)]
        #vis mod #name {
            #[doc = #trait_doc]
            #[diagnostic::on_unimplemented(message = #message, label = #label, note = #note)]
            pub trait Dtype: ::tile::Element {
                #[doc(hidden)]
                fn spec() -> &'static #p::KernelSpec;
                #[doc(hidden)]
                fn slot() -> &'static #p::KernelSlot;
            }

            #(#mods)*

            /// Launches on `stream`, or on the tensors' device's default stream.
            #[allow(clippy::too_many_arguments)]
            pub fn launch_on<D: Dtype>(stream: ::core::option::Option<&::tile::Stream>, #(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
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
                pub fn launch<D: Dtype>(&self, #(#args),*) -> ::core::result::Result<#ret, ::tile::Error> {
                    launch_on::<D>(::core::option::Option::Some(self.0), #(#names),*)
                }
            }

            #helpers
        }
    }
}
