use tile::prelude::*;

#[tile::kernel(block_m = 16, block_n = 16, threads = 128)]
pub fn closure_arity(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx| {
        for (i, j) in T::parallel([block_m, block_n]) {
            c[(i, bx * block_n + j)] = a[(i, bx * block_n + j)];
        }
    });
}

fn main() {}
