use tile::prelude::*;

#[tile::kernel(m = 8, n = 64, threads = 128)]
pub fn bad_reduce(a: Tensor<f32, (m, n)>, c: TensorMut<f32, (m,)>) {
    T::kernel(1, threads, |bx| {
        let t = T::alloc_fragment::<f32>([m, n]);
        let r = T::alloc_fragment::<f32>([n]);
        let i = T::alloc_fragment::<i32>([m]);
        T::copy(a, t);
        T::reduce_sum(t, r, 1);
        T::reduce_max(a, r, 0);
        T::reduce_min(t, i, 1);
        T::reduce_abssum(t, r, 2);
        T::reduce_sum(t, r, 0, 1);
        T::cumsum(t, r);
    });
}

fn main() {}
