use tile::prelude::*;

#[tile::kernel(block_m = 32, block_n = 64, threads = 128)]
pub fn copy_incompatible(a: Tensor<f16, (M, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx, by| {
        let a_s = T::alloc_shared::<f16>([block_m, block_n]);
        let c_l = T::alloc_fragment::<f16>([block_n, block_m]);
        T::copy(a.at([by * block_m, bx * block_n]), a_s);
        T::copy(a_s, c_l);
        T::copy(c_l, c.at([by * block_m, bx * block_n]));
    });
}

fn main() {}
