//! Storages: the untyped memory behind tensors, allocated by tile or owned elsewhere.
//!
//! Invariants:
//! - A storage's memory never moves: `base` is the host or device address of byte 0 for
//!   the storage's whole life, and `bytes` bytes from it are readable and writable.
//! - Every access to the bytes, by the host or by a kernel launch, holds the storage's
//!   reader/writer lock (shared to read, exclusive to write).
//! - Memory tile allocated is freed when the storage drops. Memory owned elsewhere
//!   ([`Storage::external_host`], [`Storage::external_cuda`]) is never freed here: the
//!   storage drops its `keep` value instead (a DLPack deleter, say), after ordering the
//!   home stream after every use on other streams.
//! - A *scoped* storage views memory borrowed for a lifetime the storage's type does not
//!   carry (a view over `&[T]` or a cudarc slice): the borrowing view owns the only
//!   handle to it, so nothing may keep it past the view. Graph capture refuses it.
//! - Device-side ordering across streams is the storage's [`StreamSync`]; the home stream
//!   of external device memory is the stream it was handed over on.

use std::alloc::Layout;
use std::any::Any;
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

use crate::cuda;
use crate::device::Device;
use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::sync::StreamSync;

/// Alignment of host allocations, in bytes.
pub const HOST_ALIGN: usize = 64;

/// Something that keeps external memory alive; dropped when the storage is.
pub(crate) type Keep = Option<Box<dyn Any + Send + Sync>>;

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
/// A launch reads, per buffer, the base address, the device, the lock word, the
/// `external` flag and (on a device) the stream-ordering `home` word. After the driver's
/// work of the previous launch has evicted them they are cache misses, so they sit
/// together at the front of a cache-line-aligned struct: `repr(C)` keeps this field
/// order, `mem` is a `repr(u8)` enum whose CUDA payload starts with the [`StreamSync`]
/// (whose `home` comes first), and the lock guards nothing but `()` rather than wrapping
/// the allocation handle, so its word is not placed after that handle. Together they fit
/// the first 64 bytes (checked in the tests); the rest is only read off the launch path.
#[repr(C, align(64))]
pub(crate) struct Storage {
    /// Host address or device address of byte 0 (it never moves).
    base: usize,
    device: Device,
    /// The reader/writer lock of the module invariants: every access to the bytes (and
    /// every use of `CudaOwner::Slice`) holds it, shared to read, exclusive to write.
    lock: RwLock<()>,
    /// The memory is not tile's allocation (a view or an import): the launch checks
    /// that its byte range does not overlap another argument's.
    external: bool,
    /// Borrowed for a lifetime this type does not carry (see the module invariants).
    scoped: bool,
    mem: Mem,
}

#[repr(u8)]
enum Mem {
    Host(HostMem),
    Cuda(CudaMem),
}

enum HostMem {
    Alloc(HostBuf),
    External { bytes: usize, _keep: Keep },
}

#[repr(C)]
struct CudaMem {
    /// Cross-stream ordering of the accesses (see [`crate::sync`]); first, see `Storage`.
    sync: StreamSync,
    bytes: usize,
    owner: CudaOwner,
}

enum CudaOwner {
    /// The allocation. Only used with `Storage::lock` held: shared access under a shared
    /// lock, mutable access under the exclusive lock (or with `&mut Storage` on drop).
    Slice(UnsafeCell<CudaSlice<u8>>),
    /// Memory owned elsewhere, handed over on `home`.
    External { home: Arc<CudaStream>, keep: Keep },
}

// SAFETY: the only field that is not `Sync` is `Slice`'s `UnsafeCell` of a `Sync` +
// `Send` `CudaSlice`; `Storage` hands out `&CudaSlice` only under the shared lock and
// `&mut CudaSlice` only under the exclusive lock or through `&mut self`, so the cell is
// used as an `RwLock<CudaSlice>` would use its own.
unsafe impl Sync for CudaMem {}

/// A held storage lock (see the module invariants).
pub(crate) enum StorageGuard<'a> {
    Read(#[allow(dead_code)] RwLockReadGuard<'a, ()>),
    Write(#[allow(dead_code)] RwLockWriteGuard<'a, ()>),
}

impl CudaMem {
    /// The stream copies use and the storage is freed (or released) on.
    fn home(&self) -> &Arc<CudaStream> {
        match &self.owner {
            // SAFETY: reading the slice's stream handle only; the handle is never changed.
            CudaOwner::Slice(s) => unsafe { (*s.get()).stream() },
            CudaOwner::External { home, .. } => home,
        }
    }
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
            Mem::Host(HostMem::Alloc(buf)) => buf.layout.size(),
            Mem::Host(HostMem::External { bytes, .. }) => *bytes,
            Mem::Cuda(c) => c.bytes,
        }
    }

    /// Memory owned elsewhere (a view or an import), not tile's allocation.
    #[inline(always)]
    pub(crate) fn is_external(&self) -> bool {
        self.external
    }

    /// Borrowed for a lifetime this type does not carry (see the module invariants).
    pub(crate) fn is_scoped(&self) -> bool {
        self.scoped
    }

    /// Orders an access by `stream` after conflicting accesses on other streams (device
    /// storages; nothing to do on the host).
    #[inline]
    pub(crate) fn order(&self, stream: &Arc<CudaStream>, write: bool) -> Result<()> {
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

    fn new(base: usize, device: Device, external: bool, scoped: bool, mem: Mem) -> Storage {
        Storage {
            base,
            device,
            lock: RwLock::new(()),
            external,
            scoped,
            mem,
        }
    }

    pub(crate) fn alloc(bytes: usize, device: Device, zero: bool) -> Result<Storage> {
        match device {
            Device::Cpu => {
                let buf = HostBuf::zeroed(bytes)?;
                let base = buf.ptr.as_ptr() as usize;
                Ok(Storage::new(
                    base,
                    device,
                    false,
                    false,
                    Mem::Host(HostMem::Alloc(buf)),
                ))
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
                let mem = Mem::Cuda(CudaMem {
                    sync: StreamSync::new(&dev.stream),
                    bytes,
                    owner: CudaOwner::Slice(UnsafeCell::new(slice)),
                });
                Ok(Storage::new(base as usize, device, false, false, mem))
            }
        }
    }

    /// Host memory owned elsewhere: `bytes` bytes at `base`, kept alive by `keep`.
    ///
    /// # Safety
    ///
    /// The bytes must stay valid for reads and writes, and be accessed by nothing but
    /// this storage, until the storage and `keep` drop (for a `scoped` storage: until
    /// the view owning it drops).
    pub(crate) unsafe fn external_host(
        base: usize,
        bytes: usize,
        keep: Keep,
        scoped: bool,
    ) -> Storage {
        let mem = Mem::Host(HostMem::External { bytes, _keep: keep });
        Storage::new(base, Device::Cpu, true, scoped, mem)
    }

    /// Device memory owned elsewhere, ready on `home` (a stream of `device`).
    ///
    /// # Safety
    ///
    /// As [`external_host`](Self::external_host), for device memory of the context of
    /// `home`; work the owner queues on it must be ordered on `home`.
    pub(crate) unsafe fn external_cuda(
        base: usize,
        bytes: usize,
        home: Arc<CudaStream>,
        keep: Keep,
        scoped: bool,
    ) -> Storage {
        let device = Device::Cuda(home.context().ordinal());
        let mem = Mem::Cuda(CudaMem {
            sync: StreamSync::new(&home),
            bytes,
            owner: CudaOwner::External { home, keep },
        });
        Storage::new(base, device, true, scoped, mem)
    }

    /// The cudarc allocation of a storage tile allocated on a GPU, for `f` to borrow
    /// with the lock held as `write` says.
    pub(crate) fn cuda_slice(&self) -> Option<&UnsafeCell<CudaSlice<u8>>> {
        match &self.mem {
            Mem::Cuda(CudaMem {
                owner: CudaOwner::Slice(s),
                ..
            }) => Some(s),
            _ => None,
        }
    }

    /// Checks that `len` bytes from byte `byte0` are inside the storage.
    fn in_bounds(&self, byte0: usize, len: usize, what: &str) -> Result<()> {
        match byte0.checked_add(len) {
            Some(end) if end <= self.bytes() => Ok(()),
            _ => Err(Error::view(format!(
                "{what} past the end of the tensor storage"
            ))),
        }
    }

    /// Copies `len` elements from element `first` to a new host buffer.
    pub(crate) fn read<T: Element>(&self, first: usize, len: usize) -> Result<Vec<T>> {
        let size = std::mem::size_of::<T>();
        let (byte0, nbytes) = (first * size, len * size);
        self.in_bounds(byte0, nbytes, "read")?;
        let mut out: Vec<T> = Vec::with_capacity(len);
        // SAFETY: all-zero bytes are a valid `T` (an `Element` guarantee).
        unsafe {
            std::ptr::write_bytes(out.as_mut_ptr(), 0, len);
            out.set_len(len);
        }
        let _guard = self.lock(false);
        match &self.mem {
            Mem::Host(_) => {
                // SAFETY: the range is inside the memory (checked above), `out` has room
                // for `len` elements, the regions do not overlap, and the shared lock
                // excludes writers. `T: Element` is plain data.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        (self.base + byte0) as *const u8,
                        out.as_mut_ptr().cast::<u8>(),
                        nbytes,
                    );
                }
            }
            Mem::Cuda(c) if nbytes > 0 => {
                let stream = c.home();
                c.sync.order(stream, false)?;
                bind(stream)?;
                // SAFETY: the source range is inside the device memory (checked above)
                // and ordered on `stream`; `out` holds `len` plain-data elements and the
                // stream is synchronized before it is read or dropped.
                unsafe {
                    cudarc::driver::result::memcpy_dtoh_async(
                        &mut out[..],
                        (self.base + byte0) as u64,
                        stream.cu_stream(),
                    )
                }
                .map_err(|e| Error::driver("cuMemcpyDtoHAsync", e))?;
                stream
                    .synchronize()
                    .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
            }
            Mem::Cuda(_) => {}
        }
        Ok(out)
    }

    /// Writes `data` at element `first`. The caller holds no lock.
    pub(crate) fn write<T: Element>(&self, first: usize, data: &[T]) -> Result<()> {
        let byte0 = first * std::mem::size_of::<T>();
        let nbytes = std::mem::size_of_val(data);
        self.in_bounds(byte0, nbytes, "write")?;
        if nbytes == 0 {
            return Ok(());
        }
        let _guard = self.lock(true);
        match &self.mem {
            Mem::Host(_) => {
                // SAFETY: in bounds (checked above), exclusive lock held, no overlap with
                // the caller's slice (which is borrowed, not this storage).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr().cast::<u8>(),
                        (self.base + byte0) as *mut u8,
                        nbytes,
                    )
                }
            }
            Mem::Cuda(c) => {
                let stream = c.home();
                c.sync.order(stream, true)?;
                bind(stream)?;
                // SAFETY: the destination range is inside the device memory (checked
                // above), the exclusive lock is held and the write is ordered on `stream`.
                unsafe {
                    cudarc::driver::result::memcpy_htod_async(
                        (self.base + byte0) as u64,
                        data,
                        stream.cu_stream(),
                    )
                }
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

    /// Copies `nbytes` bytes from byte `src_byte0` of `src` to byte `byte0` of `self`,
    /// two device storages, queued on `self`'s home stream after every conflicting use
    /// of either on other streams (`src`'s home stream may be on another device). One
    /// GPU: a device-to-device copy. Two: a peer copy, direct when `self`'s device has
    /// peer access to `src`'s (`peer`), otherwise staged through host memory by the
    /// driver. Returns once the copy is queued.
    pub(crate) fn copy_device(
        &self,
        byte0: usize,
        src: &Storage,
        src_byte0: usize,
        nbytes: usize,
    ) -> Result<()> {
        self.in_bounds(byte0, nbytes, "copy")?;
        src.in_bounds(src_byte0, nbytes, "copy")?;
        let (Mem::Cuda(dst_mem), Mem::Cuda(src_mem)) = (&self.mem, &src.mem) else {
            return Err(Error::view(
                "a device copy between storages that are not both on a GPU",
            ));
        };
        if std::ptr::eq(self, src) {
            return Err(Error::view("a device copy within one storage"));
        }
        if nbytes == 0 {
            return Ok(());
        }
        // Address order, as launches lock, so concurrent copies cannot deadlock.
        let (_first, _second) = if (self as *const Storage) < (src as *const Storage) {
            (self.lock(true), src.lock(false))
        } else {
            let s = src.lock(false);
            (self.lock(true), s)
        };
        let stream = dst_mem.home();
        src_mem.sync.order(stream, false)?;
        dst_mem.sync.order(stream, true)?;
        bind(stream)?;
        let (dst_ptr, src_ptr) = ((self.base + byte0) as u64, (src.base + src_byte0) as u64);
        if self.device == src.device {
            // SAFETY: both ranges are inside live device memory of this context (checked
            // above), the storages are locked (exclusive for the destination) and both
            // were ordered on `stream`, which the copy is queued on.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    dst_ptr,
                    src_ptr,
                    nbytes,
                    stream.cu_stream(),
                )
            }
            .map_err(|e| Error::driver("cuMemcpyDtoDAsync", e))
        } else {
            let (dst_ctx, src_ctx) = (stream.context(), src_mem.home().context());
            // SAFETY: as above, each pointer in the context named beside it; the driver
            // copies directly with peer access enabled and through the host otherwise.
            unsafe {
                cudarc::driver::result::memcpy_peer_async(
                    dst_ctx.cu_ctx(),
                    dst_ptr,
                    src_ctx.cu_ctx(),
                    src_ptr,
                    nbytes,
                    stream.cu_stream(),
                )
            }
            .map_err(|e| Error::driver("cuMemcpyPeerAsync", e))
        }
    }

    /// Host address of byte 0 for an element-wise host write, with the exclusive lock
    /// held by the caller; `None` for device memory.
    pub(crate) fn host_base(&self) -> Option<*mut u8> {
        match &self.mem {
            Mem::Host(_) => Some(self.base as *mut u8),
            Mem::Cuda(_) => None,
        }
    }
}

fn bind(stream: &CudaStream) -> Result<()> {
    stream
        .context()
        .bind_to_thread()
        .map_err(|e| Error::driver("cuCtxSetCurrent", e))
}

impl Drop for Storage {
    fn drop(&mut self) {
        if let Mem::Cuda(c) = &mut self.mem {
            // The memory is freed (or handed back) on its home stream: order that after
            // every use on other streams. A failure here has nowhere to go; cudarc
            // records driver errors of `Drop` paths in the context.
            let home = Arc::clone(c.home());
            let _ = c.sync.order(&home, true);
            if let CudaOwner::External { keep, .. } = &mut c.owner {
                drop(keep.take());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_fields_share_a_cache_line() {
        use std::mem::{align_of, offset_of, size_of};
        // `Mem` is `repr(u8)`: its payload starts after the tag, at the payload's
        // alignment; `CudaMem` and `StreamSync` start with `sync` and `home`.
        let payload = align_of::<CudaMem>().max(align_of::<HostMem>());
        let home = offset_of!(Storage, mem) + payload + offset_of!(CudaMem, sync);
        assert!(
            home + size_of::<usize>() <= 64,
            "home ends at byte {home} + 8"
        );
        assert_eq!(align_of::<Storage>(), 64);
        assert_eq!(offset_of!(Storage, base), 0);
        assert!(offset_of!(Storage, lock) + size_of::<RwLock<()>>() <= 64);
        assert!(offset_of!(Storage, external) < 64);
    }

    #[test]
    fn external_host_memory_is_not_freed() -> Result<()> {
        let mut data = vec![1u32, 2, 3, 4];
        let base = data.as_mut_ptr() as usize;
        // SAFETY: `data` outlives the storage and is not touched while it lives.
        let s = unsafe { Storage::external_host(base, 16, None, true) };
        assert!(s.is_external() && s.is_scoped());
        assert_eq!(s.bytes(), 16);
        assert_eq!(s.read::<u32>(1, 2)?, vec![2, 3]);
        s.write(3, &[9u32])?;
        assert!(s.read::<u32>(3, 2).is_err());
        drop(s);
        assert_eq!(data, vec![1, 2, 3, 9]);
        Ok(())
    }

    #[test]
    fn keep_is_dropped_with_the_storage() {
        struct Flag(Arc<std::sync::atomic::AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let data = [0u8; 4];
        let keep: Keep = Some(Box::new(Flag(Arc::clone(&dropped))));
        // SAFETY: `data` outlives the storage and is only read.
        let s = unsafe { Storage::external_host(data.as_ptr() as usize, 4, keep, false) };
        assert!(!dropped.load(std::sync::atomic::Ordering::SeqCst));
        drop(s);
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
    }
}
