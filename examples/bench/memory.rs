//! `bench memory` (and the first rows of every mode): the memory-bound
//! kernels (softmax, rmsnorm, the GEMVs, transpose) against the device's copy
//! bandwidth, each timed behind a GPU spin (`time_ms`).

use super::roofline::{Roof, Work};
use super::{gemv, rmsnorm, softmax, time_ms, transpose, Res, Row, Tuned};
use cudarc::driver::CudaStream;
use std::sync::Arc;
use tile::prelude::*;

/// Row kernels (softmax and rmsnorm, default and tuned) and the other
/// memory-bound kernels against the copy bandwidth.
pub(crate) fn memory_rows(
    dev: Device,
    stream: &Arc<CudaStream>,
    copy_bw: f64,
    rows: &mut Vec<Row>,
    tuned: &mut Vec<Tuned>,
) -> Res<()> {
    // Row kernels on 8192 × 8192 f16: read once, write once. Conventional
    // flop counts per element (only to place them on the roofline): softmax
    // 5 (max, subtract, exp, sum, scale), rmsnorm 3 (square, sum, scale).
    let (m, n) = (8192usize, 8192usize);
    let x = tile::testing::random_tensor::<f16>(&[m, n], 41, dev)?;
    let mut y = Tensor::full(&[m, n], f16::NAN, dev)?;
    let moved = 2.0 * (m * n * 2) as f64;
    type RowKernel = fn(&Tensor<f16>, &mut Tensor<f16>) -> Result<(), tile::Error>;
    for (name, kernel) in [("softmax", 0), ("rmsnorm", 1)] {
        let t0 = std::time::Instant::now();
        if kernel == 0 {
            softmax::softmax::tune().launch(&x, &mut y)?;
        } else {
            rmsnorm::rmsnorm::tune().launch(&x, &mut y)?;
        }
        dev.synchronize()?;
        let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        let report = match kernel {
            0 => softmax::softmax::reports(),
            _ => rmsnorm::rmsnorm::reports(),
        }
        .into_iter()
        .find(|r| r.shapes[0] == [m, n])
        .ok_or("no tuning report")?;
        tuned.push(Tuned::new(format!("{name} {m}x{n} f16"), report, wall_ms));
    }
    let row_kernels: [(&str, RowKernel); 4] = [
        ("softmax", |x, y| {
            softmax::softmax::with(softmax::softmax::Config::DEFAULT).launch(x, y)
        }),
        ("rmsnorm", |x, y| {
            rmsnorm::rmsnorm::with(rmsnorm::rmsnorm::Config::DEFAULT).launch(x, y)
        }),
        ("softmax (tuned)", |x, y| {
            softmax::softmax::tune().launch(x, y)
        }),
        ("rmsnorm (tuned)", |x, y| {
            rmsnorm::rmsnorm::tune().launch(x, y)
        }),
    ];
    for (name, f) in row_kernels {
        let t = time_ms(stream, 3, 50, || Ok(f(&x, &mut y)?))?;
        let (what, series) = match name.strip_suffix(" (tuned)") {
            Some(k) => (
                format!("{k} {m}x{n} f16 (tuned)"),
                format!("{k} f16 (tuned)"),
            ),
            None => (format!("{name} {m}x{n} f16"), format!("{name} f16")),
        };
        let per_elem = if name.starts_with("softmax") {
            5.0
        } else {
            3.0
        };
        let flops = per_elem * (m * n) as f64;
        rows.push(memory_row(&series, what, t, moved, flops, copy_bw));
    }
    drop((x, y));
    memory_bound(dev, stream, copy_bw, rows)
}

/// A memory-bound row: `bytes` read and written in `ms`, against the copy
/// bandwidth (which is also its roofline baseline: the memory roof).
pub(crate) fn memory_row(
    series: &str,
    what: String,
    ms: f64,
    bytes: f64,
    flops: f64,
    copy_bw: f64,
) -> Row {
    let bw = bytes / ms / 1e6;
    let tile = if ms < 1.0 {
        format!("{bw:.0} GB/s ({:.1} us)", ms * 1e3)
    } else {
        format!("{bw:.0} GB/s ({ms:.3} ms)")
    };
    Row {
        what,
        series: series.into(),
        tile,
        base: format!("copy {copy_bw:.0} GB/s"),
        ratio: bw / copy_bw,
        work: Work {
            flops,
            bytes,
            tile_ms: ms,
            base_ms: None,
            roof: Roof::Dense16,
        },
    }
}

/// Device-to-device copy bandwidth in GB/s: 1 GiB, bytes read + written.
pub(crate) fn copy_bandwidth(stream: &Arc<CudaStream>) -> Res<f64> {
    let bytes = 1usize << 30;
    let src = stream.alloc_zeros::<u8>(bytes)?;
    let mut dst = stream.alloc_zeros::<u8>(bytes)?;
    let t_copy = time_ms(stream, 3, 20, || Ok(stream.memcpy_dtod(&src, &mut dst)?))?;
    Ok(2.0 * bytes as f64 / t_copy / 1e6)
}

/// GEMV (f16, bf16, W4A16) and transpose at 8192 × 8192 against the copy
/// bandwidth. The GEMVs rotate over four weight matrices, so that no run
/// finds its weights in L2 (the W4 matrix is 32 MiB, L2 50 MB); bytes moved
/// count every operand once. A GEMV's flops are 2·N·K (W4A16's
/// dequantization not counted); a transpose has none (no roofline point).
pub(crate) fn memory_bound(
    dev: Device,
    stream: &Arc<CudaStream>,
    copy_bw: f64,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let (n, k) = (8192usize, 8192usize);
    let gemv_flops = 2.0 * (n * k) as f64;
    let mut push = |series: &str, what: String, t: f64, bytes: f64, flops: f64| {
        rows.push(memory_row(series, what, t, bytes, flops, copy_bw));
    };
    let x = tile::testing::random_tensor::<f16>(&[k], 81, dev)?;
    let mut y = Tensor::full(&[n], f16::NAN, dev)?;
    let gemv_bytes = ((n * k + k + n) * 2) as f64;
    let a: Vec<Tensor<f16>> = (0..4)
        .map(|i| tile::testing::random_tensor::<f16>(&[n, k], 82 + i, dev))
        .collect::<Result<_, _>>()?;
    // Median of 200 runs after 8, each on the next of the four weight sets.
    let rotating = |f: &mut dyn FnMut(usize) -> Res<()>| -> Res<f64> {
        let mut i = 0;
        time_ms(stream, 8, 200, || {
            i += 1;
            f(i % 4)
        })
    };
    // The default variant, then the one tuned on this shape (every variant
    // timed, L2 flushed; later plain calls in this process run the choice).
    let t = rotating(&mut |r| Ok(gemv::gemv(&a[r], &x, &mut y)?))?;
    let what = format!("gemv f16 {n}x{k}");
    push("gemv f16", what, t, gemv_bytes, gemv_flops);
    gemv::gemv::tune().launch(&a[0], &x, &mut y)?;
    let t_f16 = rotating(&mut |r| Ok(gemv::gemv(&a[r], &x, &mut y)?))?;
    let what = format!("gemv f16 {n}x{k} (tuned)");
    push("gemv f16 (tuned)", what, t_f16, gemv_bytes, gemv_flops);
    drop(a);
    let xb = tile::testing::random_tensor::<bf16>(&[k], 86, dev)?;
    let mut yb = Tensor::full(&[n], bf16::NAN, dev)?;
    let ab: Vec<Tensor<bf16>> = (0..4)
        .map(|i| tile::testing::random_tensor::<bf16>(&[n, k], 87 + i, dev))
        .collect::<Result<_, _>>()?;
    gemv::gemv::tune().launch(&ab[0], &xb, &mut yb)?;
    let t = rotating(&mut |r| Ok(gemv::gemv(&ab[r], &xb, &mut yb)?))?;
    let what = format!("gemv bf16 {n}x{k} (tuned)");
    push("gemv bf16 (tuned)", what, t, gemv_bytes, gemv_flops);
    drop(ab);
    let group = 128;
    let w: Vec<(Tensor<u32>, Tensor<f16>)> = (0..4)
        .map(|i| gemv::quantized(dev, n, k, group, 91 + i).map(|(w, s, _)| (w, s)))
        .collect::<Result<_, _>>()?;
    let bytes = (n * k / 2 + n * (k / group) * 2 + (k + n) * 2) as f64;
    let t = rotating(&mut |r| Ok(gemv::gemv_w4a16(&w[r].0, &w[r].1, &x, &mut y)?))?;
    let what = format!("gemv w4a16 {n}x{k} g{group}");
    push("gemv w4a16", what, t, bytes, gemv_flops);
    gemv::gemv_w4a16::tune().launch(&w[0].0, &w[0].1, &x, &mut y)?;
    let t_w4 = rotating(&mut |r| Ok(gemv::gemv_w4a16(&w[r].0, &w[r].1, &x, &mut y)?))?;
    let what = format!("gemv w4a16 (tuned; {:.2}x tuned f16)", t_f16 / t_w4);
    push("gemv w4a16 (tuned)", what, t_w4, bytes, gemv_flops);
    let xt = tile::testing::random_tensor::<f16>(&[n, k], 95, dev)?;
    let mut yt = Tensor::full(&[k, n], f16::NAN, dev)?;
    let t = time_ms(stream, 5, 100, || Ok(transpose::transpose(&xt, &mut yt)?))?;
    let moved = (2 * n * k * 2) as f64;
    push(
        "transpose f16",
        format!("transpose f16 {n}x{k}"),
        t,
        moved,
        0.0,
    );
    transpose::transpose::tune().launch(&xt, &mut yt)?;
    let t = time_ms(stream, 5, 100, || Ok(transpose::transpose(&xt, &mut yt)?))?;
    let what = format!("transpose f16 {n}x{k} (tuned)");
    push("transpose f16 (tuned)", what, t, moved, 0.0);
    pad_rows(dev, stream, copy_bw, rows)?;
    // The choices, for the record.
    let label = |r: Option<std::sync::Arc<tile::autotune::TuneReport>>| {
        r.map(|r| r.chosen_label.clone()).unwrap_or_default()
    };
    // Every W4A16 variant, in the tuner (an L2 flush by memset before each
    // run, whose dirty lines the kernel then evicts) and as the rows above
    // time it (a spin before each run, operands rotated, so L2 is clean).
    let in_tuner: Vec<Option<f64>> = gemv::gemv_w4a16::reports()
        .first()
        .map(|r| r.rows.iter().map(|row| row.median_ms()).collect())
        .unwrap_or_default();
    for (i, c) in gemv::gemv_w4a16::CONFIGS.iter().enumerate() {
        let launch = gemv::gemv_w4a16::with(*c);
        let t = rotating(&mut |r| Ok(launch.launch(&w[r].0, &w[r].1, &x, &mut y)?))?;
        let tuner = in_tuner.get(i).copied().flatten().unwrap_or(f64::NAN);
        println!(
            "w4a16 variant [{}]: {:.2} us as the rows time it, {:.2} us in the tuner",
            gemv::gemv_w4a16::LABELS[i],
            t * 1e3,
            tuner * 1e3
        );
    }
    println!(
        "memory-bound choices: gemv f16 [{}], gemv w4a16 [{}], transpose f16 [{}]",
        label(gemv::gemv::reports::<f16>().into_iter().next()),
        label(gemv::gemv_w4a16::reports().into_iter().next()),
        label(transpose::transpose::reports::<f16>().into_iter().next()),
    );
    Ok(())
}

/// The odd-pitch padding copies of `examples/gemm_any_pitch.rs` (`resize`,
/// an element-wise `T::parallel` copy) against the copy bandwidth (bytes
/// read plus written), over L2: rows at an odd pitch (one element a load,
/// eight iterations' loads before their stores), at an even pitch off 16
/// bytes (4-byte words), and at 16-byte pitches both ways (vectors); then
/// B of `bench gemm 1000x1030x1050`'s padded plan (in L2 here).
fn pad_rows(dev: Device, stream: &Arc<CudaStream>, copy_bw: f64, rows: &mut Vec<Row>) -> Res<()> {
    use super::gemm_any_pitch::resize;
    for (r, c, ry, cy) in [
        (8191, 8189, 8192, 8192),
        (8192, 8190, 8192, 8192),
        (8192, 8192, 8192, 8190),
        (8192, 8192, 8192, 8192),
        (1050, 1030, 1056, 1032),
    ] {
        let x = tile::testing::random_tensor::<f16>(&[r, c], 97, dev)?;
        let mut y = Tensor::full(&[ry, cy], f16::NAN, dev)?;
        let t = time_ms(stream, 5, 100, || Ok(resize(&x, &mut y)?))?;
        let moved = ((r * c + ry * cy) * 2) as f64;
        rows.push(memory_row(
            "pad f16",
            format!("pad f16 {r}x{c} -> {ry}x{cy}"),
            t,
            moved,
            0.0,
            copy_bw,
        ));
    }
    Ok(())
}
