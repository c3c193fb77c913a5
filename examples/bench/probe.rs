//! `bench probe [MxNxK]`: why the tuner's table and the kernels' own durations part
//! (bench/RESULTS.md, 2026-12-06 third session: at 1000³ the tuner's rows for the
//! 192 × 64 and 128 × 128 tiles read 2–4 us above the stand-alone driver's, its
//! 128 × 64 row does not). Three of `gemm_nn`'s variants, f16, on the same buffers,
//! timed the ways the runtime and `bench` time: `do_bench` with the tuner's first-pass
//! options (runs queued), `do_bench_interleaved` with the three together (the tuner's
//! final round), and `bench`'s paired timing (each run read before the next).
use super::{gemm, time_pair_ms, Res};
use cudarc::driver::CudaStream;
use std::sync::Arc;
use std::time::Duration;
use tile::prelude::*;
use tile::{BenchFn, BenchOptions, Stream};

const PICKS: [&str; 3] = [
    "block_m=128, block_n=64, block_k=64, stages=4, threads=256, cluster=1,",
    "block_m=128, block_n=128, block_k=64, stages=4, threads=256, cluster=1, cluster_y=1, splits=1",
    "block_m=192,",
];

pub(crate) fn probe_rows(
    shape: Option<(usize, usize, usize)>,
    dev: Device,
    stream: &Arc<CudaStream>,
) -> Res<()> {
    let (m, n, k) = shape.unwrap_or((1000, 1000, 1000));
    let ts = dev.default_stream()?;
    let a = tile::testing::random_tensor::<f16>(&[m, k], 51, dev)?;
    let b = tile::testing::random_tensor::<f16>(&[k, n], 52, dev)?;
    let mut cs = (0..PICKS.len())
        .map(|_| Tensor::<f16>::zeros(&[m, n], dev))
        .collect::<Result<Vec<_>, _>>()?;
    let labels = gemm::gemm_nn::LABELS;
    let picks = PICKS
        .iter()
        .map(|p| labels.iter().position(|l| l.contains(p)))
        .collect::<Option<Vec<usize>>>()
        .ok_or("a probed variant is not in gemm_nn's space")?;
    // The tuner's first-pass options (tile-runtime's autotune::bench_options).
    let first_pass = BenchOptions {
        warmup: Duration::from_millis(5),
        rep: Duration::from_millis(15),
        min_samples: 3,
        max_samples: 200,
        ..BenchOptions::default()
    };
    let run = |i: usize, s: &Stream, c: &mut Tensor<f16>| -> tile::Result<()> {
        gemm::gemm_nn::with(gemm::gemm_nn::CONFIGS[picks[i]])
            .on(s)
            .launch(&a, &b, c)
    };
    println!("probe {m}x{n}x{k} f16, us: do_bench (queued) | interleaved | paired (two estimates)");
    let mut queued = Vec::new();
    for (i, c) in cs.iter_mut().enumerate() {
        let r = tile::do_bench(&ts, |s| run(i, s, c), &first_pass)?;
        queued.push(r.median_ms * 1e3);
    }
    let inter = {
        let (c0, rest) = cs.split_at_mut(1);
        let (c1, c2) = rest.split_at_mut(1);
        let mut f0 = |s: &Stream| run(0, s, &mut c0[0]);
        let mut f1 = |s: &Stream| run(1, s, &mut c1[0]);
        let mut f2 = |s: &Stream| run(2, s, &mut c2[0]);
        let mut fs: [BenchFn<'_>; 3] = [&mut f0, &mut f1, &mut f2];
        tile::do_bench_interleaved(&ts, &mut fs, &BenchOptions::default())?
    };
    for (i, c) in cs.iter_mut().enumerate() {
        let cell = std::cell::RefCell::new(c);
        let (p1, p2) = time_pair_ms(
            stream,
            5,
            50,
            || Ok(run(i, &ts, &mut cell.borrow_mut())?),
            || Ok(run(i, &ts, &mut cell.borrow_mut())?),
        )?;
        println!(
            "  {:<95} {:7.2} | {:7.2} | {:7.2} {:7.2}",
            labels[picks[i]],
            queued[i],
            inter[i].median_ms * 1e3,
            p1 * 1e3,
            p2 * 1e3
        );
    }
    Ok(())
}
