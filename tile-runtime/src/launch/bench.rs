//! Micro-benchmark of the host work of a warm launch, without a driver.
//!
//! A CUDA launch spends a few microseconds in the driver, which evicts the runtime's data
//! from the L1 and L2 caches; what the typed path then costs on top of a raw
//! `cuLaunchKernel` is mostly the cache lines it has to bring back. This times the part
//! of that path that runs without a GPU (building the `ArgRef`s as a generated launcher
//! does, the checks, the grid, the storage locks and the marshalling of the CUDA
//! parameter list) on CPU tensors, once warm and once after sweeping a buffer larger than
//! L2 between calls to stand in for the driver's eviction.
//!
//! Run with
//! `cargo test -p tile-runtime --release --lib -- --ignored --nocapture launch_path`.
//! It prints numbers and asserts nothing about them. `TILE_BENCH_SWEEP_MIB=4` runs one
//! sweep size only and `TILE_BENCH_ITERS=200` sets the call count, e.g. to count the
//! cache misses of `host_path` in a cache simulator instead of timing it.

use std::hint::black_box;
use std::time::Instant;

use super::*;
use crate::tensor::Tensor;
/// What `launch_dims` and `launch_cuda` do for a warm launch, up to the driver call.
#[inline(never)]
fn host_path(a: &Tensor<f32>, b: &Tensor<f32>, c: &mut Tensor<f32>) -> Result<()> {
    // The shape of `examples/launch_overhead.rs`: `tiny_add(a, b, mut c)` over f32[N].
    let spec = &super::tests::VECADD;
    let cfg = Config::get();
    let args = [ArgRef::input(a), ArgRef::input(b), ArgRef::output(c)];
    let mut dims = [0i64; INLINE];
    let dims = &mut dims[..spec.dims.len()];
    let device = check_into(spec, &args, dims)?;
    let grid = eval_grid(spec, device, dims)?;
    if cfg.diagnostics || grid.contains(&0) {
        return Ok(());
    }
    with_locked(&args, |held| {
        // (Stream ordering needs a CUDA stream; on the host it is a no-op.)
        for l in held.iter().flatten() {
            black_box(l.write);
        }
        with_cuda_params(&args, dims, &[], |params| {
            black_box((params, grid, spec.threads, spec.cuda.shared_bytes));
        });
        Ok(())
    })
}

/// Writes one byte per cache line of `buf`.
fn sweep(buf: &mut [u8]) {
    for i in (0..buf.len()).step_by(64) {
        buf[i] = buf[i].wrapping_add(1);
    }
    black_box(buf);
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

#[test]
#[ignore = "micro-benchmark; prints timings"]
fn launch_path_host_cost() -> Result<()> {
    let a = crate::testing::random_tensor::<f32>(&[256], 1, Device::Cpu)?;
    let b = crate::testing::random_tensor::<f32>(&[256], 2, Device::Cpu)?;
    let mut c = Tensor::<f32>::zeros(&[256], Device::Cpu)?;
    host_path(&a, &b, &mut c)?;
    println!("launch path without the driver (tiny_add, 3 buffers, 1 dim), ns per call:");
    println!("{:<28} {:>8} {:>8} {:>8}", "", "p10", "median", "p90");
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok());
    let cases = [(0usize, 50_000), (4, 5_000), (64, 500)];
    for (mib, iters) in cases {
        if env("TILE_BENCH_SWEEP_MIB").is_some_and(|m| m != mib) {
            continue;
        }
        let iters = env("TILE_BENCH_ITERS").unwrap_or(iters);
        let label = match mib {
            0 => "warm".to_string(),
            _ => format!("after a {mib} MiB sweep"),
        };
        let bytes = mib << 20;
        let mut buf = vec![0u8; bytes];
        let mut ns = Vec::with_capacity(iters);
        for _ in 0..iters {
            sweep(&mut buf);
            let t = Instant::now();
            host_path(&a, &b, &mut c)?;
            ns.push(t.elapsed().as_nanos() as f64);
        }
        ns.sort_by(f64::total_cmp);
        println!(
            "{label:<28} {:>8.0} {:>8.0} {:>8.0}",
            percentile(&ns, 0.1),
            percentile(&ns, 0.5),
            percentile(&ns, 0.9)
        );
    }
    Ok(())
}

/// Median over `batches` of the host time per call of 200 calls of `f`, the stream
/// drained before each batch (the same measure as `examples/launch_overhead.rs`).
fn per_call_us(
    stream: &Arc<CudaStream>,
    batches: usize,
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<f64> {
    const BATCH: usize = 200;
    let mut per = Vec::with_capacity(batches);
    for _ in 0..batches {
        stream
            .synchronize()
            .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
        let t = Instant::now();
        for _ in 0..BATCH {
            f()?;
        }
        per.push(t.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
    }
    per.sort_by(f64::total_cmp);
    Ok(per[per.len() / 2])
}

/// The typed launch taken apart on a GPU: each row adds one piece of the warm path to a
/// raw `cuLaunchKernel` of the same function on the same stream, and the rows are timed
/// in alternating rounds so drift falls on all alike. Prints per-row medians and each
/// row's median per-round excess over the raw launch.
///
/// `cargo test -p tile-runtime --release --lib -- --ignored --nocapture launch_path_gpu`
#[test]
#[ignore = "micro-benchmark on a GPU; prints timings"]
fn launch_path_gpu_decomposed() -> Result<()> {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skipped: {e}");
            return Ok(());
        }
    };
    let spec = &super::gpu_tests::VECADD_JIT;
    let cfg = Config::get();
    static SLOT: KernelSlot = KernelSlot::new();
    let n = 256usize;
    let a = crate::testing::random_tensor::<f32>(&[n], 1, dev)?;
    let b = crate::testing::random_tensor::<f32>(&[n], 2, dev)?;
    let mut c = Tensor::<f32>::zeros(&[n], dev)?;
    launch_with(
        cfg,
        spec,
        &SLOT,
        None,
        &[ArgRef::input(&a), ArgRef::input(&b), ArgRef::output(&mut c)],
    )?;
    let loaded = SLOT.cuda(spec, 0, cfg)?;
    let stream = Arc::clone(&loaded.dev.stream);
    let dims = [n as i64];
    let grid = [1i64, 1, 1];
    let (pa, pb, pc) = (
        a.data_ptr() as u64,
        b.data_ptr() as u64,
        c.data_ptr() as u64,
    );
    let mut fixed = (pa, pb, pc, n as i32);
    loaded
        .dev
        .ctx
        .bind_to_thread()
        .map_err(|e| Error::driver("cuCtxSetCurrent", e))?;
    let cu_func = loaded.func.cu_function();
    let raw_stream = stream.cu_stream();
    let raw_params = |f: &mut (u64, u64, u64, i32)| {
        [
            (&mut f.0 as *mut u64).cast::<c_void>(),
            (&mut f.1 as *mut u64).cast(),
            (&mut f.2 as *mut u64).cast(),
            (&mut f.3 as *mut i32).cast(),
        ]
    };

    let rows = [
        "raw cuLaunchKernel",
        "+ cuCtxGetCurrent",
        "+ bind_to_thread",
        "+ parameter list",
        "+ locks, stream order",
        "+ checks, grid (general)",
        "launch (warm path)",
        "warm path without locks",
    ];
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok());
    let rounds = env("TILE_BENCH_ROUNDS").unwrap_or(30);
    let batches = env("TILE_BENCH_BATCHES").unwrap_or(3);
    let mut t = vec![Vec::with_capacity(rounds); rows.len()];
    for _ in 0..rounds {
        for (row, times) in t.iter_mut().enumerate() {
            let mut call = || -> Result<()> {
                match row {
                    0 | 1 => {
                        if row == 1 {
                            let cur = cudarc::driver::result::ctx::get_current()
                                .map_err(|e| Error::driver("cuCtxGetCurrent", e))?;
                            black_box(cur);
                        }
                        let mut p = raw_params(&mut fixed);
                        // SAFETY: the kernel's ABI with live buffers of n floats.
                        unsafe {
                            cudarc::driver::result::launch_kernel(
                                cu_func,
                                (1, 1, 1),
                                (256, 1, 1),
                                0,
                                raw_stream,
                                &mut p,
                            )
                        }
                        .map_err(|e| Error::driver("cuLaunchKernel", e))
                    }
                    2 => {
                        let mut p = raw_params(&mut fixed);
                        // SAFETY: as above.
                        unsafe { cuda::launch(&loaded.func, &stream, [1, 1, 1], 256, 0, &mut p) }
                    }
                    3 => {
                        let args = [ArgRef::input(&a), ArgRef::input(&b), ArgRef::output(&mut c)];
                        with_cuda_params(&args, &dims, &[], |p| {
                            // SAFETY: as above.
                            unsafe { cuda::launch(&loaded.func, &stream, [1, 1, 1], 256, 0, p) }
                        })
                    }
                    4 => {
                        let args = [ArgRef::input(&a), ArgRef::input(&b), ArgRef::output(&mut c)];
                        launch_cuda(loaded, &stream, &dims, &[], grid, &args, false)
                    }
                    5 => launch_with(
                        cfg,
                        spec,
                        &SLOT,
                        None,
                        &[ArgRef::input(&a), ArgRef::input(&b), ArgRef::output(&mut c)],
                    ),
                    6 => launch(
                        spec,
                        &SLOT,
                        None,
                        &[ArgRef::input(&a), ArgRef::input(&b), ArgRef::output(&mut c)],
                    ),
                    // What the storage locks cost inside the warm path (the buffers are
                    // used by this thread alone, so skipping them is safe here).
                    _ => {
                        let args = [ArgRef::input(&a), ArgRef::input(&b), ArgRef::output(&mut c)];
                        let mut d = [0i64; 1];
                        assert!(crate::check::accepts(spec, &args, &mut d));
                        let g = super::warm::grid(spec, &d).expect("grid");
                        super::warm::order_and_enqueue(loaded, &stream, &d, &[], g, &args)
                    }
                }
            };
            times.push(per_call_us(&stream, batches, &mut call)?);
        }
    }
    stream
        .synchronize()
        .map_err(|e| Error::driver("cuStreamSynchronize", e))?;
    let got = c.to_vec()?;
    let (av, bv) = (a.to_vec()?, b.to_vec()?);
    assert!(got
        .iter()
        .zip(av.iter().zip(&bv))
        .all(|(c, (a, b))| *c == a + b));
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "warm launch taken apart ({rounds} alternating rounds of {batches} batches of 200), us per call:"
    );
    println!(
        "{:<26} {:>8} {:>16} {:>8}",
        "", "median", "excess over raw", "ratio"
    );
    let raw = med(t[0].clone());
    for (row, times) in t.iter().enumerate() {
        let excess = med(times.iter().zip(&t[0]).map(|(x, r)| x - r).collect());
        println!(
            "{:<26} {:>8.3} {:>16.3} {:>8.3}",
            rows[row],
            med(times.clone()),
            excess,
            med(times.clone()) / raw
        );
    }
    Ok(())
}
