use tile::prelude::*;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn many_errors(a: Tensor<f32, (N,)>, c: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let s = T::alloc_shared::<f32>([N]);
        for i in T::parallel(block_n) {
            a[bx * block_n + i] = 0.0;
            c[bx * block_n + i] = a[bx * block_n + i];
            c[bx * block_n + i] = offset;
        }
        T::barrier();
    });
}

fn main() {}
