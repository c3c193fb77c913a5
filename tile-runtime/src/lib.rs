//! Runtime of the `tile` kernel language: devices, tensors, streams, the host ABI's
//! argument checks, the kernel caches (in-process slot, disk), the C and NVRTC JITs,
//! module loading and launch.
//!
//! The runtime never parses kernel syntax. A `#[tile::kernel]` expansion hands it a
//! `'static` [`spec::KernelSpec`] (parameters, grid, generated sources, cache keys and
//! any ahead-of-time artifacts) and a [`KernelSlot`], and calls [`launch`]:
//!
//! ```text
//! check args → evaluate grid → find kernel (slot → AOT → disk cache → JIT) → launch
//! ```
//!
//! Settings come from the environment, read once: `TILE_DEVICE`, `TILE_CACHE_DIR`,
//! `TILE_DISABLE_CACHE`, `TILE_NO_AOT`, `TILE_JIT_DIAGNOSTICS`, `TILE_NUM_THREADS`, `CC`,
//! and `CUDA_HOME`/`CUDA_PATH`/`CUDA_ROOT` for NVRTC's headers.

pub mod spec;

mod cache;
mod cc;
mod check;
mod config;
mod cpu;
mod cuda;
mod device;
mod dtype;
mod error;
mod launch;
mod nvrtc;
mod stream;
mod tensor;
pub mod testing;

pub use check::{check_args, Bound};
pub use device::Device;
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use launch::{kernel_source, launch, ArgRef, KernelSlot, Origin, Target};
pub use stream::Stream;
pub use tensor::{Tensor, HOST_ALIGN};

pub use cudarc::driver::{CudaContext, CudaStream};
pub use half::{bf16, f16};
