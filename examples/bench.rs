//! Benchmarks tile kernels on a GPU beside their baselines, measured in this
//! one process on the same device: GEMM against cuBLAS (`cublasGemmEx`,
//! f16/bf16 in and out, f32 compute), softmax and rmsnorm against the
//! device-to-device copy bandwidth. Random inputs, CUDA-event timing, median
//! of many runs after warm-up (a GEMM and its cuBLAS baseline alternate run
//! by run). The example GEMM (`gemm_nn`, a space of 21 tile configurations
//! per dtype) and the row kernels (a space of block sizes) appear twice: the
//! default variant, and the variant tuned for each shape in this process
//! (`kernel::tune()`: every variant timed on the shape, L2 flushed; the
//! choice is kept in the disk cache, so a second run reads it and times
//! nothing). Prints the table last, then the tuning table: per shape the
//! chosen configuration, its time and the default's (from the tuning run),
//! and the time tuning took.
//!
//! fp8 GEMM (`gemm_fp8`, e4m3 with per-tensor scales) is compared with
//! cuBLASLt's fp8 matmul.
//!
//! After the table, every row with flops becomes a point of a roofline
//! (`bench/roofline.rs`): an SVG written to `$TILE_ROOFLINE` or
//! `roofline.svg` in the current directory, in every mode.
//!
//! GEMM rows are timed with L2 flushed before each run (a device memset that
//! also keeps the GPU busy while the host issues the timed launch, so small
//! shapes are not timed with their launch cost); `TILE_BENCH_WARM_L2=1`
//! waits on the GPU instead and leaves L2 warm.
//!
//! `cargo run --release --example bench [memory|gemm|tune|fp8|persistent|splitk|space|pitch|wide|grid|probe]`
//! (needs a CUDA device; `memory` stops after the memory-bound kernels,
//! `gemm` runs only the f16/bf16 GEMM table with its tuned rows, `tune` only
//! the GEMM tuning table (run it twice: the second process reads every
//! choice from the disk cache), the others one group of rows). `gemm`,
//! `tune` and `grid` take shapes after the mode (`bench tune 1000x1000x1000
//! 1008x1000x1000`, M×N×K): then only those, and `gemm` times only the
//! default and tuned example GEMM on them; `TILE_BENCH_ROWS=k32 bench gemm
//! [MxNxK..]` only the table's kernels whose names contain `k32`, untuned
//! (at 4096³ without shapes). `probe [MxNxK]` times six of
//! the example GEMM's variants the ways the tuner and this bench time
//! (`bench/probe.rs`).

#[path = "bench/blas.rs"]
mod blas;
#[path = "bench/cublaslt.rs"]
mod cublaslt;
#[path = "bench/fp8.rs"]
mod fp8;
#[allow(dead_code)]
#[path = "gemm_any_pitch.rs"]
mod gemm_any_pitch;
#[allow(dead_code)]
#[path = "gemm_fp8.rs"]
mod gemm_fp8;
#[allow(dead_code)]
#[path = "gemm_splitk.rs"]
mod gemm_splitk;
#[allow(dead_code)]
#[path = "gemv.rs"]
mod gemv;
#[path = "bench/memory.rs"]
mod memory;
#[path = "bench/probe.rs"]
mod probe;
#[allow(dead_code)]
#[path = "rmsnorm.rs"]
mod rmsnorm;
#[path = "bench/roofline.rs"]
mod roofline;
#[allow(dead_code)]
#[path = "softmax.rs"]
mod softmax;
#[path = "bench/space.rs"]
mod space;
#[path = "bench/splitk.rs"]
mod splitk;
#[allow(dead_code)]
#[path = "transpose.rs"]
mod transpose;

use blas::bench_gemm;
use gemm::Launch;
use gemm_any_pitch::gemm;
use roofline::Work;
use std::sync::Arc;
use tile::autotune::Pick;
use tile::prelude::*;

use cudarc::cublas::sys::cudaDataType;
use cudarc::cublas::CudaBlas;
use cudarc::driver::{sys::CUevent_flags, CudaStream};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The same GEMM with 8 warps (a 128 × 128 tile split 4 × 2), for comparison.
#[tile::kernel(block_m = 128, block_n = 128, block_k = 32, stages = 3, threads = 256)]
pub fn gemm_nn_f16_w8(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
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

/// A shallower K tile (128 × 128 × 32, 3 stages: 48 KiB of static shared
/// memory), for comparison with the example's 128 × 128 × 64; f16 and bf16.
#[tile::kernel(dtype = [f16, bf16], block_m = 128, block_n = 128, block_k = 32, stages = 3, threads = 128)]
pub fn gemm_nn_k32(
    a: Tensor<dtype, (M, K)>,
    b: Tensor<dtype, (K, N)>,
    c: TensorMut<dtype, (M, N)>,
) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
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
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// The k32 tile with 4 stages (64 KiB of dynamic shared memory), on bulk
/// tensor copies on Hopper (its 64-byte rows are one only on request:
/// `instruction = "tma"`; warp-specialized, two blocks a multiprocessor);
/// f16 and bf16.
#[tile::kernel(dtype = [f16, bf16], block_m = 128, block_n = 128, block_k = 32, stages = 4, threads = 128)]
pub fn gemm_nn_k32s4(
    a: Tensor<dtype, (M, K)>,
    b: Tensor<dtype, (K, N)>,
    c: TensorMut<dtype, (M, N)>,
) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_swizzle(8);
            let a_s = T::alloc_shared::<dtype>([block_m, block_k]);
            let b_s = T::alloc_shared::<dtype>([block_k, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s, instruction = "tma");
                T::copy(b.at([ko * block_k, bx * block_n]), b_s, instruction = "tma");
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// A decode-shaped tile: 16 rows (one `mma.sync` strip; the 4 warps split
/// the 64 columns) and a deep k128 pipeline, so that small M still spreads
/// over N/64 blocks streaming B; f16 and bf16.
#[tile::kernel(dtype = [f16, bf16], block_m = 16, block_n = 64, block_k = 128, stages = 4, threads = 128)]
pub fn gemm_nn_m16(
    a: Tensor<dtype, (M, K)>,
    b: Tensor<dtype, (K, N)>,
    c: TensorMut<dtype, (M, N)>,
) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<dtype>([block_m, block_k]);
            let b_s = T::alloc_shared::<dtype>([block_k, block_n]);
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

/// A 128 × 256 × 64 tile over two warpgroups, 3 stages (144 KiB), the
/// accumulator stored from registers; f16 and bf16. On Hopper the main loop
/// is warp-specialized: two consumer warpgroups and a producer warpgroup
/// that issues the tile copies as bulk tensor copies.
#[tile::kernel(dtype = [f16, bf16], block_m = 128, block_n = 256, block_k = 64, stages = 3, threads = 256)]
pub fn gemm_nn_n256(
    a: Tensor<dtype, (M, K)>,
    b: Tensor<dtype, (K, N)>,
    c: TensorMut<dtype, (M, N)>,
) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
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
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// Median milliseconds of `f` over `reps` runs after `warm` runs, by events.
/// Each timed run waits behind a 0.1 ms spin on the GPU, so the start event
/// opens when the launch is already queued: the time is the GPU's, not the
/// host's launch cost as well (which `launch_overhead` measures). Without
/// the spin, a 13 us kernel measured 17 us. L2 keeps what the previous run
/// left; callers that must not find their operands there rotate them.
fn time_ms(
    stream: &Arc<CudaStream>,
    warm: usize,
    reps: usize,
    mut f: impl FnMut() -> Res<()>,
) -> Res<f64> {
    for _ in 0..warm {
        f()?;
    }
    let mut ts = Vec::with_capacity(reps);
    for _ in 0..reps {
        spin(stream)?;
        let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        f()?;
        let end = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        end.synchronize()?;
        ts.push(start.elapsed_ms(&end)? as f64);
    }
    ts.sort_by(f64::total_cmp);
    Ok(ts[ts.len() / 2])
}

/// Bytes written before each paired timing: more than the H200's 50 MB L2.
const FLUSH_BYTES: usize = 256 << 20;

/// A kernel of one thread that waits `ns` nanoseconds of the GPU's clock.
const SPIN_PTX: &str = ".version 7.0
.target sm_80
.address_size 64
.visible .entry tl_spin(.param .u64 ns)
{
  .reg .pred %p;
  .reg .b64 %t0, %t1, %d, %lim;
  ld.param.u64 %lim, [ns];
  mov.u64 %t0, %globaltimer;
SPIN:
  mov.u64 %t1, %globaltimer;
  sub.u64 %d, %t1, %t0;
  setp.lt.u64 %p, %d, %lim;
  @%p bra SPIN;
  ret;
}
";

thread_local! {
    static SPIN: std::cell::RefCell<Option<cudarc::driver::CudaFunction>> = const { std::cell::RefCell::new(None) };
    static FLUSH: std::cell::RefCell<Option<cudarc::driver::CudaSlice<u8>>> = const { std::cell::RefCell::new(None) };
}

/// Queues `tl_spin` for 0.1 ms: the GPU is busy while the host issues what
/// comes next.
fn spin(stream: &Arc<CudaStream>) -> Res<()> {
    SPIN.with(|f| -> Res<()> {
        let mut f = f.borrow_mut();
        if f.is_none() {
            let m = stream
                .context()
                .load_module(cudarc::nvrtc::Ptx::from_src(SPIN_PTX))?;
            *f = Some(m.load_function("tl_spin")?);
        }
        use cudarc::driver::PushKernelArg;
        let ns = 100_000u64;
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: tl_spin takes one u64 by value and touches no memory.
        unsafe {
            stream
                .launch_builder(f.as_ref().expect("set above"))
                .arg(&ns)
                .launch(cfg)
        }?;
        Ok(())
    })
}

/// Runs before each paired timing. By default it overwrites L2 with a
/// device memset (as `triton.testing.do_bench` and the tuner do); with
/// `TILE_BENCH_WARM_L2=1` it only spins 0.1 ms on the GPU, leaving L2 as
/// the previous run left it. Either keeps the GPU busy while the host
/// issues the timed call, so the start event does not open before the
/// launch reaches the GPU: without it a kernel of a few microseconds is
/// timed together with its host launch cost (which launch_overhead
/// measures).
fn before_timed_run(stream: &Arc<CudaStream>) -> Res<()> {
    if std::env::var_os("TILE_BENCH_WARM_L2").is_some() {
        return spin(stream);
    }
    FLUSH.with(|b| -> Res<()> {
        let mut b = b.borrow_mut();
        if b.is_none() {
            *b = Some(stream.alloc_zeros::<u8>(FLUSH_BYTES)?);
        }
        stream.memset_zeros(b.as_mut().expect("set above"))?;
        Ok(())
    })
}

/// Median milliseconds of `f` and of `g`, timed alternately (f, g, f, g, ...)
/// after `warm` runs of each, so that clock and temperature drift during the
/// measurement fall on both alike. L2 is flushed before every timed run.
fn time_pair_ms(
    stream: &Arc<CudaStream>,
    warm: usize,
    reps: usize,
    mut f: impl FnMut() -> Res<()>,
    mut g: impl FnMut() -> Res<()>,
) -> Res<(f64, f64)> {
    for _ in 0..warm {
        f()?;
        g()?;
    }
    let once = |h: &mut dyn FnMut() -> Res<()>| -> Res<f64> {
        before_timed_run(stream)?;
        let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        h()?;
        let end = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        end.synchronize()?;
        Ok(start.elapsed_ms(&end)? as f64)
    };
    let (mut tf, mut tg) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for _ in 0..reps {
        tf.push(once(&mut f)?);
        tg.push(once(&mut g)?);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok((median(tf), median(tg)))
}

struct Row {
    what: String,
    /// The kernel without its shape: one colour of the roofline.
    series: String,
    tile: String,
    base: String,
    ratio: f64,
    /// The measured numbers behind the row, for its roofline point.
    work: Work,
}

/// One tuning of one kernel on one shape.
struct Tuned {
    what: String,
    report: std::sync::Arc<tile::autotune::TuneReport>,
    /// Wall time of the tuning call (first launches included).
    wall_ms: f64,
}

impl Tuned {
    fn new(
        what: String,
        report: std::sync::Arc<tile::autotune::TuneReport>,
        wall_ms: f64,
    ) -> Tuned {
        Tuned {
            what,
            report,
            wall_ms,
        }
    }
}

fn print_rows(rows: &[Row]) {
    println!();
    println!(
        "{:<46} {:>26} {:>26} {:>7}",
        "kernel", "tile", "baseline (same run)", "ratio"
    );
    for r in rows {
        println!(
            "{:<46} {:>26} {:>26} {:>6.1}%",
            r.what,
            r.tile,
            r.base,
            100.0 * r.ratio
        );
    }
}

/// Tunes `gemm_nn::<E>` on fresh `m × k` and `k × n` inputs (a shape's choice
/// is kept for the rest of the process and in the disk cache).
fn tune_gemm<E: gemm::gemm_nn::Dtype>(
    dtype: &str,
    dev: Device,
    (m, n, k): (usize, usize, usize),
) -> Res<Tuned> {
    let a = tile::testing::random_tensor::<E>(&[m, k], 51, dev)?;
    let b = tile::testing::random_tensor::<E>(&[k, n], 52, dev)?;
    let mut c = Tensor::<E>::zeros(&[m, n], dev)?;
    let t = std::time::Instant::now();
    gemm::gemm_nn::tune().launch(&a, &b, &mut c)?;
    dev.synchronize()?;
    let wall_ms = t.elapsed().as_secs_f64() * 1e3;
    let report = gemm::gemm_nn::reports::<E>()
        .into_iter()
        .find(|r| r.shapes == [vec![m, k], vec![k, n], vec![m, n]])
        .ok_or("no tuning report")?;
    Ok(Tuned::new(
        format!("gemm {dtype} nn {m}x{n}x{k}"),
        report,
        wall_ms,
    ))
}

/// `bench persistent`: the persistent GEMM of the example (one pipe across
/// tiles) beside the one-tile-per-block kernels of the same and a larger
/// tile, on the large and odd shapes of the Hopper issue.
fn persistent_rows(
    dev: Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    rows: &mut Vec<Row>,
) -> Res<()> {
    // 4096³ and the large and odd shapes (no decode shapes).
    let shapes = std::iter::once((4096, 4096, 4096)).chain(GEMM_SHAPES.into_iter().take(6));
    for s in shapes {
        persistent_set::<f16>(
            "f16",
            cudaDataType::CUDA_R_16F,
            (dev, stream, blas),
            s,
            rows,
        )?;
        persistent_set::<bf16>(
            "bf16",
            cudaDataType::CUDA_R_16BF,
            (dev, stream, blas),
            s,
            rows,
        )?;
    }
    Ok(())
}

/// The three kernels of `bench persistent` in one dtype on one shape.
fn persistent_set<E>(
    dname: &str,
    dt: cudaDataType,
    (dev, stream, blas): (Device, &Arc<CudaStream>, &CudaBlas),
    shape: (usize, usize, usize),
    rows: &mut Vec<Row>,
) -> Res<()>
where
    E: gemm::gemm_persistent::Dtype
        + gemm::gemm_nn::Dtype
        + gemm_nn_n256::Dtype
        + cudarc::driver::DeviceRepr
        + cudarc::driver::ValidAsZeroBits,
{
    let kernels: [(&str, Launch<E>); 3] = [
        ("persistent (128x128)", |a, b, c| {
            gemm::gemm_persistent(a, b, c)
        }),
        ("(k64, 96 KiB)", |a, b, c| {
            gemm::gemm_nn::with(gemm::gemm_nn::Config::DEFAULT).launch(a, b, c)
        }),
        ("(128x256, 2 warpgroups)", |a, b, c| gemm_nn_n256(a, b, c)),
    ];
    for (what, f) in kernels {
        let name = format!("gemm {dname} nn {what}");
        bench_gemm::<E>(&name, &f, dev, stream, blas, shape, dt, rows)?;
    }
    Ok(())
}

fn main() -> Res<()> {
    let dev = Device::default();
    if !dev.is_cuda() {
        println!("bench: no CUDA device; this benchmark needs a GPU (TILE_DEVICE=cuda)");
        return Ok(());
    }
    let Stream::Cuda(stream) = dev.default_stream()? else {
        unreachable!("cuda device")
    };
    let blas = CudaBlas::new(stream.clone())?;
    let mut rows = Vec::new();
    // Measured in every mode: it is the roofline's memory roof.
    let copy_bw = memory::copy_bandwidth(&stream)?;
    let device = stream.context().name().unwrap_or_else(|_| dev.to_string());
    // The modes that time one group of rows alone.
    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode == "probe" {
        let shape = shape_args()?.and_then(|v| v.first().copied());
        return probe::probe_rows(shape, dev, &stream);
    }
    if matches!(
        mode.as_str(),
        "fp8" | "persistent" | "splitk" | "space" | "pitch" | "wide" | "grid"
    ) {
        match mode.as_str() {
            "fp8" => fp8::fp8_rows(dev, &stream, &mut rows)?,
            "persistent" => persistent_rows(dev, &stream, &blas, &mut rows)?,
            "space" => space::space_rows(dev, &stream, &blas, &mut rows)?,
            "pitch" => space::pitch_rows(dev, &stream, &blas, &mut rows)?,
            "wide" => space::wide_rows(dev, &stream, &blas, &mut rows)?,
            "grid" => space::grid_rows(shape_args()?, dev, &stream, &blas, &mut rows)?,
            _ => splitk::splitk_rows(dev, &stream, &blas, &mut rows)?,
        }
        print_rows(&rows);
        roofline::write(&rows, copy_bw, &device);
        return Ok(());
    }

    let mut tuned: Vec<Tuned> = Vec::new();
    let custom = shape_args()?;
    if mode == "tune" {
        // Only the GEMM tuning table: a second run in a new process shows
        // whether the choices come from the disk cache (nothing timed).
        for s in custom.clone().unwrap_or_else(default_shapes) {
            tuned.push(tune_gemm::<f16>("f16", dev, s)?);
            tuned.push(tune_gemm::<bf16>("bf16", dev, s)?);
            if s.1 % 8 != 0 || s.2 % 8 != 0 {
                tuned.push(tune_plan::<f16>("f16", dev, s)?);
                tuned.push(tune_plan::<bf16>("bf16", dev, s)?);
            }
        }
        print_tuned(&tuned);
        return Ok(());
    }
    if mode != "gemm" {
        memory::memory_rows(dev, &stream, copy_bw, &mut rows, &mut tuned)?;
        // The memory-bound table now (the GEMM part takes minutes); `bench
        // memory` stops here.
        print_rows(&rows);
        if mode == "memory" {
            roofline::write(&rows, copy_bw, &device);
            return Ok(());
        }
    }
    gemm_rows(
        dev,
        &stream,
        &blas,
        custom.as_deref(),
        &mut rows,
        &mut tuned,
    )?;
    if mode != "gemm" {
        fp8::fp8_rows(dev, &stream, &mut rows)?;
        splitk::splitk_rows(dev, &stream, &blas, &mut rows)?;
    }
    print_rows(&rows);
    roofline::write(&rows, copy_bw, &device);
    print_tuned(&tuned);
    Ok(())
}

/// The shapes of the Hopper issue after 4096³: square, LLaMA-7B
/// projections, a large MLP, odd sizes (127 rows among them), decode
/// (small M).
const GEMM_SHAPES: [(usize, usize, usize); 9] = [
    (8192, 8192, 8192),
    (4096, 11008, 4096),
    (4096, 4096, 11008),
    (8192, 28672, 8192),
    (1000, 1000, 1000),
    (4097, 4095, 4099),
    (127, 8192, 8192),
    (16, 8192, 8192),
    (1, 8192, 8192),
];

/// The shapes the GEMM table and the tuning table time by default: 4096³,
/// then the Hopper issue's list.
fn default_shapes() -> Vec<(usize, usize, usize)> {
    std::iter::once((4096, 4096, 4096))
        .chain(GEMM_SHAPES)
        .collect()
}

/// The shapes given after the mode (`MxNxK` each), if any.
fn shape_args() -> Res<Option<Vec<(usize, usize, usize)>>> {
    let shapes: Vec<(usize, usize, usize)> = std::env::args()
        .skip(2)
        .map(|a| {
            let d: Vec<usize> = a
                .split('x')
                .map(str::parse)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("bench: shape `{a}` is not MxNxK: {e}"))?;
            match d[..] {
                [m, n, k] if m > 0 && n > 0 && k > 0 => Ok((m, n, k)),
                _ => Err(format!(
                    "bench: shape `{a}` is not MxNxK (three positive sizes)"
                )),
            }
        })
        .collect::<Result<_, String>>()?;
    Ok((!shapes.is_empty()).then_some(shapes))
}

/// The example GEMM's variants and the bench's own kernels against cuBLAS,
/// default and tuned per shape; with `custom` shapes only the example's
/// default and tuned GEMM on those.
fn gemm_rows(
    dev: Device,
    stream: &Arc<CudaStream>,
    blas: &CudaBlas,
    custom: Option<&[(usize, usize, usize)]>,
    rows: &mut Vec<Row>,
    tuned: &mut Vec<Tuned>,
) -> Res<()> {
    // In table order: the example's kernels and the variants above.
    enum Gemm {
        F16(&'static str, Launch<f16>),
        Bf16(&'static str, Launch<bf16>),
    }
    // The example's default variant, named explicitly: a plain call would use
    // a choice tuned earlier in this process.
    let gemms = [
        Gemm::F16("gemm f16 nn (k64, 96 KiB)", |a, b, c| {
            gemm::gemm_nn::with(gemm::gemm_nn::Config::DEFAULT).launch(a, b, c)
        }),
        Gemm::F16("gemm f16 nn (k32, 8 warps)", gemm_nn_f16_w8),
        Gemm::F16("gemm f16 nn (k32, 48 KiB)", gemm_nn_k32),
        Gemm::Bf16("gemm bf16 nn (k64, 96 KiB)", |a, b, c| {
            gemm::gemm_nn::with(gemm::gemm_nn::Config::DEFAULT).launch(a, b, c)
        }),
        Gemm::Bf16("gemm bf16 nn (k32, 48 KiB)", gemm_nn_k32),
        Gemm::F16("gemm f16 nn (k32, 4 stages, bulk copies)", gemm_nn_k32s4),
        Gemm::Bf16("gemm bf16 nn (k32, 4 stages, bulk copies)", gemm_nn_k32s4),
        Gemm::F16("gemm f16 nn (128x256, 2 warpgroups)", gemm_nn_n256),
        Gemm::Bf16("gemm bf16 nn (128x256, 2 warpgroups)", gemm_nn_n256),
    ];
    let run = |g: &Gemm, shape, rows: &mut Vec<Row>| match *g {
        Gemm::F16(name, f) => bench_gemm::<f16>(
            name,
            &f,
            dev,
            stream,
            blas,
            shape,
            cudaDataType::CUDA_R_16F,
            rows,
        ),
        Gemm::Bf16(name, f) => bench_gemm::<bf16>(
            name,
            &f,
            dev,
            stream,
            blas,
            shape,
            cudaDataType::CUDA_R_16BF,
            rows,
        ),
    };
    let shapes = custom.map_or_else(default_shapes, <[_]>::to_vec);
    // `TILE_BENCH_ROWS=k32`: only the table's kernels whose names contain it,
    // at the shapes given (4096³ without), and no tuning.
    if let Ok(only) = std::env::var("TILE_BENCH_ROWS") {
        for g in &gemms {
            let (Gemm::F16(name, _) | Gemm::Bf16(name, _)) = g;
            if name.contains(only.as_str()) {
                for &s in custom.unwrap_or(&[(4096, 4096, 4096)]) {
                    run(g, s, rows)?;
                }
            }
        }
        return Ok(());
    }
    if custom.is_some() {
        for g in [&gemms[0], &gemms[3]] {
            for &s in &shapes {
                run(g, s, rows)?;
            }
        }
    } else {
        for g in &gemms {
            run(g, (4096, 4096, 4096), rows)?;
        }
        for g in [&gemms[0], &gemms[3], &gemms[7], &gemms[8]] {
            for s in GEMM_SHAPES {
                run(g, s, rows)?;
            }
        }
        // The 16-row tile on the decode shapes (and one ragged M).
        for g in [
            Gemm::F16("gemm f16 nn (16-row tile)", gemm_nn_m16),
            Gemm::Bf16("gemm bf16 nn (16-row tile)", gemm_nn_m16),
        ] {
            for s in [(16, 8192, 8192), (1, 8192, 8192), (33, 8192, 8192)] {
                run(&g, s, rows)?;
            }
        }
    }

    // The example's GEMM tuned per shape (every variant timed on the shape),
    // then timed against cuBLAS like the rows above.
    let tuned_gemms = [
        Gemm::F16("gemm f16 nn (tuned)", |a, b, c| {
            gemm::gemm_nn::tune().launch(a, b, c)
        }),
        Gemm::Bf16("gemm bf16 nn (tuned)", |a, b, c| {
            gemm::gemm_nn::tune().launch(a, b, c)
        }),
    ];
    for s in shapes {
        tuned.push(tune_gemm::<f16>("f16", dev, s)?);
        tuned.push(tune_gemm::<bf16>("bf16", dev, s)?);
        for g in &tuned_gemms {
            run(g, s, rows)?;
        }
        // A pitch off 16 bytes: the operands padded first, then the aligned
        // GEMM, tuned on the padded shape (examples/gemm_any_pitch.rs).
        if s.1 % 8 != 0 || s.2 % 8 != 0 {
            // The plans tuned first (the rows' tuned plan then uses the choice).
            tuned.push(tune_plan::<f16>("f16", dev, s)?);
            tuned.push(tune_plan::<bf16>("bf16", dev, s)?);
            padded_row::<f16>(
                "f16",
                s,
                cudaDataType::CUDA_R_16F,
                (dev, stream, blas),
                rows,
            )?;
            padded_row::<bf16>(
                "bf16",
                s,
                cudaDataType::CUDA_R_16BF,
                (dev, stream, blas),
                rows,
            )?;
        }
    }
    Ok(())
}

/// Tunes `gemm_any_pitch::Gemm::<E>`'s plans (direct or padded, each with
/// `gemm_nn` tuned) on fresh `m × k` and `k × n` inputs.
fn tune_plan<E: gemm_any_pitch::Dtype>(
    dtype: &str,
    dev: Device,
    (m, n, k): (usize, usize, usize),
) -> Res<Tuned> {
    let a = tile::testing::random_tensor::<E>(&[m, k], 53, dev)?;
    let b = tile::testing::random_tensor::<E>(&[k, n], 54, dev)?;
    let mut c = Tensor::<E>::zeros(&[m, n], dev)?;
    let t = std::time::Instant::now();
    gemm_any_pitch::Gemm::<E>::default().launch(Pick::Tune, &a, &b, &mut c)?;
    dev.synchronize()?;
    let wall_ms = t.elapsed().as_secs_f64() * 1e3;
    let report = gemm_any_pitch::Gemm::<E>::reports()
        .into_iter()
        .find(|r| r.shapes == [vec![m, k], vec![k, n], vec![m, n]])
        .ok_or("no plan report")?;
    Ok(Tuned::new(
        format!("plan {dtype} nn {m}x{n}x{k}"),
        report,
        wall_ms,
    ))
}

/// Rows of `gemm_any_pitch` beside cuBLAS: `AnyPitch` (padded buffers kept
/// across the timed runs; each run pads, multiplies and unpads), `FixedB`
/// (B padded once; each run pads A if K is off and unpads C if N is), and
/// `Gemm` (the plan tuned for the shape, direct or padded: `tune_plan`).
fn padded_row<E>(
    dname: &str,
    s: (usize, usize, usize),
    dt: cudaDataType,
    (dev, stream, blas): (Device, &Arc<CudaStream>, &CudaBlas),
    rows: &mut Vec<Row>,
) -> Res<()>
where
    E: gemm_any_pitch::Dtype + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits,
{
    let tuned: gemm_any_pitch::GemmFn<'_, E> =
        &|a, b, c| gemm_any_pitch::gemm::gemm_nn::tune().launch(a, b, c);
    let any = std::cell::RefCell::new(gemm_any_pitch::AnyPitch::<E>::default());
    let name = format!("gemm {dname} nn (padded, tuned)");
    bench_gemm::<E>(
        &name,
        &|a, b, c| any.borrow_mut().launch(a, b, c, tuned),
        dev,
        stream,
        blas,
        s,
        dt,
        rows,
    )?;
    // B as fixed weights, padded at the first call only (bench_gemm passes
    // the same B to every call).
    let fixed = std::cell::RefCell::new(None::<gemm_any_pitch::FixedB<E>>);
    bench_gemm::<E>(
        &format!("{name}, B padded once"),
        &|a, b, c| {
            let mut f = fixed.borrow_mut();
            if f.is_none() {
                *f = Some(gemm_any_pitch::FixedB::new(b)?);
            }
            f.as_mut().expect("set above").launch(a, c, tuned)
        },
        dev,
        stream,
        blas,
        s,
        dt,
        rows,
    )?;
    let chooser = std::cell::RefCell::new(gemm_any_pitch::Gemm::<E>::default());
    bench_gemm::<E>(
        &format!("gemm {dname} nn (tuned plan)"),
        &|a, b, c| chooser.borrow_mut().launch(Pick::Tune, a, b, c),
        dev,
        stream,
        blas,
        s,
        dt,
        rows,
    )
}

fn print_tuned(tuned: &[Tuned]) {
    // Per tuned shape: the chosen variant, its median and the default's (both
    // from the tuning run, L2 flushed), variants that ran and matched, the
    // time spent timing, on first launches (module loads) and on checking
    // (saving, restoring and comparing outputs, on the device), the tuning
    // call's wall time, and whether the choice came from the disk cache (then
    // nothing was timed: the times are the earlier run's).
    println!();
    println!(
        "{:<30} {:>9} {:>10} {:>7} {:>6} {:>10} {:>9} {:>9} {:>9} {:>6}  chosen",
        "autotune",
        "tuned ms",
        "default ms",
        "speedup",
        "ok",
        "timing ms",
        "first ms",
        "check ms",
        "wall ms",
        "cached"
    );
    for t in tuned {
        let r = &t.report;
        let chosen = r
            .rows
            .get(r.chosen)
            .and_then(|x| x.median_ms())
            .unwrap_or(f64::NAN);
        let default = r
            .rows
            .first()
            .and_then(|x| x.median_ms())
            .unwrap_or(f64::NAN);
        let ok = r.rows.iter().filter(|x| x.median_ms().is_some()).count();
        println!(
            "{:<30} {:>9.4} {:>10.4} {:>6.2}x {:>6} {:>10.1} {:>9.1} {:>9.1} {:>9.1} {:>6}  {}",
            t.what,
            chosen,
            default,
            default / chosen,
            format!("{ok}/{}", r.rows.len()),
            r.timing_ms,
            r.first_launch_ms,
            r.check_ms,
            t.wall_ms,
            if r.from_cache { "yes" } else { "no" },
            r.chosen_label
        );
    }
    // Every variant's time (ms; a variant pruned after one call shows that
    // call), one line per shape, for comparing variants across shapes.
    println!();
    for t in tuned {
        let times: Vec<String> = t
            .report
            .rows
            .iter()
            .map(|x| match x.median_ms() {
                Some(ms) => format!("[{}] {ms:.4}", x.variant),
                None => format!("[{}] -", x.variant),
            })
            .collect();
        println!("variants {}: {}", t.what, times.join("; "));
    }
}
