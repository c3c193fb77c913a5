//! Consts of the kernel's module and `#[tile::func]` helpers, inlined.

use super::*;

const SCALE: f32 = 0.5;
const TWICE: f32 = SCALE * 2.0 + 0.25;
const SHIFT: i32 = 3;
const BIG: i64 = 1 << 40;
const FLAG: bool = true;
const BLOCK: i32 = 64;

/// GELU, tanh form.
#[tile::func]
fn gelu(x: f32) -> f32 {
    let c = 0.797_884_6;
    let inner = c * (x + 0.044715 * x * x * x);
    0.5 * x * (1.0 + T::tanh(inner))
}

/// A helper calling a helper.
#[tile::func]
fn scaled_gelu(x: f32, s: f32) -> f32 {
    gelu(x) * s
}

#[tile::func]
fn wrap(i: i32, n: i32) -> i32 {
    T::if_then_else(i < n, i, i - n)
}

#[tile::kernel(block_n = 64, threads = 64)]
pub fn gelu_consts(x: Tensor<f32, (N,)>, y: TensorMut<f32, (N,)>, z: TensorMut<i64, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(BLOCK) {
            let k = bx * block_n + i;
            let v = x[k];
            y[k] = scaled_gelu(v, SCALE) + T::if_then_else(FLAG, TWICE, 0.0);
            z[k] = BIG + (wrap(k, 100) << SHIFT) as i64;
        }
    });
}

fn gelu_host(x: f32) -> f32 {
    let c = 0.797_884_6f32;
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

#[test]
fn consts_and_helpers_are_inlined() -> TestResult {
    for &n in &[64usize, 150] {
        let x = random_tensor::<f32>(&[n], 2900 + n as u64, dev())?;
        let mut y = Tensor::full(&[n], f32::NAN, dev())?;
        let mut z = Tensor::full(&[n], 0i64, dev())?;
        gelu_consts(&x, &mut y, &mut z)?;
        let want: Vec<f64> = host(&x)
            .iter()
            .map(|&v| (gelu_host(v as f32) * SCALE + TWICE) as f64)
            .collect();
        check("gelu_consts y", &y, &want, 1e-6, 1e-5);
        let want: Vec<i64> = (0..n as i32)
            .map(|k| BIG + (((if k < 100 { k } else { k - 100 }) << SHIFT) as i64))
            .collect();
        check_exact("gelu_consts z", &z, &want);
    }
    // The values are in the script (and so in the cache key).
    let ir = gelu_consts::ir();
    assert!(
        ir.contains("T.float32(0.5)") && ir.contains("T.int64(1099511627776)"),
        "{ir}"
    );
    Ok(())
}
