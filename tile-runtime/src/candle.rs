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
use crate::f8::f8e4m3;
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
    host_view(storage.as_slice::<T>()?, layout)
}

/// [`cpu_view`] of a candle `F8E4M3` CPU storage, as tile's [`f8e4m3`]: candle holds
/// the `float8` crate's `F8E4M3`, a byte of the same format (e4m3, NaN `0x7F`), which
/// is not an [`Element`] itself.
pub fn cpu_view_f8e4m3<'a>(
    storage: &'a candle_core::CpuStorage,
    layout: &candle_core::Layout,
) -> candle_core::Result<TensorView<'a, f8e4m3>> {
    let candle_core::CpuStorage::F8E4M3(data) = storage else {
        return Err(candle_core::Error::Msg(format!(
            "tile: expected an f8e4m3 storage, got {:?}",
            candle_core::backend::BackendStorage::dtype(storage)
        )));
    };
    // Whatever float8's type is, the bytes are reinterpreted only if it is one byte.
    if size_of_val(data.as_slice()) != data.len() {
        return Err(candle_core::Error::Msg(
            "tile: candle's F8E4M3 is not one byte".into(),
        ));
    }
    // SAFETY: `data` is `data.len()` initialized bytes (checked above), borrowed for 'a;
    // every byte is a valid `f8e4m3` (`repr(transparent)` over `u8`).
    let data = unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<f8e4m3>(), data.len()) };
    host_view(data, layout)
}

fn host_view<'a, T: Element>(
    data: &'a [T],
    layout: &candle_core::Layout,
) -> candle_core::Result<TensorView<'a, T>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f8e4m3_storages_read_as_tile_f8() -> candle_core::Result<()> {
        let dev = candle_core::Device::Cpu;
        let t = candle_core::Tensor::new(&[[1.0f32, -0.5, 448.0], [3.0, 0.25, -2.0]], &dev)?
            .to_dtype(candle_core::DType::F8E4M3)?
            .t()?;
        let (storage, layout) = t.storage_and_layout();
        let candle_core::Storage::Cpu(cpu) = &*storage else {
            unreachable!("a CPU tensor")
        };
        let v = cpu_view_f8e4m3(cpu, layout)?;
        assert_eq!(v.shape(), &[3, 2]);
        let got: Vec<f32> = v
            .to_vec()
            .map_err(to_candle)?
            .iter()
            .map(|x| x.to_f32())
            .collect();
        assert_eq!(got, [1.0, 3.0, -0.5, 0.25, 448.0, -2.0]);
        let f = candle_core::Tensor::new(&[1.0f32], &dev)?;
        let (storage, layout) = f.storage_and_layout();
        let candle_core::Storage::Cpu(cpu) = &*storage else {
            unreachable!("a CPU tensor")
        };
        assert!(cpu_view_f8e4m3(cpu, layout).is_err());
        Ok(())
    }
}
