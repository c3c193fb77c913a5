//! GEMM with its K loop split over the blocks of a cluster
//! (`T::use_split_k`). On Hopper each output tile is `splits` blocks in one
//! cluster, each summing a contiguous range of the k steps, and the first
//! block adds the others' partial sums (read from their shared memory) before
//! its epilogue; elsewhere the kernel runs unsplit. Either way the result is
//! the product: checked here against the host reference, with k ranges left
//! empty (fewer k steps than blocks), ragged edges, and a K whose row pitch
//! is off 16 bytes (the element-wise copies instead of bulk tensor copies).

use super::*;

/// The GEMM example's NN kernel with its k steps split over 2, 4 or 8
/// blocks: 128 × 128 tiles on two consumer warpgroups and 64 × 128 tiles on
/// one.
#[tile::kernel(
    dtype = [f16, bf16],
    block_m = [128, 64],
    block_n = 128,
    block_k = 64,
    stages = [4, 3],
    threads = [256, 128],
    splits = [2, 4, 8],
    filter = (block_m == 128) == (threads == 256)
        && (block_m == 128) == (stages == 4)
        && (splits == 2 || block_m == 64)
)]
pub fn split_gemm(a: Tensor<dtype, (M, K)>, b: Tensor<dtype, (K, N)>, c: TensorMut<dtype, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_split_k(splits);
            T::use_swizzle(8);
            let a_s = T::alloc_shared::<dtype>([block_m, block_k]);
            let b_s = T::alloc_shared::<dtype>([block_k, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            let c_s = T::alloc_shared::<dtype>([block_m, block_n]);
            T::annotate_layout(c_s, T::swizzled);
            T::copy(acc, c_s);
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        },
    );
}

fn split_case<E: Element + split_gemm::Dtype>((m, n, k): (usize, usize, usize)) -> TestResult {
    let a = random_tensor::<E>(&[m, k], 7300 + k as u64, dev())?;
    let b = random_tensor::<E>(&[k, n], 7400 + n as u64, dev())?;
    let want: Vec<f64> = matmul_ref(&host(&a), &host(&b), m, n, k, false)
        .into_iter()
        .map(round_to::<E>)
        .collect();
    for (cfg, label) in split_gemm::CONFIGS.iter().zip(split_gemm::LABELS) {
        // Twice: the first launch of a kernel takes the general path, later
        // ones the warm path; both must run the split grid.
        for call in ["first", "second"] {
            let mut c = Tensor::full(&[m, n], E::from_f64(f64::NAN), dev())?;
            split_gemm::with(*cfg).launch(&a, &b, &mut c)?;
            check(
                &format!("split_gemm<{}> {label}, {m}x{n}x{k}, {call} call", E::DTYPE),
                &c,
                &want,
                3e-2,
                2e-2,
            );
        }
    }
    Ok(())
}

#[test]
fn k_split_over_clusters_sums_every_range() -> TestResult {
    // 1000 x 1000 x 1000 in miniature (ragged M and N, 4 k steps: with 8
    // blocks half of them sum nothing), a K of one k step, a K that no block
    // size divides, and a K whose rows are 1022 bytes (off 16).
    for shape in [
        (200, 260, 256),
        (130, 128, 64),
        (64, 300, 712),
        (96, 136, 511),
    ] {
        split_case::<f16>(shape)?;
    }
    split_case::<bf16>((136, 200, 328))
}
