//! CUDA driver access: probing, one context and default stream per device, module
//! loading and the raw kernel launch.
//!
//! Invariants:
//! - Nothing here panics on a machine without CUDA. cudarc's dynamic loading panics when
//!   the driver library or a symbol is missing, so the library is probed first
//!   (through cudarc's own candidate list, so the probe and the later load agree) and
//!   every first call into the driver runs under `catch_unwind`. With the
//!   `cuda-dynamic-linking` feature the libraries are linked, and there is nothing to
//!   probe.
//! - Each device's primary context and default stream are created once, lazily, and
//!   live for the process (they sit in a static table and are never dropped, which
//!   avoids tearing down contexts during process exit).
//! - cudarc's per-buffer event tracking is off in these contexts: the runtime orders its
//!   storages across streams itself ([`crate::sync`]). Slices that other code allocates
//!   through [`crate::Stream::as_cuda`] are therefore not ordered by cudarc either.
//! - Kernels are launched with a raw `cuLaunchKernel` whose parameter list is the ABI in
//!   [`crate::spec`]: one `CUdeviceptr` per buffer, then one `int` per dynamic dim.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaContext, CudaFunction, CudaStream};
use once_cell::sync::OnceCell;

use crate::error::{Error, Result};

/// Result of looking for a CUDA driver, computed once per process.
#[derive(Debug)]
pub(crate) struct Probe {
    pub count: usize,
    /// Why there is no device, when `count == 0`.
    pub reason: String,
}

/// Looks for a CUDA driver and counts devices; never panics.
pub(crate) fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| {
        // SAFETY: loading the driver library runs its initialisers, as any CUDA use does;
        // the probe only opens and closes it.
        #[cfg(not(feature = "cuda-dynamic-linking"))]
        let present = unsafe { cudarc::driver::sys::is_culib_present() };
        // Linked: the process would not have started without it.
        #[cfg(feature = "cuda-dynamic-linking")]
        let present = true;
        if !present {
            return Probe {
                count: 0,
                reason: "the CUDA driver library (libcuda.so.1) is not installed or not on the \
                         library search path"
                    .into(),
            };
        }
        match catch_unwind(CudaContext::device_count) {
            Ok(Ok(n)) if n > 0 => Probe {
                count: n as usize,
                reason: String::new(),
            },
            Ok(Ok(_)) => Probe {
                count: 0,
                reason: "the CUDA driver reports no devices".into(),
            },
            Ok(Err(e)) => Probe {
                count: 0,
                reason: Error::driver("cuInit/cuDeviceGetCount", e).to_string(),
            },
            Err(_) => Probe {
                count: 0,
                reason: "the CUDA driver library lacks a required entry point (driver too old?)"
                    .into(),
            },
        }
    })
}

pub(crate) fn no_cuda() -> Error {
    Error::NoCuda {
        reason: probe().reason.clone(),
    }
}

/// A device's context, default stream and compute capability.
pub(crate) struct DeviceState {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub cc: (i32, i32),
}

/// The state of CUDA device `ordinal`, created on first use.
pub(crate) fn device(ordinal: usize) -> Result<&'static DeviceState> {
    static DEVICES: OnceLock<Box<[OnceCell<DeviceState>]>> = OnceLock::new();
    let count = probe().count;
    if count == 0 {
        return Err(no_cuda());
    }
    let table = DEVICES.get_or_init(|| (0..count).map(|_| OnceCell::new()).collect());
    let cell = table
        .get(ordinal)
        .ok_or(Error::NoSuchDevice { ordinal, count })?;
    cell.get_or_try_init(|| {
        let ctx = match catch_unwind(|| CudaContext::new(ordinal)) {
            Ok(r) => r.map_err(|e| Error::driver("cuDevicePrimaryCtxRetain", e))?,
            Err(_) => return Err(no_symbol("cuDevicePrimaryCtxRetain")),
        };
        // SAFETY: the runtime orders every storage it allocates in this context itself
        // (`crate::sync`), and no slice exists in the context yet, so none is left without
        // ordering: cudarc's per-buffer events would add driver calls to every launch.
        unsafe { ctx.disable_event_tracking() };
        let cc = ctx
            .compute_capability()
            .map_err(|e| Error::driver("cuDeviceGetAttribute", e))?;
        let stream = ctx.default_stream();
        Ok(DeviceState { ctx, stream, cc })
    })
}

/// What the driver says about device `ordinal`, without creating its context.
pub(crate) fn describe(ordinal: usize) -> Result<(String, (i32, i32), usize)> {
    let count = probe().count;
    if count == 0 {
        return Err(no_cuda());
    }
    if ordinal >= count {
        return Err(Error::NoSuchDevice { ordinal, count });
    }
    use cudarc::driver::result::device;
    use cudarc::driver::sys::CUdevice_attribute as A;
    let query = || -> std::result::Result<_, (&'static str, cudarc::driver::DriverError)> {
        let dev = device::get(ordinal as i32).map_err(|e| ("cuDeviceGet", e))?;
        let name = device::get_name(dev).map_err(|e| ("cuDeviceGetName", e))?;
        // SAFETY: `dev` came from `cuDeviceGet` above.
        let attr = |a| unsafe { device::get_attribute(dev, a) };
        let major = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            .map_err(|e| ("cuDeviceGetAttribute", e))?;
        let minor = attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            .map_err(|e| ("cuDeviceGetAttribute", e))?;
        // SAFETY: as above.
        let memory = unsafe { device::total_mem(dev) }.map_err(|e| ("cuDeviceTotalMem", e))?;
        Ok((name, (major, minor), memory))
    };
    match catch_unwind(query) {
        Ok(Ok(info)) => Ok(info),
        Ok(Err((call, e))) => Err(Error::driver(call, e)),
        Err(_) => Err(no_symbol("cuDeviceGetName")),
    }
}

/// Whether device `to` can read and write device `from`'s memory directly (peer access
/// over NVLink or PCIe), enabling it in `to`'s context the first time. The answer is
/// kept per ordered pair: enabling twice is an error in the driver.
pub(crate) fn peer_access(to: usize, from: usize) -> Result<bool> {
    static PAIRS: std::sync::Mutex<Vec<((usize, usize), bool)>> = std::sync::Mutex::new(Vec::new());
    if to == from {
        device(to)?;
        return Ok(true);
    }
    let (dst, src) = (device(to)?, device(from)?);
    let mut pairs = PAIRS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, on)) = pairs.iter().find(|(p, _)| *p == (to, from)) {
        return Ok(on);
    }
    use cudarc::driver::sys;
    let mut can = 0i32;
    // SAFETY: both handles are devices of contexts this process holds; `can` is a local.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        sys::cuDeviceCanAccessPeer(&mut can, dst.ctx.cu_device(), src.ctx.cu_device())
    }))
    .map_err(|_| no_symbol("cuDeviceCanAccessPeer"))?;
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(Error::driver(
            "cuDeviceCanAccessPeer",
            cudarc::driver::DriverError(r),
        ));
    }
    let on = can != 0;
    if on {
        dst.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
        // SAFETY: `to`'s context is current and `src.ctx` is a live context of another
        // device; flags must be 0.
        let r = catch_unwind(AssertUnwindSafe(|| unsafe {
            sys::cuCtxEnablePeerAccess(src.ctx.cu_ctx(), 0)
        }))
        .map_err(|_| no_symbol("cuCtxEnablePeerAccess"))?;
        if r != sys::CUresult::CUDA_SUCCESS
            && r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
        {
            return Err(Error::driver(
                "cuCtxEnablePeerAccess",
                cudarc::driver::DriverError(r),
            ));
        }
    }
    pairs.push(((to, from), on));
    Ok(on)
}

fn no_symbol(call: &'static str) -> Error {
    Error::Driver {
        call,
        message: "the CUDA driver library lacks this entry point (driver too old?)".into(),
    }
}

/// Architectures whose embedded cubin can run on a device of compute capability `cc`,
/// best first. SASS runs on the same major version with an equal or higher minor, so
/// sm_80 code serves 8.6 and 8.9; the `a` variants only run on their exact arch.
pub(crate) fn cubin_archs(cc: (i32, i32)) -> Vec<String> {
    match cc {
        (9, 0) => vec!["sm_90a".into(), "sm_90".into()],
        (8, 0) => vec!["sm_80".into()],
        (8, minor) => vec![format!("sm_8{minor}"), "sm_80".into()],
        (major, minor) => vec![format!("sm_{major}{minor}")],
    }
}

/// The architecture NVRTC compiles for on a device of compute capability `cc`.
pub(crate) fn nvrtc_arch(cc: (i32, i32)) -> String {
    match cc {
        (9, 0) => "sm_90a".into(),
        (major, minor) => format!("sm_{major}{minor}"),
    }
}

/// Loads a cubin image into the device's context and looks up `entry`.
pub(crate) fn load_function(
    dev: &DeviceState,
    kernel: &'static str,
    image: Vec<u8>,
    entry: &str,
    origin: &std::path::Path,
    dynamic_shared: u32,
) -> Result<CudaFunction> {
    let load_err = |message: String| Error::Load {
        kernel,
        path: origin.to_path_buf(),
        message,
    };
    if entry.contains('\0') {
        return Err(load_err(format!("entry name {entry:?} contains NUL")));
    }
    let ptx = cudarc::nvrtc::Ptx::from_binary(image);
    let module = match catch_unwind(AssertUnwindSafe(|| dev.ctx.load_module(ptx))) {
        Ok(r) => r.map_err(|e| load_err(Error::driver("cuModuleLoadData", e).to_string()))?,
        Err(_) => return Err(no_symbol("cuModuleLoadData")),
    };
    let func = module
        .load_function(entry)
        .map_err(|e| load_err(Error::driver("cuModuleGetFunction", e).to_string()))?;
    // Past 48 KiB a kernel must opt in to its dynamic shared memory, once.
    if dynamic_shared > 48 * 1024 {
        func.set_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            dynamic_shared as i32,
        )
        .map_err(|e| load_err(Error::driver("cuFuncSetAttribute", e).to_string()))?;
    }
    Ok(func)
}

/// Enqueues `f` on `stream`.
///
/// # Safety
///
/// `params` must match the kernel's signature exactly (one pointer to a `u64` device
/// address per buffer, then one pointer to an `i32` per dynamic dim), every device
/// address must point to live memory of the size the kernel indexes, and that memory must
/// stay alive and correctly ordered (stream events) until the kernel finishes.
pub(crate) unsafe fn launch(
    f: &CudaFunction,
    stream: &CudaStream,
    grid: [u32; 3],
    threads: u32,
    dynamic_shared: u32,
    params: &mut [*mut c_void],
) -> Result<()> {
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
    // SAFETY: forwarded from the caller's contract; the function handle belongs to a
    // module that the kernel slot keeps loaded for the process lifetime.
    unsafe {
        cudarc::driver::result::launch_kernel(
            f.cu_function(),
            (grid[0], grid[1], grid[2]),
            (threads, 1, 1),
            dynamic_shared,
            stream.cu_stream(),
            params,
        )
    }
    .map_err(|e| Error::driver("cuLaunchKernel", e))
}

/// [`launch`] with blocks run as clusters of `cluster[0]` along x by `cluster[1]` along y
/// (`cuLaunchKernelEx`; the grid's extents multiples of them): a kernel whose blocks share
/// tile copies (`// tile:launch .. cluster=n [cluster_y=m]`).
///
/// # Safety
///
/// As for [`launch`].
pub(crate) unsafe fn launch_in_clusters(
    f: &CudaFunction,
    stream: &CudaStream,
    grid: [u32; 3],
    threads: u32,
    dynamic_shared: u32,
    cluster: [u32; 2],
    params: &mut [*mut c_void],
) -> Result<()> {
    use cudarc::driver::sys;
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
    // SAFETY: a plain-data union of the driver's headers; zero is a valid value of
    // every member, and the one the attribute's id selects is set next.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cluster[0];
    attr.value.clusterDim.y = cluster[1];
    attr.value.clusterDim.z = 1;
    let config = sys::CUlaunchConfig {
        gridDimX: grid[0],
        gridDimY: grid[1],
        gridDimZ: grid[2],
        blockDimX: threads,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: dynamic_shared,
        hStream: stream.cu_stream(),
        attrs: &mut attr,
        numAttrs: 1,
    };
    // SAFETY: forwarded from the caller's contract (as `launch`); `config` and `attr`
    // outlive the call, which copies them.
    unsafe {
        sys::cuLaunchKernelEx(
            &config,
            f.cu_function(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
    .map_err(|e| Error::driver("cuLaunchKernelEx", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_choice() {
        assert_eq!(cubin_archs((9, 0)), ["sm_90a", "sm_90"]);
        assert_eq!(cubin_archs((8, 0)), ["sm_80"]);
        assert_eq!(cubin_archs((8, 9)), ["sm_89", "sm_80"]);
        assert_eq!(cubin_archs((12, 0)), ["sm_120"]);
        assert_eq!(nvrtc_arch((9, 0)), "sm_90a");
        assert_eq!(nvrtc_arch((8, 6)), "sm_86");
    }

    #[test]
    fn probe_does_not_panic() {
        let p = probe();
        if p.count == 0 {
            assert!(!p.reason.is_empty());
            assert!(device(0).is_err());
        }
    }
}
