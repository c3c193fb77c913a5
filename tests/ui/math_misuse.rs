use tile::prelude::*;

// Each math function and bit operation used wrongly: a wrong argument count,
// an integer where a float is needed, a float where an integer is needed.
#[tile::kernel(block_n = 64, threads = 64)]
pub fn math_misuse(
    x: Tensor<f32, (N,)>,
    k: Tensor<i32, (N,)>,
    m: Tensor<f32, (N, N)>,
    y: TensorMut<f32, (N,)>,
    z: TensorMut<i32, (N,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for j in T::parallel(block_n) {
            let i = bx * block_n + j;
            let v = x[i];
            let n = k[i];
            y[i] = T::erf(n) + T::sin(n) + T::cos(v, v) + T::pow(v) + T::pow(v, n);
            y[i] = T::floor(n) + T::ceil(n) + T::round(n) + T::trunc(n) + T::fma(v, v);
            y[i] = T::fma(v, v, n) + T::log1p(n) + T::expm1() + T::clamp(v, 0.0);
            z[i] = (n & 3) | (n << 2);
            z[i] = (v & 1.0) as i32 + (n ^ v) as i32 + (v << 1) as i32 + (1 << 40);
            y[i] = v.exp(1.0) + v.tan() + v.sin::<f32>() + n.ceildiv(2) as f32;
            y[i] = m[i][j];
            y[i] = T::bitcast::<f64>(v) as f32;
            y[i] = T::bitcast(v);
            z[i] = T::bitcast::<i32>(v > 0.0);
        }
    });
}

fn main() {}
