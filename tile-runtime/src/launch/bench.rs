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
use crate::spec::{CpuKernel, CudaKernel, DimSpec, GridExpr, ParamSpec};

static N_DIM: GridExpr = GridExpr::Dim(0);
static BLOCK: GridExpr = GridExpr::Const(256);
static BLOCKS: GridExpr = GridExpr::CeilDiv(&N_DIM, &BLOCK);
static ONE: GridExpr = GridExpr::Const(1);
const N: DimSpec = DimSpec::Dyn(0);

/// The shape of `examples/launch_overhead.rs`: `tiny_add(a, b, mut c)` over f32[N].
static TINY_ADD: KernelSpec = KernelSpec {
    name: "tiny_add",
    params: &[
        ParamSpec {
            name: "a",
            dtype: DType::F32,
            shape: &[N],
            output: false,
            align: 16,
        },
        ParamSpec {
            name: "b",
            dtype: DType::F32,
            shape: &[N],
            output: false,
            align: 16,
        },
        ParamSpec {
            name: "c",
            dtype: DType::F32,
            shape: &[N],
            output: true,
            align: 16,
        },
    ],
    dims: &["N"],
    grid: [&BLOCKS, &ONE, &ONE],
    threads: 128,
    ir: "",
    cpu: CpuKernel {
        key: "0000",
        symbol: "none",
        source: "",
        aot: None,
    },
    cuda: CudaKernel {
        key: "0000",
        entry: "none",
        source: "",
        cubins: &[],
        shared_bytes: 0,
    },
};

/// What `launch_dims` and `launch_cuda` do for a warm launch, up to the driver call.
#[inline(never)]
fn host_path(a: &Tensor<f32>, b: &Tensor<f32>, c: &mut Tensor<f32>) -> Result<()> {
    let spec = &TINY_ADD;
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
        with_cuda_params(&args, dims, |params| {
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
