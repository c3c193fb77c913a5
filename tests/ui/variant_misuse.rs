use tile::prelude::*;

// Mistakes in a variant list.
#[tile::kernel(block_n = [64, 64], threads = [32, true], wide = [1, f16])]
pub fn lists(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i];
        }
    });
}

// A filter that names something the attribute does not have.
#[tile::kernel(block_n = [64, 128], threads = 32, filter = block_n >= blocks)]
pub fn unknown_name(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i];
        }
    });
}

// A filter that keeps nothing.
#[tile::kernel(block_n = [64, 128], threads = 32, filter = block_n < threads)]
pub fn keeps_nothing(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i];
        }
    });
}

// A filter that is not a condition.
#[tile::kernel(block_n = [64, 128], threads = 32, filter = block_n * 2)]
pub fn not_a_condition(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i];
        }
    });
}

// A filter without a variant space.
#[tile::kernel(block_n = 64, threads = 32, filter = block_n > 1)]
pub fn nothing_to_filter(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i];
        }
    });
}

fn main() {}
