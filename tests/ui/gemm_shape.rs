use tile::prelude::*;

#[tile::kernel(block_m = 64, block_n = 64, block_k = 32, threads = 128)]
pub fn gemm_shape(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx, by| {
        let a_s = T::alloc_shared::<f16>([block_m, block_k]);
        let b_s = T::alloc_shared::<f16>([block_n, block_k]);
        let acc = T::alloc_fragment::<f32>([block_m, block_n]);
        T::clear(acc);
        for ko in T::pipelined(T::ceildiv(K, block_k), 2) {
            T::copy(a.at([by * block_m, ko * block_k]), a_s);
            T::copy(b.at([ko * block_k, bx * block_n]), b_s);
            T::gemm(a_s, b_s, acc);
        }
        T::copy(acc, c.at([by * block_m, bx * block_n]));
    });
}

fn main() {}
