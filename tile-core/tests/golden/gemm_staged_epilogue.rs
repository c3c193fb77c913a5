// Two phases that share shared memory: the A/B tiles of the GEMM main loop
// (2 stages each, 8 KiB apiece) are dead once the loop ends, so the f32 tile
// that stages the epilogue (16 KiB) reuses their bytes: the block needs
// 16 KiB, not 32 KiB, and a barrier separates the loop's last reads of the
// A/B tiles from the first write of the staging tile.
#[tile::kernel(block_m = 64, block_n = 64, block_k = 32, stages = 2, threads = 128)]
pub fn gemm_staged_epilogue(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_m, block_k]);
            let b_s = T::alloc_shared::<f16>([block_k, block_n]);
            let c_s = T::alloc_shared::<f32>([block_m, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c_s);
            for (i, j) in T::parallel([block_m, block_n]) {
                c_s[(i, j)] = c_s[(i, j)] * 2.0;
            }
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        },
    );
}
