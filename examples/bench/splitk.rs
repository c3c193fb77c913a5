//! Split-K rows of the benchmark (`bench splitk`, and the full run): the
//! two-pass split-K GEMM of `examples/gemm_splitk.rs` on decode shapes (few
//! rows), against cuBLAS on the same data, beside the one-pass 16-row tile.

use super::{bench_gemm, gemm_nn_m16, gemm_splitk, Res, Row};
use cudarc::cublas::sys::cudaDataType;
use cudarc::cublas::CudaBlas;
use cudarc::driver::CudaStream;
use std::cell::RefCell;
use std::sync::Arc;
use tile::prelude::*;

/// Decode shapes: LLaMA-7B's down projection (K = 11008) and an 8192 layer
/// at 1 to 64 rows; their output tiles alone fill a fraction of the GPU.
const SHAPES: [(usize, usize, usize); 5] = [
    (16, 4096, 11008),
    (1, 4096, 11008),
    (16, 8192, 8192),
    (33, 8192, 8192),
    (64, 4096, 4096),
];

pub(crate) fn splitk_rows(
    dev: Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    rows: &mut Vec<Row>,
) -> Res<()> {
    for s in SHAPES {
        one_shape::<f16>(dev, stream, blas, s, cudaDataType::CUDA_R_16F, rows)?;
    }
    for s in [SHAPES[0], SHAPES[3]] {
        one_shape::<bf16>(dev, stream, blas, s, cudaDataType::CUDA_R_16BF, rows)?;
    }
    Ok(())
}

fn one_shape<E>(
    dev: Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    (m, n, k): (usize, usize, usize),
    dt: cudaDataType,
    rows: &mut Vec<Row>,
) -> Res<()>
where
    E: gemm_splitk::gemm_splitk::Dtype
        + gemm_splitk::splitk_reduce::Dtype
        + super::gemm_nn_m16::Dtype
        + cudarc::driver::DeviceRepr
        + cudarc::driver::ValidAsZeroBits,
{
    let dname = E::DTYPE.to_string();
    bench_gemm::<E>(
        &format!("gemm {dname} nn (16-row tile)"),
        &|a, b, c| gemm_nn_m16(a, b, c),
        dev,
        stream,
        blas,
        (m, n, k),
        dt,
        rows,
    )?;
    let small = m <= 16;
    for splits in [2usize, 4, 8, 16] {
        // The workspace is allocated once, outside the timed calls.
        let w = RefCell::new(Tensor::<f32>::empty(&[splits, m, n], dev)?);
        bench_gemm::<E>(
            &format!(
                "gemm {dname} split-K x{splits} ({}-row tile)",
                if small { 16 } else { 64 }
            ),
            &|a, b, c| gemm_splitk::gemm_split_k(a, b, &mut w.borrow_mut(), c, small),
            dev,
            stream,
            blas,
            (m, n, k),
            dt,
            rows,
        )?;
    }
    Ok(())
}
