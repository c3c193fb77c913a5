use tile::prelude::*;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn wrong_arity(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let a_l = T::alloc_fragment::<f32>([block_n]);
        T::copy(a.at(bx * block_n));
        T::copy(a_l, c.at(bx * block_n));
    });
}

fn main() {}
