//! Streams, graphs, the profiler and inspection through real `#[tile::kernel]`
//! launchers, on `Device::default()` (the CPU here, the GPU where one is usable).

use tile::prelude::*;
use tile::testing::random_tensor;
use tile::{do_bench, BenchOptions};

#[tile::kernel(block_n = 256, threads = 128)]
pub fn g_add(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

#[tile::kernel(block_n = 256, threads = 128)]
pub fn g_scale(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] * 3.0;
        }
    });
}

#[tile::kernel(block_m = 16, block_n = 16, threads = 64)]
pub fn g_outer(a: Tensor<f32, (M,)>, b: Tensor<f32, (K,)>, c: TensorMut<f32, (M, K)>) {
    T::kernel(
        [T::ceildiv(K, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            for (i, j) in T::parallel([block_m, block_n]) {
                c[(by * block_m + i, bx * block_n + j)] = a[by * block_m + i] * b[bx * block_n + j];
            }
        },
    );
}

fn dev() -> Device {
    Device::default()
}

fn close(actual: &[f32], expected: &[f64]) {
    if let Err(e) = tile::testing::assert_allclose(actual, expected, 1e-6, 1e-6) {
        panic!("{e}");
    }
}

#[test]
fn explicit_and_default_streams() -> Result<(), Error> {
    let d = dev();
    let n = 5000;
    let a = random_tensor::<f32>(&[n], 1, d)?;
    let b = random_tensor::<f32>(&[n], 2, d)?;
    let (av, bv) = (a.to_vec()?, b.to_vec()?);
    let sum: Vec<f64> = av.iter().zip(&bv).map(|(x, y)| f64::from(x + y)).collect();
    let side = d.new_stream()?;
    let mut c = Tensor::zeros(&[n], d)?;
    g_add::on(&side).launch(&a, &b, &mut c)?;
    // Read on the default stream: ordered after the side stream's write.
    let mut e = Tensor::zeros(&[n], d)?;
    g_scale::on(&d.default_stream()?).launch(&c, &mut e)?;
    close(&c.to_vec()?, &sum);
    let tripled: Vec<f64> = sum.iter().map(|s| f64::from((*s as f32) * 3.0)).collect();
    close(&e.to_vec()?, &tripled);
    Ok(())
}

#[test]
fn graph_capture_replays_and_keeps_buffers_alive() -> Result<(), Error> {
    let d = dev();
    let n = 3001;
    let stream = d.new_stream()?;
    let a = random_tensor::<f32>(&[n], 3, d)?;
    let b = random_tensor::<f32>(&[n], 4, d)?;
    let (av, bv) = (a.to_vec()?, b.to_vec()?);
    let mut c = Tensor::zeros(&[n], d)?;
    let mut e = Tensor::zeros(&[n], d)?;
    // Warm up outside the capture (finding a kernel is best not captured).
    g_add::on(&stream).launch(&a, &b, &mut c)?;
    g_scale::on(&stream).launch(&c, &mut e)?;
    let mut c2 = Tensor::zeros(&[n], d)?;
    let mut e2 = Tensor::zeros(&[n], d)?;
    let g = Graph::capture(&stream, |s| {
        g_add::on(s).launch(&a, &b, &mut c2)?;
        g_scale::on(s).launch(&c2, &mut e2)
    })?;
    assert_eq!(g.launches(), 2);
    assert_eq!(g.buffers(), 4);
    stream.synchronize()?;
    assert!(
        e2.to_vec()?.iter().all(|&x| x == 0.0),
        "nothing runs while capturing"
    );
    let out = e2.clone();
    drop((a, b, c2, e2));
    for _ in 0..3 {
        g.replay()?;
    }
    let want: Vec<f64> = av
        .iter()
        .zip(&bv)
        .map(|(x, y)| f64::from((x + y) * 3.0))
        .collect();
    close(&out.to_vec()?, &want);
    // The default stream during a capture is the capture's stream.
    let x = random_tensor::<f32>(&[n], 5, d)?;
    let mut y = Tensor::zeros(&[n], d)?;
    let g2 = Graph::capture(&d.default_stream()?, |_| g_scale(&x, &mut y))?;
    assert_eq!(g2.launches(), 1);
    assert!(y.to_vec()?.iter().all(|&v| v == 0.0));
    g2.replay()?;
    let xv = x.to_vec()?;
    close(
        &y.to_vec()?,
        &xv.iter().map(|v| f64::from(v * 3.0)).collect::<Vec<_>>(),
    );
    Ok(())
}

#[test]
fn profiler_checks_against_a_reference_on_random_inputs() -> Result<(), Error> {
    let p = g_outer::profiler().device(dev()).dim("M", 37).dim("K", 50);
    let reports = p.assert_allclose(
        |x| {
            let (a, b) = (&x[0].data, &x[1].data);
            let mut c = Vec::with_capacity(a.len() * b.len());
            for ai in a {
                for bj in b {
                    c.push(f64::from((*ai as f32) * (*bj as f32)));
                }
            }
            vec![c]
        },
        0.0,
        0.0,
    )?;
    assert_eq!(reports.len(), 1);
    // A wrong reference is reported with the output's name.
    let err = p
        .assert_allclose(|x| vec![vec![0.5; x[2].data.len()]], 1e-3, 0.0)
        .err();
    assert!(
        matches!(err, Some(Error::Mismatch { buffer: "c", .. })),
        "{err:?}"
    );
    // Misuse is an error, not a panic.
    let unbound = g_outer::profiler().device(dev()).dim("M", 4);
    assert!(matches!(unbound.inputs(), Err(Error::Profile { .. })));
    let unknown = g_outer::profiler().device(dev()).dim("Q", 4);
    assert!(matches!(unknown.inputs(), Err(Error::Profile { .. })));
    assert!(p.origin().is_some());
    Ok(())
}

#[test]
fn do_bench_times_launches_and_graph_replays() -> Result<(), Error> {
    let d = dev();
    let opts = BenchOptions {
        warmup: std::time::Duration::from_millis(5),
        rep: std::time::Duration::from_millis(20),
        ..BenchOptions::default()
    };
    let p = g_add::profiler().device(d).dim("N", 1 << 16);
    let r = p.do_bench(&opts)?;
    assert!(r.median_ms > 0.0 && r.min_ms <= r.median_ms && r.median_ms <= r.max_ms);
    assert!(r.times_ms.len() >= opts.min_samples);
    let graph = BenchOptions {
        graph: true,
        calls_per_sample: 4,
        ..opts.clone()
    };
    let n = 1 << 16;
    let a = random_tensor::<f32>(&[n], 6, d)?;
    let mut c = Tensor::zeros(&[n], d)?;
    let stream = d.new_stream()?;
    let r = do_bench(&stream, |s| g_scale::on(s).launch(&a, &mut c), &graph)?;
    assert_eq!(r.calls_per_sample, 4);
    assert!(r.method.ends_with("graph"), "{}", r.method);
    assert!(r.median_ms > 0.0);
    Ok(())
}

#[test]
fn interleaved_bench_keeps_each_callable_apart() -> Result<(), Error> {
    let d = dev();
    let opts = BenchOptions {
        warmup: std::time::Duration::from_millis(2),
        rep: std::time::Duration::from_millis(20),
        ..BenchOptions::default()
    };
    let (small, large) = (1 << 10, 1 << 20);
    let a = random_tensor::<f32>(&[large], 7, d)?;
    let mut c = Tensor::zeros(&[large], d)?;
    let a_small = random_tensor::<f32>(&[small], 8, d)?;
    let mut c_small = Tensor::zeros(&[small], d)?;
    let stream = d.new_stream()?;
    // Plain, then primed: each timed call follows an untimed one of its own.
    for primed in [false, true] {
        let opts = BenchOptions { primed, ..opts };
        let (mut calls_large, mut calls_small) = (0usize, 0usize);
        let mut f_large = |s: &Stream| {
            calls_large += 1;
            g_scale::on(s).launch(&a, &mut c)
        };
        let mut f_small = |s: &Stream| {
            calls_small += 1;
            g_scale::on(s).launch(&a_small, &mut c_small)
        };
        let r = tile::do_bench_interleaved(&stream, &mut [&mut f_large, &mut f_small], &opts)?;
        assert_eq!(r.len(), 2);
        // Every round calls both once (twice primed): the same sample counts, and
        // as many calls.
        assert_eq!(r[0].times_ms.len(), r[1].times_ms.len());
        assert!(r[0].times_ms.len() >= opts.min_samples);
        assert_eq!(calls_large, calls_small);
        let per_sample = if primed { 2 } else { 1 };
        assert!(
            calls_small >= per_sample * r[1].times_ms.len(),
            "{calls_small} calls"
        );
        // In the order given: 1024 times the elements takes longer.
        assert!(r[0].median_ms > r[1].median_ms, "{:?} vs {:?}", r[0], r[1]);
        assert!(r
            .iter()
            .all(|x| x.min_ms <= x.median_ms && x.median_ms <= x.max_ms));
        // c holds the last call's result.
        let (x, y) = (a.to_vec()?, c.to_vec()?);
        let want: Vec<f32> = x.iter().map(|v| v * 3.0).collect();
        assert_eq!(y[..8], want[..8]);
    }
    Ok(())
}

#[test]
fn inspection_of_a_kernel() -> Result<(), Error> {
    let host = g_add::host_source();
    assert!(
        host.contains("kernel g_add: num_args should be 3"),
        "{host}"
    );
    assert!(
        host.contains("let grid = [ceildiv(N, 256), 1, 1];"),
        "{host}"
    );
    assert!(
        host.contains("kernel g_add input b shape mismatch"),
        "{host}"
    );
    assert!(g_add::source(Target::Cuda).contains("__global__"));
    assert!(g_add::ir().contains("g_add"));
    // `tile inspect --emit host` derives the same text from the source file alone.
    let out = std::process::Command::new(tile_bin())
        .args([
            "inspect",
            "tests/runtime_graph.rs",
            "--kernel",
            "g_add",
            "--emit",
            "host",
        ])
        .output()
        .map_err(|e| Error::Profile {
            kernel: "g_add",
            message: e.to_string(),
        })?;
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), host);
    let dir = std::env::temp_dir().join(format!("tile-export-it-{}", std::process::id()));
    let files = g_add::export_sources(&dir)?;
    assert_eq!(files.len(), 4);
    for f in &files {
        assert!(f.is_file(), "{}", f.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The `tile` binary: `TILE_BIN` when set (test binaries copied to another machine),
/// else the one cargo built beside this test.
fn tile_bin() -> std::path::PathBuf {
    std::env::var_os("TILE_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_tile")))
}
