//! One GEMM row of the table: a tile launch and `cublasGemmEx` on the same
//! random data, checked against each other, then timed alternately with L2
//! flushed.

use super::roofline::{Roof, Work};
use super::{time_pair_ms, Res, Row};
use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t, cublasOperation_t, cudaDataType};
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use std::sync::Arc;
use tile::prelude::*;

/// A launch of `C = A · B` on three tensors of one dtype.
pub(crate) type GemmLaunch<'a, E> =
    &'a dyn Fn(&Tensor<E>, &Tensor<E>, &mut Tensor<E>) -> Result<(), tile::Error>;

/// cuBLAS `C = A · B` for row-major f16/bf16 matrices (computed as
/// `Cᵀ = Bᵀ · Aᵀ` in column-major), f32 accumulation.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cublas_gemm<T: cudarc::driver::DeviceRepr>(
    blas: &CudaBlas,
    stream: &Arc<CudaStream>,
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
    c: &mut CudaSlice<T>,
    (m, n, k): (usize, usize, usize),
    dt: cudaDataType,
) -> Res<()> {
    let (alpha, beta) = (1.0f32, 0.0f32);
    let (pa, _ga) = a.device_ptr(stream);
    let (pb, _gb) = b.device_ptr(stream);
    let (pc, _gc) = c.device_ptr_mut(stream);
    // SAFETY: the three buffers hold m·k, k·n and m·n elements of `dt` on
    // this stream's device; leading dimensions match their row-major shapes;
    // alpha and beta are host f32 values as the f32 compute type requires.
    unsafe {
        cudarc::cublas::result::gemm_ex(
            *blas.handle(),
            cublasOperation_t::CUBLAS_OP_N,
            cublasOperation_t::CUBLAS_OP_N,
            n as i32,
            m as i32,
            k as i32,
            (&alpha as *const f32).cast(),
            pb as *const std::ffi::c_void,
            dt,
            n as i32,
            pa as *const std::ffi::c_void,
            dt,
            k as i32,
            (&beta as *const f32).cast(),
            pc as *mut std::ffi::c_void,
            dt,
            n as i32,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
        )?;
    }
    Ok(())
}

/// The same results: over about a thousand elements spread over the output,
/// the worst relative difference (`|x - y| / (1 + |y|)`) must be at most
/// 2e-2. Against `exact` (the f64 value of element i) where the caller has
/// it, else against the baseline's output. cuBLAS's own bf16 results at odd
/// shapes are off by more than that against the exact values (1001³: -0.441
/// where the product is -0.482 and tile's kernel gives -0.482), so where the
/// exact values are known the baseline is only reported, never the judge.
/// `what` and `baseline` name the two in the error and the report.
pub(crate) fn spot_check<E: Element>(
    what: &str,
    baseline: &str,
    ours: &[E],
    theirs: &[E],
    exact: Option<&dyn Fn(usize) -> f64>,
) -> Res<()> {
    let len = ours.len().min(theirs.len());
    // The worst sampled element: its relative difference and index.
    let worst = |got: &[E]| {
        let (mut worst, mut at) = (0f64, 0);
        for i in (0..len).step_by((len / 997).max(1)) {
            let want = exact.map_or_else(|| theirs[i].to_f64(), |f| f(i));
            let d = (got[i].to_f64() - want).abs() / (1.0 + want.abs());
            if d > worst || d.is_nan() {
                (worst, at) = (d, i);
            }
        }
        (worst, at)
    };
    let (d, at) = worst(ours);
    let truth = if exact.is_some() {
        "the exact product"
    } else {
        baseline
    };
    if d.is_nan() || d > 2e-2 {
        return Err(format!(
            "{what}: differs from {truth} (worst {d:.3e} at element {at} of {len}: {} against {} from {baseline})",
            ours[at].to_f64(),
            theirs[at].to_f64()
        )
        .into());
    }
    if exact.is_some() {
        let (d, at) = worst(theirs);
        if d.is_nan() || d > 2e-2 {
            println!(
                "note: {baseline} beside {what} is off the exact product by {d:.3e} at element {at} \
                 ({} against {}; tile's {})",
                theirs[at].to_f64(),
                exact.map_or(f64::NAN, |f| f(at)),
                ours[at].to_f64()
            );
        }
    }
    Ok(())
}

/// Times `launch` beside cuBLAS on contiguous matrices of `(m, n, k)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bench_gemm<
    E: Element + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits,
>(
    name: &str,
    launch: GemmLaunch<'_, E>,
    dev: Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    (m, n, k): (usize, usize, usize),
    dt: cudaDataType,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let ha = tile::testing::random_vec::<E>(m * k, 31, -1.0, 1.0);
    let hb = tile::testing::random_vec::<E>(k * n, 32, -1.0, 1.0);
    let a = Tensor::from_slice(&ha, &[m, k], dev)?;
    let b = Tensor::from_slice(&hb, &[k, n], dev)?;
    let mut c = Tensor::full(&[m, n], E::from_f64(f64::NAN), dev)?;
    let ca = stream.clone_htod(&ha)?;
    let cb = stream.clone_htod(&hb)?;
    let mut cc = stream.alloc_zeros::<E>(m * n)?;
    // Same results (spot check of about a thousand elements against cuBLAS).
    launch(&a, &b, &mut c)?;
    cublas_gemm(blas, stream, &ca, &cb, &mut cc, (m, n, k), dt)?;
    stream.synchronize()?;
    let exact = |i: usize| {
        let (row, col) = (i / n, i % n);
        (0..k)
            .map(|p| ha[row * k + p].to_f64() * hb[p * n + col].to_f64())
            .sum::<f64>()
    };
    spot_check(
        name,
        "cuBLAS",
        &c.to_vec()?,
        &stream.clone_dtoh(&cc)?,
        Some(&exact),
    )?;
    let flops = 2.0 * (m * n * k) as f64;
    let bytes = ((m * k + k * n + m * n) * std::mem::size_of::<E>()) as f64;
    let (t_tile, t_blas) = time_pair_ms(
        stream,
        5,
        50,
        || Ok(launch(&a, &b, &mut c)?),
        || cublas_gemm(blas, stream, &ca, &cb, &mut cc, (m, n, k), dt),
    )?;
    let (tf, bf) = (flops / t_tile / 1e9, flops / t_blas / 1e9);
    let dims = if m == n && n == k {
        format!("{n}^3")
    } else {
        format!("{m}x{n}x{k}")
    };
    rows.push(Row {
        what: format!("{name} {dims}"),
        series: name.into(),
        tile: format!("{tf:.1} TFLOP/s"),
        base: format!("cuBLAS {bf:.1} TFLOP/s"),
        ratio: tf / bf,
        work: Work {
            flops,
            bytes,
            tile_ms: t_tile,
            base_ms: Some(t_blas),
            roof: Roof::Dense16,
        },
    });
    Ok(())
}
