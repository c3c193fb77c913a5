//! Kernels of a crate that depends on `tile`: each `#[tile::kernel]` becomes a
//! public typed launcher, and `build.rs` links its C form ahead of time.
//! (The kernel syntax itself needs no imports: the macro reads it.)

/// The factor `scale_add` was compiled with.
pub const ALPHA: f32 = 1.5;

/// `out = alpha * x + y` element-wise, with `alpha` fixed at compile time.
#[tile::kernel(alpha = 1.5, block_n = 512, threads = 128)]
pub fn scale_add(x: Tensor<f32, (N,)>, y: Tensor<f32, (N,)>, out: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            out[bx * block_n + i] = alpha * x[bx * block_n + i] + y[bx * block_n + i];
        }
    });
}

/// The gain `softsign_scaled` applies (a const the kernel reads: its value is
/// inlined, and checked against this item when the crate builds).
pub const GAIN: f32 = 0.5;

/// `x / (1 + |x|)`: a device helper, inlined where a kernel of this module
/// calls it.
#[tile::func]
fn softsign(x: f32) -> f32 {
    x / (1.0 + T::abs(x))
}

/// `out = softsign(x) * GAIN * temp` element-wise, `temp` given at each call.
#[tile::kernel(block_n = 256, threads = 128)]
pub fn softsign_scaled(x: Tensor<f32, (N,)>, temp: f32, out: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            out[bx * block_n + i] = softsign(x[bx * block_n + i]) * GAIN * temp;
        }
    });
}

/// Kernels in an inline module are found by the build script too.
pub mod half {
    use tile::prelude::*;

    /// `out = x * factor` in f16, staged through a fragment.
    #[tile::kernel(factor = -2.0, block_n = 256, threads = 128)]
    pub fn scale_f16(x: Tensor<f16, (N,)>, out: TensorMut<f16, (N,)>) {
        T::kernel(T::ceildiv(N, block_n), threads, |bx| {
            let t = T::alloc_fragment::<f16>([block_n]);
            T::copy(x.at(bx * block_n), t);
            for i in T::parallel(block_n) {
                t[i] = t[i] * factor;
            }
            T::copy(t, out.at(bx * block_n));
        });
    }

    /// Runs [`scale_f16()`] on the host CPU for a slice, returning the result.
    pub fn scale_f16_host(x: &[f16]) -> Result<Vec<f16>, Error> {
        let dev = Device::Cpu;
        let xt = Tensor::from_slice(x, &[x.len()], dev)?;
        let mut out = Tensor::full(&[x.len()], f16::NAN, dev)?;
        scale_f16(&xt, &mut out)?;
        out.to_vec()
    }
}
