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
/// `Cᵀ = Bᵀ · Aᵀ` in column-major), f32 accumulation; `ld` holds the row
/// pitches of A, B and C in elements.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cublas_gemm<T: cudarc::driver::DeviceRepr>(
    blas: &CudaBlas,
    stream: &Arc<CudaStream>,
    a: &CudaSlice<T>,
    b: &CudaSlice<T>,
    c: &mut CudaSlice<T>,
    (m, n, k): (usize, usize, usize),
    (lda, ldb, ldc): (usize, usize, usize),
    dt: cudaDataType,
) -> Res<()> {
    if a.len() < m * lda || b.len() < k * ldb || c.len() < m * ldc {
        return Err("cublas_gemm: a buffer is shorter than its rows".into());
    }
    let (alpha, beta) = (1.0f32, 0.0f32);
    let (pa, _ga) = a.device_ptr(stream);
    let (pb, _gb) = b.device_ptr(stream);
    let (pc, _gc) = c.device_ptr_mut(stream);
    // SAFETY: the three buffers hold m rows of lda, k rows of ldb and m rows
    // of ldc elements of `dt` on this stream's device (checked above), each
    // pitch at least its row's length; alpha and beta are host f32 values as
    // the f32 compute type requires.
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
            ldb as i32,
            pa as *const std::ffi::c_void,
            dt,
            lda as i32,
            (&beta as *const f32).cast(),
            pc as *mut std::ffi::c_void,
            dt,
            ldc as i32,
            cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
        )?;
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
    let ld = (k, n, n);
    // Same results (spot check of about a thousand elements against cuBLAS).
    launch(&a, &b, &mut c)?;
    cublas_gemm(blas, stream, &ca, &cb, &mut cc, (m, n, k), ld, dt)?;
    stream.synchronize()?;
    let ours = c.to_vec()?;
    let theirs = stream.clone_dtoh(&cc)?;
    let mut worst = 0f64;
    for i in (0..m * n).step_by((m * n / 997).max(1)) {
        let (x, y) = (ours[i].to_f64(), theirs[i].to_f64());
        worst = worst.max((x - y).abs() / (1.0 + y.abs()));
    }
    if worst.is_nan() || worst > 2e-2 {
        return Err(format!("{name}: differs from cuBLAS (worst {worst:.3e})").into());
    }
    let flops = 2.0 * (m * n * k) as f64;
    let bytes = ((m * k + k * n + m * n) * std::mem::size_of::<E>()) as f64;
    let (t_tile, t_blas) = time_pair_ms(
        stream,
        5,
        50,
        || Ok(launch(&a, &b, &mut c)?),
        || cublas_gemm(blas, stream, &ca, &cb, &mut cc, (m, n, k), ld, dt),
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
