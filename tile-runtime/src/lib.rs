//! Runtime of the `tile` kernel language: devices, tensors, streams, the host ABI's
//! argument checks, the kernel caches (in-process slot, disk, device binaries), the C and
//! NVRTC JITs, module loading, launch, graphs and the profiler.
//!
//! The runtime never parses kernel syntax. A `#[tile::kernel]` expansion hands it a
//! `'static` [`spec::KernelSpec`] (parameters, grid, generated sources, cache keys and
//! any ahead-of-time artifacts) and a [`KernelSlot`], and calls [`launch`]:
//!
//! ```text
//! check args → evaluate grid → find kernel (slot → AOT → disk cache → device binary
//! cache → JIT → publish → load) → launch (or record, inside Graph::capture)
//! ```
//!
//! Modules: `check` (host ABI), `arg` (a launch's arguments), `launch` (the launch path;
//! `launch::warm`, the warm CUDA launch inlined into each generated launcher), `slot` (the
//! in-process cache level), `find` (the cold path and its keys), `loaded` (what finding
//! produces), `cache` (disk levels, public inspection API), `cc`/`nvrtc` (JITs), `cpu`
//! (the worker pool), `cuda` (driver access), `device` (the device type), `select`
//! (choosing and listing devices), `sync` (cross-stream ordering), `graph`, `profile`,
//! `autotune` (kernel variants: choosing one, tuning, the tuned choices in memory and on
//! disk), `host` (`host_source`, `export_sources`), `storage` (tile's allocations and
//! memory owned elsewhere), `dist` (NCCL communicators and collectives), `view` (borrowed
//! views and the launcher's argument traits), `f8` (the
//! host types of the fp8 dtypes), `dlpack`, `candle` (feature `candle`). The module dependency graph is acyclic. The kernel
//! ABI itself (dtypes, targets, the spec tables) is the `tile-abi` crate's, re-exported
//! here as `DType`, `Target` and `spec`.
//!
//! Settings come from the environment, read once: `TILE_DEVICE`, `TILE_CACHE_DIR`,
//! `TILE_DISABLE_CACHE`, `TILE_NO_AOT`, `TILE_JIT_DIAGNOSTICS`, `TILE_NUM_THREADS`,
//! `TILE_AUTOTUNE`, `TILE_AUTOTUNE_BUCKET`, `CC`,
//! and `CUDA_HOME`/`CUDA_PATH`/`CUDA_ROOT` for NVRTC's headers.

#![deny(missing_docs)]

pub mod autotune;
pub mod cache;
#[cfg(feature = "candle")]
pub mod candle;
pub mod dist;
pub mod dlpack;
pub mod spec;

mod arg;
mod cc;
mod check;
mod config;
mod cpu;
mod cuda;
mod device;
mod dims;
mod dtype;
mod error;
mod f8;
mod find;
mod graph;
mod host;
mod launch;
mod loaded;
mod nvrtc;
mod profile;
mod select;
mod slot;
mod storage;
mod stream;
mod sync;
mod tensor;
pub mod testing;
mod tma;
mod view;

pub use arg::ArgRef;
pub use cache::params_json;
pub use check::{check_args, Bound};
pub use device::{Device, DeviceInfo};
pub use dtype::{DType, Element};
pub use error::{Error, Result};
pub use f8::{f8e4m3, f8e5m2};
pub use find::{binary_key, entry_key};
pub use graph::Graph;
pub use host::{export_sources, grid_text, host_source};
pub use launch::{kernel_source, launch, launch_scalars, scalar_arg};
pub use loaded::Origin;
pub use profile::{
    do_bench, do_bench_interleaved, AnyTensor, BenchFn, BenchOptions, BenchResult, HostArg,
    Profiler, L2_FLUSH_BYTES,
};
pub use slot::KernelSlot;
pub use stream::Stream;
pub use tensor::{Tensor, HOST_ALIGN};
pub use tile_abi::Target;
pub use view::{CudaRead, CudaWrite, TensorArg, TensorArgMut, TensorView, TensorViewMut};

/// cudarc, for code that drives the same contexts and streams directly.
pub use cudarc;
pub use cudarc::driver::{CudaContext, CudaStream};
pub use half::{bf16, f16};
