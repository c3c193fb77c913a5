use tile::prelude::*;

// Mistakes in `default(..)`, the marked default of a variant space.

// A default naming a parameter the attribute does not have.
#[tile::kernel(block_m = [64, 128], threads = [128, 256], default(block_n = 64))]
pub fn unknown_name(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// A default naming a value that is not listed.
#[tile::kernel(block_m = [64, 128], threads = [128, 256], default(block_m = 96))]
pub fn not_listed(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// A default the filter drops.
#[tile::kernel(block_m = [64, 128], threads = [128, 256], filter = block_m < threads, default(block_m = 128, threads = 128))]
pub fn filtered_out(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// A default naming a parameter with one value.
#[tile::kernel(block_m = [64, 128], threads = 128, default(threads = 128))]
pub fn one_value(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// A default that is not a literal.
#[tile::kernel(block_m = [64, 128], threads = [128, 256], default(block_m = 2 * 64))]
pub fn not_a_literal(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// A default without a variant space.
#[tile::kernel(block_m = 64, threads = 128, default(block_m = 64))]
pub fn no_variants(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// A default written as a value.
#[tile::kernel(block_m = [64, 128], threads = [128, 256], default = 64)]
pub fn as_a_value(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

fn main() {}
