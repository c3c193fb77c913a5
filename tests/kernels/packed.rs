//! Packed pairs (`f16x2`, `bf16x2`): two halves in one register, computed
//! half by half with one paired instruction on CUDA (`HFMA2`, ..) and half by
//! half in float, each result rounded to the half's type, on the CPU.

use super::*;

/// On pairs `(a[2i], a[2i + 1])`, .. : `r = fma(a, b, c) - a * 2 + max(a, b)
/// / s` and `y = (high(r), low(r))` (the halves swapped); generic over the
/// half's dtype (a value of it stands in both halves of a pair).
#[tile::kernel(dtype = [f16, bf16], block_n = 64, threads = 64)]
pub fn pair_ops(
    a: Tensor<dtype, (N,)>,
    b: Tensor<dtype, (N,)>,
    c: Tensor<dtype, (N,)>,
    s: f32,
    y: TensorMut<dtype, (N,)>,
) {
    T::kernel(T::ceildiv(N, 2 * block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let g = 2 * (bx * block_n + i);
            let pa = T::pack2(a[g], a[g + 1]);
            let pb = T::pack2(b[g], b[g + 1]);
            let pc = T::pack2(c[g], c[g + 1]);
            let r = T::fma(pa, pb, pc) - pa * 2.0 + T::max(pa, pb) / (s as dtype);
            y[g] = T::high(r);
            y[g + 1] = T::low(r);
        }
    });
}

/// 4-bit weights as W4A16 kernels dequantize them: nibbles `t` and `t + 4`
/// of a word masked into the mantissas of a pair of 1024 (`0x6400`), less
/// `1024 + 8`, are `q - 8` exactly; times a pair of `x`, summed in the pair.
#[tile::kernel(block_n = 64, threads = 64)]
pub fn nibble_dot(w: Tensor<u32, (N,)>, x: Tensor<f16, (K8,)>, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let xp = T::alloc_local::<f16x2>([4]);
        for t in T::unroll(4) {
            xp[t] = T::pack2(x[t], x[t + 4]);
        }
        for i in T::parallel(block_n) {
            let word = w[bx * block_n + i];
            let mut acc = T::splat::<f16x2>(0.0);
            for t in T::unroll(4) {
                let bits = ((word >> (4 * t)) & 0x000f000fu32) | 0x64006400u32;
                let q = T::bitcast::<f16x2>(bits) - 1032.0;
                acc = T::fma(q, xp[t], acc);
            }
            y[bx * block_n + i] = T::low(acc) as f32 + T::high(acc) as f32;
        }
    });
}

/// `v` rounded to the half's type (`bf` for bf16).
fn round(v: f64, bf: bool) -> f64 {
    if bf {
        bf16::from_f64(v).to_f64()
    } else {
        f16::from_f64(v).to_f64()
    }
}

fn pair_ops_ref(a: &[f64], b: &[f64], c: &[f64], s: f64, bf: bool) -> Vec<f64> {
    let r = |v: f64| round(v, bf);
    let sp = r(s);
    let lane = |k: usize| {
        let f = r(a[k].mul_add(b[k], c[k]));
        let m = r(a[k] * 2.0);
        let d = r(a[k].max(b[k]) / sp);
        r(r(f - m) + d)
    };
    let mut y = vec![0.0; a.len()];
    for g in (0..a.len()).step_by(2) {
        y[g] = lane(g + 1);
        y[g + 1] = lane(g);
    }
    y
}

#[test]
fn pairs_compute_half_by_half() -> TestResult {
    for (k, &n) in [2usize, 128, 130, 1000].iter().enumerate() {
        let seed = 1500 + 10 * k as u64;
        let a = random_tensor::<f16>(&[n], seed, dev())?;
        let b = random_tensor::<f16>(&[n], seed + 1, dev())?;
        let c = random_tensor::<f16>(&[n], seed + 2, dev())?;
        let want = pair_ops_ref(&host(&a), &host(&b), &host(&c), 0.75, false);
        let mut y = Tensor::full(&[n], f16::NAN, dev())?;
        pair_ops(&a, &b, &c, 0.75, &mut y)?;
        // Each op rounds to f16 as the reference does; the device's fused
        // and unfused forms may differ by a rounding step.
        check(&format!("pair_ops f16 n={n}"), &y, &want, 4e-3, 4e-3);

        let a = random_tensor::<bf16>(&[n], seed + 3, dev())?;
        let b = random_tensor::<bf16>(&[n], seed + 4, dev())?;
        let c = random_tensor::<bf16>(&[n], seed + 5, dev())?;
        let want = pair_ops_ref(&host(&a), &host(&b), &host(&c), 0.75, true);
        let mut y = Tensor::full(&[n], bf16::NAN, dev())?;
        pair_ops(&a, &b, &c, 0.75, &mut y)?;
        check(&format!("pair_ops bf16 n={n}"), &y, &want, 3e-2, 3e-2);
    }
    Ok(())
}

#[test]
fn nibbles_dequantize_exactly_in_pairs() -> TestResult {
    let n = 1000;
    let mut rng = tile::testing::Rng::new(1550);
    let words: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    // Eight x with few bits each: every product and sum is exact in f16.
    let xs = [0.5f32, -1.0, 0.25, 2.0, -0.75, 1.5, 0.125, -0.5];
    let xv: Vec<f16> = xs.iter().map(|&v| f16::from_f32(v)).collect();
    let w = Tensor::from_slice(&words, &[n], dev())?;
    let x = Tensor::from_slice(&xv, &[8], dev())?;
    let want: Vec<f64> = words
        .iter()
        .map(|&wd| {
            (0..8)
                .map(|t| (((wd >> (4 * t)) & 15) as f64 - 8.0) * xs[t] as f64)
                .sum()
        })
        .collect();
    let mut y = Tensor::full(&[n], f32::NAN, dev())?;
    nibble_dot(&w, &x, &mut y)?;
    check("nibble_dot", &y, &want, 0.0, 0.0);
    Ok(())
}
