use tile::prelude::*;

#[tile::kernel(n = 64, threads = 64)]
pub fn bad_misc(a: Tensor<f32, (n,)>, c: TensorMut<i32, (n,)>) {
    T::kernel(1, threads, |bx| {
        T::use_swizzle(4);
        let v = T::alloc_var();
        let w = T::infinity::<i32>();
        T::print(a[0], 3);
        for i in T::parallel(n) {
            c[i] = T::max_value::<bool>();
        }
    });
}

fn main() {}
