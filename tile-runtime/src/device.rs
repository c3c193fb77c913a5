//! Devices: the host CPU and CUDA GPUs by ordinal. This is the value type; choosing a
//! device (probing CUDA, `TILE_DEVICE`, the default) is [`crate::select`]'s.

use std::fmt;

use tile_abi::Target;

/// Where a tensor lives and a kernel runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// The host, running generated C over a pool of worker threads.
    Cpu,
    /// CUDA device by ordinal.
    Cuda(usize),
}

impl Device {
    /// The host CPU.
    pub const fn cpu() -> Device {
        Device::Cpu
    }

    /// Whether this is the host CPU.
    pub const fn is_cpu(self) -> bool {
        matches!(self, Device::Cpu)
    }

    /// Whether this is a CUDA device.
    pub const fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
    }
}

/// What a device is: its name and, for a GPU, compute capability, memory and the
/// architecture whose code it runs ([`Device::info`], [`Device::cuda_devices`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device described.
    pub device: Device,
    /// The driver's name for a GPU (`NVIDIA H200`); `cpu` for the host.
    pub name: String,
    /// `(major, minor)`; `None` for the host.
    pub compute_capability: Option<(i32, i32)>,
    /// Total device memory in bytes; `None` for the host.
    pub total_memory: Option<usize>,
    /// The architecture whose code this device runs (`sm_90a` on a compute-capability-9.0
    /// GPU): ahead-of-time cubins are taken for it (or an older one of the same major
    /// version, see `Origin`), and NVRTC compiles for it; `None` for the host.
    pub arch: Option<String>,
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.device, self.name)?;
        if let (Some((major, minor)), Some(arch)) = (self.compute_capability, &self.arch) {
            write!(f, ", compute capability {major}.{minor} ({arch})")?;
        }
        if let Some(bytes) = self.total_memory {
            write!(f, ", {:.1} GiB", bytes as f64 / (1u64 << 30) as f64)?;
        }
        Ok(())
    }
}

impl From<Device> for Target {
    /// The target that runs on `device`.
    fn from(device: Device) -> Target {
        match device {
            Device::Cpu => Target::Cpu,
            Device::Cuda(_) => Target::Cuda,
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display() {
        assert_eq!(Device::Cpu.to_string(), "cpu");
        assert_eq!(Device::Cuda(0).to_string(), "cuda:0");
        assert_eq!(Device::Cuda(3).to_string(), "cuda:3");
    }
}
