// A GEMM in clusters of two blocks on Hopper: blocks 2k and 2k + 1 along x
// read the same A rows (the swizzle's row, even panel), so each loads half
// of every A tile and the copy engine multicasts it into both; each empty
// barrier then waits for both blocks' consumer warps. B is the block's own.
use tile::prelude::*;

#[tile::kernel(block_m = 128, block_n = 64, block_k = 64, stages = 4, threads = 256)]
pub fn cluster_gemm(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx, by| {
        T::use_cluster(2);
        T::use_swizzle(8);
        let a_s = T::alloc_shared::<f16>([block_m, block_k]);
        let b_s = T::alloc_shared::<f16>([block_k, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, block_n]);
        T::clear(acc);
        for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
            T::copy(a.at([by * block_m, ko * block_k]), a_s);
            T::copy(b.at([ko * block_k, bx * block_n]), b_s);
            T::gemm(a_s, b_s, acc);
        }
        let c_s = T::alloc_shared::<f16>([block_m, block_n]);
        T::annotate_layout(c_s, T::swizzled);
        T::copy(acc, c_s);
        T::copy(c_s, c.at([by * block_m, bx * block_n]));
    });
}
