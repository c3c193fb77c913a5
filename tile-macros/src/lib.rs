//! `#[tile::kernel]`: parse → compile → expand. The front end, passes and
//! code generators live in tile-core (shared with build scripts); this crate
//! only turns diagnostics into spanned `compile_error!`s and writes the typed
//! launcher.

mod expand;
mod generic;

use proc_macro::TokenStream;

/// Turns a tile-language function into a typed launcher.
///
/// ```ignore
/// #[tile::kernel(block_n = 256, threads = 128)]
/// pub fn vecadd(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
///     T::kernel(T::ceildiv(N, block_n), threads, |bx| {
///         for i in T::parallel(block_n) {
///             c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
///         }
///     });
/// }
/// // expands to: pub fn vecadd(a: &Tensor<f32>, b: &Tensor<f32>, c: &mut Tensor<f32>) -> Result<(), tile::Error>
/// ```
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = match syn::parse::<syn::ItemFn>(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    let env = module_env(&item.sig.ident);
    let instances = match tile_core::frontend::instances(attr.into(), &item) {
        Ok(v) => v,
        Err(diags) => return expand::errors(&item, &diags).into(),
    };
    let build = |i: tile_core::frontend::Instance| {
        tile_core::frontend::parse_kernel_in(i.attr, &i.item, &env).and_then(tile_core::compile)
    };
    let mut instances = instances.into_iter();
    let generic = match instances.next() {
        Some(i) if i.dtype.is_none() => {
            return match build(i) {
                Ok(c) => expand::launcher(&item, &c).into(),
                Err(diags) => expand::errors(&item, &diags).into(),
            };
        }
        first => first.into_iter().chain(instances),
    };
    // Every instance is compiled; a mistake the instances share is reported once.
    let (mut compiled, mut diags) = (Vec::new(), Vec::<tile_core::Diagnostic>::new());
    for i in generic {
        let dtype = i.dtype.unwrap_or(tile_core::ir::DType::F32);
        match build(i) {
            Ok(c) => compiled.push((dtype, c)),
            Err(d) => {
                for x in d {
                    let seen = diags.iter().any(|y| {
                        y.message == x.message
                            && format!("{:?}", y.span.start) == format!("{:?}", x.span.start)
                    });
                    if !seen {
                        diags.push(x);
                    }
                }
            }
        }
    }
    if !diags.is_empty() {
        return expand::errors(&item, &diags).into();
    }
    generic::launcher(&item, &compiled).into()
}

/// A device helper for kernels: inlined where a kernel of the same module
/// calls it (see `tile_core::frontend::Env` for the rule).
///
/// ```ignore
/// #[tile::func]
/// fn gelu(x: f32) -> f32 {
///     let c = 0.7978846;
///     0.5 * x * (1.0 + T::tanh(c * (x + 0.044715 * x * x * x)))
/// }
/// ```
///
/// The body is tile-language code, checked here (mistakes are errors at their
/// spans); it is not compiled as Rust, so nothing is left in its place.
#[proc_macro_attribute]
pub fn func(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = match syn::parse::<syn::ItemFn>(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    let mut diags = tile_core::frontend::check_func(&item, &module_env(&item.sig.ident));
    if !attr.is_empty() {
        diags.push(tile_core::Diagnostic::new(
            proc_macro2::TokenStream::from(attr)
                .into_iter()
                .next()
                .map_or(proc_macro2::Span::call_site(), |t| t.span()),
            "`#[tile::func]` takes no arguments",
        ));
    }
    expand::func_errors(&diags).into()
}

/// The consts and helpers of the module that declares function `name`, read
/// from the source file of the macro's call site (a procedural macro sees only
/// its own item). Empty where the file cannot be read (tokens from another
/// macro's expansion, say).
fn module_env(name: &syn::Ident) -> tile_core::frontend::Env {
    let Some(path) = proc_macro::Span::call_site().local_file() else {
        return Default::default();
    };
    match std::fs::read_to_string(path) {
        Ok(text) => tile_core::frontend::Env::for_fn_in_source(&text, &name.to_string()),
        Err(_) => Default::default(),
    }
}
