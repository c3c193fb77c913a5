// A scalar parameter of every kind the ABI passes differently (float, half,
// 64-bit integer, bool): after the dims, by value on CUDA and through the
// `dims` array on the CPU. The body uses the math functions with more than
// one operand and the integer bit operations.
#[tile::kernel(block_n = 256, threads = 128)]
pub fn scaled_bits(
    x: Tensor<f32, (N,)>,
    temp: f32,
    bias: f16,
    mask: i64,
    flip: bool,
    k: Tensor<i64, (N,)>,
    y: TensorMut<f32, (N,)>,
    z: TensorMut<i64, (N,)>,
) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let v = x[bx * block_n + i] * temp;
            y[bx * block_n + i] = T::fma(v, T::erf(v), bias as f32) + T::pow(T::abs(v), 0.5);
            let w = k[bx * block_n + i];
            z[bx * block_n + i] = T::if_then_else(flip, !w, (w & mask) << 3 | w >> 2);
        }
    });
}
