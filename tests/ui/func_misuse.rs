use tile::prelude::*;

const LABEL: &str = "x";
const FROM_CALL: i32 = three();
const GOOD: f32 = 1.5;

const fn three() -> i32 {
    3
}

// Mistakes in a helper are reported at their spans in the helper.
#[tile::func]
fn bad_body(x: i32) -> f32 {
    let mut y = 1.0;
    T::erf(x)
}

#[tile::func]
fn no_value(x: f32) -> f32 {
    let y = x * 2.0;
}

#[tile::func]
fn scale(x: f32, s: f32) -> f32 {
    x * s * GOOD
}

// Mistakes at the calls and uses are reported there.
#[tile::kernel(block_n = 64, threads = 64)]
pub fn func_misuse(x: Tensor<f32, (N,)>, h: Tensor<f16, (N,)>, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let k = bx * block_n + i;
            y[k] = scale(x[k]) + scale(h[k], 2.0) + scale(x[k], 1.0);
            y[k] = LABEL + FROM_CALL as f32 + missing(x[k]);
        }
    });
}

fn main() {
    let _ = (LABEL, FROM_CALL);
}
