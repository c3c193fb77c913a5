use tile::prelude::*;

// Clusters are of 1, 2, 4 or 8 blocks, known at compile time; like the
// swizzle, `T::use_cluster` opens the kernel body.
#[tile::kernel(n = 64, threads = 64)]
pub fn cluster_of_three(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, n), threads, |bx| {
        T::use_cluster(3);
        for i in T::parallel(n) {
            c[bx * n + i] = a[bx * n + i];
        }
    });
}

#[tile::kernel(n = 64, threads = 64)]
pub fn cluster_late(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, n), threads, |bx| {
        let x = bx * n;
        T::use_cluster(2);
        for i in T::parallel(n) {
            c[x + i] = a[x + i];
        }
    });
}

#[tile::kernel(n = 64, threads = 64)]
pub fn cluster_of_sixteen(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, n), threads, |bx| {
        T::use_cluster(16);
        for i in T::parallel(n) {
            c[bx * n + i] = a[bx * n + i];
        }
    });
}

fn main() {}
