use tile::prelude::*;

// Constant arithmetic the device would get wrong or leave undefined.
#[tile::kernel(threads = 128)]
pub fn folds(a: Tensor<i32, (N,)>, c: TensorMut<i32, (N,)>, f: TensorMut<f32, (N,)>) {
    T::kernel(1, threads, |bx| {
        c[0] = 2147483647 + 1;
        c[1] = a[1] / 0;
        c[2] = (-5u32) as i32;
        f[0] = 1e39f32;
        f[1] = 70000.0f16 as f32;
    });
}

fn main() {}
