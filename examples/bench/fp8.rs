//! The fp8 rows of the benchmark: the `gemm_fp8` example (e4m3, per-tensor
//! scales, bf16 out) against cuBLASLt's fp8 matmul on the same inputs, the
//! two timed alternately in this process (`bench fp8` runs only these).

use super::blas::spot_check;
use super::cublaslt::{cublaslt_available, Fp8Gemm, OutType};
use super::gemm_fp8::{gemm_fp8, gemm_fp8_persistent};
use super::roofline::{Roof, Work};
use super::{time_pair_ms, Res, Row};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use std::sync::Arc;
use tile::prelude::*;

/// The shapes (M, N, K): the 8192³, a 4096³ and the LLaMA-7B MLP
/// shapes, and a decode-sized M.
const SHAPES: [(usize, usize, usize); 5] = [
    (8192, 8192, 8192),
    (4096, 4096, 4096),
    (4096, 11008, 4096),
    (4096, 4096, 11008),
    (128, 8192, 8192),
];

pub(crate) fn fp8_rows(dev: Device, stream: &Arc<CudaStream>, rows: &mut Vec<Row>) -> Res<()> {
    if !cublaslt_available() {
        println!("bench: cuBLASLt cannot be loaded; no fp8 rows");
        return Ok(());
    }
    for (m, n, k) in SHAPES {
        fp8_shape(dev, stream, (m, n, k), rows)?;
    }
    Ok(())
}

fn fp8_shape(
    dev: Device,
    stream: &Arc<CudaStream>,
    (m, n, k): (usize, usize, usize),
    rows: &mut Vec<Row>,
) -> Res<()> {
    let ha = tile::testing::random_vec::<f8e4m3>(m * k, 51, -2.0, 2.0);
    let hb = tile::testing::random_vec::<f8e4m3>(n * k, 52, -2.0, 2.0);
    let (sa, sb) = (0.5f32, 0.25f32);
    let a = Tensor::from_slice(&ha, &[m, k], dev)?;
    let b = Tensor::from_slice(&hb, &[n, k], dev)?;
    let mut c = Tensor::full(&[m, n], bf16::NAN, dev)?;
    let ca = stream.clone_htod(&ha)?;
    let cb = stream.clone_htod(&hb)?;
    // One allocation per scale: cuBLASLt refuses (NOT_SUPPORTED) a scale
    // pointer that is only 4-byte aligned.
    let scale_a = stream.clone_htod(&[sa])?;
    let scale_b = stream.clone_htod(&[sb])?;
    let mut cd = stream.alloc_zeros::<bf16>(m * n)?;
    let mut lt = Fp8Gemm::new(stream, m, n, k, OutType::Bf16)?;
    let ptrs = {
        let (pa, _ga) = ca.device_ptr(stream);
        let (pb, _gb) = cb.device_ptr(stream);
        let (psa, _gsa) = scale_a.device_ptr(stream);
        let (psb, _gsb) = scale_b.device_ptr(stream);
        let (pd, _gd) = cd.device_ptr_mut(stream);
        (pa, pb, psa, psb, pd)
    };
    let (pa, pb, psa, psb, pd) = ptrs;
    let mut baseline = || -> Res<()> { Ok(lt.run(pa, pb, pd, psa, psb)?) };
    let default = gemm_fp8::Config::DEFAULT;
    // Same results (a spot check of about a thousand elements).
    gemm_fp8::with(default).launch(&a, &b, &mut c, sa, sb)?;
    baseline()?;
    stream.synchronize()?;
    spot_check(
        &format!("gemm_fp8 {m}x{n}x{k}"),
        "cuBLASLt",
        &c.to_vec()?,
        &stream.clone_dtoh(&cd)?,
        None,
    )?;
    let flops = 2.0 * (m * n * k) as f64;
    // One byte per fp8 input element, two per bf16 output element.
    let bytes = (m * k + n * k + 2 * m * n) as f64;
    let what = if m == n && n == k {
        format!("gemm_fp8 e4m3 {n}^3")
    } else {
        format!("gemm_fp8 e4m3 {m}x{n}x{k}")
    };
    // The default variant, then the one tuned for this shape.
    let tuned = {
        gemm_fp8::tune().launch(&a, &b, &mut c, sa, sb)?;
        dev.synchronize()?;
        gemm_fp8::reports::<f8e4m3>()
            .iter()
            .find(|r| r.shapes[0] == [m, k] && r.shapes[1] == [n, k])
            .map(|r| r.chosen_label.clone())
            .unwrap_or_default()
    };
    // 0: the default variant, 1: the tuned one, 2: the persistent kernel.
    for (label, mode) in [
        (String::from("default"), 0),
        (format!("tuned: {tuned}"), 1),
        (String::from("persistent 128x128"), 2),
    ] {
        let (t_tile, t_lt) = time_pair_ms(
            stream,
            5,
            50,
            || {
                match mode {
                    0 => gemm_fp8::with(default).launch(&a, &b, &mut c, sa, sb)?,
                    1 => gemm_fp8::tune().launch(&a, &b, &mut c, sa, sb)?,
                    _ => gemm_fp8_persistent(&a, &b, &mut c, sa, sb)?,
                }
                Ok(())
            },
            &mut baseline,
        )?;
        let (tf, lf) = (flops / t_tile / 1e9, flops / t_lt / 1e9);
        rows.push(Row {
            what: format!("{what} ({label})"),
            series: format!(
                "gemm_fp8 e4m3 ({})",
                ["default", "tuned", "persistent"][mode]
            ),
            tile: format!("{tf:.1} TFLOP/s"),
            base: format!("cuBLASLt fp8 {lf:.1} TFLOP/s"),
            ratio: tf / lf,
            work: Work {
                flops,
                bytes,
                tile_ms: t_tile,
                base_ms: Some(t_lt),
                roof: Roof::Fp8,
            },
        });
    }
    Ok(())
}
