//! The collectives themselves: what each one checks before NCCL sees it (dtype, device,
//! contiguity, sizes against the world size, root, overlap), and how it is queued on a
//! stream, recorded into a graph, or run as a copy on a one-rank host communicator.

use super::*;

#[derive(Clone, Copy)]
pub(super) enum Kind {
    AllReduce(ReduceOp),
    AllGather,
    ReduceScatter(ReduceOp),
    Broadcast(usize),
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::AllReduce(_) => "all_reduce",
            Kind::AllGather => "all_gather",
            Kind::ReduceScatter(_) => "reduce_scatter",
            Kind::Broadcast(_) => "broadcast",
        }
    }
}

/// NCCL's type for `dtype`, if it has one.
fn nccl_type(dtype: DType) -> Option<sys::ncclDataType_t> {
    use sys::ncclDataType_t as N;
    Some(match dtype {
        DType::I8 => N::ncclInt8,
        DType::U8 => N::ncclUint8,
        DType::I32 => N::ncclInt32,
        DType::U32 => N::ncclUint32,
        DType::I64 => N::ncclInt64,
        DType::U64 => N::ncclUint64,
        DType::F16 => N::ncclFloat16,
        DType::BF16 => N::ncclBfloat16,
        DType::F32 => N::ncclFloat32,
        DType::F64 => N::ncclFloat64,
        DType::F8E4M3 => N::ncclFloat8e4m3,
        DType::F8E5M2 => N::ncclFloat8e5m2,
        DType::Bool | DType::I16 | DType::U16 | DType::F16x2 | DType::BF16x2 => return None,
    })
}

/// The untyped facts a collective checks and uses about one tensor.
struct Buf<'a> {
    name: &'static str,
    storage: &'a Arc<Storage>,
    /// Address of the first element.
    ptr: usize,
    numel: usize,
    bytes: usize,
    shape: &'a [usize],
    device: Device,
    contiguous: bool,
}

impl<'a> Buf<'a> {
    fn of<T: Element>(name: &'static str, t: &'a Tensor<T>) -> Buf<'a> {
        Buf {
            name,
            storage: t.storage(),
            ptr: t.data_ptr(),
            numel: t.numel(),
            bytes: t.numel() * std::mem::size_of::<T>(),
            shape: t.shape(),
            device: t.device(),
            contiguous: t.is_contiguous(),
        }
    }

    fn overlaps(&self, other: &Buf<'_>) -> bool {
        Arc::ptr_eq(self.storage, other.storage)
            && self.bytes > 0
            && other.bytes > 0
            && self.ptr < other.ptr + other.bytes
            && other.ptr < self.ptr + self.bytes
    }
}

impl Comm {
    /// Checks, then queues (or records, or on the host runs) one collective. `send` is
    /// `None` for the in-place forms (`recv` is both).
    pub(super) fn run<T: Element>(
        &self,
        stream: Option<&Stream>,
        kind: Kind,
        send: Option<&Tensor<T>>,
        recv: &mut Tensor<T>,
    ) -> Result<()> {
        let send = send.map(|t| Buf::of("send", t));
        let recv = Buf::of(if send.is_some() { "recv" } else { "buf" }, recv);
        let dtype = self.check::<T>(stream, kind, send.as_ref(), &recv)?;
        let inner = &self.inner;
        let capture = graph::capture_for(stream, inner.device);
        let mut storages = vec![(recv.storage, true)];
        if let Some(s) = &send {
            if !Arc::ptr_eq(s.storage, recv.storage) {
                storages.push((s.storage, false));
            }
        }
        let err = |message: String| Error::Collective {
            op: kind.name(),
            rank: inner.rank,
            buffer: recv.name,
            message,
        };
        if capture.is_some() && storages.iter().any(|(s, _)| s.is_scoped()) {
            return Err(err(
                "a borrowed view cannot be captured into a graph (the graph would outlive the borrow)".into(),
            ));
        }
        storages.sort_by_key(|(s, _)| Arc::as_ptr(s) as usize);
        let _calls = inner.calls.lock().unwrap_or_else(|e| e.into_inner());
        let _guards: Vec<_> = storages.iter().map(|(s, w)| s.lock(*w)).collect();
        let send_ptr = send.as_ref().map_or(recv.ptr, |s| s.ptr);
        match (&inner.backend, inner.device) {
            (Backend::Local, _) => {
                if capture.is_some() {
                    return Err(err("collectives are not recorded into CPU graphs".into()));
                }
                // One rank: every collective copies its input (an in-place one is done).
                if send_ptr != recv.ptr {
                    // SAFETY: both ranges are host memory of live storages (checked: on the
                    // host, contiguous, `recv.bytes` long each with one rank), locked
                    // above; `copy` allows overlap.
                    unsafe {
                        std::ptr::copy(send_ptr as *const u8, recv.ptr as *mut u8, recv.bytes)
                    };
                }
                Ok(())
            }
            (Backend::Nccl(raw), Device::Cuda(n)) => {
                let dev = cuda::device(n)?;
                let (cu_stream, capturing) = match (&capture, stream) {
                    (Some(rec), _) => (rec.cuda_stream().unwrap_or(&dev.stream), true),
                    (None, Some(Stream::Cuda(s))) => (s, false),
                    (None, _) => (&dev.stream, false),
                };
                if !capturing {
                    for (s, write) in &storages {
                        s.order(cu_stream, *write)?;
                    }
                }
                dev.ctx
                    .bind_to_thread()
                    .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
                let (comm, st) = (raw.0, cu_stream.cu_stream() as sys::cudaStream_t);
                let (src, dst) = (send_ptr as *const c_void, recv.ptr as *mut c_void);
                let rank = Some(inner.rank);
                // SAFETY: the buffers are live device memory of this communicator's device,
                // contiguous, of the sizes NCCL reads and writes for this collective
                // (checked above), locked, and ordered on `st` (or held by the capture's
                // graph, below); the stream is of the same device.
                checked(kind.name(), rank, comm, || unsafe {
                    match kind {
                        Kind::AllReduce(op) => {
                            sys::ncclAllReduce(src, dst, recv.numel, dtype, op.nccl(), comm, st)
                        }
                        Kind::AllGather => {
                            let count = send.as_ref().map_or(0, |s| s.numel);
                            sys::ncclAllGather(src, dst, count, dtype, comm, st)
                        }
                        Kind::ReduceScatter(op) => {
                            sys::ncclReduceScatter(src, dst, recv.numel, dtype, op.nccl(), comm, st)
                        }
                        Kind::Broadcast(root) => {
                            sys::ncclBroadcast(src, dst, recv.numel, dtype, root as i32, comm, st)
                        }
                    }
                })?;
                if let Some(rec) = &capture {
                    let keep: Arc<dyn Any + Send + Sync> = Arc::clone(&self.inner) as _;
                    rec.record_other(&storages, keep);
                }
                Ok(())
            }
            (Backend::Nccl(_), Device::Cpu) => Err(err("an NCCL communicator on the CPU".into())),
        }
    }

    /// Every check of the module docs, in argument order; NCCL's type on success.
    fn check<T: Element>(
        &self,
        stream: Option<&Stream>,
        kind: Kind,
        send: Option<&Buf<'_>>,
        recv: &Buf<'_>,
    ) -> Result<sys::ncclDataType_t> {
        let inner = &self.inner;
        let err = |buffer: &'static str, message: String| Error::Collective {
            op: kind.name(),
            rank: inner.rank,
            buffer,
            message,
        };
        let dtype = nccl_type(T::DTYPE).ok_or_else(|| {
            err(
                recv.name,
                format!(
                    "dtype {} has no NCCL type (NCCL takes int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64, float8_e4m3, float8_e5m2)",
                    T::DTYPE
                ),
            )
        })?;
        if matches!(inner.backend, Backend::Nccl(_))
            && matches!(T::DTYPE, DType::F8E4M3 | DType::F8E5M2)
        {
            let v = nccl()?;
            if v < FP8_VERSION {
                return Err(err(
                    recv.name,
                    format!(
                        "dtype {} needs NCCL 2.24 or later (loaded: version code {v})",
                        T::DTYPE
                    ),
                ));
            }
        }
        if let Some(s) = stream {
            if s.device() != inner.device {
                return Err(err(
                    "stream",
                    format!(
                        "device mismatch, expected {} (the communicator's device), got {}",
                        inner.device,
                        s.device()
                    ),
                ));
            }
        }
        for b in send.into_iter().chain([recv]) {
            if b.device != inner.device {
                return Err(err(
                    b.name,
                    format!(
                        "device mismatch, expected {} (the communicator's device), got {}",
                        inner.device, b.device
                    ),
                ));
            }
            if !b.contiguous {
                return Err(err(
                    b.name,
                    format!(
                        "not contiguous (shape {:?}); collectives take row-major tensors (`.contiguous()` makes a copy)",
                        b.shape
                    ),
                ));
            }
        }
        let world = inner.world;
        let sizes = |want_send: usize, what: &str| -> Result<()> {
            let got = send.map_or(recv.numel, |s| s.numel);
            if got != want_send {
                let shapes = match send {
                    Some(s) => format!("send {:?}, recv {:?}", s.shape, recv.shape),
                    None => format!("buf {:?}", recv.shape),
                };
                return Err(err(
                    send.map_or(recv.name, |s| s.name),
                    format!("{what} ({shapes}, world size {world})"),
                ));
            }
            Ok(())
        };
        match kind {
            Kind::AllReduce(_) => sizes(recv.numel, "send and recv must hold as many elements")?,
            Kind::AllGather => {
                let s = send.map_or(recv.numel, |s| s.numel);
                if s.checked_mul(world) != Some(recv.numel) {
                    return Err(err(
                        recv.name,
                        format!(
                            "recv must hold world size × send's elements (send {:?}, recv {:?}, world size {world})",
                            send.map_or(recv.shape, |s| s.shape),
                            recv.shape
                        ),
                    ));
                }
            }
            Kind::ReduceScatter(_) => match recv.numel.checked_mul(world) {
                Some(n) => sizes(n, "send must hold world size × recv's elements")?,
                None => return Err(err(recv.name, "too many elements".into())),
            },
            Kind::Broadcast(root) => {
                if root >= world {
                    return Err(err("root", format!("root {root} of a world of {world}")));
                }
            }
        }
        if let Some(s) = send {
            // The overlaps NCCL defines (in place): the same buffer, or this rank's block
            // of the larger one.
            let in_place = match kind {
                Kind::AllReduce(_) => s.ptr == recv.ptr,
                Kind::AllGather => s.ptr == recv.ptr + inner.rank * s.bytes,
                Kind::ReduceScatter(_) => recv.ptr == s.ptr + inner.rank * recv.bytes,
                Kind::Broadcast(_) => s.ptr == recv.ptr,
            };
            if s.overlaps(recv) && !in_place {
                return Err(err(
                    recv.name,
                    "overlaps send in memory (only NCCL's in-place layouts may share memory: the same tensor, or this rank's block of the larger one)".into(),
                ));
            }
        }
        Ok(dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtypes_map_one_to_one() {
        let mapped: Vec<_> = DType::ALL.iter().filter_map(|&d| nccl_type(d)).collect();
        assert_eq!(mapped.len(), 12);
        for (i, a) in mapped.iter().enumerate() {
            assert!(!mapped[..i].contains(a), "{a:?} twice");
        }
        assert!(nccl_type(DType::Bool).is_none());
        assert!(nccl_type(DType::I16).is_none());
        assert!(nccl_type(DType::U16).is_none());
    }

    #[test]
    fn probing_never_panics() {
        match nccl_version() {
            Ok((major, _, _)) => assert!(major >= 2),
            Err(e) => {
                assert!(matches!(e, Error::NcclUnavailable { .. }));
                assert!(!nccl_available());
                assert!(matches!(
                    UniqueId::new(),
                    Err(Error::NcclUnavailable { .. })
                ));
                // Grouping still runs the closure: only host communicators exist.
                assert_eq!(group(|| Ok(7)).ok(), Some(7));
            }
        }
    }

    #[test]
    fn unique_id_bytes_round_trip() -> Result<()> {
        let bytes: Vec<u8> = (0..128u8).collect();
        let id = UniqueId::from_bytes(&bytes)?;
        assert_eq!(id.as_bytes().to_vec(), bytes);
        let e = UniqueId::from_bytes(&bytes[..5])
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("collective UniqueId::from_bytes on rank 0: bytes: 5 bytes, an NCCL id has 128")
        );
        Ok(())
    }
}
