//! Borrowed views: tensors over memory tile does not own, and the argument traits that
//! let a generated launcher take them wherever it takes a [`Tensor`].
//!
//! A launcher's parameters are `&impl TensorArg<Elem = T>` (read) and
//! `&mut impl TensorArgMut<Elem = T>` (written). [`Tensor`] implements both,
//! [`TensorView`] (shared borrow) the first, [`TensorViewMut`] (exclusive borrow) both.
//!
//! Invariants:
//! - A view owns the only handle to its storage (a *scoped* storage, see
//!   [`crate::storage`]) and exposes no [`Tensor`], so nothing outlives the borrow: the
//!   views it makes (`slice`, `transpose`, ..) borrow it, and graph capture refuses it.
//! - A view passes every check a tensor passes (shape, strides, alignment, device) and one
//!   more: its byte range may not overlap another argument of the same launch that is
//!   written, unless both are the same storage (see [`crate::check`]).
//! - A view of a cudarc slice is homed on the slice's stream: a launch on another stream
//!   waits for the slice's work there first, and dropping the view queues a wait for
//!   every launch on other streams on the slice's stream, then records cudarc's read
//!   (or write) event there, as `DevicePtr::device_ptr` (`device_ptr_mut`) expects.
//! - Nothing here synchronizes the host with a device.

use std::marker::PhantomData;
use std::mem::size_of_val;
use std::sync::Arc;

use cudarc::driver::{CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceRepr, SyncOnDrop};

use crate::arg::ArgRef;
use crate::device::Device;
use crate::dims::Dims;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::storage::{Keep, Storage, StorageGuard};
use crate::stream::Stream;
use crate::tensor::Tensor;

/// A launcher argument the kernel reads: a [`Tensor`] or a view.
pub trait TensorArg {
    /// The element type.
    type Elem: Element;

    /// The argument as the host ABI sees it.
    fn arg(&self) -> ArgRef<'_>;
}

/// A launcher argument the kernel writes: a [`Tensor`] or a [`TensorViewMut`].
pub trait TensorArgMut: TensorArg {
    /// The argument as the host ABI sees it, marked written.
    fn arg_mut(&mut self) -> ArgRef<'_>;
}

impl<T: Element> TensorArg for Tensor<T> {
    type Elem = T;

    #[inline(always)]
    fn arg(&self) -> ArgRef<'_> {
        ArgRef::input(self)
    }
}

impl<T: Element> TensorArgMut for Tensor<T> {
    #[inline(always)]
    fn arg_mut(&mut self) -> ArgRef<'_> {
        ArgRef::output(self)
    }
}

/// A read-only tensor view of memory borrowed for `'a`: a host slice, a cudarc slice, or
/// (unsafely) a raw pointer. Pass it wherever a launcher reads a tensor.
pub struct TensorView<'a, T: Element> {
    // Field order is drop order: the storage (ordering its home stream) before cudarc's
    // event is recorded there.
    t: Tensor<T>,
    _sync: Option<SyncOnDrop<'a>>,
    _borrow: PhantomData<&'a [T]>,
}

/// A writable tensor view of memory borrowed exclusively for `'a`. Pass it wherever a
/// launcher reads or writes a tensor.
pub struct TensorViewMut<'a, T: Element> {
    t: Tensor<T>,
    _sync: Option<SyncOnDrop<'a>>,
    _borrow: PhantomData<&'a mut [T]>,
}

/// Number of elements from the first to the last element a view of `shape` and
/// `strides` touches (`0` when empty); `None` for negative strides or overflow.
fn span(shape: &[usize], strides: &[isize]) -> Option<usize> {
    if shape.len() != strides.len() || strides.iter().any(|&s| s < 0) {
        return None;
    }
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().zip(strides).try_fold(1usize, |acc, (&d, &s)| {
        (d - 1).checked_mul(s as usize)?.checked_add(acc)
    })
}

fn layout_error(shape: &[usize], strides: &[isize], what: &str) -> Error {
    Error::view(format!(
        "view of shape {shape:?} with strides {strides:?} {what}"
    ))
}

/// Checks a layout against `len` elements of memory: non-negative strides, in bounds.
fn check_layout(shape: &[usize], strides: &[isize], offset: usize, len: usize) -> Result<()> {
    let n = span(shape, strides)
        .ok_or_else(|| layout_error(shape, strides, "has negative strides or overflows"))?;
    if n > 0 && offset.checked_add(n).is_none_or(|end| end > len) {
        return Err(layout_error(
            shape,
            strides,
            &format!("at offset {offset} does not fit {len} elements"),
        ));
    }
    if shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .is_none()
    {
        return Err(Error::TensorTooLarge {
            shape: shape.to_vec(),
        });
    }
    Ok(())
}

fn exact_len(shape: &[usize], len: usize) -> Result<()> {
    match shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) {
        Some(n) if n == len => Ok(()),
        Some(_) => Err(Error::TensorLen {
            shape: shape.to_vec(),
            len,
        }),
        None => Err(Error::TensorTooLarge {
            shape: shape.to_vec(),
        }),
    }
}

/// The storage of a cudarc slice's memory, homed on the slice's stream.
fn cuda_storage<T>(
    ptr: u64,
    len: usize,
    home: &Arc<cudarc::driver::CudaStream>,
) -> Result<Arc<Storage>> {
    if !home.context().is_primary() {
        return Err(Error::view(
            "a cudarc slice of a non-primary context cannot be viewed: tile's kernels run in \
             the device's primary context",
        ));
    }
    let bytes = len * std::mem::size_of::<T>();
    // SAFETY: the caller's view borrows the slice for as long as the storage lives (the
    // view owns its only handle), so the memory stays valid; work on it is ordered on
    // the slice's stream (`home`), which cudarc's `device_ptr` call has made wait.
    Ok(Arc::new(unsafe {
        Storage::external_cuda(ptr as usize, bytes, Arc::clone(home), None, true)
    }))
}

/// The storage of raw memory described by `shape`/`strides` on `stream`'s device.
///
/// # Safety
///
/// See [`TensorView::from_raw_parts`].
unsafe fn raw_storage<T: Element>(
    ptr: usize,
    shape: &[usize],
    strides: &[isize],
    stream: &Stream,
    keep: Keep,
    scoped: bool,
) -> Result<Arc<Storage>> {
    let n = span(shape, strides)
        .ok_or_else(|| layout_error(shape, strides, "has negative strides or overflows"))?;
    check_layout(shape, strides, 0, n)?;
    if ptr == 0 && n > 0 {
        return Err(Error::view("view of a null pointer"));
    }
    let bytes = n
        .checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::TensorTooLarge {
            shape: shape.to_vec(),
        })?;
    // SAFETY: forwarded from the caller.
    Ok(Arc::new(unsafe {
        match stream {
            Stream::Cpu => Storage::external_host(ptr, bytes, keep, scoped),
            Stream::Cuda(s) => Storage::external_cuda(ptr, bytes, Arc::clone(s), keep, scoped),
        }
    }))
}

/// A contiguous tensor of `shape` over `bytes` bytes of borrowed host memory (scoped).
///
/// # Safety
///
/// As [`Storage::external_host`].
unsafe fn borrowed_host<T: Element>(ptr: usize, bytes: usize, shape: &[usize]) -> Tensor<T> {
    // SAFETY: forwarded from the caller.
    let storage = unsafe { Storage::external_host(ptr, bytes, None, true) };
    Tensor::over(Arc::new(storage), shape)
}

/// A scoped tensor of raw memory: see [`TensorView::from_raw_parts`] for the contract.
unsafe fn borrowed_raw<T: Element>(
    ptr: usize,
    shape: &[usize],
    strides: &[isize],
    stream: &Stream,
) -> Result<Tensor<T>> {
    // SAFETY: forwarded from the caller.
    let storage = unsafe { raw_storage::<T>(ptr, shape, strides, stream, None, true)? };
    Ok(Tensor::from_parts(storage, shape, strides, 0))
}

/// A tensor of raw memory that owns `keep` (an import): see [`TensorView::from_raw_parts`]
/// for the contract, which must hold until `keep` is dropped.
pub(crate) unsafe fn owned_raw<T: Element>(
    ptr: usize,
    shape: &[usize],
    strides: &[isize],
    stream: &Stream,
    keep: Keep,
) -> Result<Tensor<T>> {
    // SAFETY: forwarded from the caller.
    let storage = unsafe { raw_storage::<T>(ptr, shape, strides, stream, keep, false)? };
    Ok(Tensor::from_parts(storage, shape, strides, 0))
}

macro_rules! view_common {
    ($ty:ident) => {
        impl<'a, T: Element> $ty<'a, T> {
            fn wrap(t: Tensor<T>, sync: Option<SyncOnDrop<'a>>) -> Self {
                $ty {
                    t,
                    _sync: sync,
                    _borrow: PhantomData,
                }
            }

            /// The extent of each dim.
            pub fn shape(&self) -> &[usize] {
                self.t.shape()
            }

            /// Strides in elements.
            pub fn strides(&self) -> &[isize] {
                self.t.strides()
            }

            /// Offset of the first element, in elements from the start of the borrowed
            /// memory.
            pub fn offset(&self) -> usize {
                self.t.offset()
            }

            /// The number of elements (the product of the extents).
            pub fn numel(&self) -> usize {
                self.t.numel()
            }

            /// The number of dims.
            pub fn ndim(&self) -> usize {
                self.t.ndim()
            }

            /// The device whose memory the view borrows.
            pub fn device(&self) -> Device {
                self.t.device()
            }

            /// The element type, `T`'s dtype.
            pub fn dtype(&self) -> DType {
                T::DTYPE
            }

            /// Row-major contiguous, ignoring the strides of extent-1 dims.
            pub fn is_contiguous(&self) -> bool {
                self.t.is_contiguous()
            }

            /// Host address or CUDA device address of the first element.
            pub fn data_ptr(&self) -> usize {
                self.t.data_ptr()
            }

            /// The elements in logical row-major order (a device view is copied on its
            /// home stream, which this waits for).
            pub fn to_vec(&self) -> Result<Vec<T>> {
                self.t.to_vec()
            }

            /// The same memory seen with another layout: `shape` and `strides` (in
            /// elements) from element `offset` of the borrowed memory. Strides must not
            /// be negative and every element must fall inside the borrowed memory.
            pub fn strided(
                self,
                shape: &[usize],
                strides: &[isize],
                offset: usize,
            ) -> Result<Self> {
                let len = self.t.storage().bytes() / std::mem::size_of::<T>().max(1);
                check_layout(shape, strides, offset, len)?;
                let t = self
                    .t
                    .view(Dims::from_slice(shape), Dims::from_slice(strides), offset);
                Ok(Self::wrap(t, self._sync))
            }

            /// A contiguous row-major view of `shape` over the same memory, from the
            /// current offset.
            pub fn reshape(self, shape: &[usize]) -> Result<Self> {
                let t = self.t.reshape(shape)?;
                Ok(Self::wrap(t, self._sync))
            }

            /// A read-only view of `range` along `dim`, borrowing this one.
            pub fn slice(
                &self,
                dim: usize,
                range: std::ops::Range<usize>,
            ) -> Result<TensorView<'_, T>> {
                Ok(TensorView::wrap(self.t.slice(dim, range)?, None))
            }

            /// A read-only view with dims `d0` and `d1` swapped, borrowing this one.
            ///
            /// # Panics
            ///
            /// If `d0` or `d1` is not a dim of the view.
            pub fn transpose(&self, d0: usize, d1: usize) -> TensorView<'_, T> {
                TensorView::wrap(self.t.transpose(d0, d1), None)
            }

            /// A contiguous copy into a new tensor on `device`.
            pub fn to_device(&self, device: Device) -> Result<Tensor<T>> {
                self.t.to_device(device)
            }
        }

        impl<T: Element> TensorArg for $ty<'_, T> {
            type Elem = T;

            #[inline(always)]
            fn arg(&self) -> ArgRef<'_> {
                ArgRef::input(&self.t)
            }
        }

        impl<T: Element> std::fmt::Debug for $ty<'_, T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($ty))
                    .field("dtype", &T::DTYPE)
                    .field("shape", &self.shape())
                    .field("strides", &self.strides())
                    .field("offset", &self.offset())
                    .field("device", &self.device())
                    .finish()
            }
        }
    };
}

view_common!(TensorView);
view_common!(TensorViewMut);

impl<'a, T: Element> TensorView<'a, T> {
    /// A contiguous view of `shape` over a host slice (the CPU backend).
    pub fn from_slice(data: &'a [T], shape: &[usize]) -> Result<Self> {
        exact_len(shape, data.len())?;
        // SAFETY: `data` is borrowed for 'a, as long as the view that owns the storage,
        // and only read through it (the view is never an output).
        let t = unsafe { borrowed_host(data.as_ptr() as usize, size_of_val(data), shape) };
        Ok(Self::wrap(t, None))
    }

    /// A contiguous view of `shape` over a cudarc slice (`CudaSlice<T>`, `CudaView<T>`)
    /// of a device's primary context, homed on the slice's stream (see the module docs).
    /// Launch on `Stream::Cuda(slice.stream().clone())` to need no cross-stream wait.
    pub fn from_cuda_slice<S: DevicePtr<T>>(slice: &'a S, shape: &[usize]) -> Result<Self> {
        exact_len(shape, slice.len())?;
        let home = slice.stream();
        let (ptr, sync) = slice.device_ptr(home);
        let storage = cuda_storage::<T>(ptr, slice.len(), home)?;
        Ok(Self::wrap(Tensor::over(storage, shape), Some(sync)))
    }

    /// A view of raw host or device memory: `shape` and `strides` (in elements) from
    /// `ptr`, on `stream`'s device (host memory for [`Stream::Cpu`]; for CUDA, device
    /// memory of the device's primary context whose pending work is ordered on `stream`).
    ///
    /// # Safety
    ///
    /// Every element the layout reaches must be valid, initialised memory of `T` for all
    /// of `'a`, and nothing may write it while the view lives. Device memory must stay
    /// allocated until the work queued on it through the view has finished (tile orders
    /// that work before `stream`'s later work when the view drops).
    pub unsafe fn from_raw_parts(
        ptr: usize,
        shape: &[usize],
        strides: &[isize],
        stream: &Stream,
    ) -> Result<Self> {
        // SAFETY: forwarded from the caller.
        Ok(Self::wrap(
            unsafe { borrowed_raw(ptr, shape, strides, stream)? },
            None,
        ))
    }
}

impl<'a, T: Element> TensorViewMut<'a, T> {
    /// A contiguous writable view of `shape` over a mutable host slice.
    pub fn from_slice_mut(data: &'a mut [T], shape: &[usize]) -> Result<Self> {
        exact_len(shape, data.len())?;
        // SAFETY: `data` is borrowed exclusively for 'a, as long as the view that owns the
        // storage; every access goes through the storage's lock.
        let t = unsafe { borrowed_host(data.as_mut_ptr() as usize, size_of_val(data), shape) };
        Ok(Self::wrap(t, None))
    }

    /// A contiguous writable view of `shape` over a cudarc slice (`CudaSlice<T>`,
    /// `CudaViewMut<T>`), homed on the slice's stream (see the module docs).
    pub fn from_cuda_slice_mut<S: DevicePtrMut<T>>(
        slice: &'a mut S,
        shape: &[usize],
    ) -> Result<Self> {
        exact_len(shape, slice.len())?;
        let len = slice.len();
        let home = Arc::clone(slice.stream());
        let (ptr, sync) = {
            // `device_ptr_mut` borrows the stream for 'a: use the slice's own handle.
            let slice: &'a mut S = slice;
            let stream: *const cudarc::driver::CudaStream = Arc::as_ptr(&home);
            // SAFETY: `home` is a clone of the slice's stream `Arc`, which the slice (and
            // the storage below) keep alive for longer than 'a.
            slice.device_ptr_mut(unsafe { &*stream })
        };
        let storage = cuda_storage::<T>(ptr, len, &home)?;
        Ok(Self::wrap(Tensor::over(storage, shape), Some(sync)))
    }

    /// A writable view of raw host or device memory (see
    /// [`TensorView::from_raw_parts`]).
    ///
    /// # Safety
    ///
    /// As [`TensorView::from_raw_parts`], and nothing else may read or write the memory
    /// while the view lives.
    pub unsafe fn from_raw_parts_mut(
        ptr: usize,
        shape: &[usize],
        strides: &[isize],
        stream: &Stream,
    ) -> Result<Self> {
        // SAFETY: forwarded from the caller; the read-only view is consumed here.
        let view = unsafe { TensorView::<'a, T>::from_raw_parts(ptr, shape, strides, stream)? };
        Ok(Self::wrap(view.t, None))
    }

    /// A read-only view borrowing this one.
    pub fn as_view(&self) -> TensorView<'_, T> {
        TensorView::wrap(self.t.clone(), None)
    }

    /// Overwrites the elements, given in logical row-major order (device views must be
    /// contiguous).
    pub fn copy_from_slice(&mut self, data: &[T]) -> Result<()> {
        self.t.copy_from_slice(data)
    }
}

impl<T: Element> TensorArgMut for TensorViewMut<'_, T> {
    #[inline(always)]
    fn arg_mut(&mut self) -> ArgRef<'_> {
        ArgRef::output(&mut self.t)
    }
}

impl<T: Element> Tensor<T> {
    /// [`TensorView::from_cuda_slice`]: a view of a cudarc slice, no copy.
    pub fn from_cuda_slice<'a, S: DevicePtr<T>>(
        slice: &'a S,
        shape: &[usize],
    ) -> Result<TensorView<'a, T>> {
        TensorView::from_cuda_slice(slice, shape)
    }

    /// [`TensorView::from_slice`]: a view of a host slice, no copy.
    pub fn view_of<'a>(data: &'a [T], shape: &[usize]) -> Result<TensorView<'a, T>> {
        TensorView::from_slice(data, shape)
    }

    /// [`TensorViewMut::from_slice_mut`]: a writable view of a host slice, no copy.
    pub fn view_of_mut<'a>(data: &'a mut [T], shape: &[usize]) -> Result<TensorViewMut<'a, T>> {
        TensorViewMut::from_slice_mut(data, shape)
    }
}

/// A tile tensor's device memory lent to cudarc for reading: see [`Tensor::cuda_view`].
pub struct CudaRead<'a, T> {
    whole: CudaView<'a, T>,
    range: std::ops::Range<usize>,
    _guard: StorageGuard<'a>,
}

/// A tile tensor's device memory lent to cudarc for writing: see
/// [`Tensor::cuda_view_mut`].
pub struct CudaWrite<'a, T> {
    whole: CudaViewMut<'a, T>,
    range: std::ops::Range<usize>,
    _guard: StorageGuard<'a>,
}

impl<'a, T> CudaRead<'a, T> {
    /// The tensor's elements as a cudarc view (use it on the stream given).
    pub fn view(&self) -> CudaView<'a, T> {
        self.whole.slice(self.range.clone())
    }
}

impl<T> CudaWrite<'_, T> {
    /// The tensor's elements as a cudarc view (use it on the stream given).
    pub fn view(&self) -> CudaView<'_, T> {
        self.whole.slice(self.range.clone())
    }

    /// The tensor's elements as a writable cudarc view (use it on the stream given).
    pub fn view_mut(&mut self) -> CudaViewMut<'_, T> {
        self.whole.slice_mut(self.range.clone())
    }
}

impl<T: Element + DeviceRepr> Tensor<T> {
    fn cuda_parts(
        &self,
        stream: &Stream,
        write: bool,
    ) -> Result<(StorageGuard<'_>, std::ops::Range<usize>, usize)> {
        let Stream::Cuda(s) = stream else {
            return Err(Error::view("cuda_view needs a CUDA stream"));
        };
        if stream.device() != self.device() {
            return Err(Error::view(format!(
                "cuda_view: the tensor is on {}, the stream on {}",
                self.device(),
                stream.device()
            )));
        }
        if !self.is_contiguous() {
            return Err(Error::view(format!(
                "cuda_view: tensor of shape {:?} with strides {:?} is not contiguous",
                self.shape(),
                self.strides()
            )));
        }
        if self.storage().cuda_slice().is_none() {
            return Err(Error::view(
                "cuda_view: the tensor's memory was not allocated by tile on a GPU",
            ));
        }
        let guard = self.storage().lock(write);
        self.storage().order(s, write)?;
        let whole = self.storage().bytes() / std::mem::size_of::<T>().max(1);
        Ok((guard, self.offset()..self.offset() + self.numel(), whole))
    }

    /// Lends the tensor's device memory to cudarc code as a `CudaView<T>`, ordered after
    /// tile's earlier work on `stream` (queue the cudarc work on `stream`). The tensor's
    /// storage stays read-locked while the guard lives: a launch writing it from this
    /// thread would wait forever. The tensor must be contiguous and allocated by tile.
    pub fn cuda_view(&self, stream: &Stream) -> Result<CudaRead<'_, T>> {
        let (guard, range, whole) = self.cuda_parts(stream, false)?;
        let Some(cell) = self.storage().cuda_slice() else {
            unreachable!("checked in cuda_parts")
        };
        // SAFETY: the shared lock is held for the guard's life (see `CudaOwner::Slice`);
        // the bytes hold `whole` elements of `T` (this storage's element type).
        let whole = unsafe { (*cell.get()).transmute::<T>(whole) }
            .ok_or_else(|| Error::view("cuda_view: storage smaller than its elements"))?;
        Ok(CudaRead {
            whole,
            range,
            _guard: guard,
        })
    }

    /// [`cuda_view`](Self::cuda_view) for writing: the storage stays write-locked while
    /// the guard lives.
    pub fn cuda_view_mut(&mut self, stream: &Stream) -> Result<CudaWrite<'_, T>> {
        let (guard, range, whole) = self.cuda_parts(stream, true)?;
        let Some(cell) = self.storage().cuda_slice() else {
            unreachable!("checked in cuda_parts")
        };
        // SAFETY: the exclusive lock is held for the guard's life (see
        // `CudaOwner::Slice`), so this is the only reference to the slice.
        let whole = unsafe { (*cell.get()).transmute_mut::<T>(whole) }
            .ok_or_else(|| Error::view("cuda_view: storage smaller than its elements"))?;
        Ok(CudaWrite {
            whole,
            range,
            _guard: guard,
        })
    }
}

impl Stream {
    /// A CUDA stream another library owns (PyTorch's current stream, say), by its raw
    /// `CUstream` handle (`0` is the legacy default stream), in the primary context of
    /// CUDA device `device`. Dropping the result does not destroy the stream.
    ///
    /// # Safety
    ///
    /// `handle` must be a stream of that context, alive as long as the result (and
    /// anything launched or ordered on it) is used.
    pub unsafe fn from_raw_cuda(device: Device, handle: usize) -> Result<Stream> {
        let Device::Cuda(ordinal) = device else {
            return Err(Error::view("from_raw_cuda needs a CUDA device"));
        };
        let dev = crate::cuda::device(ordinal)?;
        // SAFETY: forwarded from the caller.
        let s = unsafe {
            dev.ctx
                .wrap_borrowed_stream(handle as cudarc::driver::sys::CUstream)
        };
        Ok(Stream::Cuda(s))
    }
}
