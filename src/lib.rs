//! tile: a Rust-native tile-level GPU kernel language.
//!
//! Write a kernel with `#[tile::kernel]` and the `T::` tile primitives; the
//! macro compiles it (IR → passes → CUDA C++ and C) while your crate builds
//! and leaves an ordinary typed function that checks its arguments, finds
//! the compiled kernel and launches it on the tensors' device.
//!
//! ```ignore
//! use tile::prelude::*;
//!
//! #[tile::kernel(block_n = 1024, threads = 128)]
//! pub fn vecadd(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
//!     T::kernel(T::ceildiv(N, block_n), threads, |bx| {
//!         for i in T::parallel(block_n) {
//!             c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
//!         }
//!     });
//! }
//!
//! let dev = Device::default();
//! let a = Tensor::from_slice(&[1.0f32; 1000], &[1000], dev)?;
//! # let b = a.clone(); let mut c = Tensor::zeros(&[1000], dev)?;
//! vecadd(&a, &b, &mut c)?;
//! ```
//!
//! The body of a kernel is tile-language syntax read by the macro, not Rust
//! that runs on the host: `T` is not a Rust item.

#![deny(missing_docs)]

pub use tile_macros::{func, kernel};
pub use tile_runtime::{
    bf16, cache, do_bench, do_bench_interleaved, f16, f8e4m3, f8e5m2, testing, AnyTensor, BenchFn,
    BenchOptions, BenchResult, CudaRead, CudaWrite, DType, Device, DeviceInfo, Element, Error,
    Graph, HostArg, Origin, Profiler, Result, Stream, Target, Tensor, TensorArg, TensorArgMut,
    TensorView, TensorViewMut,
};

/// Kernel variants and the autotuner: tuning reports, and the policies a launch of a
/// kernel with a variant space chooses by.
pub use tile_runtime::autotune;

/// cudarc, the CUDA driver bindings tile uses (for views of `CudaSlice`s).
pub use tile_runtime::cudarc;

/// Collectives across GPUs over NCCL: communicators, all-reduce, all-gather,
/// reduce-scatter, broadcast on tile tensors and streams.
pub use tile_runtime::dist;

/// DLPack import and export (see `Tensor::from_dlpack`, `Tensor::to_dlpack`).
pub use tile_runtime::dlpack;

/// candle interop (feature `candle`): tile kernels on candle tensors without copies.
#[cfg(feature = "candle")]
pub use tile_runtime::candle;

/// The language of kernel bodies: every `T::` builtin, where it may stand,
/// how a call is written and what it does.
///
/// A kernel body is read by `#[tile::kernel]`, not compiled as Rust: `T` is
/// not a Rust item, so the builtins are listed here rather than as
/// functions. The tables are generated from the compiler's own table of
/// builtins when this crate builds (the same words its error messages
/// quote). The README's language section says how they combine (buffers,
/// fragments, layouts, dtypes, what runs where).
#[doc = include_str!(concat!(env!("OUT_DIR"), "/lang.md"))]
pub mod lang {}

/// Everything a kernel file usually needs.
pub mod prelude {
    pub use crate::{
        bf16, f16, f8e4m3, f8e5m2, kernel, DType, Device, Element, Error, Graph, Stream, Target,
        Tensor, TensorArg, TensorArgMut, TensorView, TensorViewMut,
    };
}

/// The build API for a crate's build script (see `tile_core::build`).
pub mod build {
    pub use tile_core::build::{Builder, Report};
}

#[doc(hidden)]
pub mod __private {
    pub use tile_runtime::autotune::{pick, Pick, TuneReport, VariantSet};
    pub use tile_runtime::spec::*;
    pub use tile_runtime::{
        bf16, export_sources, f16, f8e4m3, f8e5m2, host_source, kernel_source, launch,
        launch_scalars, scalar_arg, ArgRef, DType, KernelSlot, TensorArg, TensorArgMut,
    };
}
