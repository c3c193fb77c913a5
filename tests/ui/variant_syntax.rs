use tile::prelude::*;

// Malformed filters and variant lists: each error is placed inside the attribute.

// A filter that does not parse: `for <` starts a closure's lifetimes.
#[tile::kernel(block_m = [64, 128], threads = [128, 256], filter = for < threads)]
pub fn for_closure(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// An empty filter.
#[tile::kernel(block_m = [64, 128], threads = [128, 256], filter = )]
pub fn empty(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// A comparison without its right side.
#[tile::kernel(block_m = [64, 128], threads = [128, 256], filter = block_m <)]
pub fn no_right_side(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// A sum without its right side.
#[tile::kernel(block_m = [64, 128], threads = [128, 256], filter = 3 +)]
pub fn unfinished_sum(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// A filter naming something that is not a parameter of the attribute.
#[tile::kernel(block_m = [64, 128], threads = [128, 256], filter = block_m <= nope)]
pub fn unknown_parameter(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// A variant list without its comma.
#[tile::kernel(block_m = [64 128], threads = 128)]
pub fn list_without_comma(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

// Two commas: the arguments before and after are still read.
#[tile::kernel(block_m = [64, 128], threads = [128, 256],, filter = block_m < threads)]
pub fn two_commas(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            c[bx * block_m + i] = a[bx * block_m + i];
        }
    });
}

fn main() {}
