//! Streams: the queue a launch is ordered on.
//!
//! Invariants:
//! - A CUDA stream is held as cudarc's `Arc<CudaStream>` (never a cached raw handle), so
//!   it keeps its context alive and cudarc's per-buffer events order work across streams.
//! - The CPU "stream" is synchronous: a CPU launch has finished when it returns.

use std::sync::Arc;

use cudarc::driver::CudaStream;

use crate::cuda;
use crate::device::Device;
use crate::error::{Error, Result};

/// An ordered queue of launches on one device.
#[derive(Debug, Clone)]
pub enum Stream {
    /// Host execution; launches run to completion before returning.
    Cpu,
    /// A cudarc stream (the device default stream or one from [`Device::new_stream`]).
    Cuda(Arc<CudaStream>),
}

impl Stream {
    /// Blocks until everything queued on the stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        match self {
            Stream::Cpu => Ok(()),
            Stream::Cuda(s) => s
                .synchronize()
                .map_err(|e| Error::driver("cuStreamSynchronize", e)),
        }
    }

    /// The device the stream runs work on ([`Device::Cpu`] for the host stream).
    pub fn device(&self) -> Device {
        match self {
            Stream::Cpu => Device::Cpu,
            Stream::Cuda(s) => Device::Cuda(s.context().ordinal()),
        }
    }

    /// The cudarc stream, for interoperating with other cudarc code.
    pub fn as_cuda(&self) -> Option<&Arc<CudaStream>> {
        match self {
            Stream::Cpu => None,
            Stream::Cuda(s) => Some(s),
        }
    }
}

impl Device {
    /// The stream launches use when none is given: the device's default stream.
    pub fn default_stream(&self) -> Result<Stream> {
        match *self {
            Device::Cpu => Ok(Stream::Cpu),
            Device::Cuda(n) => Ok(Stream::Cuda(Arc::clone(&cuda::device(n)?.stream))),
        }
    }

    /// A new stream on this device (non-blocking with respect to the default stream on
    /// CUDA; cudarc's buffer events keep cross-stream reads and writes ordered).
    pub fn new_stream(&self) -> Result<Stream> {
        match *self {
            Device::Cpu => Ok(Stream::Cpu),
            Device::Cuda(n) => {
                let dev = cuda::device(n)?;
                dev.ctx
                    .new_stream()
                    .map(Stream::Cuda)
                    .map_err(|e| Error::driver("cuStreamCreate", e))
            }
        }
    }

    /// Blocks until all work on the device has finished.
    pub fn synchronize(&self) -> Result<()> {
        match *self {
            Device::Cpu => Ok(()),
            Device::Cuda(n) => cuda::device(n)?
                .ctx
                .synchronize()
                .map_err(|e| Error::driver("cuCtxSynchronize", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_stream() -> Result<()> {
        let s = Device::Cpu.default_stream()?;
        assert_eq!(s.device(), Device::Cpu);
        s.synchronize()?;
        assert!(Device::Cpu.new_stream()?.as_cuda().is_none());
        Device::Cpu.synchronize()
    }
}
