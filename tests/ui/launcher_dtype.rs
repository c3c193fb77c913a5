use tile::prelude::*;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn scale(a: Tensor<f16, (N,)>, c: TensorMut<f16, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] * 2.0;
        }
    });
}

#[allow(dead_code)]
fn call(a: &Tensor<f32>, c: &mut Tensor<f16>) -> Result<(), tile::Error> {
    scale(a, c)
}

fn main() {}
