//! The kernel ABI of `tile`: the one description of a compiled kernel that the
//! compiler (`tile-core`), the `#[tile::kernel]` macro and the runtime share.
//!
//! - [`DType`]: the element types, their sizes and spellings.
//! - [`Target`]: CPU (generated C) or CUDA (generated CUDA C++).
//! - [`spec`]: the `'static` tables a generated launcher holds and the runtime reads
//!   (parameters, dims, grid, sources, keys, ahead-of-time artifacts).
//! - [`desc`]: their owned form, which the compiler builds and the macro quotes.
//! - [`f8`]: exact conversions of the fp8 dtypes to and from f64, as CUDA rounds.
//!
//! This crate has no dependencies and knows nothing of devices or host types: the
//! mapping of Rust element types to dtypes is the runtime's.

#![deny(missing_docs)]

mod dtype;
mod target;

pub mod f8;

pub mod desc;
pub mod spec;

pub use desc::{CpuDesc, CudaDesc, Grid, GridOp, KernelDesc, ParamDesc};
pub use dtype::DType;
pub use target::Target;
