//! `bench space`: a wide space of GEMM tile configurations, each timed
//! against cuBLAS on the same data, on shapes whose output tiles fill the
//! H200 only once or twice (1000³ and its neighbours) and on 4096³. It asks
//! which lever these shapes need: more blocks (smaller tiles), more bytes in
//! flight (more stages, longer k steps), or both.

use super::blas::bench_gemm;
use super::{Res, Row};
use cudarc::cublas::sys::cudaDataType;
use cudarc::cublas::CudaBlas;
use cudarc::driver::CudaStream;
use std::sync::Arc;
use tile::prelude::*;

/// The example's NN GEMM (`gemm_nn`, the same body: a kernel's variant
/// space is its attribute, so a wider space is a second kernel) over tiles
/// of 64 or 128 rows and columns, k steps of 64 or 128, 3 to 8 stages, one
/// or two consumer warpgroups; the filter keeps the stages within 200 KiB
/// of shared memory and the accumulator within 128 floats per thread.
///
/// And 192 × 64 tiles on three consumer warpgroups, alone, in pairs or in
/// clusters of four that multicast A (`bench wide`). And two-dimensional
/// clusters (`cluster_y = 2`, `bench grid`): 2 × 2 and 4 × 2 blocks whose
/// rows share A and whose columns share B, of 192 × 64 tiles, 128 × 128
/// ones and 128 × 64 ones (2 × 2 only: 1000³'s 128 blocks of 128 × 64 in
/// fours would not fit one wave). cuBLAS's 1000³ kernel divides both
/// operands' rows among the blocks of 4 × 2 clusters; 192 × 64 tiles in
/// 4 × 2 clusters ask for 48 + 32 rows a k step against the example's best
/// tile's 64 + 64, for 1.5× the products. Timed, they went into the
/// example's tuning space (bench/RESULTS.md, 2026-12-06, second session):
/// even at 1000³, faster at 1000 × 1030 × 1050. At 1000³ the example's best
/// tile, 128 × 64 in pairs, reads about 33 MB from L2 over its 128
/// blocks; cuBLAS's 128 × 72 tiles in clusters of eight read about 18 MB
/// (bench/RESULTS.md, "What cuBLAS does at 1000³"). 192 × 64 tiles make 96
/// blocks, 24 clusters of four (the H200 holds 30 at one block an SM), and
/// read about 21 MB. (192 × 128 on 384 threads builds, but ptxas inserts
/// `wgmma` waits to reuse the accumulator's registers: not in the space.)
#[tile::kernel(
    dtype = [f16],
    block_m = [128, 64, 192],
    block_n = [128, 64],
    block_k = [64, 128],
    stages = [4, 3, 6, 8],
    threads = [256, 128, 384],
    cluster = [1, 2, 4],
    cluster_y = [1, 2],
    filter = (threads == 128 || block_m == 128 || block_m == 192)
        && (block_m == 192) == (threads == 384)
        && (block_m != 192 || (block_n == 64 && block_k == 64 && stages >= 4 && stages <= 6))
        && (cluster == 1 || block_m == 192 || cluster_y == 2)
        && (cluster_y == 1
            || (block_k == 64 && stages == 4 && cluster >= 2
                && (block_m == 192 || (threads == 256 && (block_n == 128 || cluster == 2)))))
        && block_m * block_n / threads <= 128
        && (block_m + block_n) * block_k * 2 * stages <= 200 * 1024
)]
pub fn gemm_space(a: Tensor<dtype, (M, K)>, b: Tensor<dtype, (K, N)>, c: TensorMut<dtype, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_cluster(cluster, cluster_y);
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

/// `bench wide`: the space's 192-row variants beside cuBLAS on the shapes
/// that fill the H200 about once, their neighbours, and 4096³ for contrast.
pub(crate) fn wide_rows(
    dev: Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let shapes = [
        (1000, 1000, 1000),
        (1008, 1008, 1008),
        (960, 1000, 1000),
        (1000, 960, 1000),
        (2000, 1000, 1000),
        (1000, 1000, 4000),
        (4096, 4096, 4096),
    ];
    time_variants(
        &shapes,
        &|label| label.contains("block_m=192"),
        dev,
        stream,
        blas,
        rows,
    )
}

/// `bench grid`: the two-dimensional clusters (`cluster_y = 2`) on
/// `shapes`, or on the one- and two-wave shapes and 4096³.
pub(crate) fn grid_rows(
    shapes: Option<Vec<(usize, usize, usize)>>,
    dev: Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let shapes = shapes.unwrap_or_else(|| {
        vec![
            (1000, 1000, 1000),
            (1000, 1000, 4000),
            (2000, 1000, 1000),
            (2000, 2000, 2000),
            (4096, 4096, 4096),
        ]
    });
    time_variants(
        &shapes,
        &|label| label.contains("cluster_y=2"),
        dev,
        stream,
        blas,
        rows,
    )
}

/// Shapes of one or two waves of 128 × 128 tiles, and 4096³ for contrast.
const SHAPES: [(usize, usize, usize); 6] = [
    (1000, 1000, 1000),
    (1024, 1024, 1024),
    (1000, 1000, 4000),
    (2000, 1000, 1000),
    (1536, 1536, 768),
    (4096, 4096, 4096),
];

pub(crate) fn space_rows(
    dev: Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    rows: &mut Vec<Row>,
) -> Res<()> {
    time_variants(
        &SHAPES,
        &|label| !label.contains("block_m=192"),
        dev,
        stream,
        blas,
        rows,
    )
}

/// `bench pitch`: shapes around 1024 that tell a row pitch that is 16-byte
/// but not 128-byte aligned (a dim of 1000: 2000 bytes; 1008: 2016; 1016:
/// 2032) from ragged tile edges. Kernels take contiguous tensors, so a
/// pitch is a dim: (1000, 1024, 1024) is ragged in M with aligned pitches,
/// (1024, 1024, 1000) has A's pitch at 2000 bytes and a ragged last k step,
/// (1024, 1000, 1024) B's and C's pitches at 2000 bytes and ragged columns.
/// Four variants of the space: the example's default tile and the best at
/// 1000³ and 1024³ in `bench space`.
pub(crate) fn pitch_rows(
    dev: Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    rows: &mut Vec<Row>,
) -> Res<()> {
    let shapes = [
        (1000, 1000, 1000),
        (1008, 1008, 1008),
        (1016, 1016, 1016),
        (1024, 1024, 1024),
        (1000, 1024, 1024),
        (1024, 1024, 1000),
        (1024, 1000, 1024),
        (1024, 1024, 1008),
        (1024, 1024, 1016),
        // B's (and C's) pitch apart from its raggedness: 1080 and 1088 both
        // leave a part-filled last column of 128-wide tiles, with 2160- and
        // 2176-byte rows (the latter a multiple of 128 bytes); 1152 is whole
        // 128-wide tiles.
        (1024, 1080, 1024),
        (1024, 1088, 1024),
        (1024, 1152, 1024),
    ];
    let wanted = [
        "block_m=128, block_n=128, block_k=64, stages=3, threads=128, cluster=1",
        "block_m=128, block_n=64, block_k=64, stages=4, threads=256, cluster=1",
        "block_m=64, block_n=128, block_k=64, stages=8, threads=128, cluster=1",
        "block_m=128, block_n=128, block_k=64, stages=4, threads=256, cluster=1",
    ];
    time_variants(
        &shapes,
        &|label| wanted.contains(&label),
        dev,
        stream,
        blas,
        rows,
    )
}

/// Times every variant of the space whose label `keep` accepts on each of
/// `shapes`, beside cuBLAS.
fn time_variants(
    shapes: &[(usize, usize, usize)],
    keep: &dyn Fn(&str) -> bool,
    dev: Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    rows: &mut Vec<Row>,
) -> Res<()> {
    for &s in shapes {
        for (cfg, label) in gemm_space::CONFIGS.iter().zip(gemm_space::LABELS) {
            if !keep(label) {
                continue;
            }
            let cfg = *cfg;
            bench_gemm::<f16>(
                &format!("gemm f16 space {label}"),
                &|a, b, c| gemm_space::with(cfg).launch(a, b, c),
                dev,
                stream,
                blas,
                s,
                cudaDataType::CUDA_R_16F,
                rows,
            )?;
        }
    }
    Ok(())
}
