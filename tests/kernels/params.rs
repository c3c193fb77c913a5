//! Scalar parameters: values passed by value to the typed launcher, of every
//! dtype, in the body as read-only variables; in graphs and the profiler.

use super::*;

/// `y = x * temp`, the scalar between the tensors.
#[tile::kernel(block_n = 128, threads = 128)]
pub fn scale_by(x: Tensor<f32, (N,)>, temp: f32, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            y[bx * block_n + i] = x[bx * block_n + i] * temp;
        }
    });
}

/// One scalar of every dtype, each written to its own slot of `out` (one
/// thread: plain stores).
#[tile::kernel(slots = 13, threads = 1)]
#[allow(clippy::too_many_arguments)]
pub fn every_scalar(
    b: bool,
    i8v: i8,
    u8v: u8,
    i16v: i16,
    u16v: u16,
    i32v: i32,
    u32v: u32,
    i64v: i64,
    u64v: u64,
    h: f16,
    bh: bf16,
    f: f32,
    d: f64,
    out: TensorMut<f64, (slots,)>,
    wide: TensorMut<i64, (W,)>,
) {
    T::kernel(1, threads, |_bx| {
        out[0] = T::if_then_else(b, 1.0, 2.0);
        out[1] = i8v as f64;
        out[2] = u8v as f64;
        out[3] = i16v as f64;
        out[4] = u16v as f64;
        out[5] = i32v as f64;
        out[6] = u32v as f64;
        out[7] = (i64v / 1024) as f64;
        out[8] = (u64v / 1024) as f64;
        out[9] = h as f64;
        out[10] = bh as f64;
        out[11] = f as f64;
        out[12] = d;
        wide[0] = i64v;
        wide[1] = u64v as i64;
    });
}

/// A scalar as a loop bound and an index offset: `y[i] = sum of x[i + s] for
/// s in 0..taps` (zero past the end).
#[tile::kernel(block_n = 64, threads = 64)]
pub fn window_sum(x: Tensor<f32, (N,)>, taps: i32, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let mut acc = 0.0f32;
            for s in T::serial(taps) {
                let k = bx * block_n + i + s;
                acc += T::if_then_else(k < N, x[T::min(k, N - 1)], 0.0);
            }
            y[bx * block_n + i] = acc;
        }
    });
}

#[test]
fn a_scalar_is_passed_by_value() -> TestResult {
    for &n in &[128usize, 1000, 1] {
        let x = random_tensor::<f32>(&[n], 2100 + n as u64, dev())?;
        let mut y = Tensor::full(&[n], f32::NAN, dev())?;
        scale_by(&x, 0.25, &mut y)?;
        let want: Vec<f64> = host(&x).iter().map(|v| (*v as f32 * 0.25) as f64).collect();
        check("scale_by", &y, &want, 0.0, 0.0);
        // Another value, through the explicit-stream launcher.
        scale_by::on(&dev().default_stream()?).launch(&x, -3.0, &mut y)?;
        let want: Vec<f64> = host(&x).iter().map(|v| (*v as f32 * -3.0) as f64).collect();
        check("scale_by -3", &y, &want, 0.0, 0.0);
    }
    Ok(())
}

#[test]
fn scalars_of_every_dtype() -> TestResult {
    let mut out = Tensor::full(&[13], f64::NAN, dev())?;
    let mut wide = Tensor::full(&[2], 0i64, dev())?;
    let big = -(1i64 << 40) - 5;
    let ubig = (1u64 << 63) + 4096;
    every_scalar(
        false,
        -7,
        250,
        -30000,
        65000,
        -2_000_000_000,
        4_000_000_000,
        big,
        ubig,
        f16::from_f32(1.5),
        bf16::from_f32(-0.375),
        3.25,
        1e300,
        &mut out,
        &mut wide,
    )?;
    let want = [
        2.0,
        -7.0,
        250.0,
        -30000.0,
        65000.0,
        -2e9,
        4e9,
        (big / 1024) as f64,
        (ubig / 1024) as f64,
        1.5,
        -0.375,
        3.25,
        1e300,
    ];
    check("every_scalar", &out, &want, 0.0, 0.0);
    check_exact("every_scalar wide", &wide, &[big, ubig as i64]);
    every_scalar(
        true,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        f16::ZERO,
        bf16::ZERO,
        0.0,
        0.0,
        &mut out,
        &mut wide,
    )?;
    assert_eq!(out.to_vec()?[0], 1.0);
    Ok(())
}

#[test]
fn a_scalar_bounds_a_loop() -> TestResult {
    let n = 300;
    let x = random_tensor::<f32>(&[n], 2200, dev())?;
    let xv = host(&x);
    for taps in [0, 1, 5] {
        let mut y = Tensor::full(&[n], f32::NAN, dev())?;
        window_sum(&x, taps, &mut y)?;
        let want: Vec<f64> = (0..n)
            .map(|i| {
                let mut acc = 0f32;
                for s in 0..taps as usize {
                    acc += xv.get(i + s).map_or(0.0, |v| *v as f32);
                }
                acc as f64
            })
            .collect();
        check(&format!("window_sum taps={taps}"), &y, &want, 1e-6, 1e-6);
    }
    Ok(())
}

#[test]
fn scalars_in_graphs_and_the_profiler() -> TestResult {
    let d = dev();
    let n = 700;
    let x = random_tensor::<f32>(&[n], 2300, d)?;
    let mut y = Tensor::zeros(&[n], d)?;
    let mut z = Tensor::zeros(&[n], d)?;
    let stream = d.new_stream()?;
    scale_by::on(&stream).launch(&x, 1.0, &mut y)?;
    // The values are captured with the launch: replay uses them.
    let g = Graph::capture(&stream, |s| {
        scale_by::on(s).launch(&x, 2.0, &mut y)?;
        scale_by::on(s).launch(&y, 0.5, &mut z)
    })?;
    g.replay()?;
    stream.synchronize()?;
    let xv = host(&x);
    let want: Vec<f64> = xv.iter().map(|v| (*v as f32 * 2.0) as f64).collect();
    check("graph y", &y, &want, 0.0, 0.0);
    check("graph z", &z, &xv, 0.0, 0.0);
    // The profiler: scalars are 1 until set; the reference knows the value.
    let p = scale_by::profiler()
        .device(d)
        .dim("N", 333)
        .scalar("temp", 4.0);
    p.assert_allclose(
        |a| vec![a[0].data.iter().map(|v| (*v as f32 * 4.0) as f64).collect()],
        0.0,
        0.0,
    )?;
    let unknown = scale_by::profiler().device(d).dim("N", 3).scalar("t", 4.0);
    assert!(matches!(unknown.inputs(), Err(Error::Profile { .. })));
    let r = tile::do_bench(
        &stream,
        |s| scale_by::on(s).launch(&x, 3.0, &mut y),
        &tile::BenchOptions {
            warmup: std::time::Duration::from_millis(2),
            rep: std::time::Duration::from_millis(10),
            ..Default::default()
        },
    )?;
    assert!(r.median_ms > 0.0);
    // The scalars are part of the signature the host side shows and the ABI.
    let host_side = scale_by::host_source();
    assert!(host_side.contains("temp: f32"), "{host_side}");
    assert_eq!(scale_by::SPEC.scalars[0].name, "temp");
    assert!(scale_by::ir().contains("temp = T.scalar(\"temp\", float32)"));
    Ok(())
}

/// A dtype-generic kernel with a scalar and an output of its dtype.
#[tile::kernel(dtype = [f32, f64], block_n = 64, threads = 64)]
pub fn axpb(x: Tensor<dtype, (N,)>, alpha: dtype, beta: f32, y: Output<dtype, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            y[bx * block_n + i] = x[bx * block_n + i] * alpha + beta as dtype;
        }
    });
}

#[test]
fn a_generic_kernel_with_scalars_and_outputs() -> TestResult {
    let n = 100;
    let x = random_tensor::<f32>(&[n], 3000, dev())?;
    let y = axpb(&x, 2.0f32, 0.5)?;
    let want: Vec<f64> = host(&x)
        .iter()
        .map(|v| (*v as f32 * 2.0 + 0.5) as f64)
        .collect();
    check("axpb f32", &y, &want, 0.0, 0.0);
    let x = random_tensor::<f64>(&[n], 3001, dev())?;
    let y = axpb::on(&dev().default_stream()?).launch(&x, -1.0f64, 0.25)?;
    let want: Vec<f64> = host(&x).iter().map(|v| v * -1.0 + 0.25).collect();
    check("axpb f64", &y, &want, 0.0, 0.0);
    // Each instance is a kernel of its own, built ahead of time.
    assert!(axpb::ir::<f64>().contains("def axpb_f64("));
    assert!(
        <f32 as axpb::Dtype>::spec().cpu.aot.is_some(),
        "axpb f32 not linked"
    );
    assert!(
        <f64 as axpb::Dtype>::spec().cpu.aot.is_some(),
        "axpb f64 not linked"
    );
    let p = axpb::profiler::<f64>()
        .device(dev())
        .dim("N", 70)
        .scalar("alpha", 3.0);
    // `x * 3 + 1` may run as one fused multiply-add (nvcc contracts it) or
    // round twice (the host): one ulp apart.
    p.assert_allclose(
        |a| vec![a[0].data.iter().map(|v| v * 3.0 + 1.0).collect()],
        0.0,
        1e-15,
    )?;
    Ok(())
}
