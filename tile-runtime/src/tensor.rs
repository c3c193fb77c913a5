//! Tensors: typed, strided views of host or device memory.
//!
//! Invariants:
//! - A [`Tensor`] is a view (shape, strides in elements, element offset) of a shared,
//!   untyped [`Storage`]; `clone`, `transpose`, `slice` and `reshape` make new views of
//!   the same storage, copies (`to_device`, `to_vec`) make new storage.
//! - Strides are never negative and every view stays inside its storage, so the span
//!   `offset ..= offset + Σ (shape[d] - 1) * strides[d]` is always in bounds.
//! - Host storage tile allocates is aligned to [`HOST_ALIGN`] (64) bytes, device storage
//!   comes from the CUDA allocator (256-byte aligned): the generated code uses 16-byte
//!   vector accesses. Memory owned elsewhere (views, DLPack imports, see
//!   [`crate::view`]) has whatever alignment it has; the launch checks it.
//! - Every access to the bytes of a storage, by the host or by a kernel launch, holds the
//!   storage's reader/writer lock (shared to read, exclusive to write), so two views of
//!   one storage cannot race through safe code. Device-side ordering across streams is
//!   the storage's [`StreamSync`](crate::sync::StreamSync) (one atomic load while a
//!   single stream is in use).
//! - A device storage is freed on its allocating stream after every use on other streams
//!   (its drop orders a write there first).

use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use crate::device::Device;
use crate::dims::{each, Body, Dims};
use crate::dtype::Element;
use crate::error::{Error, Result};
pub use crate::storage::HOST_ALIGN;
pub(crate) use crate::storage::{Storage, StorageGuard};

/// A typed, strided view of host or device memory.
///
/// Everything a launch reads is in the struct itself (shape and strides inline, see
/// `Dims`), in this order (`repr(C)`), so for small ndim it spans few cache lines and
/// the only pointer the launch follows is `storage`.
#[repr(C)]
pub struct Tensor<T: Element> {
    storage: Arc<Storage>,
    offset: usize,
    shape: Dims<usize>,
    strides: Dims<isize>,
    _elem: PhantomData<T>,
}

fn numel_of(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Row-major strides of a contiguous tensor of `shape`.
pub(crate) fn contiguous_strides(shape: &[usize]) -> Dims<isize> {
    let mut strides = Dims::filled(0isize, shape.len());
    let mut acc = 1isize;
    for d in (0..shape.len()).rev() {
        strides[d] = acc;
        acc = acc.saturating_mul(shape[d] as isize);
    }
    strides
}

/// The first dim whose stride breaks contiguous row-major order, as
/// `(dim, expected, got)`. Dims of extent 1 may have any stride (TileLang's rule).
#[inline]
pub(crate) fn stride_mismatch(shape: &[usize], strides: &[isize]) -> Option<(usize, isize, isize)> {
    /// Dims from the last; a struct, not a closure, so it is always inlined (see `Body`).
    struct Step<'a> {
        shape: &'a [usize],
        strides: &'a [isize],
        expected: isize,
    }
    impl Body<(usize, isize, isize)> for Step<'_> {
        #[inline(always)]
        fn run(&mut self, k: usize) -> Result<(), (usize, isize, isize)> {
            let d = self.shape.len() - 1 - k;
            let got = self.strides.get(d).copied().unwrap_or(0);
            if self.shape[d] != 1 && got != self.expected {
                return Err((d, self.expected, got));
            }
            self.expected = self.expected.saturating_mul(self.shape[d] as isize);
            Ok(())
        }
    }
    let step = Step {
        shape,
        strides,
        expected: 1,
    };
    each(true, shape.len(), step).err()
}

/// Calls `f` with the element offset of every index of a view, in row-major order.
fn for_each_offset(shape: &[usize], strides: &[isize], base: usize, mut f: impl FnMut(usize)) {
    if shape.contains(&0) {
        return;
    }
    let mut index = vec![0usize; shape.len()];
    let mut off = base as isize;
    loop {
        f(off as usize);
        // Odometer step from the last dim.
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            off += strides[d];
            if index[d] < shape[d] {
                break;
            }
            off -= strides[d] * shape[d] as isize;
            index[d] = 0;
        }
    }
}

impl<T: Element> Tensor<T> {
    fn new_storage(shape: &[usize], device: Device, zero: bool) -> Result<(Arc<Storage>, usize)> {
        let too_large = || Error::TensorTooLarge {
            shape: shape.to_vec(),
        };
        let numel = numel_of(shape).ok_or_else(too_large)?;
        let bytes = numel
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(too_large)?;
        Ok((Arc::new(Storage::alloc(bytes, device, zero)?), numel))
    }

    fn row_major(storage: Arc<Storage>, shape: &[usize]) -> Tensor<T> {
        Tensor {
            storage,
            offset: 0,
            shape: Dims::from_slice(shape),
            strides: contiguous_strides(shape),
            _elem: PhantomData,
        }
    }

    /// A contiguous tensor of `shape` holding a copy of `data` (row-major).
    pub fn from_slice(data: &[T], shape: &[usize], device: Device) -> Result<Tensor<T>> {
        let numel = numel_of(shape).ok_or_else(|| Error::TensorTooLarge {
            shape: shape.to_vec(),
        })?;
        if numel != data.len() {
            return Err(Error::TensorLen {
                shape: shape.to_vec(),
                len: data.len(),
            });
        }
        let (storage, _) = Self::new_storage(shape, device, false)?;
        storage.write(0, data)?;
        Ok(Self::row_major(storage, shape))
    }

    /// Like [`Tensor::from_slice`], taking the data by value.
    pub fn from_vec(data: Vec<T>, shape: &[usize], device: Device) -> Result<Tensor<T>> {
        Self::from_slice(&data, shape, device)
    }

    /// A contiguous tensor of zeros.
    pub fn zeros(shape: &[usize], device: Device) -> Result<Tensor<T>> {
        let (storage, _) = Self::new_storage(shape, device, true)?;
        Ok(Self::row_major(storage, shape))
    }

    /// A contiguous tensor with every element equal to `value`.
    pub fn full(shape: &[usize], value: T, device: Device) -> Result<Tensor<T>> {
        let (storage, numel) = Self::new_storage(shape, device, false)?;
        storage.write(0, &vec![value; numel])?;
        Ok(Self::row_major(storage, shape))
    }

    /// A contiguous tensor whose contents are unspecified (zero on the host; left
    /// uninitialised on a GPU, except for `bool`, which is zeroed to stay valid).
    pub fn empty(shape: &[usize], device: Device) -> Result<Tensor<T>> {
        let zero = device.is_cpu() || T::DTYPE == crate::DType::Bool;
        let (storage, _) = Self::new_storage(shape, device, zero)?;
        Ok(Self::row_major(storage, shape))
    }

    /// The extent of each dim.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// The number of elements (the product of the extents).
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The number of dims.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// The device whose memory holds the elements.
    pub fn device(&self) -> Device {
        self.storage.device()
    }

    /// The element type, `T`'s dtype.
    pub fn dtype(&self) -> crate::DType {
        T::DTYPE
    }

    /// Row-major contiguous, ignoring the strides of extent-1 dims (the rule the launch
    /// checks apply).
    pub fn is_contiguous(&self) -> bool {
        stride_mismatch(&self.shape, &self.strides).is_none()
    }

    /// The same elements, row-major from the start of an allocation, as launchers take
    /// them: `self` (sharing its storage) when it already is, else a copy
    /// (`x.transpose(0, 1).contiguous()`, or a slice that starts inside its
    /// allocation and so is not aligned for vector access). The copy goes through the
    /// host for a device tensor.
    pub fn contiguous(&self) -> Result<Tensor<T>> {
        if self.is_contiguous() && self.offset == 0 {
            return Ok(self.clone());
        }
        Tensor::from_vec(self.to_vec()?, &self.shape, self.device())
    }

    /// Offset of the first element, in elements from the start of the storage.
    pub fn offset(&self) -> usize {
        self.offset
    }

    pub(crate) fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    /// Host address or CUDA device address of the first element. Using the memory
    /// behind it outside tile is `unsafe` in the caller's code; see
    /// [`Tensor::cuda_view`] for a checked way to hand device memory to cudarc.
    pub fn data_ptr(&self) -> usize {
        self.storage.base() + self.offset * std::mem::size_of::<T>()
    }

    /// `(first, len)` of the elements this view can touch, or `None` if it is empty.
    fn span(&self) -> Option<(usize, usize)> {
        if self.shape.contains(&0) {
            return None;
        }
        let last: isize = self
            .shape
            .iter()
            .zip(self.strides.iter())
            .map(|(&d, &s)| (d as isize - 1) * s)
            .sum();
        Some((self.offset, last as usize + 1))
    }

    /// The elements in logical row-major order (gathers non-contiguous views).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let Some((first, len)) = self.span() else {
            return Ok(Vec::new());
        };
        let numel = self.numel();
        if self.is_contiguous() {
            return self.storage.read(first, numel);
        }
        let span = self.storage.read::<T>(first, len)?;
        let mut out = Vec::with_capacity(numel);
        for_each_offset(&self.shape, &self.strides, 0, |off| out.push(span[off]));
        Ok(out)
    }

    /// Overwrites the elements, given in logical row-major order. Device tensors must be
    /// contiguous.
    pub fn copy_from_slice(&mut self, data: &[T]) -> Result<()> {
        if data.len() != self.numel() {
            return Err(Error::TensorLen {
                shape: self.shape.to_vec(),
                len: data.len(),
            });
        }
        if self.is_contiguous() {
            return self.storage.write(self.offset, data);
        }
        match self.storage.host_base() {
            Some(base) => {
                let _guard = self.storage.lock(true);
                let base = base.cast::<T>();
                let mut src = data.iter();
                for_each_offset(&self.shape, &self.strides, self.offset, |off| {
                    if let Some(&v) = src.next() {
                        // SAFETY: every offset of the view is inside the storage (module
                        // invariant), the allocation is aligned for `T`, and the exclusive
                        // lock is held.
                        unsafe { base.add(off).write(v) }
                    }
                });
                Ok(())
            }
            None => Err(Error::view(
                "copy_from_slice into a non-contiguous CUDA tensor is not supported",
            )),
        }
    }

    /// A contiguous copy on `device` (always a new storage, even on the same device).
    ///
    /// Between GPUs (and on one) a contiguous tensor is copied on the device, queued on
    /// the destination's default stream after the source's pending work: directly when
    /// the destination has peer access to the source's GPU ([`Device::peer_access`],
    /// enabled here on first use), otherwise staged through host memory by the driver.
    /// Other copies go through the host.
    pub fn to_device(&self, device: Device) -> Result<Tensor<T>> {
        let gpus = self.device().is_cuda() && device.is_cuda();
        if !gpus || !self.is_contiguous() {
            return Tensor::from_vec(self.to_vec()?, &self.shape, device);
        }
        if let (Device::Cuda(to), Device::Cuda(from)) = (device, self.device()) {
            // Enables direct access when the pair has it; the copy below is the same call
            // either way.
            crate::cuda::peer_access(to, from)?;
        }
        let (storage, numel) = Self::new_storage(&self.shape, device, false)?;
        let size = std::mem::size_of::<T>();
        storage.copy_device(0, &self.storage, self.offset * size, numel * size)?;
        Ok(Self::row_major(storage, &self.shape))
    }

    /// A contiguous tensor of `shape` over `storage` from its start.
    pub(crate) fn over(storage: Arc<Storage>, shape: &[usize]) -> Tensor<T> {
        Self::row_major(storage, shape)
    }

    /// A tensor over `storage` with this layout (the caller checked that it fits).
    pub(crate) fn from_parts(
        storage: Arc<Storage>,
        shape: &[usize],
        strides: &[isize],
        offset: usize,
    ) -> Tensor<T> {
        Tensor {
            storage,
            offset,
            shape: Dims::from_slice(shape),
            strides: Dims::from_slice(strides),
            _elem: PhantomData,
        }
    }

    pub(crate) fn view(
        &self,
        shape: Dims<usize>,
        strides: Dims<isize>,
        offset: usize,
    ) -> Tensor<T> {
        Tensor {
            storage: Arc::clone(&self.storage),
            offset,
            shape,
            strides,
            _elem: PhantomData,
        }
    }

    /// A view with dims `d0` and `d1` swapped (shares storage; usually non-contiguous).
    ///
    /// # Panics
    ///
    /// If `d0` or `d1` is not a dim of the tensor.
    pub fn transpose(&self, d0: usize, d1: usize) -> Tensor<T> {
        assert!(
            d0 < self.ndim() && d1 < self.ndim(),
            "transpose({d0}, {d1}) of a {}-d tensor",
            self.ndim()
        );
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        shape.swap(d0, d1);
        strides.swap(d0, d1);
        self.view(shape, strides, self.offset)
    }

    /// A view of `range` along `dim` (shares storage).
    pub fn slice(&self, dim: usize, range: Range<usize>) -> Result<Tensor<T>> {
        let extent = *self.shape.get(dim).ok_or_else(|| {
            Error::view(format!("slice: dim {dim} of a {}-d tensor", self.ndim()))
        })?;
        if range.start > range.end || range.end > extent {
            return Err(Error::view(format!(
                "slice: range {}..{} out of bounds for dim {dim} of extent {extent}",
                range.start, range.end
            )));
        }
        let mut shape = self.shape.clone();
        shape[dim] = range.end - range.start;
        let offset = if shape[dim] == 0 {
            self.offset
        } else {
            self.offset + range.start * self.strides[dim] as usize
        };
        Ok(self.view(shape, self.strides.clone(), offset))
    }

    /// A view with a new shape of the same element count; the tensor must be contiguous.
    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor<T>> {
        if numel_of(shape) != Some(self.numel()) {
            return Err(Error::view(format!(
                "reshape: cannot view shape {:?} as {shape:?}",
                self.shape
            )));
        }
        if !self.is_contiguous() {
            return Err(Error::view(format!(
                "reshape: tensor of shape {:?} with strides {:?} is not contiguous",
                self.shape, self.strides
            )));
        }
        Ok(self.view(
            Dims::from_slice(shape),
            contiguous_strides(shape),
            self.offset,
        ))
    }
}

impl<T: Element> Clone for Tensor<T> {
    /// Another view of the same storage (no copy; see [`Tensor::to_device`] for one).
    fn clone(&self) -> Tensor<T> {
        self.view(self.shape.clone(), self.strides.clone(), self.offset)
    }
}

impl<T: Element> fmt::Debug for Tensor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &T::DTYPE)
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .field("offset", &self.offset)
            .field("device", &self.device())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<X: Send + Sync>() {}

    #[test]
    fn contiguous_copies_only_what_is_not_row_major_from_its_start() -> Result<()> {
        let t = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3], Device::Cpu)?;
        let same = t.contiguous()?;
        assert!(
            Arc::ptr_eq(same.storage(), t.storage()),
            "already row-major: shared"
        );
        let tt = t.transpose(0, 1).contiguous()?;
        assert!(tt.is_contiguous() && tt.offset() == 0);
        assert_eq!(tt.shape(), &[3, 2]);
        assert_eq!(tt.to_vec()?, [1, 4, 2, 5, 3, 6]);
        let tail = t.reshape(&[6])?.slice(0, 1..6)?.contiguous()?;
        assert_eq!((tail.offset(), tail.to_vec()?), (0, vec![2, 3, 4, 5, 6]));
        assert!(!Arc::ptr_eq(tail.storage(), t.storage()));
        Ok(())
    }

    #[test]
    fn tensor_is_send_sync() {
        assert_send_sync::<Tensor<f32>>();
        assert_send_sync::<Tensor<half::f16>>();
    }

    #[test]
    fn construct_and_read_back() -> Result<()> {
        let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], Device::Cpu)?;
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.strides(), &[3, 1]);
        assert_eq!(t.numel(), 6);
        assert_eq!(t.ndim(), 2);
        assert!(t.is_contiguous());
        assert_eq!(t.data_ptr() % HOST_ALIGN, 0);
        assert_eq!(t.to_vec()?, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(
            Tensor::<i32>::zeros(&[3], Device::Cpu)?.to_vec()?,
            vec![0; 3]
        );
        assert_eq!(Tensor::full(&[2], 7u8, Device::Cpu)?.to_vec()?, vec![7, 7]);
        assert_eq!(
            Tensor::<f64>::empty(&[2], Device::Cpu)?.to_vec()?,
            vec![0.0; 2]
        );
        let e = Tensor::from_slice(&[1.0f32; 5], &[2, 3], Device::Cpu).err();
        assert_eq!(
            e.map(|e| e.to_string()).as_deref(),
            Some("tensor shape [2, 3] holds 6 elements but the data has 5")
        );
        assert!(matches!(
            Tensor::<f32>::zeros(&[usize::MAX, 2], Device::Cpu),
            Err(Error::TensorTooLarge { .. })
        ));
        let z = Tensor::<f32>::zeros(&[0, 4], Device::Cpu)?;
        assert_eq!(z.numel(), 0);
        assert!(z.to_vec()?.is_empty());
        assert_ne!(z.data_ptr(), 0);
        Ok(())
    }

    #[test]
    fn views() -> Result<()> {
        let data: Vec<i32> = (0..12).collect();
        let t = Tensor::from_slice(&data, &[3, 4], Device::Cpu)?;
        let tt = t.transpose(0, 1);
        assert_eq!(tt.shape(), &[4, 3]);
        assert_eq!(tt.strides(), &[1, 4]);
        assert!(!tt.is_contiguous());
        assert_eq!(tt.to_vec()?, vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
        let rows = t.slice(0, 1..3)?;
        assert!(rows.is_contiguous());
        assert_eq!(rows.offset(), 4);
        assert_eq!(rows.to_vec()?, (4..12).collect::<Vec<_>>());
        let cols = t.slice(1, 1..3)?;
        assert!(!cols.is_contiguous());
        assert_eq!(cols.to_vec()?, vec![1, 2, 5, 6, 9, 10]);
        let col = t.slice(1, 2..3)?;
        assert_eq!(col.to_vec()?, vec![2, 6, 10]);
        let r = rows.reshape(&[8])?;
        assert_eq!(r.to_vec()?, (4..12).collect::<Vec<_>>());
        assert!(tt.reshape(&[12]).is_err());
        assert!(t.slice(2, 0..1).is_err());
        assert!(t.slice(0, 2..4).is_err());
        // A single row of a transposed view has extent-1 dims: still contiguous.
        let one = t.slice(0, 1..2)?;
        assert!(one.is_contiguous());
        Ok(())
    }

    #[test]
    fn copy_into_views() -> Result<()> {
        let mut t = Tensor::<f32>::zeros(&[2, 3], Device::Cpu)?;
        t.copy_from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
        let mut tt = t.transpose(0, 1);
        tt.copy_from_slice(&[10.0, 40.0, 20.0, 50.0, 30.0, 60.0])?;
        assert_eq!(t.to_vec()?, vec![10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
        let mut row = t.slice(0, 1..2)?;
        row.copy_from_slice(&[7.0, 8.0, 9.0])?;
        assert_eq!(t.to_vec()?, vec![10.0, 20.0, 30.0, 7.0, 8.0, 9.0]);
        assert!(row.copy_from_slice(&[1.0]).is_err());
        let moved = t.to_device(Device::Cpu)?;
        assert_eq!(moved.to_vec()?, t.to_vec()?);
        assert_ne!(moved.data_ptr(), t.data_ptr());
        Ok(())
    }

    #[test]
    fn offsets_iterate_row_major() {
        let mut seen = Vec::new();
        for_each_offset(&[2, 2, 2], &[1, 4, 2], 100, |o| seen.push(o));
        assert_eq!(seen, vec![100, 102, 104, 106, 101, 103, 105, 107]);
        let mut none = 0;
        for_each_offset(&[2, 0], &[1, 1], 0, |_| none += 1);
        assert_eq!(none, 0);
        let mut scalar = Vec::new();
        for_each_offset(&[], &[], 5, |o| scalar.push(o));
        assert_eq!(scalar, vec![5]);
    }

    #[test]
    fn stride_rule() {
        assert_eq!(stride_mismatch(&[4, 3], &[3, 1]), None);
        assert_eq!(stride_mismatch(&[4, 3], &[1, 4]), Some((1, 1, 4)));
        assert_eq!(stride_mismatch(&[4, 1], &[1, 99]), None);
        assert_eq!(stride_mismatch(&[1, 5], &[0, 1]), None);
        assert_eq!(stride_mismatch(&[5], &[2]), Some((0, 1, 2)));
    }
}
