use tile::prelude::*;

#[tile::kernel(dtype = [f16, bf16], block_n = 128, threads = 128)]
pub fn scale(x: Tensor<dtype, (N,)>, y: TensorMut<dtype, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            y[bx * block_n + i] = x[bx * block_n + i] * (2.0 as dtype);
        }
    });
}

// A dtype that does not exist, one listed twice, two type parameters.
#[tile::kernel(dtype = [f16, f17, f16], other = [f32], threads = 32)]
pub fn bad_list(x: Tensor<dtype, (N,)>) {
    T::kernel(1, threads, |_bx| {});
}

// A mistake in the body is reported once, not once per instance.
#[tile::kernel(dtype = [f32, f64], threads = 32)]
pub fn bad_body(x: TensorMut<dtype, (N,)>) {
    T::kernel(1, threads, |_bx| {
        x[0] = missing;
    });
}

fn main() {
    let x = Tensor::<f32>::zeros(&[4], Device::Cpu).unwrap();
    let mut y = Tensor::<f32>::zeros(&[4], Device::Cpu).unwrap();
    // f32 is not one of the kernel's dtypes.
    let _ = scale(&x, &mut y);
    // A kernel with a mistake keeps its call sites quiet.
    let _ = bad_body(&mut y);
}
