use tile::prelude::*;

// Clusters are of 1, 2, 4 or 8 blocks, known at compile time, 8 at most
// in two dims, which need a grid of two dims or three; like the swizzle,
// `T::use_cluster` opens the kernel body.
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

#[tile::kernel(n = 64, threads = 64)]
pub fn cluster_of_four_by_four(a: Tensor<f32, (N, N)>, c: TensorMut<f32, (N, N)>) {
    T::kernel([T::ceildiv(N, n), N], threads, |bx, by| {
        T::use_cluster(4, 4);
        for i in T::parallel(n) {
            c[(by, bx * n + i)] = a[(by, bx * n + i)];
        }
    });
}

#[tile::kernel(n = 64, threads = 64)]
pub fn cluster_rows_of_a_line(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, n), threads, |bx| {
        T::use_cluster(2, 2);
        for i in T::parallel(n) {
            c[bx * n + i] = a[bx * n + i];
        }
    });
}

fn main() {}
