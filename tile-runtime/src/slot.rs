//! The in-process level of the kernel cache: each generated launcher's [`KernelSlot`].

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::config::Config;
use crate::cuda;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::find;
use crate::loaded::{CpuLoaded, CudaLoaded, Origin};
use crate::spec::KernelSpec;

/// One CUDA device's entry of a [`KernelSlot`], on a cache line of its own (see
/// [`CudaLoaded`]).
#[repr(align(64))]
struct CudaCell(OnceLock<CudaLoaded>);

/// Per-launcher cache of found kernels: the in-process level of the kernel cache.
///
/// Generated launchers hold one in a `static`; what it loads stays loaded for the
/// process lifetime.
pub struct KernelSlot {
    /// Serialises the slow path so one process compiles a kernel once.
    init: Mutex<()>,
    cpu: OnceLock<CpuLoaded>,
    /// Indexed by CUDA ordinal.
    cuda: OnceLock<Box<[CudaCell]>>,
    /// How many times the slow path found a kernel (for tests and diagnostics).
    pub(crate) finds: AtomicU32,
}

impl KernelSlot {
    /// An empty slot, for a launcher's `static`.
    pub const fn new() -> KernelSlot {
        KernelSlot {
            init: Mutex::new(()),
            cpu: OnceLock::new(),
            cuda: OnceLock::new(),
            finds: AtomicU32::new(0),
        }
    }

    /// Where the kernel for `device` came from, once it has been found.
    pub fn origin(&self, device: Device) -> Option<&Origin> {
        match device {
            Device::Cpu => self.cpu.get().map(|l| &l.origin),
            Device::Cuda(n) => self.cuda_loaded(n).map(|l| &*l.origin),
        }
    }

    #[inline]
    pub(crate) fn cuda_loaded(&self, ordinal: usize) -> Option<&CudaLoaded> {
        self.cuda
            .get()
            .and_then(|t| t.get(ordinal))
            .and_then(|c| c.0.get())
    }

    /// Whether the kernel for `device` is already loaded (the next launch is warm).
    pub(crate) fn is_warm(&self, device: Device) -> bool {
        self.origin(device).is_some()
    }

    pub(crate) fn cpu(&self, spec: &'static KernelSpec, cfg: &Config) -> Result<&CpuLoaded> {
        if let Some(l) = self.cpu.get() {
            return Ok(l);
        }
        let _guard = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = self.cpu.get() {
            return Ok(l);
        }
        self.finds.fetch_add(1, Ordering::Relaxed);
        let loaded = find::find_cpu(spec, cfg)?;
        Ok(self.cpu.get_or_init(|| loaded))
    }

    /// The kernel for CUDA device `ordinal`, found on first use. A warm call reads only
    /// the slot (the device state is in the entry); a cold one first looks up the device,
    /// so a missing driver or device is reported before anything is found.
    pub(crate) fn cuda(
        &self,
        spec: &'static KernelSpec,
        ordinal: usize,
        cfg: &Config,
    ) -> Result<&CudaLoaded> {
        if let Some(l) = self.cuda_loaded(ordinal) {
            return Ok(l);
        }
        let dev = cuda::device(ordinal)?;
        let count = cuda::probe().count;
        let table = self
            .cuda
            .get_or_init(|| (0..count).map(|_| CudaCell(OnceLock::new())).collect());
        let cell = &table
            .get(ordinal)
            .ok_or(Error::NoSuchDevice { ordinal, count })?
            .0;
        let _guard = self.init.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = cell.get() {
            return Ok(l);
        }
        self.finds.fetch_add(1, Ordering::Relaxed);
        let loaded = find::find_cuda(spec, dev, cfg)?;
        Ok(cell.get_or_init(|| loaded))
    }
}

impl Default for KernelSlot {
    fn default() -> KernelSlot {
        KernelSlot::new()
    }
}

impl fmt::Debug for KernelSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelSlot")
            .field("cpu", &self.cpu.get().map(|l| &l.origin))
            .field("finds", &self.finds.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cuda_slot_entry_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<CudaCell>(), 64);
        assert_eq!(std::mem::align_of::<CudaCell>(), 64);
    }
}
