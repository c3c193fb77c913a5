//! The math functions beyond exp/log (erf, sin, cos, pow, floor, ceil, round,
//! trunc, fma, log1p, expm1, clamp), method syntax, and the integer bit
//! operations, against host references.

use super::*;

/// One column per function.
#[tile::kernel(block_n = 64, cols = 16, threads = 64)]
pub fn more_math(x: Tensor<f32, (N,)>, y: Tensor<f32, (N,)>, out: TensorMut<f32, (N, cols)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for j in T::parallel(block_n) {
            let i = bx * block_n + j;
            let v = x[i] * 3.0;
            let w = y[i];
            out[(i, 0)] = T::erf(v);
            out[(i, 1)] = T::sin(v);
            out[(i, 2)] = T::cos(v);
            out[(i, 3)] = T::pow(T::abs(v), w * 2.0);
            out[(i, 4)] = T::floor(v);
            out[(i, 5)] = T::ceil(v);
            out[(i, 6)] = T::round(v);
            out[(i, 7)] = T::trunc(v);
            out[(i, 8)] = T::fma(v, w, 0.5);
            out[(i, 9)] = T::log1p(T::abs(w));
            out[(i, 10)] = T::expm1(w);
            out[(i, 11)] = T::clamp(v, -1.0, 2.0);
            // Method syntax, Rust's names included.
            out[(i, 12)] = v.exp() + w.max(0.0);
            out[(i, 13)] = v.abs().powf(1.5) + v.mul_add(2.0, 1.0);
            out[(i, 14)] = w.ln_1p() + v.sin().min(w);
            // Rounding of half-way cases: away from zero.
            out[(i, 15)] = T::round(T::floor(v) + 0.5);
        }
    });
}

/// The same in f64 (the double-precision library calls) and f16 (computed in
/// float, rounded at the store).
#[tile::kernel(block_n = 64, threads = 64)]
pub fn more_math_wide(
    x: Tensor<f64, (N,)>,
    h: Tensor<f16, (N,)>,
    d: TensorMut<f64, (N,)>,
    e: TensorMut<f16, (N,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for j in T::parallel(block_n) {
            let i = bx * block_n + j;
            let v = x[i];
            d[i] = T::erf(v)
                + T::pow(T::abs(v), 0.5)
                + T::fma(v, v, 1.0)
                + T::trunc(v * 10.0)
                + T::expm1(v);
            e[i] = T::sin(h[i]) + T::clamp(h[i], -0.25, 0.25) + h[i].floor();
        }
    });
}

/// `& | ^ << >> !` and their compound assignments, on 32-bit, 8-bit and
/// 64-bit integers.
#[tile::kernel(block_n = 64, threads = 64)]
#[allow(clippy::too_many_arguments)]
pub fn bit_ops(
    a: Tensor<i32, (N,)>,
    b: Tensor<u8, (N,)>,
    c: Tensor<i64, (N,)>,
    q: Tensor<u64, (N,)>,
    s: Tensor<i32, (N,)>,
    oa: TensorMut<i32, (N,)>,
    ob: TensorMut<u8, (N,)>,
    oc: TensorMut<i64, (N,)>,
    oq: TensorMut<u64, (N,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for j in T::parallel(block_n) {
            let i = bx * block_n + j;
            let x = a[i];
            let k = s[i];
            let mut m = (x & 0xff0f) | (x >> k) ^ !x;
            m ^= (x & 0xfff) << 3 & 0x7fff;
            m >>= 1;
            // `c | (a & b)`: one lop3 on CUDA (`tl::and_or`), as `(a & b) | c` above.
            oa[i] = m ^ (k | (x & 0x0ff0));
            let u = b[i];
            ob[i] = (!u ^ (u << 2) | (u >> k)) as u8;
            let w = c[i];
            oc[i] = (w >> (k + 7)) ^ !w & (1i64 << 40) | (w & 0xffff) << 20;
            let p = q[i];
            oq[i] = (p >> 3) ^ !p | (p << k);
        }
    });
}

/// erf by its series (enough terms for |x| <= 3 in f64).
fn erf(x: f64) -> f64 {
    let (mut sum, mut term) = (0.0, x);
    for n in 0..80 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn math_functions() -> TestResult {
    for &n in &[64usize, 100] {
        let x = random_tensor::<f32>(&[n], 2400 + n as u64, dev())?;
        let y = random_tensor::<f32>(&[n], 2500 + n as u64, dev())?;
        let mut out = Tensor::full(&[n, 16], f32::NAN, dev())?;
        more_math(&x, &y, &mut out)?;
        let (xv, yv) = (host(&x), host(&y));
        let mut want = Vec::new();
        for i in 0..n {
            let v = (xv[i] as f32 * 3.0) as f64;
            let w = yv[i];
            let vf = v as f32;
            want.extend([
                erf(v),
                v.sin(),
                v.cos(),
                v.abs().powf((w as f32 * 2.0) as f64),
                v.floor(),
                v.ceil(),
                v.round(),
                v.trunc(),
                v.mul_add(w, 0.5),
                w.abs().ln_1p(),
                w.exp_m1(),
                v.clamp(-1.0, 2.0),
                (vf.exp() + (w as f32).max(0.0)) as f64,
                (vf.abs().powf(1.5) + vf.mul_add(2.0, 1.0)) as f64,
                ((w as f32).ln_1p() + vf.sin().min(w as f32)) as f64,
                (vf.floor() + 0.5).round() as f64,
            ]);
        }
        check("more_math", &out, &want, 2e-6, 2e-5);
    }
    Ok(())
}

#[test]
fn math_functions_in_f64_and_f16() -> TestResult {
    let n = 100;
    let x = random_tensor::<f64>(&[n], 2600, dev())?;
    let h = random_tensor::<f16>(&[n], 2700, dev())?;
    let mut d = Tensor::full(&[n], f64::NAN, dev())?;
    let mut e = Tensor::full(&[n], f16::NAN, dev())?;
    more_math_wide(&x, &h, &mut d, &mut e)?;
    let want: Vec<f64> = host(&x)
        .iter()
        .map(|&v| erf(v) + v.abs().sqrt() + v.mul_add(v, 1.0) + (v * 10.0).trunc() + v.exp_m1())
        .collect();
    check("more_math_wide f64", &d, &want, 1e-12, 1e-12);
    let want: Vec<f64> = host(&h)
        .iter()
        .map(|&v| round_to::<f16>(v.sin() + v.clamp(-0.25, 0.25) + v.floor()))
        .collect();
    check("more_math_wide f16", &e, &want, 2e-3, 2e-3);
    Ok(())
}

#[test]
fn bit_operations() -> TestResult {
    let n = 200;
    let d = dev();
    let av = random_vec::<i32>(n, 2800, -2e9, 2e9);
    let bv = random_vec::<u8>(n, 2801, 0.0, 255.0);
    let cv = random_vec::<i64>(n, 2802, -9e18, 9e18);
    let qv = random_vec::<u64>(n, 2803, 0.0, 1.8e19);
    // Shift amounts in range for every operand (below 8 for the u8 shifts
    // too; `k + 7` for the 64-bit one).
    let sv: Vec<i32> = (0..n as i32).map(|i| i % 8).collect();
    let (a, c) = (
        Tensor::from_slice(&av, &[n], d)?,
        Tensor::from_slice(&cv, &[n], d)?,
    );
    let (b, q) = (
        Tensor::from_slice(&bv, &[n], d)?,
        Tensor::from_slice(&qv, &[n], d)?,
    );
    let s = Tensor::from_slice(&sv, &[n], d)?;
    let mut oa = Tensor::full(&[n], 0i32, d)?;
    let mut ob = Tensor::full(&[n], 0u8, d)?;
    let mut oc = Tensor::full(&[n], 0i64, d)?;
    let mut oq = Tensor::full(&[n], 0u64, d)?;
    bit_ops(&a, &b, &c, &q, &s, &mut oa, &mut ob, &mut oc, &mut oq)?;
    let mut wa = Vec::new();
    let (mut wb, mut wc, mut wq) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let (x, k) = (av[i], sv[i]);
        let mut m = (x & 0xff0f) | (x >> k) ^ !x;
        m ^= ((x & 0xfff) << 3) & 0x7fff;
        m >>= 1;
        wa.push(m ^ (k | (x & 0x0ff0)));
        // u8 computes in i32 (C's promotion), then the store wraps.
        let u = bv[i] as i32;
        wb.push((!u ^ (u << 2) | (u >> k)) as u8);
        let w = cv[i];
        wc.push((w >> (k + 7)) ^ !w & (1i64 << 40) | (w & 0xffff) << 20);
        let p = qv[i];
        wq.push((p >> 3) ^ !p | (p << k));
    }
    check_exact("bit_ops i32", &oa, &wa);
    check_exact("bit_ops u8", &ob, &wb);
    check_exact("bit_ops i64", &oc, &wc);
    check_exact("bit_ops u64", &oq, &wq);
    Ok(())
}

/// `T::bitcast` both ways between floats and integers of each size: f32 ↔
/// u32, f16 and bf16 ↔ u16, i64 → f64, and the int4 dequantization trick
/// (`q | 0x4b000000` read as f32 is `2^23 + q`).
#[tile::kernel(block_n = 64, cols = 4, threads = 64)]
pub fn bitcasts(
    x: Tensor<f32, (N,)>,
    h: Tensor<f16, (N,)>,
    b: Tensor<bf16, (N,)>,
    w: Tensor<u32, (N,)>,
    xb: TensorMut<u32, (N,)>,
    hb: TensorMut<u16, (N,)>,
    bb: TensorMut<u16, (N,)>,
    back: TensorMut<f32, (N, cols)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for j in T::parallel(block_n) {
            let i = bx * block_n + j;
            let xbits = T::bitcast::<u32>(x[i]);
            xb[i] = xbits;
            let hbits = T::bitcast::<u16>(h[i]);
            hb[i] = hbits;
            bb[i] = T::bitcast::<u16>(b[i]);
            // Back again, with a sign flip on the bits (the top bit).
            back[(i, 0)] = T::bitcast::<f32>(xbits ^ 0x80000000u32);
            back[(i, 1)] = T::bitcast::<f16>(hbits) as f32;
            back[(i, 2)] = T::bitcast::<f32>((w[i] & 15) | 0x4b000000u32) - 8388616.0;
            back[(i, 3)] = T::bitcast::<f64>(T::bitcast::<i64>(x[i] as f64)) as f32;
        }
    });
}

#[test]
fn bitcast_reads_bits_as_another_dtype() -> TestResult {
    let n = 100;
    let d = dev();
    let x = random_tensor::<f32>(&[n], 2900, d)?;
    let h = random_tensor::<f16>(&[n], 2901, d)?;
    let b = random_tensor::<bf16>(&[n], 2902, d)?;
    let wv = random_vec::<u32>(n, 2903, 0.0, 4.0e9);
    let w = Tensor::from_slice(&wv, &[n], d)?;
    let mut xb = Tensor::full(&[n], 0u32, d)?;
    let mut hb = Tensor::full(&[n], 0u16, d)?;
    let mut bb = Tensor::full(&[n], 0u16, d)?;
    let mut back = Tensor::full(&[n, 4], f32::NAN, d)?;
    bitcasts(&x, &h, &b, &w, &mut xb, &mut hb, &mut bb, &mut back)?;
    let (xv, hv, bv) = (x.to_vec()?, h.to_vec()?, b.to_vec()?);
    check_exact(
        "bitcast f32 -> u32",
        &xb,
        &xv.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
    );
    check_exact(
        "bitcast f16 -> u16",
        &hb,
        &hv.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
    );
    check_exact(
        "bitcast bf16 -> u16",
        &bb,
        &bv.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
    );
    let mut want = Vec::new();
    for i in 0..n {
        want.extend([
            -xv[i] as f64,
            hv[i].to_f64(),
            (wv[i] & 15) as f64 - 8.0,
            xv[i] as f64,
        ]);
    }
    check("bitcast back", &back, &want, 0.0, 0.0);
    Ok(())
}
