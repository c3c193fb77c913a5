use tile::prelude::*;

// The launcher allocates `out` from the inputs' shapes, so every dynamic dim
// of an output must be carried by an input.
#[tile::kernel(threads = 64)]
pub fn widen(a: Tensor<f32, (N,)>, out: Output<f32, (N, K)>) {
    T::kernel(T::ceildiv(N, 64), threads, |bx| {
        for i in T::parallel(64) {
            out[(bx * 64 + i, 0)] = a[bx * 64 + i];
        }
    });
}

fn main() {}
