use tile::prelude::*;

#[tile::kernel(n = 64, threads = 64)]
pub fn bad_atomic(a: Tensor<f32, (n,)>, c: TensorMut<f32, (n,)>) {
    T::kernel(1, threads, |bx| {
        let f = T::alloc_fragment::<f32>([n]);
        for i in T::parallel(n) {
            T::atomic_add(a[i], 1.0);
            T::atomic_add(f[i], 1.0);
            T::atomic_add(c[i], 1);
        }
        T::atomic_add(c);
    });
}

fn main() {}
