use tile::prelude::*;

#[tile::kernel(threads = 128)]
pub fn parallel_dynamic(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(1, threads, |bx| {
        for i in T::parallel(N) {
            c[i] = a[i];
        }
    });
}

fn main() {}
