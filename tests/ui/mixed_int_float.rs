use tile::prelude::*;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn mixed_int_float(a: Tensor<f32, (N,)>, b: Tensor<i32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

fn main() {}
