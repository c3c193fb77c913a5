//! What finding a kernel produces: the kernel loaded for one target, and where its
//! binary came from.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use cudarc::driver::CudaFunction;
use libloading::Library;

use crate::cuda;
use crate::spec::{CpuEntry, CudaKernel, KernelSpec};
use crate::tma::LaunchPlan;

/// Where a launcher's kernel binary came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Linked (CPU) or embedded (CUDA) at build time.
    Aot,
    /// Loaded from this disk cache entry (`kernels/<key>`).
    DiskCache(PathBuf),
    /// Loaded from this device binary cache entry (`cuda-binaries/<key>`), the kernel
    /// entry being rebuilt around it (the device source was unchanged).
    BinaryCache(PathBuf),
    /// Compiled in this process (published to this entry, or a temporary folder).
    Compiled(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Aot => f.write_str("the ahead-of-time artifact"),
            Origin::DiskCache(p) => write!(f, "the disk cache at {}", p.display()),
            Origin::BinaryCache(p) => write!(f, "the device binary cache at {}", p.display()),
            Origin::Compiled(p) => write!(f, "a fresh compile at {}", p.display()),
        }
    }
}

pub(crate) struct CpuLoaded {
    pub entry: CpuEntry,
    /// Keeps the JIT-compiled library mapped while `entry` can be called (graphs that
    /// recorded `entry` hold a clone too).
    pub lib: Option<Arc<Library>>,
    pub origin: Origin,
}

/// A kernel loaded on one device, with what a warm launch needs from the spec and the
/// device table copied next to the function handle: `repr(C)` keeps these first, and
/// the origin (never read by a launch) is boxed so the whole entry, with its `OnceLock`
/// state, fits the cache line of a [`CudaCell`]. One line then replaces reads of the
/// spec's tail, the probe and the device table after the driver has evicted them.
#[repr(C)]
pub(crate) struct CudaLoaded {
    pub func: CudaFunction,
    /// `spec.threads`, or the code's own count (`tma`).
    pub threads: u32,
    /// The loaded code's `shared_bytes`.
    pub shared_bytes: u32,
    /// The device's context and default stream.
    pub dev: &'static cuda::DeviceState,
    pub origin: Box<Origin>,
    /// The tensor maps the code takes (bulk tensor copies; `tma`), if any.
    pub tma: Option<Box<LaunchPlan>>,
    /// Blocks along x the code runs for each of the spec's grid: its loop split over a
    /// cluster of that many (`T::use_split_k`, `LaunchPlan::split`), else 1.
    pub split: u32,
}

impl CudaLoaded {
    pub(crate) fn new(
        spec: &KernelSpec,
        code: &CudaKernel,
        dev: &'static cuda::DeviceState,
        func: CudaFunction,
        origin: Origin,
    ) -> CudaLoaded {
        // A warp-specialized kernel's block has more threads than the spec's and
        // takes tensor maps (`tma`).
        let plan = LaunchPlan::of_source(spec.name, code.source);
        CudaLoaded {
            func,
            threads: plan
                .as_ref()
                .and_then(|p| p.threads)
                .unwrap_or(spec.threads),
            shared_bytes: code.shared_bytes,
            dev,
            origin: Box::new(origin),
            split: plan.as_ref().map_or(1, |p| p.split.max(1)),
            tma: plan.filter(|p| !p.maps.is_empty()).map(Box::new),
        }
    }
}
