use tile::prelude::*;

// One combination of the variant space cannot work (its tiles do not fit in shared
// memory): the error names that variant and points at the allocation; the others build.
#[tile::kernel(block_m = [64, 256], block_k = [64, 256], threads = 128)]
pub fn gemm_like(a: Tensor<f32, (M, K)>, c: TensorMut<f32, (M, K)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let a_s = T::alloc_shared::<f32>([block_m, block_k]);
        T::copy(a.at([bx * block_m, 0]), a_s);
        T::copy(a_s, c.at([bx * block_m, 0]));
    });
}

// The same space with a filter that leaves the combination out builds.
#[tile::kernel(block_m = [64, 256], block_k = [64, 256], threads = 128, filter = block_m * block_k <= 128 * 128)]
pub fn gemm_like_filtered(a: Tensor<f32, (M, K)>, c: TensorMut<f32, (M, K)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let a_s = T::alloc_shared::<f32>([block_m, block_k]);
        T::copy(a.at([bx * block_m, 0]), a_s);
        T::copy(a_s, c.at([bx * block_m, 0]));
    });
}

fn main() {
    // Only the kept variants exist.
    let _: [gemm_like_filtered::Config; 3] = [
        gemm_like_filtered::Config { block_m: 64, block_k: 64 },
        gemm_like_filtered::Config { block_m: 64, block_k: 256 },
        gemm_like_filtered::Config { block_m: 256, block_k: 64 },
    ];
    let _ = gemm_like_filtered::CONFIGS;
    // Not a field of the variant space.
    let _ = gemm_like_filtered::Config { block_m: 64, block_k: 64, threads: 128 };
}
