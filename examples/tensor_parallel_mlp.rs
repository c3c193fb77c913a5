//! A tensor-parallel MLP block, `Y = GELU(X · W1) · W2`, over every visible
//! GPU (Megatron-style): rank `g` holds a block of W1's columns and the same
//! block of W2's rows, computes `GELU(X · W1_g) · W2_g` (a column-parallel
//! GEMM with GELU fused, then a row-parallel GEMM) and the partial products
//! are summed by an NCCL all-reduce (`tile::dist`). The result is checked
//! against the same MLP on one GPU (unsharded) and, at small sizes, against a
//! host reference; per-GPU and total throughput are printed. With one rank the
//! step is also recorded into a `tile::Graph`, kernels and all-reduce
//! together, and replayed.
//!
//! Without a GPU it runs on the CPU backend with one rank (the host
//! communicator: the all-reduce of one rank is a copy).
//!
//! `cargo run --release --example tensor_parallel_mlp [TOKENS HIDDEN INTER] [--gpus N] [--bench]`
//! (`--bench`: 8192 tokens, hidden 8192, intermediate 32768, timed; tunes the
//! kernels' tiles first; `--allreduce MIB` times the all-reduce alone.)

use std::time::Instant;

use tile::dist::{self, Comm, ReduceOp};
use tile::prelude::*;
use tile::{do_bench, BenchOptions};

/// GELU, `x Φ(x)` with the normal CDF from `erf`.
#[tile::func]
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + T::erf(x * 0.707_106_77))
}

/// `H = GELU(X · W)`: the column-parallel GEMM, GELU computed on the f32
/// accumulator before the one rounding to f16. Two tiles: 128 × 128 on four
/// warps (the default) and 128 × 256 on two warpgroups.
#[tile::kernel(
    block_m = 128, block_n = [128, 256], block_k = 64, stages = 3, threads = [128, 256],
    filter = (block_n == 256) == (threads == 256)
)]
pub fn tp_gemm_gelu(x: Tensor<f16, (M, K)>, w: Tensor<f16, (K, N)>, h: TensorMut<f16, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_swizzle(8);
            let x_s = T::alloc_shared::<f16>([block_m, block_k]);
            let w_s = T::alloc_shared::<f16>([block_k, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(x.at([by * block_m, ko * block_k]), x_s);
                T::copy(w.at([ko * block_k, bx * block_n]), w_s);
                T::gemm(x_s, w_s, acc);
            }
            for (i, j) in T::parallel([block_m, block_n]) {
                h[(by * block_m + i, bx * block_n + j)] = gelu(acc[(i, j)]) as f16;
            }
        },
    );
}

/// `Y = H · W`: the row-parallel GEMM (each rank's product is a partial sum
/// of the full one); the result leaves through a shared tile.
#[tile::kernel(
    block_m = 128, block_n = [128, 256], block_k = 64, stages = 3, threads = [128, 256],
    filter = (block_n == 256) == (threads == 256)
)]
pub fn tp_gemm(h: Tensor<f16, (M, K)>, w: Tensor<f16, (K, N)>, y: TensorMut<f16, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_swizzle(8);
            let h_s = T::alloc_shared::<f16>([block_m, block_k]);
            let w_s = T::alloc_shared::<f16>([block_k, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::pipelined(T::ceildiv(K, block_k), stages) {
                T::copy(h.at([by * block_m, ko * block_k]), h_s);
                T::copy(w.at([ko * block_k, bx * block_n]), w_s);
                T::gemm(h_s, w_s, acc);
            }
            let y_s = T::alloc_shared::<f16>([block_m, block_n]);
            T::annotate_layout(y_s, T::swizzled);
            T::copy(acc, y_s);
            T::copy(y_s, y.at([by * block_m, bx * block_n]));
        },
    );
}

/// The MLP's sizes: `X` is `[tokens, hidden]`, `W1` `[hidden, inter]`, `W2`
/// `[inter, hidden]`.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub tokens: usize,
    pub hidden: usize,
    pub inter: usize,
}

impl Sizes {
    /// Multiply-adds × 2 of one forward step (both GEMMs).
    fn flops(self) -> f64 {
        4.0 * self.tokens as f64 * self.hidden as f64 * self.inter as f64
    }
}

/// One rank's weights and buffers, all on its device.
struct Shard {
    comm: Comm,
    x: Tensor<f16>,
    w1: Tensor<f16>,
    w2: Tensor<f16>,
    h: Tensor<f16>,
    y: Tensor<f16>,
}

impl Shard {
    /// This rank's two GEMMs on `stream` (`None`: the device's default stream).
    fn compute(&mut self, stream: Option<&Stream>) -> Result<(), Error> {
        match stream {
            Some(s) => {
                tp_gemm_gelu::on(s).launch(&self.x, &self.w1, &mut self.h)?;
                tp_gemm::on(s).launch(&self.h, &self.w2, &mut self.y)
            }
            None => {
                tp_gemm_gelu(&self.x, &self.w1, &mut self.h)?;
                tp_gemm(&self.h, &self.w2, &mut self.y)
            }
        }
    }
}

/// One tensor-parallel forward step: every rank's GEMMs, then the all-reduce
/// of the partial outputs, grouped (one process drives every GPU).
fn step(shards: &mut [Shard]) -> Result<(), Error> {
    for s in shards.iter_mut() {
        s.compute(None)?;
    }
    all_reduce(shards)
}

fn all_reduce(shards: &mut [Shard]) -> Result<(), Error> {
    dist::group(|| {
        shards
            .iter_mut()
            .try_for_each(|s| s.comm.all_reduce_in_place(&mut s.y, ReduceOp::Sum))
    })
}

fn synchronize(devices: &[Device]) -> Result<(), Error> {
    devices.iter().try_for_each(|d| d.synchronize())
}

/// Host data of the weights: uniform with variance `1/K` so that every
/// output stays near 1 whatever the sizes.
fn weights(rows: usize, cols: usize, seed: u64) -> Vec<f16> {
    let a = (3.0 / rows as f64).sqrt();
    tile::testing::random_vec::<f16>(rows * cols, seed, -a, a)
}

/// Columns `c0..c1` of a row-major `[rows, cols]` matrix.
fn columns(m: &[f16], cols: usize, c0: usize, c1: usize) -> Vec<f16> {
    m.chunks(cols)
        .flat_map(|row| row[c0..c1].iter().copied())
        .collect()
}

/// What `run` measured.
pub struct Report {
    pub lines: Vec<String>,
}

/// Runs the MLP sharded over `devices` (one rank each; `[Device::Cpu]` for the
/// host) and checks it against the unsharded MLP on `devices[0]` and, when
/// `host_check`, against a host reference. With `bench`, tunes the kernels'
/// tiles and times the step.
pub fn run(
    devices: &[Device],
    sz: Sizes,
    host_check: bool,
    bench: bool,
) -> Result<Report, Box<dyn std::error::Error>> {
    let g = devices.len();
    if g == 0 || !sz.inter.is_multiple_of(g) {
        return Err(format!(
            "the intermediate size {} must split over {g} rank(s)",
            sz.inter
        )
        .into());
    }
    let part = sz.inter / g;
    let mut lines = Vec::new();
    for d in devices {
        lines.push(format!("rank device {}", d.info()?));
    }
    if let Ok((major, minor, patch)) = dist::nccl_version() {
        lines.push(format!("NCCL {major}.{minor}.{patch}"));
    }
    let x_host = tile::testing::random_vec::<f16>(sz.tokens * sz.hidden, 1, -1.0, 1.0);
    let w1_host = weights(sz.hidden, sz.inter, 2);
    let w2_host = weights(sz.inter, sz.hidden, 3);

    let comms = Comm::for_devices(devices)?;
    let mut shards = Vec::with_capacity(g);
    for (r, comm) in comms.into_iter().enumerate() {
        let d = devices[r];
        let w1 = columns(&w1_host, sz.inter, r * part, (r + 1) * part);
        let w2 = &w2_host[r * part * sz.hidden..(r + 1) * part * sz.hidden];
        shards.push(Shard {
            comm,
            x: Tensor::from_slice(&x_host, &[sz.tokens, sz.hidden], d)?,
            w1: Tensor::from_vec(w1, &[sz.hidden, part], d)?,
            w2: Tensor::from_slice(w2, &[part, sz.hidden], d)?,
            h: Tensor::full(&[sz.tokens, part], f16::NAN, d)?,
            y: Tensor::full(&[sz.tokens, sz.hidden], f16::NAN, d)?,
        });
    }

    if bench && devices[0].is_cuda() {
        // Tune each kernel's tile on the step's shapes.
        // A tuned choice is per device: every rank tunes.
        for s in shards.iter_mut() {
            tp_gemm_gelu::tune().launch(&s.x, &s.w1, &mut s.h)?;
            tp_gemm::tune().launch(&s.h, &s.w2, &mut s.y)?;
        }
        let chosen = |r: Vec<std::sync::Arc<tile::autotune::TuneReport>>| {
            r.iter()
                .map(|r| format!("{} ({})", r.chosen_label, r.device))
                .collect::<Vec<_>>()
                .join(", ")
        };
        lines.push(format!(
            "tuned tiles: tp_gemm_gelu {}; tp_gemm {}",
            chosen(tp_gemm_gelu::reports()),
            chosen(tp_gemm::reports())
        ));
    }

    let t = Instant::now();
    step(&mut shards)?;
    synchronize(devices)?;
    let first = t.elapsed();

    // Every rank holds the same sum.
    let y = shards[0].y.to_vec()?;
    for s in &shards[1..] {
        if s.y.to_vec()? != y {
            return Err(format!("rank {} holds another result than rank 0", s.comm.rank()).into());
        }
    }

    // The same MLP on one device, unsharded.
    let one = devices[0];
    let x1 = Tensor::from_slice(&x_host, &[sz.tokens, sz.hidden], one)?;
    let w1 = Tensor::from_slice(&w1_host, &[sz.hidden, sz.inter], one)?;
    let w2 = Tensor::from_slice(&w2_host, &[sz.inter, sz.hidden], one)?;
    let mut h1 = Tensor::full(&[sz.tokens, sz.inter], f16::NAN, one)?;
    let mut y1 = Tensor::full(&[sz.tokens, sz.hidden], f16::NAN, one)?;
    tp_gemm_gelu(&x1, &w1, &mut h1)?;
    tp_gemm(&h1, &w2, &mut y1)?;
    let y_one: Vec<f64> = y1.to_vec()?.iter().map(|v| v.to_f64()).collect();
    // One rank: the same kernels on the same data, bit for bit. More: the
    // partial sums are rounded to f16 before they are added.
    let tol = if g == 1 { 0.0 } else { 4e-3 * g as f64 };
    let r1 = tile::testing::assert_allclose(&y, &y_one, tol, tol)
        .map_err(|e| format!("sharded over {g} vs one device: {e}"))?;
    lines.push(format!(
        "sharded over {g} rank(s) vs unsharded on {one}: max_abs_err={:.3e}",
        r1.max_abs
    ));
    drop((w1, h1, y1));

    if host_check {
        let want = reference(&x_host, &w1_host, &w2_host, sz);
        let tol = 2e-3 * (sz.inter as f64).sqrt();
        let r = tile::testing::assert_allclose(&y, &want, tol, 2e-2)
            .map_err(|e| format!("vs host reference: {e}"))?;
        lines.push(format!("vs host reference: max_abs_err={:.3e}", r.max_abs));
    }

    if g == 1 && one.is_cuda() {
        // Kernels and the all-reduce recorded as one graph, replayed.
        let stream = one.new_stream()?;
        let s = &mut shards[0];
        s.y.copy_from_slice(&vec![f16::NAN; sz.tokens * sz.hidden])?;
        let graph = Graph::capture(&stream, |st| {
            s.compute(Some(st))?;
            s.comm.on(st).all_reduce_in_place(&mut s.y, ReduceOp::Sum)
        })?;
        graph.replay()?;
        stream.synchronize()?;
        if s.y.to_vec()? != y {
            return Err("the graph replay computed another result".into());
        }
        lines.push(format!(
            "graph of {} operations (2 kernels + all-reduce) replayed: same result",
            graph.launches()
        ));
    }

    lines.push(format!(
        "tensor_parallel_mlp: ranks={g} tokens={} hidden={} inter={} first step {:.3} ms",
        sz.tokens,
        sz.hidden,
        sz.inter,
        first.as_secs_f64() * 1e3
    ));
    if bench {
        lines.extend(time(devices, &mut shards, sz)?);
    }
    Ok(Report { lines })
}

/// Per-rank GEMM throughput (each rank alone, CUDA events), the all-reduce
/// alone and the whole step on all ranks (wall clock over several steps).
fn time(
    devices: &[Device],
    shards: &mut [Shard],
    sz: Sizes,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let g = shards.len();
    let mut lines = Vec::new();
    let opts = BenchOptions {
        flush_l2: false,
        ..BenchOptions::default()
    };
    let per_rank = sz.flops() / g as f64;
    for (d, s) in devices.iter().zip(shards.iter_mut()) {
        let stream = d.default_stream()?;
        let r = do_bench(&stream, |st| s.compute(Some(st)), &opts)?;
        lines.push(format!(
            "rank {} on {d}: column GEMM+GELU and row GEMM {:.3} ms, {:.2} TFLOP/s",
            s.comm.rank(),
            r.median_ms,
            per_rank / r.median_ms / 1e9
        ));
    }
    let reps = 20;
    let median = |f: &mut dyn FnMut() -> Result<(), Error>| -> Result<f64, Error> {
        f()?;
        synchronize(devices)?;
        let mut ts = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            f()?;
            synchronize(devices)?;
            ts.push(t.elapsed().as_secs_f64() * 1e3);
        }
        ts.sort_by(f64::total_cmp);
        Ok(ts[reps / 2])
    };
    let t_ar = median(&mut || all_reduce(shards))?;
    let bytes = (sz.tokens * sz.hidden * 2) as f64;
    lines.push(format!(
        "all-reduce of {:.1} MiB over {g} rank(s): {:.3} ms, algbw {:.1} GB/s, busbw {:.1} GB/s",
        bytes / (1u64 << 20) as f64,
        t_ar,
        bytes / t_ar / 1e6,
        bytes / t_ar / 1e6 * 2.0 * (g as f64 - 1.0) / g as f64
    ));
    let t_step = median(&mut || step(shards))?;
    lines.push(format!(
        "step (GEMMs on every rank + all-reduce): {:.3} ms, total {:.2} TFLOP/s, {:.2} TFLOP/s per rank",
        t_step,
        sz.flops() / t_step / 1e9,
        sz.flops() / t_step / 1e9 / g as f64
    ));
    Ok(lines)
}

/// The all-reduce alone: `mib` MiB of f32 per rank, in place and into
/// another buffer, summed over every rank (median of 20, wall clock).
pub fn time_all_reduce(devices: &[Device], mib: usize) -> Result<Vec<String>, Error> {
    let n = mib << 18;
    let comms = Comm::for_devices(devices)?;
    let mut bufs: Vec<(Tensor<f32>, Tensor<f32>)> = devices
        .iter()
        .map(|&d| Ok((Tensor::full(&[n], 1.0f32, d)?, Tensor::zeros(&[n], d)?)))
        .collect::<Result<_, Error>>()?;
    let g = devices.len() as f64;
    let mut lines = Vec::new();
    for in_place in [true, false] {
        let mut ts = Vec::new();
        for rep in 0..21 {
            let t = Instant::now();
            dist::group(|| {
                comms
                    .iter()
                    .zip(bufs.iter_mut())
                    .try_for_each(|(c, (a, b))| {
                        if in_place {
                            c.all_reduce_in_place(a, ReduceOp::Sum)
                        } else {
                            c.all_reduce(a, b, ReduceOp::Sum)
                        }
                    })
            })?;
            synchronize(devices)?;
            if rep > 0 {
                ts.push(t.elapsed().as_secs_f64());
            }
        }
        ts.sort_by(f64::total_cmp);
        let t = ts[ts.len() / 2];
        let bytes = (n * 4) as f64;
        lines.push(format!(
            "tile all-reduce {mib} MiB f32 over {g} rank(s), {}: {:.3} ms, algbw {:.1} GB/s, busbw {:.1} GB/s",
            if in_place { "in place" } else { "out of place" },
            t * 1e3,
            bytes / t / 1e9,
            bytes / t / 1e9 * 2.0 * (g - 1.0) / g
        ));
    }
    Ok(lines)
}

/// `GELU(X · W1)` rounded to f16 (as the kernel stores it), then `· W2`, in f64.
fn reference(x: &[f16], w1: &[f16], w2: &[f16], sz: Sizes) -> Vec<f64> {
    let (t, hd, it) = (sz.tokens, sz.hidden, sz.inter);
    let w1: Vec<f64> = w1.iter().map(|v| v.to_f64()).collect();
    let w2: Vec<f64> = w2.iter().map(|v| v.to_f64()).collect();
    let mut out = vec![0f64; t * hd];
    let mut h = vec![0f64; it];
    for i in 0..t {
        h.iter_mut().for_each(|v| *v = 0.0);
        for p in 0..hd {
            let a = x[i * hd + p].to_f64();
            for (hj, w) in h.iter_mut().zip(&w1[p * it..(p + 1) * it]) {
                *hj += a * w;
            }
        }
        for hj in h.iter_mut() {
            *hj = f16::from_f64(gelu_ref(*hj)).to_f64();
        }
        let row = &mut out[i * hd..(i + 1) * hd];
        for (p, &a) in h.iter().enumerate() {
            for (o, w) in row.iter_mut().zip(&w2[p * hd..(p + 1) * hd]) {
                *o += a * w;
            }
        }
    }
    out
}

fn gelu_ref(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

/// erf to about 1e-7 (Abramowitz–Stegun 7.1.26): enough for an f16 output.
fn erf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let y = 1.0
        - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736) * t
            + 0.254_829_592)
            * t
            * (-x * x).exp();
    y.copysign(x)
}

/// The ranks: every visible GPU (or the first `gpus`), or the host.
pub fn ranks(gpus: Option<usize>) -> Result<Vec<Device>, Error> {
    let dev = Device::from_env()?;
    if dev.is_cpu() {
        return Ok(vec![Device::Cpu]);
    }
    if std::env::var("TILE_DEVICE").is_ok_and(|v| v.contains(':')) {
        // One device asked for by name.
        return Ok(vec![dev]);
    }
    let all = Device::all_cuda();
    Ok(all[..gpus.unwrap_or(all.len()).min(all.len())].to_vec())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut bench = false;
    let mut gpus = None;
    let mut all_reduce_mib = None;
    let mut sizes = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bench" => bench = true,
            "--gpus" => gpus = Some(args.next().ok_or("--gpus takes a count")?.parse()?),
            "--allreduce" => {
                all_reduce_mib = Some(args.next().ok_or("--allreduce takes MiB")?.parse()?)
            }
            _ => sizes.push(a.parse::<usize>()?),
        }
    }
    let devices = ranks(gpus)?;
    if let Some(mib) = all_reduce_mib {
        for l in time_all_reduce(&devices, mib)? {
            println!("{l}");
        }
        return Ok(());
    }
    let sz = match (sizes.as_slice(), bench, devices[0].is_cpu()) {
        ([t, h, i], _, _) => Sizes {
            tokens: *t,
            hidden: *h,
            inter: *i,
        },
        ([], true, _) => Sizes {
            tokens: 8192,
            hidden: 8192,
            inter: 32768,
        },
        ([], false, true) => Sizes {
            tokens: 64,
            hidden: 128,
            inter: 256,
        },
        ([], false, false) => Sizes {
            tokens: 512,
            hidden: 1024,
            inter: 4096,
        },
        _ => return Err("sizes: TOKENS HIDDEN INTER".into()),
    };
    // The host reference costs tokens × hidden × inter multiply-adds.
    let host_check = (sz.tokens * sz.hidden * sz.inter) as f64 <= 1.1e9;
    let r = run(&devices, sz, host_check, bench)?;
    for l in r.lines {
        println!("{l}");
    }
    Ok(())
}
