//! Choosing a device: which CUDA devices exist, `TILE_DEVICE`, the default.
//!
//! Invariants:
//! - Asking whether CUDA is usable never panics and never fails hard: on a machine
//!   without a driver the answer is "no CUDA" (see [`crate::cuda`] for the probe) and
//!   every default falls back to the CPU backend.
//! - `TILE_DEVICE` is honoured when set; an invalid or unavailable value is an error
//!   from [`Device::from_env`], never a silent fallback.

use crate::cuda;
use crate::device::{Device, DeviceInfo};
use crate::error::{Error, Result};

impl Device {
    /// CUDA device `ordinal`, if it exists.
    pub fn cuda(ordinal: usize) -> Result<Device> {
        let count = cuda::probe().count;
        if count == 0 {
            return Err(cuda::no_cuda());
        }
        if ordinal >= count {
            return Err(Error::NoSuchDevice { ordinal, count });
        }
        Ok(Device::Cuda(ordinal))
    }

    /// Whether a CUDA driver is loadable and reports at least one device.
    pub fn cuda_available() -> bool {
        cuda::probe().count > 0
    }

    /// Number of CUDA devices (0 without a usable driver).
    pub fn cuda_device_count() -> usize {
        cuda::probe().count
    }

    /// Every CUDA device the driver reports, by ordinal, with its name and compute
    /// capability (empty without a usable driver). Contexts are not created: listing
    /// costs no device memory.
    pub fn cuda_devices() -> Result<Vec<DeviceInfo>> {
        (0..cuda::probe().count)
            .map(|n| Device::Cuda(n).info())
            .collect()
    }

    /// The CUDA devices the driver reports, as devices (`cuda:0`, `cuda:1`, ..).
    pub fn all_cuda() -> Vec<Device> {
        (0..cuda::probe().count).map(Device::Cuda).collect()
    }

    /// What this device is (see [`DeviceInfo`]).
    pub fn info(self) -> Result<DeviceInfo> {
        match self {
            Device::Cpu => Ok(DeviceInfo {
                device: self,
                name: "cpu".into(),
                compute_capability: None,
                total_memory: None,
                arch: None,
            }),
            Device::Cuda(n) => {
                let (name, cc, memory) = cuda::describe(n)?;
                Ok(DeviceInfo {
                    device: self,
                    name,
                    compute_capability: Some(cc),
                    total_memory: Some(memory),
                    arch: Some(cuda::nvrtc_arch(cc)),
                })
            }
        }
    }

    /// Whether this GPU reads and writes `peer`'s memory directly (NVLink or PCIe peer
    /// access); the first call for a pair enables it. True for a device and itself;
    /// false when either is the host. [`Tensor::to_device`](crate::Tensor::to_device)
    /// between GPUs copies directly when it is true, staged through the host otherwise.
    pub fn peer_access(self, peer: Device) -> Result<bool> {
        match (self, peer) {
            (Device::Cuda(to), Device::Cuda(from)) => cuda::peer_access(to, from),
            _ => Ok(false),
        }
    }

    /// The device named by `TILE_DEVICE` (`cpu`, `cuda`, `cuda:N`), or when it is unset
    /// the first GPU if one is usable, else the CPU.
    pub fn from_env() -> Result<Device> {
        let value = std::env::var("TILE_DEVICE").ok();
        Device::from_setting(value.as_deref())
    }

    /// Parses a device name: `cpu`, `cuda` (ordinal 0) or `cuda:N`, checking that a CUDA
    /// device exists.
    pub fn parse(value: &str) -> Result<Device> {
        let v = value.trim().to_ascii_lowercase();
        if v == "cpu" {
            return Ok(Device::Cpu);
        }
        let ordinal = if v == "cuda" || v == "gpu" {
            0
        } else if let Some(n) = v.strip_prefix("cuda:") {
            n.parse::<usize>().map_err(|_| Error::InvalidDevice {
                value: value.to_string(),
            })?
        } else {
            return Err(Error::InvalidDevice {
                value: value.to_string(),
            });
        };
        Device::cuda(ordinal).map_err(|e| match e {
            Error::NoCuda { reason } => Error::NoCuda {
                reason: format!("TILE_DEVICE={value} asks for a CUDA device: {reason}"),
            },
            other => other,
        })
    }

    /// `from_env` with the variable's value passed in (unset = `None`).
    pub(crate) fn from_setting(value: Option<&str>) -> Result<Device> {
        match value.map(str::trim) {
            Some(v) if !v.is_empty() => Device::parse(v),
            _ => Ok(if Device::cuda_available() {
                Device::Cuda(0)
            } else {
                Device::Cpu
            }),
        }
    }
}

impl Default for Device {
    /// [`Device::from_env`]; falls back to the CPU only when `TILE_DEVICE` is unset and
    /// no GPU is usable.
    ///
    /// # Panics
    ///
    /// When `TILE_DEVICE` is set to an invalid or unavailable device: running somewhere
    /// else than asked would be a silent surprise. Use [`Device::from_env`] to handle it.
    fn default() -> Device {
        match Device::from_env() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names() {
        assert_eq!(Device::parse("cpu").ok(), Some(Device::Cpu));
        assert_eq!(Device::parse(" CPU ").ok(), Some(Device::Cpu));
        let e = Device::parse("tpu").err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("invalid TILE_DEVICE value \"tpu\": expected `cpu`, `cuda` or `cuda:N`")
        );
        assert!(matches!(
            Device::parse("cuda:x"),
            Err(Error::InvalidDevice { .. })
        ));
    }

    #[test]
    fn default_without_gpu_is_cpu() {
        // Probing must not panic whether or not a driver is present.
        let available = Device::cuda_available();
        let d = Device::from_setting(None);
        match d {
            Ok(Device::Cpu) => assert!(!available),
            Ok(Device::Cuda(0)) => assert!(available),
            other => panic!("unexpected {other:?}"),
        }
        if !available {
            assert_eq!(Device::cuda_device_count(), 0);
            assert_eq!(Device::from_setting(Some("")).ok(), Some(Device::Cpu));
            // Device::default() reads TILE_DEVICE; it is unset in the test environment.
            if std::env::var_os("TILE_DEVICE").is_none() {
                assert_eq!(Device::default(), Device::Cpu);
            }
        }
    }

    #[test]
    fn cuda_request_without_gpu_is_a_clear_error() {
        if Device::cuda_available() {
            return;
        }
        let e = Device::from_setting(Some("cuda")).err();
        let msg = e.as_ref().map(|e| e.to_string()).unwrap_or_default();
        assert!(matches!(e, Some(Error::NoCuda { .. })), "{msg}");
        assert!(
            msg.starts_with("no usable CUDA device: TILE_DEVICE=cuda asks for a CUDA device"),
            "{msg}"
        );
        assert!(matches!(Device::cuda(0), Err(Error::NoCuda { .. })));
        assert!(Device::from_setting(Some("cuda:1")).is_err());
    }
}
