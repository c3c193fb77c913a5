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
    pub const fn cpu() -> Device {
        Device::Cpu
    }

    pub const fn is_cpu(self) -> bool {
        matches!(self, Device::Cpu)
    }

    pub const fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
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
