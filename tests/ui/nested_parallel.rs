use tile::prelude::*;

#[tile::kernel(block_m = 16, block_n = 16, threads = 128)]
pub fn nested_parallel(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx, by| {
        for i in T::parallel(block_m) {
            for j in T::parallel(block_n) {
                c[(by * block_m + i, bx * block_n + j)] = a[(by * block_m + i, bx * block_n + j)];
            }
        }
    });
}

fn main() {}
