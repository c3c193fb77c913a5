use tile::prelude::*;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn float_into_int(a: Tensor<f32, (N,)>, c: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] * 2.0;
        }
    });
}

fn main() {}
