use tile::prelude::*;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn dynamic_shared(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let a_s = T::alloc_shared::<f32>([N]);
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i];
        }
    });
}

fn main() {}
