//! candle interop (feature `candle`; `candle-cuda` for candle's CUDA backend): tile
//! kernels on candle tensors without copies.
//!
//! A candle custom op (`CustomOp1/2/3`) receives each input as a storage plus a
//! `Layout` (start offset and strides in elements). [`cpu_view`] and [`cuda_view`] turn
//! that pair into a [`TensorView`] that a generated launcher takes directly; outputs are
//! views of a buffer the op allocates ([`TensorViewMut::from_slice_mut`] or
//! [`TensorViewMut::from_cuda_slice_mut`]) and returns to candle. On CUDA, launch on
//! [`stream`] (candle's stream for the device), so no cross-stream wait is needed and
//! nothing synchronizes the host.
//!
//! A layout that is not contiguous or not aligned as the kernel needs is refused by the
//! launch checks (`stride mismatch`, `misaligned`); call `.contiguous()` on the candle
//! tensor first where that can happen.

use crate::dtype::Element;
use crate::error::Error;
use crate::view::TensorView;

/// A tile error as a candle error (its text kept).
pub fn to_candle(e: Error) -> candle_core::Error {
    candle_core::Error::Msg(format!("tile: {e}"))
}

/// A read-only tile view of a candle CPU storage laid out as `layout` (no copy).
pub fn cpu_view<'a, T: Element + candle_core::WithDType>(
    storage: &'a candle_core::CpuStorage,
    layout: &candle_core::Layout,
) -> candle_core::Result<TensorView<'a, T>> {
    let data = storage.as_slice::<T>()?;
    let strides: Vec<isize> = layout.stride().iter().map(|&s| s as isize).collect();
    TensorView::from_slice(data, &[data.len()])
        .and_then(|v| v.strided(layout.dims(), &strides, layout.start_offset()))
        .map_err(to_candle)
}

/// A read-only tile view of a candle CUDA storage laid out as `layout` (no copy), homed
/// on the storage's stream.
#[cfg(feature = "candle-cuda")]
pub fn cuda_view<'a, T>(
    storage: &'a candle_core::CudaStorage,
    layout: &candle_core::Layout,
) -> candle_core::Result<TensorView<'a, T>>
where
    T: Element + candle_core::cuda_backend::CudaDType + cudarc::driver::DeviceRepr,
{
    let slice = storage.as_cuda_slice::<T>()?;
    let strides: Vec<isize> = layout.stride().iter().map(|&s| s as isize).collect();
    TensorView::from_cuda_slice(slice, &[slice.len()])
        .and_then(|v| v.strided(layout.dims(), &strides, layout.start_offset()))
        .map_err(to_candle)
}

/// The stream candle queues its work for `device` on, as a tile stream.
#[cfg(feature = "candle-cuda")]
pub fn stream(device: &candle_core::CudaDevice) -> crate::Stream {
    crate::Stream::Cuda(device.cuda_stream())
}
