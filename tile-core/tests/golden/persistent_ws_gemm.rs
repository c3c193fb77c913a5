// A persistent GEMM whose main loop is warp-specialized across tiles on
// Hopper: the producer warpgroup runs the tile loop too (one pipe for every
// tile), and c_s keeps bytes of its own because the producer fills the next
// tile's stages while the consumers store this one.
use tile::prelude::*;

#[tile::kernel(block_m = 128, block_n = 128, block_k = 64, stages = 3, threads = 256, blocks = 132)]
pub fn persistent_ws_gemm(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel(blocks, threads, |bid| {
        let acc = T::alloc_fragment::<f32>([block_m, block_n]);
        for (bx, by) in T::persistent([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], blocks, bid) {
            let a_s = T::alloc_shared::<f16>([block_m, block_k]);
            let b_s = T::alloc_shared::<f16>([block_k, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            // Every tile declared in the loop: without the persistent pipeline
            // c_s could reuse the bytes of a_s and b_s (as the sm_80 code does).
            let c_s = T::alloc_shared::<f16>([block_m, block_n]);
            T::annotate_layout(c_s, T::swizzled);
            T::copy(acc, c_s);
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        }
    });
}
