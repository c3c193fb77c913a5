//! The fp8 dtypes: conversions round to nearest even once and saturate (CUDA's
//! satfinite conversion), f8 values compute in f32, constants fold to what the
//! device computes. The host side (`tile::f8e4m3`, `tile::f8e5m2`) is the
//! reference, so this also checks the backends' conversions against it bit
//! for bit.

use super::*;

#[tile::kernel(block_n = 128, threads = 128)]
pub fn f8_convert(
    x: Tensor<f32, (N,)>,
    y: Tensor<f64, (N,)>,
    e4: TensorMut<f8e4m3, (N,)>,
    e5: TensorMut<f8e5m2, (N,)>,
    d4: TensorMut<f8e4m3, (N,)>,
    d5: TensorMut<f8e5m2, (N,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for j in T::parallel(block_n) {
            let i = bx * block_n + j;
            e4[i] = x[i] as f8e4m3;
            e5[i] = x[i] as f8e5m2;
            d4[i] = y[i] as f8e4m3;
            d5[i] = y[i] as f8e5m2;
        }
    });
}

/// Reads f8 back, computes with it (in f32), and folds constant casts.
#[tile::kernel(block_n = 128, threads = 128)]
pub fn f8_compute(
    a: Tensor<f8e4m3, (N,)>,
    b: Tensor<f8e5m2, (N,)>,
    s: TensorMut<f32, (N,)>,
    h: TensorMut<f16, (N,)>,
    q: TensorMut<i32, (N,)>,
    c: TensorMut<f32, (C,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for j in T::parallel(block_n) {
            let i = bx * block_n + j;
            s[i] = a[i] * 0.5 + b[i] - T::max(a[i], b[i]);
            h[i] = a[i] as f16;
            q[i] = b[i] as i32;
        }
        if bx == 0 {
            // Folded by the compiler: a tie (0.3 rounds between codes), a
            // saturation, a value through f64, the largest finite values.
            c[0] = (0.3 as f8e4m3) as f32;
            c[1] = (1000.0 as f8e4m3) as f32 + (70000.0 as f8e5m2) as f32;
            c[2] = (1.0625f64 as f8e4m3) as f32;
            c[3] = T::max_value::<f8e4m3>() as f32 + T::max_value::<f8e5m2>() as f32;
        }
    });
}

/// Every code's value, the midpoints between neighbours (ties) and the f32s
/// just beside them, values past the largest finite one, infinities, NaN,
/// zeros, tiny values, and random values over the whole range.
fn probe_values() -> Vec<f64> {
    let mut v = Vec::new();
    for code in 0..=255u8 {
        for x in [
            f8e4m3::from_bits(code).to_f64(),
            f8e5m2::from_bits(code).to_f64(),
        ] {
            if x.is_finite() {
                v.push(x);
            }
        }
    }
    let mut sorted: Vec<f64> = v.clone();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    for w in sorted.windows(2) {
        let mid = (w[0] + w[1]) / 2.0;
        let m = mid as f32;
        v.extend([
            mid,
            f64::from(f32::from_bits(m.to_bits() + 1)),
            f64::from(f32::from_bits(m.to_bits().wrapping_sub(1))),
        ]);
    }
    v.extend([
        464.0,
        465.0,
        480.0,
        1e6,
        61440.0,
        61439.0,
        1e30,
        f64::INFINITY,
        f64::NAN,
    ]);
    v.extend([0.0, -0.0, 1e-3, 2f64.powi(-10), 2f64.powi(-17), 1e-30]);
    let mut rng = tile::testing::Rng::new(0xf8);
    for _ in 0..2000 {
        let e = rng.next_f64() * 40.0 - 20.0;
        v.push((rng.next_f64() * 2.0 - 1.0) * 2f64.powf(e));
    }
    let neg: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v
}

/// Bits equal, or both NaN (a NaN's payload is not specified).
fn same<const E5: bool>(got: u8, want: u8) -> bool {
    let nan = |b: u8| {
        if E5 {
            f8e5m2::from_bits(b).is_nan()
        } else {
            f8e4m3::from_bits(b).is_nan()
        }
    };
    got == want || (nan(got) && nan(want))
}

#[test]
fn f8_conversions_round_once_and_saturate() -> TestResult {
    let vals = probe_values();
    let n = vals.len();
    let x = Tensor::from_slice(
        &vals.iter().map(|&v| v as f32).collect::<Vec<_>>(),
        &[n],
        dev(),
    )?;
    let y = Tensor::from_slice(&vals, &[n], dev())?;
    let poison4 = f8e4m3::from_bits(0x55);
    let poison5 = f8e5m2::from_bits(0x55);
    let mut e4 = Tensor::full(&[n], poison4, dev())?;
    let mut e5 = Tensor::full(&[n], poison5, dev())?;
    let mut d4 = Tensor::full(&[n], poison4, dev())?;
    let mut d5 = Tensor::full(&[n], poison5, dev())?;
    f8_convert(&x, &y, &mut e4, &mut e5, &mut d4, &mut d5)?;
    let (e4, e5, d4, d5) = (e4.to_vec()?, e5.to_vec()?, d4.to_vec()?, d5.to_vec()?);
    let mut bad = Vec::new();
    for (i, &v) in vals.iter().enumerate() {
        let f = f64::from(v as f32);
        let checks = [
            (
                "f32 -> e4m3",
                e4[i].to_bits(),
                f8e4m3::from_f64(f).to_bits(),
                false,
            ),
            (
                "f32 -> e5m2",
                e5[i].to_bits(),
                f8e5m2::from_f64(f).to_bits(),
                true,
            ),
            (
                "f64 -> e4m3",
                d4[i].to_bits(),
                f8e4m3::from_f64(v).to_bits(),
                false,
            ),
            (
                "f64 -> e5m2",
                d5[i].to_bits(),
                f8e5m2::from_f64(v).to_bits(),
                true,
            ),
        ];
        for (what, got, want, e5m2) in checks {
            let ok = if e5m2 {
                same::<true>(got, want)
            } else {
                same::<false>(got, want)
            };
            if !ok {
                bad.push(format!("{what} of {v:e}: got {got:#04x}, want {want:#04x}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} conversions differ:\n{}",
        bad.len(),
        4 * n,
        bad[..bad.len().min(20)].join("\n")
    );
    Ok(())
}

#[test]
fn f8_values_compute_in_f32_and_constants_fold_like_the_device() -> TestResult {
    for n in [128usize, 1000, 1] {
        let a = random_tensor::<f8e4m3>(&[n], 1700 + n as u64, dev())?;
        let b = random_tensor::<f8e5m2>(&[n], 1800 + n as u64, dev())?;
        let mut s = Tensor::full(&[n], f32::NAN, dev())?;
        let mut h = Tensor::full(&[n], f16::NAN, dev())?;
        let mut q = Tensor::full(&[n], i32::MIN, dev())?;
        let mut c = Tensor::full(&[4], f32::NAN, dev())?;
        f8_compute(&a, &b, &mut s, &mut h, &mut q, &mut c)?;
        let (av, bv) = (a.to_vec()?, b.to_vec()?);
        let ws: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(x, y)| {
                let (x, y) = (x.to_f32(), y.to_f32());
                f64::from(x * 0.5 + y - x.max(y))
            })
            .collect();
        let wh: Vec<f64> = av.iter().map(|x| x.to_f64()).collect();
        let wq: Vec<i32> = bv.iter().map(|y| y.to_f32() as i32).collect();
        check(&format!("f8 arithmetic n={n}"), &s, &ws, 0.0, 0.0);
        check(&format!("f8 -> f16 n={n}"), &h, &wh, 0.0, 0.0);
        check_exact(&format!("f8 -> i32 n={n}"), &q, &wq);
        let wc = [
            f8e4m3::from_f64(f64::from(0.3f32)).to_f64(),
            448.0 + 57344.0,
            f8e4m3::from_f64(1.0625).to_f64(),
            448.0 + 57344.0,
        ];
        check("f8 constants", &c, &wc, 0.0, 0.0);
    }
    Ok(())
}
