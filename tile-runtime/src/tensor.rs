//! Tensors: typed, strided views of host or device memory.
//!
//! Invariants:
//! - A [`Tensor`] is a view (shape, strides in elements, element offset) of a shared,
//!   untyped [`Storage`]; `clone`, `transpose`, `slice` and `reshape` make new views of
//!   the same storage, copies (`to_device`, `to_vec`) make new storage.
//! - Strides are never negative and every view stays inside its storage, so the span
//!   `offset ..= offset + Σ (shape[d] - 1) * strides[d]` is always in bounds.
//! - Host storage is aligned to [`HOST_ALIGN`] (64) bytes, device storage comes from the
//!   CUDA allocator (256-byte aligned): the generated code uses 16-byte vector accesses.
//! - Every access to the bytes of a storage, by the host or by a kernel launch, holds the
//!   storage's reader/writer lock (shared to read, exclusive to write), so two views of
//!   one storage cannot race through safe code. Device-side ordering across streams is
//!   the storage's [`StreamSync`] (one atomic load while a single stream is in use).
//! - A device storage is freed on its allocating stream after every use on other streams
//!   (its drop orders a write there first).

use std::alloc::Layout;
use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cudarc::driver::{CudaSlice, DevicePtr};

use crate::cuda;
use crate::device::Device;
use crate::dims::{each, Body, Dims};
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::sync::StreamSync;

/// Alignment of host allocations, in bytes.
pub const HOST_ALIGN: usize = 64;

/// A zero-initialised host allocation aligned to [`HOST_ALIGN`].
pub(crate) struct HostBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl HostBuf {
    fn zeroed(bytes: usize) -> Result<HostBuf> {
        // One byte at least: a zero-sized tensor still gets a real, aligned address.
        let layout = Layout::from_size_align(bytes.max(1), HOST_ALIGN)
            .map_err(|_| Error::view(format!("cannot allocate {bytes} bytes on the host")))?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        match NonNull::new(raw) {
            Some(ptr) => Ok(HostBuf { ptr, layout }),
            None => std::alloc::handle_alloc_error(layout),
        }
    }
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout and not freed elsewhere.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// SAFETY: `HostBuf` owns its allocation; every read or write of the bytes happens while
// the owning `Storage`'s lock is held (shared for reads, exclusive for writes).
unsafe impl Send for HostBuf {}
// SAFETY: see `Send`; `&HostBuf` alone gives no access to the bytes.
unsafe impl Sync for HostBuf {}

/// Untyped memory shared by the views of a tensor.
///
/// A launch reads, per buffer, the base address, the device, the lock word and (on a
/// device) the stream-ordering `home` word. After the driver's work of the previous launch
/// has evicted them they are cache misses, so they sit together at the front of a
/// cache-line-aligned struct: `repr(C)` keeps this field order, `mem` is a `repr(u8)` enum
/// whose CUDA payload starts with the [`StreamSync`] (whose `home` comes first), and the
/// lock guards nothing but `()` rather than wrapping the allocation handle, so its word is
/// not placed after that handle. Together they fit the first 64 bytes (checked in the
/// tests); the rest of the struct is only read off the launch path.
#[repr(C, align(64))]
pub(crate) struct Storage {
    /// Host address or device address of byte 0 (it never moves).
    base: usize,
    device: Device,
    /// The reader/writer lock of the module invariants: every access to the bytes (and
    /// every use of `Mem::Cuda::slice`) holds it, shared to read, exclusive to write.
    lock: RwLock<()>,
    mem: Mem,
}

#[repr(u8)]
enum Mem {
    Host(HostBuf),
    Cuda(CudaMem),
}

#[repr(C)]
struct CudaMem {
    /// Cross-stream ordering of the accesses (see [`crate::sync`]); first, see `Storage`.
    sync: StreamSync,
    bytes: usize,
    /// The allocation. Only used with `Storage::lock` held: shared access under a shared
    /// lock, mutable access under the exclusive lock (or with `&mut Storage` on drop).
    slice: UnsafeCell<CudaSlice<u8>>,
}

// SAFETY: the only field that is not `Sync` is `slice`, an `UnsafeCell` of a `Sync` +
// `Send` `CudaSlice`; `Storage` hands out `&CudaSlice` only under the shared lock and
// `&mut CudaSlice` only under the exclusive lock or through `&mut self`, so the cell is
// used as an `RwLock<CudaSlice>` would use its own.
unsafe impl Sync for CudaMem {}

/// A held storage lock (see the module invariants).
pub(crate) enum StorageGuard<'a> {
    Read(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Write(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

impl Storage {
    pub(crate) fn device(&self) -> Device {
        self.device
    }

    /// Host address or device address of byte 0.
    pub(crate) fn base(&self) -> usize {
        self.base
    }

    pub(crate) fn bytes(&self) -> usize {
        match &self.mem {
            Mem::Host(buf) => buf.layout.size(),
            Mem::Cuda(c) => c.bytes,
        }
    }

    /// Orders an access by `stream` after conflicting accesses on other streams (device
    /// storages; nothing to do on the host).
    #[inline]
    pub(crate) fn order(
        &self,
        stream: &Arc<cudarc::driver::CudaStream>,
        write: bool,
    ) -> Result<()> {
        match &self.mem {
            Mem::Host(_) => Ok(()),
            Mem::Cuda(c) => c.sync.order(stream, write),
        }
    }

    /// Takes the lock, shared or exclusive. Lock poisoning is ignored: no code panics
    /// while holding it in a way that leaves the bytes half-updated in a Rust-visible way.
    pub(crate) fn lock(&self, write: bool) -> StorageGuard<'_> {
        if write {
            StorageGuard::Write(self.lock.write().unwrap_or_else(|e| e.into_inner()))
        } else {
            StorageGuard::Read(self.lock.read().unwrap_or_else(|e| e.into_inner()))
        }
    }

    /// [`lock`](Self::lock) without waiting: `None` when a holder conflicts (or this
    /// thread already holds the lock in a conflicting way).
    #[inline]
    pub(crate) fn try_lock(&self, write: bool) -> Option<StorageGuard<'_>> {
        use std::sync::TryLockError;
        if write {
            match self.lock.try_write() {
                Ok(g) => Some(StorageGuard::Write(g)),
                Err(TryLockError::Poisoned(e)) => Some(StorageGuard::Write(e.into_inner())),
                Err(TryLockError::WouldBlock) => None,
            }
        } else {
            match self.lock.try_read() {
                Ok(g) => Some(StorageGuard::Read(g)),
                Err(TryLockError::Poisoned(e)) => Some(StorageGuard::Read(e.into_inner())),
                Err(TryLockError::WouldBlock) => None,
            }
        }
    }

    fn alloc(bytes: usize, device: Device, zero: bool) -> Result<Storage> {
        match device {
            Device::Cpu => {
                let buf = HostBuf::zeroed(bytes)?;
                Ok(Storage {
                    base: buf.ptr.as_ptr() as usize,
                    device,
                    lock: RwLock::new(()),
                    mem: Mem::Host(buf),
                })
            }
            Device::Cuda(ordinal) => {
                let dev = cuda::device(ordinal)?;
                let len = bytes.max(1);
                let slice = if zero {
                    dev.stream.alloc_zeros::<u8>(len)
                } else {
                    // SAFETY: the bytes are unset; every `Element` except `bool` is valid
                    // for any bit pattern, and `empty::<bool>` asks for zeroed memory.
                    unsafe { dev.stream.alloc::<u8>(len) }
                }
                .map_err(|e| Error::driver("cuMemAlloc", e))?;
                let base = {
                    let (ptr, _record) = slice.device_ptr(&dev.stream);
                    ptr
                };
                Ok(Storage {
                    base: base as usize,
                    device,
                    lock: RwLock::new(()),
                    mem: Mem::Cuda(CudaMem {
                        sync: StreamSync::new(&dev.stream),
                        bytes,
                        slice: UnsafeCell::new(slice),
                    }),
                })
            }
        }
    }

    /// Copies bytes `range` to a new host buffer of `T`s.
    fn read<T: Element>(&self, first: usize, len: usize) -> Result<Vec<T>> {
        let size = std::mem::size_of::<T>();
        let byte0 = first * size;
        let nbytes = len * size;
        if byte0 + nbytes > self.bytes() {
            return Err(Error::view("read past the end of the tensor storage"));
        }
        let mut out: Vec<T> = Vec::with_capacity(len);
        let _guard = self.lock(false);
        match &self.mem {
            Mem::Host(buf) => {
                // SAFETY: the range is inside the allocation (checked above), `out` has
                // room for `len` elements, the regions do not overlap, and the shared
                // lock excludes writers. `T: Element` is plain data.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        buf.ptr.as_ptr().add(byte0),
                        out.as_mut_ptr().cast::<u8>(),
                        nbytes,
                    );
                    out.set_len(len);
                }
            }
            Mem::Cuda(c) => {
                // SAFETY: the shared lock is held (see `CudaMem::slice`).
                let slice = unsafe { &*c.slice.get() };
                c.sync.order(slice.stream(), false)?;
                // SAFETY: all-zero bytes are a valid `T` (an `Element` guarantee).
                unsafe {
                    std::ptr::write_bytes(out.as_mut_ptr(), 0, len);
                    out.set_len(len);
                }
                if nbytes > 0 {
                    // SAFETY: `out` holds `len` initialised plain-data elements.
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), nbytes)
                    };
                    let stream = slice.stream().clone();
                    let view = slice.slice(byte0..byte0 + nbytes);
                    stream
                        .memcpy_dtoh(&view, dst)
                        .map_err(|e| Error::driver("cuMemcpyDtoHAsync", e))?;
                    stream
                        .synchronize()
                        .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
                }
            }
        }
        Ok(out)
    }

    /// Writes `data` at element `first`. The caller holds no lock.
    fn write<T: Element>(&self, first: usize, data: &[T]) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let byte0 = first * size;
        let nbytes = std::mem::size_of_val(data);
        if byte0 + nbytes > self.bytes() {
            return Err(Error::view("write past the end of the tensor storage"));
        }
        if nbytes == 0 {
            return Ok(());
        }
        // SAFETY: `T: Element` is plain data without padding, so its bytes are initialised.
        let src = unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), nbytes) };
        let _guard = self.lock(true);
        match &self.mem {
            Mem::Host(buf) => {
                // SAFETY: in bounds (checked above), exclusive lock held, no overlap with
                // the caller's slice (which is borrowed, not this storage).
                unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), buf.ptr.as_ptr().add(byte0), nbytes)
                }
            }
            Mem::Cuda(c) => {
                // SAFETY: the exclusive lock is held (see `CudaMem::slice`).
                let slice = unsafe { &mut *c.slice.get() };
                c.sync.order(slice.stream(), true)?;
                let stream = slice.stream().clone();
                let mut view = slice.slice_mut(byte0..byte0 + nbytes);
                stream
                    .memcpy_htod(src, &mut view)
                    .map_err(|e| Error::driver("cuMemcpyHtoDAsync", e))?;
                // The source is pageable host memory owned by the caller: wait until the
                // copy has consumed it.
                stream
                    .synchronize()
                    .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
            }
        }
        Ok(())
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Mem::Cuda(c) = &mut self.mem {
            let slice = c.slice.get_mut();
            // The slice is freed on its allocating stream: order the free after every use
            // on other streams. A failure here has nowhere to go; cudarc records driver
            // errors of `Drop` paths in the context.
            let _ = c.sync.order(slice.stream(), true);
        }
    }
}

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

    fn contiguous(storage: Arc<Storage>, shape: &[usize]) -> Tensor<T> {
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
        Ok(Self::contiguous(storage, shape))
    }

    /// Like [`Tensor::from_slice`], taking the data by value.
    pub fn from_vec(data: Vec<T>, shape: &[usize], device: Device) -> Result<Tensor<T>> {
        Self::from_slice(&data, shape, device)
    }

    /// A contiguous tensor of zeros.
    pub fn zeros(shape: &[usize], device: Device) -> Result<Tensor<T>> {
        let (storage, _) = Self::new_storage(shape, device, true)?;
        Ok(Self::contiguous(storage, shape))
    }

    /// A contiguous tensor with every element equal to `value`.
    pub fn full(shape: &[usize], value: T, device: Device) -> Result<Tensor<T>> {
        let (storage, numel) = Self::new_storage(shape, device, false)?;
        storage.write(0, &vec![value; numel])?;
        Ok(Self::contiguous(storage, shape))
    }

    /// A contiguous tensor whose contents are unspecified (zero on the host; left
    /// uninitialised on a GPU, except for `bool`, which is zeroed to stay valid).
    pub fn empty(shape: &[usize], device: Device) -> Result<Tensor<T>> {
        let zero = device.is_cpu() || T::DTYPE == crate::DType::Bool;
        let (storage, _) = Self::new_storage(shape, device, zero)?;
        Ok(Self::contiguous(storage, shape))
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    pub fn device(&self) -> Device {
        self.storage.device()
    }

    pub fn dtype(&self) -> crate::DType {
        T::DTYPE
    }

    /// Row-major contiguous, ignoring the strides of extent-1 dims (the rule the launch
    /// checks apply).
    pub fn is_contiguous(&self) -> bool {
        stride_mismatch(&self.shape, &self.strides).is_none()
    }

    /// Offset of the first element, in elements from the start of the storage.
    pub fn offset(&self) -> usize {
        self.offset
    }

    pub(crate) fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    /// Host address or device address of the first element.
    pub(crate) fn data_ptr(&self) -> usize {
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
        match &self.storage.mem {
            Mem::Host(buf) => {
                let _guard = self.storage.lock(true);
                let base = buf.ptr.as_ptr().cast::<T>();
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
            Mem::Cuda(_) => Err(Error::view(
                "copy_from_slice into a non-contiguous CUDA tensor is not supported",
            )),
        }
    }

    /// A contiguous copy on `device` (always a new storage, even on the same device).
    pub fn to_device(&self, device: Device) -> Result<Tensor<T>> {
        Tensor::from_vec(self.to_vec()?, &self.shape, device)
    }

    fn view(&self, shape: Dims<usize>, strides: Dims<isize>, offset: usize) -> Tensor<T> {
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
    fn launch_fields_share_a_cache_line() {
        use std::mem::{align_of, offset_of, size_of};
        // `Mem` is `repr(u8)`: its payload starts after the tag, at the payload's
        // alignment; `CudaMem` and `StreamSync` start with `sync` and `home`.
        let payload = align_of::<CudaMem>().max(align_of::<HostBuf>());
        let home = offset_of!(Storage, mem) + payload + offset_of!(CudaMem, sync);
        assert!(
            home + size_of::<usize>() <= 64,
            "home ends at byte {home} + 8"
        );
        assert_eq!(align_of::<Storage>(), 64);
        assert_eq!(offset_of!(Storage, base), 0);
        assert!(offset_of!(Storage, lock) + size_of::<RwLock<()>>() <= 64);
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
