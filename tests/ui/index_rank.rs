use tile::prelude::*;

#[tile::kernel(block_m = 16, block_n = 16, threads = 128)]
pub fn index_rank(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx, by| {
        for (i, j) in T::parallel([block_m, block_n]) {
            c[(by * block_m + i, bx * block_n + j)] = a[by * block_m + i];
        }
    });
}

fn main() {}
