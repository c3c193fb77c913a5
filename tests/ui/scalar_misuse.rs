use tile::prelude::*;

// A scalar is a value: not a dim, not part of the grid (the runtime evaluates
// the grid from the tensors' shapes), not assignable; f8 has no scalar form.
#[tile::kernel(block_n = 128, threads = 128)]
pub fn scalar_misuse(a: Tensor<f32, (N,)>, n: i32, b: Tensor<f32, (n,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n) + n, threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[i];
        }
        n = 3;
    });
}

#[tile::kernel(threads = 32)]
pub fn wrong_scalar_type(a: Tensor<f32, (N,)>, s: f8e4m3, t: usize) {
    T::kernel(1, threads, |_bx| {
        T::print(a[0] + s + t);
    });
}

fn main() {
    let mut c = Tensor::<f32>::zeros(&[4], Device::Cpu).unwrap();
    let a = Tensor::<f32>::zeros(&[4], Device::Cpu).unwrap();
    // The launcher takes the scalar by value, of its dtype.
    let _ = scalar_misuse(&a, 2.5, &a, &mut c);
}
