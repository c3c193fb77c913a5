use tile::prelude::*;

// Block rasterization needs a 2-D grid.
#[tile::kernel(n = 64, threads = 64)]
pub fn swizzle_1d(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, n), threads, |bx| {
        T::use_swizzle(4);
        for i in T::parallel(n) {
            c[bx * n + i] = a[bx * n + i];
        }
    });
}

fn main() {}
