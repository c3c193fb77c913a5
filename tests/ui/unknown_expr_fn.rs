use tile::prelude::*;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn unknown_expr_fn(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = T::cosh(a[bx * block_n + i]);
        }
    });
}

fn main() {}
