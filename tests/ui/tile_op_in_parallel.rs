use tile::prelude::*;

// A tile op inside `T::parallel` would run once per element; an atomic add
// of a dtype CUDA cannot add atomically has no CUDA form.
#[tile::kernel(block_m = 32, threads = 32)]
pub fn tile_op_in_parallel(a: Tensor<f32, (M,)>, half: TensorMut<f32, (M,)>, n: TensorMut<u8, (M,)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            T::fill(half, 0.0);
            half[bx * block_m + i] = a[bx * block_m + i];
            T::atomic_add(n[bx * block_m + i], 1u8);
        }
    });
}

fn main() {}
