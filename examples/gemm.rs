//! Tiled GEMM `C = A · B` with f32 accumulation, in f16 and bf16, with B
//! given K-major (NN), N-major (NT: `B` is `[N, K]`) and A transposed (TN:
//! `A` is `[K, M]`). On CUDA, `T::gemm` runs on tensor cores (`wgmma` on
//! Hopper, `mma.sync` elsewhere, from the same source) and
//! `T::pipelined` overlaps the next tiles' copies with the current product;
//! the result leaves through a shared tile that reuses the A/B tiles' bytes.
//!
//! `cargo run --release --example gemm [M N K [PARTS]]` (PARTS: only the
//! kernels whose name, and the NN variants whose label, contains one of its
//! `+`-separated parts, such as `cluster=1` or `gemm_tn+cluster=2`)

use std::time::Instant;
use tile::prelude::*;

/// NN, written once over the element type and over a space of tile
/// configurations: `gemm_nn::<f16>` and `gemm_nn::<bf16>`, each built ahead
/// of time in every variant the filter keeps (21). A plain call runs the
/// default (the first value of every list: 128 × 128 × 64, 3 stages, 4
/// warps) unless these shapes were tuned in this process;
/// `gemm_nn::tune().launch(..)` (or `TILE_AUTOTUNE=1`) times the variants on
/// the call's shapes and remembers the fastest, on disk too;
/// `gemm_nn::with(Config { .. })` runs one.
///
/// The filter keeps: the 16-row decode tile only as 16 × 64 × 128 with 4
/// warps and 3 or 4 stages (small M spreads over N/64 blocks streaming B);
/// otherwise k64 tiles of 64 or 128 rows and 128 or 256 columns, at most
/// 128 accumulator floats per thread (registers), and 8 warps only for
/// 128-row tiles (two 64-row warpgroups on Hopper). Deeper pipelines for
/// the shapes that fill the GPU once or twice, where each block's k loop is
/// bound by copy latency rather than tensor cores (`bench space` in
/// bench/RESULTS.md: 1024³ at 0.95× cuBLAS with 64 × 128 and 6 stages, 0.66×
/// with the default): 64 × 128 with 6 stages, and 128 × 64 on two
/// warpgroups with 4 (with 6 it spills on sm_90a). 8 stages measured 3%
/// faster at 1024³ but fill 192 KiB, more than an A100 block may have
/// (164 KiB; of the variants here only 128 × 256 with 4 stages needs that).
/// The two-warpgroup 128 × 64 and 128 × 128 tiles with 4 stages also come in
/// clusters of two blocks (`cluster = 2`): on Hopper, blocks `2k` and
/// `2k + 1` share the A tile (each loads half and the copy engine multicasts
/// it). That halves A's copy requests, which at a row pitch that is not a
/// multiple of 128 bytes (1000³) is what the k loop waits on: 5–12% faster
/// there, 1–5% slower on the large shapes (the two blocks advance in step),
/// so the tuner decides (bench/RESULTS.md). Wider clusters of one row are not
/// in the space: the H200 holds at most 120 blocks in clusters of four or
/// eight at one block an SM (30 or 15 clusters, against 66 pairs on its 132
/// SMs), so 1000³'s 128 blocks of 128 × 64 ran a second wave and took
/// 1.4–1.5× as long as in pairs (tests/kernels runs them against a host
/// reference).
///
/// Two variants run in two-dimensional clusters (`cluster_y = 2`): a cluster
/// row shares A and a cluster column shares B, so each block asks the copy
/// engine for a part of each operand's rows. 128 × 128 in 2 × 2 with 4
/// stages, and 192 × 64 (three consumer warpgroups) in 4 × 2 with 7 stages
/// (224 KiB of shared memory, Hopper's whole budget), 96 blocks at 1000³.
/// The second is for row pitches off 32-byte sectors (K = 1000: every other
/// row starts mid-sector, and each stage's copies land later): asking for
/// 48 + 32 rows a step, it keeps 7 stages in flight where unshared tiles only
/// got slower with more stages, and ran 0.92–0.93 and 0.998 of cuBLAS at
/// 1000 × 1000 × 1000 and × 4000 on an H100, against 0.85 and 0.75 with 4
/// stages (`bench/kloop`, bench/RESULTS.md, 2026-12-06); 1.02 and 1.05 since
/// a cluster's blocks no longer meet at a releasing cluster barrier after
/// the barrier setup and at the end (2026-12-07, sixth session).
///
/// Three variants split K over a pair of blocks (`splits = 2`,
/// `T::use_split_k`): 128 × 128 on two warpgroups with 4 stages, 128 × 256
/// with 3, and 64 × 128 with 6. Each output tile is then two blocks in one
/// cluster, each summing half the k steps, the second block's partial sums
/// added into the first's through the cluster's shared memory before the
/// epilogue. For grids that fill the GPU less than once: 16 × 4095 × 4097
/// (2.5× the default on an H100), and rows between 128 and 256 with large
/// N and K, where 128 × 256 tiles split in two make one wave that moves
/// less from L2 than 128 × 128 tiles: 200 × 8192 × 8192 1.13× and
/// 160 × 8192 × 8192 1.14× faster than the best unsplit variant on an H100
/// (bench/RESULTS.md). At 1000³ the split variants lost to the unsplit ones.
#[tile::kernel(
    dtype = [f16, bf16],
    block_m = [128, 64, 16, 192],
    block_n = [128, 256, 64],
    block_k = [64, 128],
    stages = [3, 4, 6, 7],
    threads = [128, 256, 384],
    cluster = [1, 2, 4],
    cluster_y = [1, 2],
    splits = [1, 2],
    filter = (block_m == 16) == (block_k == 128)
        && (block_m == 192) == (threads == 384)
        && (block_m != 192 || cluster_y == 2)
        && (cluster_y == 1
            || (block_m == 192 && block_n == 64 && block_k == 64 && stages == 7 && cluster == 4)
            || (block_m == 128 && block_n == 128 && block_k == 64 && stages == 4 && threads == 256 && cluster == 2))
        && (cluster == 1 || cluster_y == 2
            || (cluster == 2 && block_m == 128 && block_n <= 128 && threads == 256 && stages == 4))
        && (splits == 1
            || (cluster == 1 && block_m == 128 && block_n == 128 && threads == 256 && stages == 4)
            || (cluster == 1 && block_m == 128 && block_n == 256 && threads == 256 && stages == 3)
            || (block_m == 64 && block_n == 128 && stages == 6))
        && (block_m != 16 || (threads == 128 && block_n == 64 && stages <= 4))
        && block_m * block_n / threads <= 128
        && (threads == 128 || block_m >= 128)
        && (stages <= 4 || (block_m == 64 && block_n == 128 && stages == 6) || (block_m == 192 && stages == 7))
        && (block_n != 64 || block_m == 16 || block_m == 192 || (threads == 256 && stages == 4))
)]
pub fn gemm_nn(a: Tensor<dtype, (M, K)>, b: Tensor<dtype, (K, N)>, c: TensorMut<dtype, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_cluster(cluster, cluster_y);
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
            // The epilogue through shared memory (reusing the A/B tiles' bytes):
            // full-width coalesced stores instead of 4-byte ones from registers.
            let c_s = T::alloc_shared::<dtype>([block_m, block_n]);
            T::annotate_layout(c_s, T::swizzled);
            T::copy(acc, c_s);
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        },
    );
}

#[tile::kernel(block_m = 128, block_n = 128, block_k = 64, stages = 3, threads = 128)]
pub fn gemm_nt_f16(a: Tensor<f16, (M, K)>, b: Tensor<f16, (N, K)>, c: TensorMut<f16, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_m, block_k]);
            let b_s = T::alloc_shared::<f16>([block_n, block_k]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([bx * block_n, ko * block_k]), b_s);
                T::gemm(a_s, b_s, acc, transpose_b = true);
            }
            // The epilogue through shared memory (reusing the A/B tiles' bytes):
            // full-width coalesced stores instead of 4-byte ones from registers.
            let c_s = T::alloc_shared::<f16>([block_m, block_n]);
            T::annotate_layout(c_s, T::swizzled);
            T::copy(acc, c_s);
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        },
    );
}

#[tile::kernel(block_m = 128, block_n = 128, block_k = 64, stages = 3, threads = 128)]
pub fn gemm_tn_f16(a: Tensor<f16, (K, M)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_k, block_m]);
            let b_s = T::alloc_shared::<f16>([block_k, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([ko * block_k, by * block_m]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc, transpose_a = true);
            }
            // The epilogue through shared memory (reusing the A/B tiles' bytes):
            // full-width coalesced stores instead of 4-byte ones from registers.
            let c_s = T::alloc_shared::<f16>([block_m, block_n]);
            T::annotate_layout(c_s, T::swizzled);
            T::copy(acc, c_s);
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// NN as a persistent kernel: `blocks` blocks (one per multiprocessor of an
/// H100/H200: 132) walk the output tiles with `T::persistent`, reusing their
/// shared tiles and accumulator. On Hopper the main loop is warp-specialized
/// across tiles: the producer warpgroup runs the tile loop too, so it
/// fetches the next tile's first stages while the consumers store this
/// tile through `c_s` (which therefore has bytes of its own). On a GPU with
/// fewer multiprocessors the blocks beyond them run as a second wave.
#[tile::kernel(
    dtype = [f16, bf16],
    block_m = 128,
    block_n = 128,
    block_k = 64,
    stages = 3,
    threads = 256,
    blocks = 132
)]
pub fn gemm_persistent(
    a: Tensor<dtype, (M, K)>,
    b: Tensor<dtype, (K, N)>,
    c: TensorMut<dtype, (M, N)>,
) {
    T::kernel(blocks, threads, |bid| {
        let a_s = T::alloc_shared::<dtype>([block_m, block_k]);
        let b_s = T::alloc_shared::<dtype>([block_k, block_n]);
        let c_s = T::alloc_shared::<dtype>([block_m, block_n]);
        T::annotate_layout(c_s, T::swizzled);
        let acc = T::alloc_fragment::<f32>([block_m, block_n]);
        for (bx, by) in T::persistent(
            [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
            blocks,
            bid,
        ) {
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c_s);
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        }
    });
}

/// A GEMM launcher `c = a · b`.
pub type Launch<E> = fn(&Tensor<E>, &Tensor<E>, &mut Tensor<E>) -> Result<(), tile::Error>;

fn check_one<E: Element>(
    name: &str,
    launch: impl Fn(&Tensor<E>, &Tensor<E>, &mut Tensor<E>) -> Result<(), tile::Error>,
    dev: Device,
    (m, n, k): (usize, usize, usize),
    (at, bt): (bool, bool),
) -> Result<String, Box<dyn std::error::Error>> {
    let ashape = if at { [k, m] } else { [m, k] };
    let bshape = if bt { [n, k] } else { [k, n] };
    let a = tile::testing::random_tensor::<E>(&ashape, 21, dev)?;
    let b = tile::testing::random_tensor::<E>(&bshape, 22, dev)?;
    let mut c = Tensor::full(&[m, n], E::from_f64(f64::NAN), dev)?;
    let t = Instant::now();
    launch(&a, &b, &mut c)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let host = |t: &Tensor<E>| -> Result<Vec<f64>, tile::Error> {
        Ok(t.to_vec()?.iter().map(|x| x.to_f64()).collect())
    };
    let want = tile::testing::matmul_ref(&host(&a)?, &host(&b)?, (m, n, k), at, bt);
    let report = tile::testing::assert_allclose(&c.to_vec()?, &want, 5e-2, 2e-2)
        .map_err(|e| format!("{name}: {e}"))?;
    Ok(format!(
        "{name}: max_abs_err={:.3e} time={:.3} ms (first call)",
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

/// Checks the kernels `run` checks before the variant space whose name
/// `keep` accepts, in that order; one line each.
fn check_fixed(
    dev: Device,
    s: (usize, usize, usize),
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut lines = Vec::new();
    macro_rules! fixed {
        ($e:ty, $name:literal, $kernel:expr, $trans:expr) => {
            if keep($name) {
                lines.push(check_one::<$e>($name, $kernel, dev, s, $trans)?);
            }
        };
    }
    let nn = (false, false);
    fixed!(f16, "gemm_nn_f16", gemm_nn, nn);
    fixed!(bf16, "gemm_nn_bf16", gemm_nn, nn);
    fixed!(f16, "gemm_nt_f16", gemm_nt_f16, (false, true));
    fixed!(f16, "gemm_tn_f16", gemm_tn_f16, (true, false));
    fixed!(f16, "gemm_persistent_f16", gemm_persistent, nn);
    fixed!(bf16, "gemm_persistent_bf16", gemm_persistent, nn);
    Ok(lines)
}

/// Checks every variant at `m × n × k` on `dev`; returns one line per
/// variant. `main` and `tests/examples.rs` call it.
pub fn run(
    dev: Device,
    m: usize,
    n: usize,
    k: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let s = (m, n, k);
    let mut lines = check_fixed(dev, s, &|_| true)?;
    // Every variant of the space, by name (f16; bf16 builds the same tiles).
    lines.extend(check_variants(dev, s, &[""])?);
    // Tuned on these shapes (every variant timed; the caller's output is the
    // chosen variant's), then the table of variants and times.
    lines.push(check_one::<bf16>(
        "gemm_nn_bf16 tuned",
        |a, b, c| gemm_nn::tune().launch(a, b, c),
        dev,
        s,
        (false, false),
    )?);
    if let Some(r) = gemm_nn::reports::<bf16>()
        .iter()
        .find(|r| r.shapes[2] == [m, n])
    {
        lines.push(format!(
            "gemm_nn_bf16 tuned: chose `{}` ({} variants, timing {:.1} ms{})",
            r.chosen_label,
            r.rows.len(),
            r.timing_ms,
            if r.from_cache {
                ", from the disk cache"
            } else {
                ""
            }
        ));
    }
    Ok(format!(
        "gemm: device={dev} m={m} n={n} k={k}\n  {}",
        lines.join("\n  ")
    ))
}

/// Checks the NN variants (f16) whose label contains one of `parts` (all
/// for `[""]`), one line each.
fn check_variants(
    dev: Device,
    s: (usize, usize, usize),
    parts: &[&str],
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let mut lines = Vec::new();
    for (config, label) in gemm_nn::CONFIGS.iter().zip(gemm_nn::LABELS) {
        if parts.iter().any(|p| label.contains(p)) {
            lines.push(check_one::<f16>(
                &format!("gemm_nn_f16 [{label}]"),
                |a, b, c| gemm_nn::with(*config).launch(a, b, c),
                dev,
                s,
                (false, false),
            )?);
        }
    }
    Ok(lines)
}

/// Checks only what `only` names, in `run`'s order: the fixed kernels whose
/// name, and the NN variants (f16) whose label, contains one of its
/// `+`-separated parts (`cluster=2`, `gemm_nt+cluster=2`). A sanitizer runs
/// some kernels this way without the rest in the same process.
pub fn run_only(
    dev: Device,
    (m, n, k): (usize, usize, usize),
    only: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let parts: Vec<&str> = only.split('+').filter(|p| !p.is_empty()).collect();
    let mut lines = check_fixed(dev, (m, n, k), &|name| {
        parts.iter().any(|p| name.contains(p))
    })?;
    lines.extend(check_variants(dev, (m, n, k), &parts)?);
    if lines.is_empty() {
        return Err(format!("no gemm kernel or variant matches `{only}`").into());
    }
    Ok(format!(
        "gemm: device={dev} m={m} n={n} k={k}, kernels matching `{only}`\n  {}",
        lines.join("\n  ")
    ))
}

/// `gemm [M N K [PARTS]]`: with a fourth argument only the kernels that
/// [`run_only`] matches run (`cluster=1`, `gemm_tn+cluster=2`).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let only = (args.len() == 4).then(|| args.remove(3));
    let dims: Vec<usize> = args.iter().map(|s| s.parse()).collect::<Result<_, _>>()?;
    let (m, n, k) = match dims.as_slice() {
        [m, n, k] => (*m, *n, *k),
        _ if dev == Device::Cpu => (160, 136, 72),
        _ => (1000, 1030, 1050),
    };
    match only {
        Some(only) => println!("{}", run_only(dev, (m, n, k), &only)?),
        None => println!("{}", run(dev, m, n, k)?),
    }
    Ok(())
}
