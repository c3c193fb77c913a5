//! Host cost of one launch of a tiny kernel, measured three ways in one process:
//! (a) a raw `cuLaunchKernel` of the same cubin, loaded through cudarc into the same
//! context, (b) the typed tile launcher, (c) replay of a CUDA graph of `GRAPH` typed
//! launches, divided by `GRAPH`. On a machine without a GPU it measures the typed
//! launcher on the CPU backend.
//!
//! Then the same comparison for a kernel with tensor maps, on Hopper: the GEMM
//! example's `gemm_nt_f16` on 128 × 128 matrices (one 128 × 128 tile, two k steps),
//! whose sm_90a code is warp-specialized (a producer warpgroup loads the operands with
//! bulk tensor copies), so each launch passes two `__grid_constant__` tensor maps after
//! the usual parameters. (e) is a raw `cuLaunchKernel` with maps encoded once before
//! the loop, as a hand-written launcher would; (f) the typed launcher, which finds its
//! maps in the runtime's cache on every launch (`tile-runtime/src/tma.rs`). Skipped,
//! with a message, on other GPUs. (The GEMM comes from `examples/gemm.rs`, where its
//! goldens and machine-code checks already are, rather than a new kernel here.)
//!
//! On CUDA it also launches the tiny kernel on views of cudarc slices (memory tile
//! does not own): (g) their warm launch cost beside (a), and the bandwidth of the
//! same add over 2^26 elements on tile tensors and on views, alternating.
//!
//! `cargo run --release --example launch_overhead [BATCHES]`

use std::time::Instant;

#[allow(dead_code)]
#[path = "gemm.rs"]
mod gemm;

use gemm::gemm_nt_f16;
use tile::prelude::*;
use tile_runtime::cudarc::driver::{result, sys, CudaFunction, CudaModule, CudaStream};
use tile_runtime::cudarc::nvrtc::Ptx;
use tile_runtime::spec::KernelSpec;
use tile_runtime::ArgRef;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn tiny_add(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

/// Launches per timed batch (well below the driver's launch queue depth, so the host
/// never waits for the device inside a batch).
const BATCH: usize = 200;
/// Launches in the captured graph.
const GRAPH: usize = 100;
const N: usize = 256;
/// The tensor-map GEMM's M = N = K: one 128 × 128 tile, so one block.
const G: usize = 128;
/// Short rounds per comparison, alternating between the launchers compared.
const ROUNDS: usize = 20;

type Launcher<'a> = &'a mut dyn FnMut() -> Result<(), Error>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// Median over `batches` of the host time per call of `BATCH` calls of `f`, the stream
/// drained before each batch; and the wall time per call of one long run (queue full:
/// the slower of host and device).
fn measure(
    batches: usize,
    sync: &dyn Fn() -> Result<(), Error>,
    f: &mut dyn FnMut() -> Result<(), Error>,
) -> Result<(f64, f64), Error> {
    let mut per = Vec::with_capacity(batches);
    for _ in 0..batches {
        sync()?;
        let t = Instant::now();
        for _ in 0..BATCH {
            f()?;
        }
        per.push(t.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
    }
    sync()?;
    let long = 20 * BATCH;
    let t = Instant::now();
    for _ in 0..long {
        f()?;
    }
    sync()?;
    let through = t.elapsed().as_secs_f64() * 1e6 / long as f64;
    Ok((median(per), through))
}

/// One launcher's host and wall microseconds per launch, one value per round.
#[derive(Default)]
struct Times {
    host: Vec<f64>,
    wall: Vec<f64>,
}

impl Times {
    fn host(&self) -> f64 {
        median(self.host.clone())
    }

    fn wall(&self) -> f64 {
        median(self.wall.clone())
    }

    /// Median, min and max over the rounds of this launcher's host time over
    /// `raw`'s: drift between rounds cancels within a round.
    fn per_round(&self, raw: &Times) -> (f64, f64, f64) {
        let mut r: Vec<f64> = self
            .host
            .iter()
            .zip(&raw.host)
            .map(|(t, r)| t / r)
            .collect();
        r.sort_by(f64::total_cmp);
        (median(r.clone()), r[0], r[r.len() - 1])
    }
}

/// Times each of `fs` in `ROUNDS` short rounds, one after the other within a round, so
/// that clock and cache drift fall on all of them alike.
fn alternate(
    batches: usize,
    sync: &dyn Fn() -> Result<(), Error>,
    fs: &mut [Launcher<'_>],
) -> Result<Vec<Times>, Error> {
    let mut out: Vec<Times> = fs.iter().map(|_| Times::default()).collect();
    for _ in 0..ROUNDS {
        for (f, t) in fs.iter_mut().zip(&mut out) {
            let (h, w) = measure(batches / ROUNDS + 1, sync, &mut **f)?;
            t.host.push(h);
            t.wall.push(w);
        }
    }
    Ok(out)
}

/// The lines of one raw/typed comparison: both launchers, their ratio, and the
/// ratio per round.
fn print_pair(raw: (&str, &Times), typed: (&str, &Times), ratio: &str) {
    let row = |label: &str, h: f64, w: f64| println!("{label:<40} {h:>12.3} {w:>12.3}");
    row(raw.0, raw.1.host(), raw.1.wall());
    row(typed.0, typed.1.host(), typed.1.wall());
    let (r, t) = (raw.1, typed.1);
    row(ratio, t.host() / r.host(), t.wall() / r.wall());
    let (rmed, rmin, rmax) = t.per_round(r);
    println!(
        "{:<40} {:>12.3} {:>12}",
        format!("{ratio} per round, median ({rmin:.3}-{rmax:.3})"),
        rmed,
        "-"
    );
}

/// The cubin of the code `spec` runs on this device (and its entry): embedded by the
/// build (with `NVCC` set), else the one the typed launcher's first call compiled into
/// the disk cache.
fn cubin_for(
    stream: &CudaStream,
    spec: &KernelSpec,
) -> Result<(Vec<u8>, String, &'static str), Box<dyn std::error::Error>> {
    let (major, minor) = stream.context().compute_capability()?;
    let arch = if (major, minor) == (9, 0) {
        "sm_90a".to_string()
    } else {
        format!("sm_{major}{minor}")
    };
    let code = spec.cuda_for(&arch);
    // Portable code built for sm_90 runs on a 9.0 device too.
    let want = [arch.clone(), format!("sm_{major}{minor}")];
    for w in &want {
        if let Some((a, bytes)) = code.cubins.iter().find(|(a, _)| a == w) {
            return Ok((bytes.to_vec(), format!("embedded {a} cubin"), code.entry));
        }
    }
    for e in tile::cache::CacheDir::from_env().entries() {
        let same_code = e.kernel.as_deref() == Some(spec.name)
            && e.target.as_deref() == Some("cuda")
            && e.arch.as_deref().is_none_or(|a| a == arch);
        if same_code {
            let path = e.path.join("kernel.cubin");
            return Ok((
                std::fs::read(&path)?,
                format!("{}", path.display()),
                code.entry,
            ));
        }
    }
    Err(format!(
        "no {arch} cubin of {}: build with NVCC set, or let the launcher compile it",
        spec.name
    )
    .into())
}

/// Loads `spec`'s cubin for this device into the stream's context.
fn load_raw(
    stream: &CudaStream,
    spec: &KernelSpec,
) -> Result<(std::sync::Arc<CudaModule>, CudaFunction, String), Box<dyn std::error::Error>> {
    let (cubin, from, entry) = cubin_for(stream, spec)?;
    let module = stream.context().load_module(Ptx::from_binary(cubin))?;
    let func = module.load_function(entry)?;
    Ok((module, func, from))
}

fn driver_err(call: &'static str) -> impl Fn(result::DriverError) -> Error {
    move |e| Error::Driver {
        call,
        message: format!("{e:?}"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let batches: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let dev = Device::from_env()?;
    let a = tile::testing::random_tensor::<f32>(&[N], 1, dev)?;
    let b = tile::testing::random_tensor::<f32>(&[N], 2, dev)?;
    let mut c = Tensor::<f32>::zeros(&[N], dev)?;
    let want: Vec<f64> = a
        .to_vec()?
        .iter()
        .zip(b.to_vec()?)
        .map(|(x, y)| f64::from(x + y))
        .collect();
    // First call: finds (or compiles) and loads the kernel.
    let t = Instant::now();
    tiny_add(&a, &b, &mut c)?;
    let first = t.elapsed().as_secs_f64() * 1e3;
    let err = tile::testing::max_abs_err(&c.to_vec()?, &want);
    let origin = tiny_add::profiler()
        .device(dev)
        .origin()
        .map(|o| o.to_string())
        .unwrap_or_default();
    println!("launch_overhead: device={dev} kernel=tiny_add (N={N}, 1 block of 128 threads, 3 buffers, 1 dim)");
    println!("first call {first:.3} ms (binary from {origin}); max_abs_err={err:e}");

    let stream = dev.default_stream()?;
    let sync = || stream.synchronize();
    let Some(cuda) = stream.as_cuda().cloned() else {
        let (host, _) = measure(batches, &sync, &mut || tiny_add(&a, &b, &mut c))?;
        println!("typed tile launcher on the CPU backend: {host:.2} us per launch (median of {batches} batches of {BATCH})");
        println!("tensor-map launch: skipped (CPU backend: no bulk tensor copies)");
        return Ok(());
    };

    // (a) The same cubin, loaded into the same context, launched raw.
    let (_module, func, from) = load_raw(&cuda, &tiny_add::SPEC)?;
    let (mut pa, mut pb) = (
        ArgRef::input(&a).ptr() as u64,
        ArgRef::input(&b).ptr() as u64,
    );
    let mut pc = ArgRef::output(&mut c).ptr() as u64;
    let mut pn = N as i32;
    let raw_stream = cuda.cu_stream();
    let cu_func = func.cu_function();
    cuda.context().bind_to_thread()?;
    let mut raw = || -> Result<(), Error> {
        let mut params = [
            (&mut pa as *mut u64).cast::<std::ffi::c_void>(),
            (&mut pb as *mut u64).cast(),
            (&mut pc as *mut u64).cast(),
            (&mut pn as *mut i32).cast(),
        ];
        // SAFETY: the kernel's ABI (three device pointers, one int) with live buffers of
        // N floats that nothing else uses while the loop runs.
        unsafe {
            result::launch_kernel(cu_func, (1, 1, 1), (128, 1, 1), 0, raw_stream, &mut params)
        }
        .map_err(driver_err("cuLaunchKernel"))
    };
    // (b) The typed launcher, same stream (the default one).
    let mut typed = || tiny_add(&a, &b, &mut c);
    // (d) The typed launcher on empty tensors: argument checks and grid only, no driver
    // call (an empty grid launches nothing), to split (b) - (a) into checks and the rest.
    let (ea, eb) = (
        Tensor::<f32>::zeros(&[0], dev)?,
        Tensor::<f32>::zeros(&[0], dev)?,
    );
    let mut ec = Tensor::<f32>::zeros(&[0], dev)?;
    let mut empty = || tiny_add(&ea, &eb, &mut ec);
    // (g) The typed launcher on views of cudarc slices (memory tile does not own),
    // allocated on this stream and viewed once: the warm launch through a view.
    let (sa, sb) = (
        cuda.clone_htod(&a.to_vec()?)?,
        cuda.clone_htod(&b.to_vec()?)?,
    );
    let mut sc = cuda.alloc_zeros::<f32>(N)?;
    let times = {
        let va = TensorView::from_cuda_slice(&sa, &[N])?;
        let vb = TensorView::from_cuda_slice(&sb, &[N])?;
        let mut vc = TensorViewMut::from_cuda_slice_mut(&mut sc, &[N])?;
        let mut viewed = || tiny_add(&va, &vb, &mut vc);
        // Many short rounds, alternating, so clock and cache drift fall on all alike.
        alternate(
            batches,
            &sync,
            &mut [&mut raw, &mut typed, &mut empty, &mut viewed],
        )?
    };
    let view_err = tile::testing::max_abs_err(&cuda.clone_dtoh(&sc)?, &want);
    let (raw_t, typed_t, empty_t, view_t) = (&times[0], &times[1], &times[2], &times[3]);

    // (c) A graph of GRAPH typed launches, replayed.
    let side = dev.new_stream()?;
    let g = Graph::capture(&side, |s| {
        (0..GRAPH).try_for_each(|_| tiny_add::on(s).launch(&a, &b, &mut c))
    })?;
    for _ in 0..10 {
        g.replay()?;
    }
    side.synchronize()?;
    let reps = 200;
    let t = Instant::now();
    for _ in 0..reps {
        g.replay()?;
    }
    side.synchronize()?;
    let graph = t.elapsed().as_secs_f64() * 1e6 / (reps * GRAPH) as f64;
    let err = tile::testing::max_abs_err(&c.to_vec()?, &want);

    println!("raw path loads {from}");
    println!("{:<40} {:>12} {:>12}", "", "host us", "wall us");
    print_pair(
        ("(a) raw cuLaunchKernel", raw_t),
        ("(b) typed tile launcher", typed_t),
        "(b)/(a)",
    );
    println!(
        "{:<40} {:>12.3} {:>12}",
        "(d) typed launcher, empty tensors",
        empty_t.host(),
        "-"
    );
    print_pair(
        ("(a) raw cuLaunchKernel", raw_t),
        ("(g) typed launcher, cudarc-slice views", view_t),
        "(g)/(a)",
    );
    println!(
        "{:<40} {:>12} {:>12.3}",
        format!("(c) graph of {GRAPH} launches / {GRAPH}"),
        "-",
        graph
    );
    println!(
        "host us: median over batches of {BATCH} launches (stream drained before each); \
         wall us: {} launches back to back, then synchronize; max_abs_err after the graph {err:e}, \
         through the views {view_err:e}",
        20 * BATCH
    );
    view_bandwidth(dev, &cuda)?;
    tma_launches(dev, &cuda, batches)
}

/// Elements of the bandwidth comparison: 768 MiB moved per launch.
const BIG: usize = 1 << 26;

/// `tiny_add` over `BIG` elements on tile tensors and on views of cudarc slices of the
/// same size, alternating in rounds of 20 launches (stream drained around each round):
/// the median GB/s of each (12 bytes per element), and their ratio.
fn view_bandwidth(
    dev: Device,
    cuda: &std::sync::Arc<CudaStream>,
) -> Result<(), Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<f32>(&[BIG], 3, dev)?;
    let b = tile::testing::random_tensor::<f32>(&[BIG], 4, dev)?;
    let mut c = Tensor::full(&[BIG], f32::NAN, dev)?;
    let (sa, sb) = (
        cuda.clone_htod(&a.to_vec()?)?,
        cuda.clone_htod(&b.to_vec()?)?,
    );
    let mut sc = cuda.alloc_zeros::<f32>(BIG)?;
    let stream = dev.default_stream()?;
    let (mut on_tensors, mut on_views) = (Vec::new(), Vec::new());
    {
        let va = TensorView::from_cuda_slice(&sa, &[BIG])?;
        let vb = TensorView::from_cuda_slice(&sb, &[BIG])?;
        let mut vc = TensorViewMut::from_cuda_slice_mut(&mut sc, &[BIG])?;
        let round = |f: &mut dyn FnMut() -> Result<(), Error>| -> Result<f64, Error> {
            stream.synchronize()?;
            let t = Instant::now();
            for _ in 0..20 {
                f()?;
            }
            stream.synchronize()?;
            Ok(20.0 * 12.0 * BIG as f64 / t.elapsed().as_secs_f64() / 1e9)
        };
        for r in 0..12 {
            let t = round(&mut || tiny_add(&a, &b, &mut c))?;
            let v = round(&mut || tiny_add(&va, &vb, &mut vc))?;
            // The first round of each warms up.
            if r > 0 {
                on_tensors.push(t);
                on_views.push(v);
            }
        }
    }
    let want: Vec<f32> = a
        .to_vec()?
        .iter()
        .zip(b.to_vec()?)
        .map(|(x, y)| x + y)
        .collect();
    let exact = c.to_vec()? == want && cuda.clone_dtoh(&sc)? == want;
    let (t, v) = (median(on_tensors), median(on_views));
    println!(
        "bandwidth, {BIG} f32 elements, 12 bytes each: tile tensors {t:.0} GB/s, cudarc-slice views {v:.0} GB/s, \
         views/tensors {:.3} (median of 11 rounds of 20 launches, alternating; results {})",
        v / t,
        if exact { "exact" } else { "WRONG" }
    );
    if !exact {
        return Err("tiny_add through views or tensors differs from a + b".into());
    }
    Ok(())
}

/// What the Hopper code's leading comment lines ask of its launch (the runtime reads
/// the same lines, `tile-runtime/src/tma.rs`): the block's threads, and per tensor map
/// the buffer parameter it describes and its box (columns, rows).
fn launch_plan(source: &str) -> (Option<u32>, Vec<(usize, u32, u32)>) {
    let field = |s: &str, name: &str| {
        s.split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('=').map(str::to_string))
    };
    let (mut threads, mut maps) = (None, Vec::new());
    for line in source.lines().take_while(|l| l.starts_with("//")) {
        if let Some(rest) = line.strip_prefix("// tile:launch ") {
            threads = field(rest, "threads").and_then(|v| v.parse().ok());
        } else if let Some(rest) = line.strip_prefix("// tile:tma ") {
            let param = field(rest, "param").and_then(|v| v.parse().ok());
            let boxes = field(rest, "box");
            let boxes = boxes.as_deref().and_then(|b| b.split_once('x'));
            if let (Some(p), Some((c, r))) = (param, boxes) {
                maps.push((p, c.parse().unwrap_or(0), r.parse().unwrap_or(0)));
            }
        }
    }
    (threads, maps)
}

/// The tensor map of a row-major f16 `rows × cols` matrix at `addr`, read in
/// `box_cols × box_rows` boxes with the 128-byte swizzle and zero fill past the edges:
/// what the runtime encodes for such a copy (`tile-runtime/src/tma.rs`), done once.
fn encode_f16(
    addr: u64,
    (rows, cols): (u64, u64),
    (box_cols, box_rows): (u32, u32),
) -> Result<sys::CUtensorMap, Error> {
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let (dims, strides) = ([cols, rows], [cols * 2]);
    let (boxes, elem) = ([box_cols, box_rows], [1u32; 2]);
    // SAFETY: every pointer points at a live local of the size rank 2 implies; the
    // address is a live device allocation of rows × cols f16 values (the caller's
    // G × G tensors: allocations are 256-byte aligned, rows 2·G = 256 bytes, within the
    // engine's limits); the driver only records it.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            2,
            addr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            elem.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    r.result()
        .map(|()| map)
        .map_err(driver_err("cuTensorMapEncodeTiled"))
}

/// Why the tensor-map comparison cannot run here, if it cannot.
fn tma_skip(cuda: &CudaStream) -> Result<Option<String>, Box<dyn std::error::Error>> {
    let cc = cuda.context().compute_capability()?;
    if cc != (9, 0) {
        return Ok(Some(format!(
            "compute capability {}.{}: bulk tensor copies are built for sm_90a only",
            cc.0, cc.1
        )));
    }
    let Some(code) = gemm_nt_f16::SPEC.cuda_sm90a else {
        return Ok(Some("gemm_nt_f16 has no sm_90a code".into()));
    };
    let (threads, maps) = launch_plan(code.source);
    if threads.is_none() || maps.len() != 2 || gemm_nt_f16::SPEC.dims.len() != 3 {
        return Ok(Some(
            "gemm_nt_f16's sm_90a code is not warp-specialized with two tensor maps".into(),
        ));
    }
    Ok(None)
}

/// (e) raw `cuLaunchKernel` of the warp-specialized GEMM with its two tensor maps,
/// against (f) its typed launcher; the raw result must equal the typed one.
fn tma_launches(
    dev: Device,
    cuda: &std::sync::Arc<CudaStream>,
    batches: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(why) = tma_skip(cuda)? {
        println!("tensor-map launch: skipped ({why})");
        return Ok(());
    }
    let a = tile::testing::random_tensor::<f16>(&[G, G], 11, dev)?;
    let b = tile::testing::random_tensor::<f16>(&[G, G], 12, dev)?;
    let mut c = Tensor::full(&[G, G], f16::NAN, dev)?;
    // First call: finds (or compiles) the kernel, so that the raw path finds its cubin.
    gemm_nt_f16(&a, &b, &mut c)?;
    let typed_out = c.to_vec()?;
    let err = tile::testing::max_abs_err(&typed_out, &gemm_reference(&a, &b)?);
    let code = gemm_nt_f16::SPEC.cuda_sm90a.ok_or("no sm_90a code")?;
    let (threads, plan) = launch_plan(code.source);
    let threads = threads.ok_or("no tile:launch line")?;
    let (_module, func, from) = load_raw(cuda, &gemm_nt_f16::SPEC)?;
    if code.shared_bytes > 48 * 1024 {
        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        func.set_attribute(attr, code.shared_bytes as i32)?;
    }
    let ptrs = [
        ArgRef::input(&a).ptr() as u64,
        ArgRef::input(&b).ptr() as u64,
        ArgRef::output(&mut c).ptr() as u64,
    ];
    // The maps, encoded once, before any timing (both operands are G × G).
    let encode =
        |(p, bc, br): (usize, u32, u32)| encode_f16(ptrs[p], (G as u64, G as u64), (bc, br));
    let mut maps = [encode(plan[0])?, encode(plan[1])?];
    let (mut pa, mut pb, mut pc) = (ptrs[0], ptrs[1], ptrs[2]);
    // The three dims (M, K, N in the kernel's ABI order), all G.
    let mut dims = [G as i32; 3];
    let (raw_stream, cu_func, shared) = (cuda.cu_stream(), func.cu_function(), code.shared_bytes);
    cuda.context().bind_to_thread()?;
    let mut raw = || -> Result<(), Error> {
        // On the stack, as the typed launcher's are.
        let [d0, d1, d2] = &mut dims;
        let [m0, m1] = &mut maps;
        let mut params = [
            (&mut pa as *mut u64).cast::<std::ffi::c_void>(),
            (&mut pb as *mut u64).cast(),
            (&mut pc as *mut u64).cast(),
            (d0 as *mut i32).cast(),
            (d1 as *mut i32).cast(),
            (d2 as *mut i32).cast(),
            (m0 as *mut sys::CUtensorMap).cast(),
            (m1 as *mut sys::CUtensorMap).cast(),
        ];
        // SAFETY: the kernel's sm_90a ABI (three device pointers, three int dims, then
        // one tensor map per `tile:tma` line, by value; `tma_skip` checked there are
        // two and three dims) with live G × G buffers that nothing else uses while the
        // loop runs, maps of those buffers, one block.
        unsafe {
            result::launch_kernel(
                cu_func,
                (1, 1, 1),
                (threads, 1, 1),
                shared,
                raw_stream,
                &mut params,
            )
        }
        .map_err(driver_err("cuLaunchKernel"))
    };
    let stream = dev.default_stream()?;
    let sync = || stream.synchronize();
    let raw_out = raw_once(&mut raw, &sync, &mut c)?;
    let mut typed = || gemm_nt_f16(&a, &b, &mut c);
    let times = alternate(batches, &sync, &mut [&mut raw, &mut typed])?;

    println!();
    println!(
        "tensor maps: kernel=gemm_nt_f16 ({G}x{G}x{G} f16, 1 block of {threads} threads: a producer \
         warpgroup + {} consumer, {} maps); raw path loads {from} and encodes its maps once",
        threads / 128 - 1,
        plan.len()
    );
    // Bit for bit: the same cubin on the same inputs, only the launch differs.
    let bits = |v: &[f16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let same = bits(&raw_out) == bits(&typed_out);
    println!(
        "max_abs_err {err:e} (typed vs host); raw result {} typed result",
        if same { "==" } else { "!=" }
    );
    println!("{:<40} {:>12} {:>12}", "", "host us", "wall us");
    print_pair(
        ("(e) raw cuLaunchKernel + tensor maps", &times[0]),
        ("(f) typed tile launcher, tensor maps", &times[1]),
        "(f)/(e)",
    );
    if !same {
        return Err("the raw launch with tensor maps computed another result".into());
    }
    // f16 outputs of 128-term sums of products in [-1, 1): about 1e-2 at most.
    if err.is_nan() || err > 0.05 {
        return Err(format!("gemm_nt_f16 differs from the host reference ({err:e})").into());
    }
    Ok(())
}

/// `c` poisoned (in place: the raw launch holds its address), one launch of `raw`,
/// and its result.
fn raw_once(
    raw: &mut dyn FnMut() -> Result<(), Error>,
    sync: &dyn Fn() -> Result<(), Error>,
    c: &mut Tensor<f16>,
) -> Result<Vec<f16>, Error> {
    c.copy_from_slice(&vec![f16::NAN; G * G])?;
    sync()?;
    raw()?;
    sync()?;
    c.to_vec()
}

/// `A · Bᵀ` on the host, in f64 (B is `[N, K]`).
fn gemm_reference(a: &Tensor<f16>, b: &Tensor<f16>) -> Result<Vec<f64>, Error> {
    let (ha, hb) = (a.to_vec()?, b.to_vec()?);
    let mut out = vec![0f64; G * G];
    for i in 0..G {
        for j in 0..G {
            out[i * G + j] = (0..G)
                .map(|k| ha[i * G + k].to_f64() * hb[j * G + k].to_f64())
                .sum();
        }
    }
    Ok(out)
}
