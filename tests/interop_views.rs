//! Borrowed views through real `#[tile::kernel]` launchers: host slices on the CPU
//! backend (here), cudarc slices on a GPU (skipped without one). A view passes every
//! check a tensor passes, and one more: distinct memories may not overlap a written
//! argument.

use tile::cudarc::driver::CudaContext;
use tile::prelude::*;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn v_add(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

/// Returns its output: the launcher allocates it on the view's device.
#[tile::kernel(block_n = 64, threads = 64)]
pub fn v_double(a: Tensor<f32, (N,)>, out: Output<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            out[bx * block_n + i] = a[bx * block_n + i] * 2.0;
        }
    });
}

#[tile::kernel(block_m = 8, block_n = 8, threads = 64)]
pub fn v_copy2d(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            for (i, j) in T::parallel([block_m, block_n]) {
                c[(by * block_m + i, bx * block_n + j)] = a[(by * block_m + i, bx * block_n + j)];
            }
        },
    );
}

fn ramp(n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|i| i as f32 * scale).collect()
}

/// 16-byte aligned storage for `n` floats (a `Vec<f32>` is only 4-byte aligned in
/// general; the kernels ask for 16).
fn aligned(n: usize) -> Vec<[f32; 4]> {
    vec![[0.0; 4]; n.div_ceil(4)]
}

fn floats(v: &mut [[f32; 4]], n: usize) -> &mut [f32] {
    &mut v.as_flattened_mut()[..n]
}

#[test]
fn host_slice_views_run_on_the_cpu_backend() -> Result<(), Error> {
    let n = 1000;
    let (mut ab, mut bb, mut cb) = (aligned(n), aligned(n), aligned(n));
    floats(&mut ab, n).copy_from_slice(&ramp(n, 1.0));
    floats(&mut bb, n).copy_from_slice(&ramp(n, 0.5));
    let a = TensorView::from_slice(floats(&mut ab, n), &[n])?;
    let b = TensorView::from_slice(floats(&mut bb, n), &[n])?;
    let mut c = TensorViewMut::from_slice_mut(floats(&mut cb, n), &[n])?;
    assert_eq!(c.device(), Device::Cpu);
    v_add(&a, &b, &mut c)?;
    drop(c);
    let want: Vec<f32> = (0..n).map(|i| i as f32 * 1.5).collect();
    assert_eq!(floats(&mut cb, n), &want[..]);

    // Views and tensors mix; the launcher's own output lands on the view's device.
    let t = Tensor::from_slice(&ramp(n, 2.0), &[n], Device::Cpu)?;
    let mut c = TensorViewMut::from_slice_mut(floats(&mut cb, n), &[n])?;
    v_add(&a, &t, &mut c)?;
    assert_eq!(c.to_vec()?, ramp(n, 3.0));
    let doubled = v_double(&c)?;
    assert_eq!(doubled.device(), Device::Cpu);
    assert_eq!(doubled.to_vec()?, ramp(n, 6.0));
    v_double::on(&Stream::Cpu).launch(&a)?;
    Ok(())
}

/// The README's example of host slice views.
#[test]
fn readme_host_slices() -> Result<(), Error> {
    let a = vec![1.0f32; 4096];
    let b = vec![2.0f32; 4096];
    let mut c = vec![0.0f32; 4096];
    let av = TensorView::from_slice(&a, &[4096])?; // no copy
    let bv = TensorView::from_slice(&b, &[4096])?;
    let mut cv = TensorViewMut::from_slice_mut(&mut c, &[4096])?;
    v_add(&av, &bv, &mut cv)?; // the launcher that takes tensors
    drop(cv);
    assert!(c.iter().all(|&x| x == 3.0));
    Ok(())
}

#[test]
fn views_are_checked_like_tensors() -> Result<(), Error> {
    let n = 64;
    let (mut ab, mut cb) = (aligned(n + 4), aligned(n + 4));
    let whole = floats(&mut ab, n + 4);
    whole.copy_from_slice(&ramp(n + 4, 1.0));
    let whole: &[f32] = whole;
    let c_mem = floats(&mut cb, n + 4);

    // Shape: N bound by `a`, checked on `c`.
    let a = TensorView::from_slice(&whole[..n], &[n])?;
    let mut c = TensorViewMut::from_slice_mut(&mut c_mem[..n - 1], &[n - 1])?;
    assert_eq!(
        v_add(&a, &a, &mut c).unwrap_err().to_string(),
        "kernel v_add input c shape mismatch: dim 0 expected 64 (N bound by a), got 63"
    );
    drop(c);

    // Alignment: one element in is 4 bytes past a 16-byte boundary.
    let a1 = TensorView::from_slice(&whole[1..n + 1], &[n])?;
    let mut c = TensorViewMut::from_slice_mut(&mut c_mem[..n], &[n])?;
    assert_eq!(
        v_add(&a1, &a, &mut c).unwrap_err().to_string(),
        "kernel v_add input a misaligned: data pointer must be aligned to 16 bytes (a view that starts inside its allocation; `.contiguous()` makes an aligned copy)"
    );
    drop(c);

    // Strides: every other element is not contiguous.
    let every_other = TensorView::from_slice(whole, &[n + 4])?.strided(&[n / 2], &[2], 0)?;
    let mut c_half = TensorViewMut::from_slice_mut(&mut c_mem[..n / 2], &[n / 2])?;
    assert_eq!(
        v_add(&every_other, &every_other, &mut c_half)
            .unwrap_err()
            .to_string(),
        "kernel v_add input a stride mismatch: dim 0 expected 1, got 2 (kernels take row-major tensors; `.contiguous()` makes a row-major copy)"
    );
    drop(c_half);

    // A transposed 2-D view is refused too, and nothing is written.
    let m = TensorView::from_slice(&whole[..n], &[8, 8])?;
    let mut out = TensorViewMut::from_slice_mut(&mut c_mem[..n], &[8, 8])?;
    out.copy_from_slice(&[7.0; 64])?;
    assert_eq!(
        v_copy2d(&m.transpose(0, 1), &mut out)
            .unwrap_err()
            .to_string(),
        "kernel v_copy2d input a stride mismatch: dim 1 expected 1, got 8 (kernels take row-major tensors; `.contiguous()` makes a row-major copy)"
    );
    assert_eq!(out.to_vec()?, vec![7.0; 64]);
    v_copy2d(&m, &mut out)?;
    assert_eq!(out.to_vec()?, ramp(n, 1.0));

    // Layouts that leave the borrowed memory are refused when the view is made.
    let small = TensorView::from_slice(&whole[..8], &[8])?;
    assert!(small.strided(&[4], &[3], 0).is_err());
    let small = TensorView::from_slice(&whole[..8], &[8])?;
    assert!(small.strided(&[2], &[-1], 1).is_err());
    assert!(TensorView::from_slice(&whole[..8], &[3, 3]).is_err());
    Ok(())
}

#[test]
fn distinct_views_of_one_memory_may_not_overlap_a_written_argument() -> Result<(), Error> {
    let n = 256;
    let mut buf = aligned(n + 64);
    let mem = floats(&mut buf, n + 64);
    mem.copy_from_slice(&ramp(n + 64, 1.0));
    let p = mem.as_mut_ptr() as usize;
    let cpu = Stream::Cpu;
    // SAFETY: `buf` outlives the views, and nothing else touches it meanwhile.
    let (a, mut c, mut shifted) = unsafe {
        (
            TensorView::<f32>::from_raw_parts(p, &[n], &[1], &cpu)?,
            TensorViewMut::<f32>::from_raw_parts_mut(p, &[n], &[1], &cpu)?,
            TensorViewMut::<f32>::from_raw_parts_mut(p + 64 * 4, &[n], &[1], &cpu)?,
        )
    };
    let b = Tensor::full(&[n], 1.0f32, Device::Cpu)?;
    assert_eq!(
        v_add(&a, &b, &mut c).unwrap_err().to_string(),
        "kernel v_add input c overlaps input a in memory and one of them is written \
         (distinct views of one memory; pass the same view to update in place)"
    );
    assert_eq!(
        v_add(&a, &b, &mut shifted).unwrap_err().to_string(),
        "kernel v_add input c overlaps input a in memory and one of them is written \
         (distinct views of one memory; pass the same view to update in place)"
    );
    // Read-only overlap is fine, and so is writing disjoint memory.
    let mut tail =
        unsafe { TensorViewMut::<f32>::from_raw_parts_mut(p + n * 4, &[64], &[1], &cpu)? };
    let head = unsafe { TensorView::<f32>::from_raw_parts(p, &[64], &[1], &cpu)? };
    let head2 = unsafe { TensorView::<f32>::from_raw_parts(p, &[64], &[1], &cpu)? };
    v_add(&head, &head2, &mut tail)?;
    assert_eq!(tail.to_vec()?, ramp(64, 2.0));
    // A tile tensor updated in place through two of its own views stays allowed.
    let mut t = Tensor::from_slice(&ramp(n, 1.0), &[n], Device::Cpu)?;
    let alias = t.clone();
    v_add(&alias, &b, &mut t)?;
    assert_eq!(
        t.to_vec()?,
        (0..n).map(|i| i as f32 + 1.0).collect::<Vec<_>>()
    );
    drop((a, c, shifted));
    Ok(())
}

#[test]
fn graph_capture_refuses_borrowed_views() -> Result<(), Error> {
    let n = 256;
    let mut buf = aligned(n);
    let a = TensorView::from_slice(floats(&mut buf, n), &[n])?;
    let b = Tensor::full(&[n], 1.0f32, Device::Cpu)?;
    let mut c = Tensor::zeros(&[n], Device::Cpu)?;
    let e = Graph::capture(&Stream::Cpu, |s| v_add::on(s).launch(&a, &b, &mut c)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "kernel v_add: a borrowed view cannot be captured into a graph (the graph would \
         outlive the borrow); use a tile tensor"
    );
    Ok(())
}

/// The GPU, or `None` (printing why) where there is none.
fn gpu() -> Option<Device> {
    match Device::cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// The README's example of cudarc views (on a GPU).
#[test]
fn readme_cudarc_slices() -> Result<(), Box<dyn std::error::Error>> {
    if gpu().is_none() {
        return Ok(());
    }
    let n = 4096;
    let ctx = CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    let a = stream.clone_htod(&ramp(n, 1.0))?;
    let mut c = stream.alloc_zeros::<f32>(n)?;
    let on_stream = Stream::Cuda(stream.clone());
    {
        let av = Tensor::from_cuda_slice(&a, &[n])?;
        let mut cv = TensorViewMut::from_cuda_slice_mut(&mut c, &[n])?;
        v_add::on(&on_stream).launch(&av, &av, &mut cv)?;
    }
    let doubled = v_double::on(&on_stream).launch(&Tensor::from_cuda_slice(&a, &[n])?)?;
    let lent = doubled.cuda_view(&on_stream)?; // a guard; `lent.view()` is a CudaView<f32>
    assert_eq!(stream.clone_dtoh(&lent.view())?, stream.clone_dtoh(&c)?);
    Ok(())
}

/// A tile tensor imported through DLPack from a managed tensor that owns `slice`.
fn dlpack_of_slice(
    slice: Box<tile::cudarc::driver::CudaSlice<f32>>,
    n: usize,
    stream: &Stream,
) -> Result<Tensor<f32>, Error> {
    use tile::cudarc::driver::DevicePtr;
    use tile::dlpack::*;
    #[repr(C)]
    struct Owner {
        managed: DLManagedTensor,
        _slice: Box<tile::cudarc::driver::CudaSlice<f32>>,
        shape: [i64; 1],
    }
    unsafe extern "C" fn release(m: *mut DLManagedTensor) {
        // SAFETY: made by `Box::leak` below; `managed` is the first field.
        drop(unsafe { Box::from_raw(m.cast::<Owner>()) });
    }
    let ptr = {
        let (p, _sync) = slice.device_ptr(slice.stream());
        p
    };
    let mut owner = Box::new(Owner {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data: ptr as *mut std::ffi::c_void,
                device: DLDevice {
                    device_type: K_DL_CUDA,
                    device_id: 0,
                },
                ndim: 1,
                dtype: to_dl(DType::F32),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(release),
        },
        _slice: slice,
        shape: [n as i64],
    });
    owner.managed.dl_tensor.shape = owner.shape.as_mut_ptr();
    let m = std::ptr::NonNull::from(&mut Box::leak(owner).managed);
    // SAFETY: the slice lives until the deleter runs; its data is ready on `stream`.
    unsafe { Tensor::<f32>::from_dlpack(m, stream) }
}

#[test]
fn cudarc_slice_views_run_on_the_slice_stream_and_across_streams(
) -> Result<(), Box<dyn std::error::Error>> {
    let Some(dev) = gpu() else {
        return Ok(());
    };
    // A context and stream of the caller's own, with cudarc's event tracking on.
    let ctx = CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    let n = 100_000;
    let a = stream.clone_htod(&ramp(n, 1.0))?;
    let b = stream.clone_htod(&ramp(n, 0.25))?;
    let mut c = stream.alloc_zeros::<f32>(n)?;
    let on_slice_stream = Stream::Cuda(stream.clone());
    {
        let av = Tensor::from_cuda_slice(&a, &[n])?;
        let bv = TensorView::from_cuda_slice(&b, &[n])?;
        let mut cv = TensorViewMut::from_cuda_slice_mut(&mut c, &[n])?;
        assert_eq!(cv.device(), dev);
        v_add::on(&on_slice_stream).launch(&av, &bv, &mut cv)?;
        // The device's default stream: ordered after the slice stream's work, and the
        // slice stream is ordered after it when the view drops.
        v_add(&av, &av, &mut cv)?;
    }
    let got = stream.clone_dtoh(&c)?;
    assert_eq!(got, ramp(n, 2.0));

    // Sub-views of cudarc views, a launcher-allocated output, and a tile tensor lent
    // back to cudarc.
    let half = a.slice(0..n / 2);
    let hv = TensorView::from_cuda_slice(&half, &[n / 2])?;
    let doubled = v_double::on(&on_slice_stream).launch(&hv)?;
    let lent = doubled.cuda_view(&on_slice_stream)?;
    let back = stream.clone_dtoh(&lent.view())?;
    drop(lent);
    assert_eq!(back, ramp(n / 2, 2.0));

    // A DLPack import of device memory owned elsewhere (a cudarc slice kept by the
    // deleter's context), used by a tile launch and released once.
    let owned = Box::new(stream.clone_htod(&ramp(n, 1.0))?);
    let t = dlpack_of_slice(owned, n, &on_slice_stream)?;
    let mut out = Tensor::<f32>::zeros(&[n], dev)?;
    v_add::on(&on_slice_stream).launch(&t, &t, &mut out)?;
    drop(t);
    assert_eq!(out.to_vec()?, ramp(n, 2.0));
    stream.synchronize()?;
    Ok(())
}

#[test]
fn cuda_views_check_device_and_overlap() -> Result<(), Box<dyn std::error::Error>> {
    let Some(_) = gpu() else {
        return Ok(());
    };
    let ctx = CudaContext::new(0)?;
    let stream = ctx.new_stream()?;
    let n = 1024;
    let mut a = stream.clone_htod(&ramp(n, 1.0))?;
    let host = ramp(n, 1.0);
    let b = TensorView::from_slice(&host, &[n])?;
    {
        let mut av = TensorViewMut::from_cuda_slice_mut(&mut a, &[n])?;
        let e = v_add(&b, &b, &mut av).unwrap_err().to_string();
        assert!(e.contains("device mismatch"), "{e}");
        // The same device memory seen twice through raw views, one written.
        let p = av.data_ptr();
        let s = Stream::Cuda(stream.clone());
        // SAFETY: `a` outlives the view and is only used through views here.
        let raw = unsafe { TensorView::<f32>::from_raw_parts(p, &[n], &[1], &s)? };
        let e = v_add(&raw, &raw, &mut av).unwrap_err().to_string();
        assert!(e.contains("overlaps input a"), "{e}");
    }
    stream.synchronize()?;
    Ok(())
}
