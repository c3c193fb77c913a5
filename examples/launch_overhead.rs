//! Host cost of one launch of a tiny kernel, measured three ways in one process:
//! (a) a raw `cuLaunchKernel` of the same cubin, loaded through cudarc into the same
//! context, (b) the typed tile launcher, (c) replay of a CUDA graph of `GRAPH` typed
//! launches, divided by `GRAPH`. On a machine without a GPU it measures the typed
//! launcher on the CPU backend.
//!
//! `cargo run --release --example launch_overhead [BATCHES]`

use std::time::Instant;

use tile::prelude::*;
use tile_runtime::cudarc::driver::{result, CudaStream};
use tile_runtime::cudarc::nvrtc::Ptx;
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

fn cubin_for(stream: &CudaStream) -> Result<(Vec<u8>, String), Box<dyn std::error::Error>> {
    let (major, minor) = stream.context().compute_capability()?;
    let want = if (major, minor) == (9, 0) {
        vec!["sm_90a".to_string(), "sm_90".to_string()]
    } else {
        vec![format!("sm_{major}{minor}")]
    };
    for w in &want {
        if let Some((a, bytes)) = tiny_add::SPEC.cuda.cubins.iter().find(|(a, _)| a == w) {
            return Ok((bytes.to_vec(), format!("embedded {a} cubin")));
        }
    }
    // Not built with nvcc: the cubin the typed launcher's NVRTC compile published.
    for e in tile::cache::CacheDir::from_env().entries() {
        if e.kernel.as_deref() == Some("tiny_add") && e.target.as_deref() == Some("cuda") {
            let path = e.path.join("kernel.cubin");
            return Ok((std::fs::read(&path)?, format!("{}", path.display())));
        }
    }
    Err("no cubin of tiny_add: build with NVCC set, or let the launcher compile it".into())
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
        return Ok(());
    };

    // (a) The same cubin, loaded into the same context, launched raw.
    let (cubin, from) = cubin_for(&cuda)?;
    let module = cuda.context().load_module(Ptx::from_binary(cubin))?;
    let func = module.load_function(tiny_add::SPEC.cuda.entry)?;
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
        .map_err(|e| Error::Driver {
            call: "cuLaunchKernel",
            message: format!("{e:?}"),
        })
    };
    // (b) The typed launcher, same stream (the default one).
    // Interleave the two so drift affects both alike.
    let mut raw_host = Vec::new();
    let mut raw_through = Vec::new();
    let mut typed_host = Vec::new();
    let mut typed_through = Vec::new();
    // (d) The typed launcher on empty tensors: argument checks and grid only, no driver
    // call (an empty grid launches nothing), to split (b) - (a) into checks and the rest.
    let (ea, eb) = (
        Tensor::<f32>::zeros(&[0], dev)?,
        Tensor::<f32>::zeros(&[0], dev)?,
    );
    let mut ec = Tensor::<f32>::zeros(&[0], dev)?;
    let mut empty_host = Vec::new();
    // Many short rounds, alternating, so clock and cache drift fall on both alike.
    const ROUNDS: usize = 20;
    for _ in 0..ROUNDS {
        let (h, t) = measure(batches / ROUNDS + 1, &sync, &mut raw)?;
        raw_host.push(h);
        raw_through.push(t);
        let (h, t) = measure(batches / ROUNDS + 1, &sync, &mut || {
            tiny_add(&a, &b, &mut c)
        })?;
        typed_host.push(h);
        typed_through.push(t);
        let (h, _) = measure(1, &sync, &mut || tiny_add(&ea, &eb, &mut ec))?;
        empty_host.push(h);
    }
    let eh = median(empty_host);
    // Each round's typed/raw ratio: drift between rounds cancels within a round.
    let mut per_round: Vec<f64> = typed_host
        .iter()
        .zip(&raw_host)
        .map(|(t, r)| t / r)
        .collect();
    per_round.sort_by(f64::total_cmp);
    let (rmin, rmax) = (per_round[0], per_round[per_round.len() - 1]);
    let rmed = median(per_round);
    let (rh, rt, th, tt) = (
        median(raw_host),
        median(raw_through),
        median(typed_host),
        median(typed_through),
    );

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
    println!("{:<40} {:>12.3} {:>12.3}", "(a) raw cuLaunchKernel", rh, rt);
    println!(
        "{:<40} {:>12.3} {:>12.3}",
        "(b) typed tile launcher", th, tt
    );
    println!("{:<40} {:>12.3} {:>12.3}", "(b)/(a)", th / rh, tt / rt);
    println!(
        "{:<40} {:>12.3} {:>12}",
        format!("(b)/(a) per round, median ({rmin:.3}-{rmax:.3})"),
        rmed,
        "-"
    );
    println!(
        "{:<40} {:>12.3} {:>12}",
        "(d) typed launcher, empty tensors", eh, "-"
    );
    println!(
        "{:<40} {:>12} {:>12.3}",
        format!("(c) graph of {GRAPH} launches / {GRAPH}"),
        "-",
        graph
    );
    println!(
        "host us: median over batches of {BATCH} launches (stream drained before each); \
         wall us: {} launches back to back, then synchronize; max_abs_err after the graph {err:e}",
        20 * BATCH
    );
    Ok(())
}
