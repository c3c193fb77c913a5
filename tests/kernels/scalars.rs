//! Casts, math functions, static shapes, and the generated module's launch plumbing.

use super::*;

// ---------------------------------------------------------------------------
// Casts
// ---------------------------------------------------------------------------

#[tile::kernel(block_n = 128, threads = 128)]
pub fn casts(
    a: Tensor<f16, (N,)>,
    b: Tensor<i32, (N,)>,
    f: TensorMut<f32, (N,)>,
    i: TensorMut<i32, (N,)>,
    h: TensorMut<bf16, (N,)>,
    d: TensorMut<f64, (N,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for j in T::parallel(block_n) {
            let x = a[bx * block_n + j];
            let k = b[bx * block_n + j];
            f[bx * block_n + j] = x as f32 + k as f32;
            i[bx * block_n + j] = (x as f32 * 100.0) as i32 + k / 3;
            h[bx * block_n + j] = (x as f32 * 0.5) as bf16;
            d[bx * block_n + j] = (k as i64 * 3000000000) as f64 + x as f64;
        }
    });
}

#[test]
fn casts_between_dtypes() -> TestResult {
    for (s, &n) in [128usize, 1000, 1].iter().enumerate() {
        let a = random_tensor::<f16>(&[n], 1500 + s as u64, dev())?;
        let b = random_tensor::<i32>(&[n], 1600 + s as u64, dev())?;
        let mut f = Tensor::full(&[n], f32::NAN, dev())?;
        let mut i = Tensor::full(&[n], i32::MIN, dev())?;
        let mut h = Tensor::full(&[n], bf16::NAN, dev())?;
        let mut d = Tensor::full(&[n], f64::NAN, dev())?;
        casts(&a, &b, &mut f, &mut i, &mut h, &mut d)?;
        let (av, bv) = (host(&a), b.to_vec()?);
        let wf: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &k)| round_to::<f32>(x + k as f64))
            .collect();
        // Rust's `as` truncates toward zero, and so does integer division.
        let wi: Vec<i32> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &k)| (x as f32 * 100.0) as i32 + k / 3)
            .collect();
        let wh: Vec<f64> = av.iter().map(|&x| round_to::<bf16>(x * 0.5)).collect();
        let wd: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &k)| (k as i64 * 3_000_000_000) as f64 + x)
            .collect();
        check(&format!("cast f32 n={n}"), &f, &wf, 0.0, 0.0);
        check_exact(&format!("cast i32 n={n}"), &i, &wi);
        check(&format!("cast bf16 n={n}"), &h, &wh, 0.0, 0.0);
        check(&format!("cast f64 n={n}"), &d, &wd, 0.0, 0.0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Math: T::max / T::min / T::exp / T::sqrt (and friends)
// ---------------------------------------------------------------------------

#[tile::kernel(block_n = 256, threads = 128)]
pub fn math_fns(
    a: Tensor<f32, (N,)>,
    b: Tensor<f32, (N,)>,
    c: TensorMut<f32, (N,)>,
    d: TensorMut<f32, (N,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let x = a[bx * block_n + i];
            let y = b[bx * block_n + i];
            c[bx * block_n + i] = T::exp(T::min(T::max(x, -0.5), 0.5)) + T::sqrt(T::abs(y));
            d[bx * block_n + i] = T::max(x, y) - T::min(x, y) + T::tanh(x) * T::sigmoid(y);
        }
    });
}

#[tile::kernel(block_n = 64, threads = 64)]
pub fn math_f16(a: Tensor<f16, (N,)>, c: TensorMut<f16, (N,)>, m: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let x = a[bx * block_n + i];
            c[bx * block_n + i] = T::sqrt(T::exp(x));
            m[bx * block_n + i] = T::min(T::max((x * 20.0) as i32, -5), 5);
        }
    });
}

#[test]
fn math_functions() -> TestResult {
    for (s, &n) in [256usize, 1000, 1, 257].iter().enumerate() {
        let a = random_tensor::<f32>(&[n], 1700 + s as u64, dev())?;
        let b = random_tensor::<f32>(&[n], 1800 + s as u64, dev())?;
        let mut c = Tensor::full(&[n], f32::NAN, dev())?;
        let mut d = Tensor::full(&[n], f32::NAN, dev())?;
        math_fns(&a, &b, &mut c, &mut d)?;
        let (av, bv) = (host(&a), host(&b));
        let wc: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &y)| x.clamp(-0.5, 0.5).exp() + y.abs().sqrt())
            .collect();
        let wd: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(&x, &y)| x.max(y) - x.min(y) + x.tanh() / (1.0 + (-y).exp()))
            .collect();
        check(&format!("math c n={n}"), &c, &wc, 1e-5, 1e-5);
        check(&format!("math d n={n}"), &d, &wd, 1e-5, 1e-5);
    }
    for (s, &n) in [64usize, 65, 3].iter().enumerate() {
        let a = random_tensor::<f16>(&[n], 1900 + s as u64, dev())?;
        let mut c = Tensor::full(&[n], f16::NAN, dev())?;
        let mut m = Tensor::full(&[n], i32::MIN, dev())?;
        math_f16(&a, &mut c, &mut m)?;
        let av = host(&a);
        let wc: Vec<f64> = av.iter().map(|&x| x.exp().sqrt()).collect();
        check(&format!("math_f16 c n={n}"), &c, &wc, 2e-3, 2e-3);
        let got = m.to_vec()?;
        // (x * 20) may round in f16 before truncation: allow the neighbouring integer.
        for (e, (&x, &g)) in av.iter().zip(&got).enumerate() {
            let exact = ((x * 20.0).trunc() as i32).clamp(-5, 5);
            assert!(
                (g - exact).abs() <= 1 && (-5..=5).contains(&g),
                "math_f16 m[{e}] = {g}, want about {exact} (x = {x})"
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Static shapes: dims named by compile-time parameters
// ---------------------------------------------------------------------------

#[tile::kernel(n = 1000, block_n = 128, threads = 128)]
pub fn static_axpy(x: Tensor<f32, (n,)>, y: Tensor<f32, (n,)>, out: TensorMut<f32, (n,)>) {
    T::kernel(T::ceildiv(n, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            out[bx * block_n + i] = 2.0 * x[bx * block_n + i] + y[bx * block_n + i];
        }
    });
}

/// A static dim and a dynamic dim in one parameter.
#[tile::kernel(rows = 6, block_n = 32, threads = 64)]
pub fn static_rows(a: Tensor<f32, (rows, N)>, c: TensorMut<f32, (rows, N)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for (r, j) in T::parallel([rows, block_n]) {
            c[(r, bx * block_n + j)] = a[(r, bx * block_n + j)] * (r + 1) as f32;
        }
    });
}

#[test]
fn static_shape_kernel() -> TestResult {
    let x = random_tensor::<f32>(&[1000], 2000, dev())?;
    let y = random_tensor::<f32>(&[1000], 2001, dev())?;
    let mut out = Tensor::full(&[1000], f32::NAN, dev())?;
    static_axpy(&x, &y, &mut out)?;
    let want: Vec<f64> = host(&x)
        .iter()
        .zip(host(&y))
        .map(|(a, b)| round_to::<f32>(2.0 * a + b))
        .collect();
    check("static_axpy", &out, &want, 1e-6, 1e-6);
    assert_eq!(
        static_axpy::SPEC.dims.len(),
        0,
        "a fully static kernel has no dynamic dims"
    );
    Ok(())
}

#[test]
fn static_shape_is_checked() -> TestResult {
    let x = random_tensor::<f32>(&[1024], 2002, dev())?;
    let y = random_tensor::<f32>(&[1024], 2003, dev())?;
    let mut out = Tensor::full(&[1024], f32::NAN, dev())?;
    let err = static_axpy(&x, &y, &mut out).expect_err("n = 1024 must be refused");
    assert!(matches!(
        err,
        Error::ShapeMismatch {
            kernel: "static_axpy",
            buffer: "x",
            dim: 0,
            expected: 1000,
            got: 1024,
            bound_by: None
        }
    ));
    assert_eq!(
        err.to_string(),
        "kernel static_axpy input x shape mismatch: dim 0 expected 1000, got 1024"
    );
    assert!(
        out.to_vec()?.iter().all(|v| v.is_nan()),
        "a refused launch writes nothing"
    );

    // The output alone has the wrong static extent.
    let x = random_tensor::<f32>(&[1000], 2004, dev())?;
    let mut out = Tensor::full(&[999], f32::NAN, dev())?;
    let err = static_axpy(&x, &x, &mut out).expect_err("out of 999 must be refused");
    assert_eq!(
        err.to_string(),
        "kernel static_axpy input out shape mismatch: dim 0 expected 1000, got 999"
    );
    assert!(out.to_vec()?.iter().all(|v| v.is_nan()));
    Ok(())
}

#[test]
fn mixed_static_and_dynamic_dims() -> TestResult {
    for (s, &n) in [32usize, 100, 1].iter().enumerate() {
        let a = random_tensor::<f32>(&[6, n], 2100 + s as u64, dev())?;
        let mut c = Tensor::full(&[6, n], f32::NAN, dev())?;
        static_rows(&a, &mut c)?;
        let want: Vec<f64> = host(&a)
            .iter()
            .enumerate()
            .map(|(e, &v)| round_to::<f32>(v * (e / n + 1) as f64))
            .collect();
        check(&format!("static_rows n={n}"), &c, &want, 0.0, 0.0);
    }
    let a = random_tensor::<f32>(&[5, 32], 2200, dev())?;
    let mut c = Tensor::full(&[5, 32], f32::NAN, dev())?;
    let err = static_rows(&a, &mut c).expect_err("5 rows must be refused");
    assert_eq!(
        err.to_string(),
        "kernel static_rows input a shape mismatch: dim 0 expected 6, got 5"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Launch plumbing visible through the generated module
// ---------------------------------------------------------------------------

#[test]
fn generated_module_describes_the_kernel() {
    let spec = &quickstart::gemm_relu::SPEC;
    assert_eq!(spec.name, "gemm_relu");
    let names: Vec<&str> = spec.params.iter().map(|p| p.name).collect();
    assert_eq!(names, ["a", "b", "c"]);
    let outputs: Vec<bool> = spec.params.iter().map(|p| p.output).collect();
    assert_eq!(outputs, [false, false, true]);
    assert_eq!(spec.dims, ["M", "K", "N"]);
    assert_eq!(spec.threads, 128);
    assert!(!quickstart::gemm_relu::source(Target::Cpu).is_empty());
    assert!(!quickstart::gemm_relu::source(Target::Cuda).is_empty());
    assert!(!quickstart::gemm_relu::ir().is_empty());
}

#[test]
fn explicit_cpu_stream() -> TestResult {
    let stream = dev().default_stream()?;
    let n = 777;
    let a = Tensor::from_vec(random_vec::<f32>(n, 1, -1.0, 1.0), &[n], dev())?;
    let b = Tensor::from_vec(random_vec::<f32>(n, 2, -1.0, 1.0), &[n], dev())?;
    let mut c = Tensor::full(&[n], f32::NAN, dev())?;
    vecadd_a::on(&stream).launch(&a, &b, &mut c)?;
    stream.synchronize()?;
    let want: Vec<f64> = host(&a)
        .iter()
        .zip(host(&b))
        .map(|(x, y)| round_to::<f32>(x + y))
        .collect();
    check("vecadd on an explicit dev() stream", &c, &want, 0.0, 0.0);
    Ok(())
}
