use tile::prelude::*;

const BLOCK: i32 = 256;

#[tile::kernel(block_n = BLOCK, threads = 128)]
pub fn non_literal_param(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, 256), threads, |bx| {
        for i in T::parallel(256) {
            c[bx * 256 + i] = a[bx * 256 + i];
        }
    });
}

fn main() {
    let _ = BLOCK;
}
