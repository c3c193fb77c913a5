//! `#[tile::kernel]`: parse → compile → expand. The front end, passes and
//! code generators live in tile-core (shared with build scripts); this crate
//! only turns diagnostics into spanned `compile_error!`s and writes the typed
//! launcher.

mod expand;

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
    let compiled =
        tile_core::frontend::parse_kernel(attr.into(), &item).and_then(tile_core::compile);
    match compiled {
        Ok(c) => expand::launcher(&item, &c).into(),
        Err(diags) => expand::errors(&item, &diags).into(),
    }
}
