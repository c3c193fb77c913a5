use tile::prelude::*;

// `T::unroll` with three bounds, `T::unroll` not used as a loop, and
// `T::if_then_else` without its else value: each is reported at its span.
#[tile::kernel(block_n = 256, threads = 128)]
pub fn unroll_select_misuse(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let mut s = 0.0f32;
            for k in T::unroll(0, 4, 1) {
                s = s + a[bx * block_n + i];
            }
            T::unroll(4);
            c[bx * block_n + i] = T::if_then_else(s > 0.0f32, s);
        }
    });
}

fn main() {}
