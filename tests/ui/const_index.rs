use tile::prelude::*;

// Constant indices and names the generated code cannot take.
#[tile::kernel(threads = 128)]
pub fn const_index(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(1, threads, |bx| {
        let s = T::alloc_shared::<f32>([64]);
        s[64] = a[0];
        c[0] = a[-1];
        let größe = 1;
    });
}

fn main() {}
