//! Clusters of blocks on Hopper. Clusters of four and eight that multicast
//! their A tiles (`T::use_cluster`): each block of a cluster loads `1 / n`
//! of A's rows and the copy engine delivers them to all `n`; elsewhere (and
//! on a grid whose x extent `n` does not divide) every block loads its own.
//! The GEMM example keeps only pairs in its tuning space (clusters of four
//! and eight fill at most 120 of the H200's 132 SMs at one block an SM, so
//! they lost everywhere they were timed: bench/RESULTS.md), so this is where
//! the larger clusters run against a host reference, with 192-row tiles on
//! three consumer warpgroups beside them. And clusters of two, four and
//! eight that split the k loop (`T::use_split_k`): each block sums a range
//! of the k steps and the first adds the others' partial sums, read from
//! their shared memory, before its epilogue (elsewhere the kernel runs
//! unsplit). And two-dimensional clusters (`T::use_cluster(nx, ny)`) whose
//! rows share A and whose columns share B.

use super::*;

/// 128-row tiles in clusters of four and eight, and 192-row tiles on three
/// consumer warpgroups (`bench wide`) alone and in clusters of four: 48 of
/// A's rows per block of a cluster, and a B tile
/// whose 512 16-byte chunks are not a multiple of the 384 threads (the
/// fallback copy's last pass covers the rows left). The k loop split over
/// two, four and eight blocks of 128-row tiles, and over two of 192-row
/// ones.
#[tile::kernel(
    block_m = [128, 192],
    block_n = 64,
    block_k = 64,
    stages = 4,
    threads = [256, 384],
    cluster = [4, 8, 1],
    splits = [1, 2, 4, 8],
    filter = (block_m == 192) == (threads == 384)
        && (cluster != 8 || block_m == 128)
        && (cluster != 1 || block_m == 192 || splits > 1)
        && (splits == 1 || (cluster == 1 && (block_m == 128 || splits == 2)))
)]
pub fn cluster_gemm(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_cluster(cluster);
            T::use_split_k(splits);
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
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

#[test]
fn clusters_multicast_a_or_split_k() -> TestResult {
    // x grids of 8 and 16 blocks (every cluster size divides them), 4 (clusters
    // of eight fall back to single blocks) and 5 (both fall back); ragged M
    // and K, and one k step; split, fewer k steps than blocks (K of 64 to
    // 200), K pitches off 16 bytes (130, 200: the element-wise copies), and
    // nine k steps over bulk tensor copies (520).
    let shapes = [
        (304, 512, 200),
        (130, 1024, 64),
        (200, 256, 130),
        (64, 320, 72),
        (136, 192, 520),
    ];
    let configs = cluster_gemm::CONFIGS.iter().zip(cluster_gemm::LABELS);
    every_variant("cluster_gemm", &shapes, 7100, configs, |cfg, a, b, c| {
        cluster_gemm::with(*cfg).launch(a, b, c)
    })
}

/// Each variant (`configs`: its config and label) of a GEMM `launch`
/// against the host reference at each of `shapes`, twice: a kernel's first
/// launch takes the general path, later ones the warm path; both must run
/// the clustered (or split) grid.
fn every_variant<'c, C: 'c>(
    name: &str,
    shapes: &[(usize, usize, usize)],
    seed: u64,
    configs: impl Iterator<Item = (&'c C, &'c &'c str)> + Clone,
    launch: impl Fn(&C, &Tensor<f16>, &Tensor<f16>, &mut Tensor<f16>) -> Result<(), tile::Error>,
) -> TestResult {
    for &(m, n, k) in shapes {
        let a = random_tensor::<f16>(&[m, k], seed + m as u64, dev())?;
        let b = random_tensor::<f16>(&[k, n], seed + 100 + n as u64, dev())?;
        let want: Vec<f64> = matmul_ref(&host(&a), &host(&b), m, n, k, false)
            .into_iter()
            .map(round_to::<f16>)
            .collect();
        for (cfg, label) in configs.clone() {
            for call in ["first", "second"] {
                let mut c = Tensor::full(&[m, n], f16::NAN, dev())?;
                launch(cfg, &a, &b, &mut c)?;
                check(
                    &format!("{name} {label}, {m}x{n}x{k}, {call} call"),
                    &c,
                    &want,
                    2e-2,
                    2e-2,
                );
            }
        }
    }
    Ok(())
}

/// Clusters of `nx` blocks along x by `ny` along y: the blocks of a row
/// (one M tile) share A, those of a column (one N tile) share B, each
/// loading `1 / nx` of A's rows and `1 / ny` of B's. 2 × 2, 4 × 2 and 1 × 2
/// of 128-row tiles, 4 × 2 of 192-row ones; `T::use_swizzle` is left out
/// for them (written here all the same: the frontend drops it).
#[tile::kernel(
    block_m = [128, 192],
    threads = [256, 384],
    cluster = [2, 4, 1],
    cluster_y = [2],
    filter = (block_m == 192) == (threads == 384) && (block_m == 128 || cluster == 4)
)]
pub fn cluster_gemm_2d(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, 64), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_cluster(cluster, cluster_y);
            T::use_swizzle(8);
            let a_s = T::alloc_shared::<f16>([block_m, 64]);
            let b_s = T::alloc_shared::<f16>([64, 64]);
            let acc = T::alloc_fragment::<f32>([block_m, 64]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, 64), 4) {
                T::copy(a.at([by * block_m, ko * 64]), a_s);
                T::copy(b.at([ko * 64, bx * 64]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c.at([by * block_m, bx * 64]));
        },
    );
}

#[test]
fn clusters_in_two_dims_share_a_and_b() -> TestResult {
    // 128-row tiles: 8 x 4 blocks (every cluster divides them), 5 x 2 (only
    // 1 x 2 does), 8 x 3 (none: single blocks), 4 x 2 with K's pitch off 16
    // bytes (clusters, each block copying its own tiles). 192-row tiles: 8 x
    // 2 with bulk tensor copies (330 x 512 x 200) and one k step (384 x 512
    // x 64), the rest single blocks or the element-wise copies.
    let shapes = [
        (500, 512, 520),
        (256, 320, 72),
        (330, 512, 200),
        (200, 256, 130),
        (384, 512, 64),
    ];
    let configs = cluster_gemm_2d::CONFIGS.iter().zip(cluster_gemm_2d::LABELS);
    every_variant("cluster_gemm_2d", &shapes, 7300, configs, |cfg, a, b, c| {
        cluster_gemm_2d::with(*cfg).launch(a, b, c)
    })
}
