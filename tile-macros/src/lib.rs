//! `#[tile::kernel]`: parse → compile → expand. The front end, passes and
//! code generators live in tile-core (shared with build scripts); this crate
//! only turns diagnostics into spanned `compile_error!`s and writes the typed
//! launcher.

mod expand;
mod generic;
mod variants;

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
///
/// A parameter that lists literals is a variant parameter: the kernel is built
/// once per combination (the first list varies slowest). `filter = <condition>`
/// over the attribute's parameters drops combinations, and `default(..)` marks
/// the variant a plain call runs (without it, the first combination the filter
/// keeps). The default may name a subset of the variant parameters: it is then
/// the first kept combination with those values. A default that names an unknown
/// parameter, a value that is not listed, or a combination the filter drops is a
/// compile error at the attribute.
///
/// ```ignore
/// #[tile::kernel(
///     block_m = [64, 128], block_n = [128, 256], threads = 128,
///     filter = block_m * block_n <= 16384,
///     default(block_m = 64, block_n = 256),
/// )]
/// pub fn gemm(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) { .. }
/// // gemm(..) runs block_m=64, block_n=256; gemm::Config::DEFAULT and gemm::LABELS[0] name it;
/// // gemm::with(gemm::Config { .. }) picks another, gemm::tune() times them all.
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
    if instances.iter().any(|i| i.variant.is_some()) {
        return with_variants(&item, instances, build);
    }
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
                    if !diags.iter().any(|y| same_diag(y, &x)) {
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

fn same_diag(a: &tile_core::Diagnostic, b: &tile_core::Diagnostic) -> bool {
    a.message == b.message && format!("{:?}", a.span.start) == format!("{:?}", b.span.start)
}

/// A kernel with a variant space: every variant (of every dtype) is compiled. A mistake
/// every instance makes is reported once, as it is; one that only some variants make
/// (shared memory over the limit for the largest tiles, say) is reported for each of
/// them, naming the variant.
fn with_variants(
    item: &syn::ItemFn,
    instances: Vec<tile_core::frontend::Instance>,
    build: impl Fn(
        tile_core::frontend::Instance,
    ) -> Result<tile_core::Compiled, Vec<tile_core::Diagnostic>>,
) -> TokenStream {
    let total = instances.len();
    let mut built = Vec::new();
    let mut failed: Vec<(String, tile_core::Diagnostic)> = Vec::new();
    for i in instances {
        let (dtype, variant) = (
            i.dtype,
            i.variant
                .clone()
                .unwrap_or_else(|| tile_core::frontend::Variant {
                    index: 0,
                    values: Vec::new(),
                }),
        );
        match build(i) {
            Ok(compiled) => built.push(variants::Built {
                dtype,
                variant,
                compiled,
            }),
            Err(d) => failed.extend(d.into_iter().map(|x| (variant.label(), x))),
        }
    }
    if failed.is_empty() {
        return variants::launcher(item, &built).into();
    }
    let name = &item.sig.ident;
    let mut diags: Vec<tile_core::Diagnostic> = Vec::new();
    for (label, d) in &failed {
        let everywhere = failed.iter().filter(|(_, x)| same_diag(x, d)).count() == total;
        let mut d = d.clone();
        if !everywhere {
            d.message = format!(
                "variant `{label}` of kernel `{name}`: {} (leave this variant out with \
                 `filter = ..` in the attribute)",
                d.message
            );
        }
        if !diags.iter().any(|y| same_diag(y, &d)) {
            diags.push(d);
        }
    }
    expand::errors(item, &diags).into()
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
