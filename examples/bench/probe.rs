//! `bench probe [MxNxK]`: why the tuner's table and the kernels' own durations part
//! (bench/RESULTS.md, 2026-12-06 third session: at 1000³ the tuner's rows for the
//! 192 × 64 and 128 × 128 tiles read 2–4 us above the stand-alone driver's, its
//! 128 × 64 row does not). Six of `gemm_nn`'s variants (the tuner's finalists at 1000³), f16, on the same buffers,
//! timed the ways the runtime and `bench` time: `do_bench` with the tuner's first-pass
//! options (runs queued), `do_bench_interleaved` with the six together (the tuner's
//! final round), and `bench`'s paired timing (each run read before the next).
use super::{gemm, time_pair_ms, Res};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaStream;
use std::sync::Arc;
use std::time::Duration;
use tile::prelude::*;
use tile::{BenchFn, BenchOptions, Stream};

const PICKS: [&str; 6] = [
    "block_m=128, block_n=64, block_k=64, stages=4, threads=256, cluster=1,",
    "block_m=128, block_n=64, block_k=64, stages=4, threads=256, cluster=2,",
    "block_m=128, block_n=128, block_k=64, stages=4, threads=256, cluster=1, cluster_y=1, splits=1",
    "block_m=128, block_n=128, block_k=64, stages=4, threads=128, cluster=1,",
    "block_m=128, block_n=128, block_k=64, stages=4, threads=256, cluster=2, cluster_y=2,",
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
    let labels = gemm::gemm_nn::LABELS;
    // `PROBE_PICKS="block_m=128, block_n=256,|..."`: other variants (each the first
    // label containing the text).
    let wanted: Vec<String> = match std::env::var("PROBE_PICKS") {
        Ok(v) => v.split('|').map(str::to_string).collect(),
        Err(_) => PICKS.iter().map(|p| p.to_string()).collect(),
    };
    let picks = wanted
        .iter()
        .map(|p| labels.iter().position(|l| l.contains(p.as_str())))
        .collect::<Option<Vec<usize>>>()
        .ok_or("a probed variant is not in gemm_nn's space")?;
    let mut cs = (0..picks.len())
        .map(|_| Tensor::<f16>::zeros(&[m, n], dev))
        .collect::<Result<Vec<_>, _>>()?;
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
    println!("probe {m}x{n}x{k} f16, us: do_bench (queued) | interleaved, primed | paired (two estimates)");
    let mut queued = Vec::new();
    for (i, c) in cs.iter_mut().enumerate() {
        let r = tile::do_bench(&ts, |s| run(i, s, c), &first_pass)?;
        queued.push(r.median_ms * 1e3);
    }
    let inter = {
        let mut runs: Vec<_> = cs
            .iter_mut()
            .enumerate()
            .map(|(i, c)| move |s: &Stream| run(i, s, c))
            .collect();
        let mut fs: Vec<BenchFn<'_>> = runs.iter_mut().map(|f| f as BenchFn<'_>).collect();
        let primed = BenchOptions {
            primed: true,
            ..BenchOptions::default()
        };
        (
            tile::do_bench_interleaved(&ts, &mut fs, &BenchOptions::default())?,
            tile::do_bench_interleaved(&ts, &mut fs, &primed)?,
        )
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
            "  {:<95} {:7.2} | {:7.2} {:7.2} | {:7.2} {:7.2}",
            labels[picks[i]],
            queued[i],
            inter.0[i].median_ms * 1e3,
            inter.1[i].median_ms * 1e3,
            p1 * 1e3,
            p2 * 1e3
        );
    }
    // Whether the kernel that ran before matters: each variant timed right after
    // each other one, and after cuBLAS on the same shape (the L2 flushed between
    // them), median of 30.
    let blas = cudarc::cublas::CudaBlas::new(stream.clone())?;
    let ha = tile::testing::random_vec::<f16>(m * k, 51, -1.0, 1.0);
    let hb = tile::testing::random_vec::<f16>(k * n, 52, -1.0, 1.0);
    let (ca, cb) = (stream.clone_htod(&ha)?, stream.clone_htod(&hb)?);
    let mut cc = stream.alloc_zeros::<f16>(m * n)?;
    // Then after each variant on a 64 × 64 × 64 problem: one block (one cluster),
    // so on one or a few multiprocessors: what a kernel leaves in every
    // multiprocessor it ran on is then missing from the others.
    let (ta, tb) = (
        tile::testing::random_tensor::<f16>(&[64, 64], 53, dev)?,
        tile::testing::random_tensor::<f16>(&[64, 64], 54, dev)?,
    );
    let mut tc = Tensor::<f16>::zeros(&[64, 64], dev)?;
    let np = picks.len();
    println!("after (column: variant, then cuBLAS, then each variant at 64^3) -> timed (row), us:");
    for b in 0..np {
        let mut row = Vec::new();
        for a in 0..=2 * np {
            let mut ts_us = Vec::new();
            for _ in 0..30 {
                if a == np {
                    let dt = cudarc::cublas::sys::cudaDataType::CUDA_R_16F;
                    super::blas::cublas_gemm(&blas, stream, &ca, &cb, &mut cc, (m, n, k), dt)?;
                } else if a > np {
                    gemm::gemm_nn::with(gemm::gemm_nn::CONFIGS[picks[a - np - 1]])
                        .on(&ts)
                        .launch(&ta, &tb, &mut tc)?;
                } else {
                    run(a, &ts, &mut cs[a])?;
                }
                super::before_timed_run(stream)?;
                let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
                run(b, &ts, &mut cs[b])?;
                let end = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
                end.synchronize()?;
                ts_us.push(start.elapsed_ms(&end)? as f64 * 1e3);
            }
            ts_us.sort_by(f64::total_cmp);
            row.push(ts_us[ts_us.len() / 2]);
        }
        let cells: Vec<String> = row.iter().map(|t| format!("{t:6.2}")).collect();
        println!("  {b}: {}   ({})", cells.join(" "), labels[picks[b]]);
    }
    Ok(())
}
