use tile::prelude::*;

// A split K runs on 2, 4 or 8 blocks, known at compile time; a cluster's
// blocks either split the loop or share tile copies, not both.
#[tile::kernel(n = 64, threads = 64)]
pub fn split_over_three(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, n), threads, |bx| {
        T::use_split_k(3);
        for i in T::parallel(n) {
            c[bx * n + i] = a[bx * n + i];
        }
    });
}

#[tile::kernel(n = 64, threads = 64)]
pub fn split_and_share(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, n), threads, |bx| {
        T::use_cluster(2);
        T::use_split_k(2);
        for i in T::parallel(n) {
            c[bx * n + i] = a[bx * n + i];
        }
    });
}

fn main() {}
