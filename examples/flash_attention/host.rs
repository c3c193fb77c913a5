//! The host side of `examples/flash_attention.rs`: shapes, the f64
//! reference, the choice of kernel for a shape, the checks, the timings
//! and the command line. The kernels stay in that file, where the build
//! reads them.

use super::*;
use std::time::Instant;

/// The shape of one attention call: `b` batches of `h` query heads and `hkv`
/// key/value heads over `s` positions of head dim `d`.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub b: usize,
    pub h: usize,
    pub hkv: usize,
    pub s: usize,
    pub d: usize,
    pub causal: bool,
}

impl Shape {
    /// `b` batches, `h` query and `hkv` key/value heads, `s` positions,
    /// head dim `d`.
    pub const fn new(b: usize, h: usize, hkv: usize, s: usize, d: usize, causal: bool) -> Self {
        Shape {
            b,
            h,
            hkv,
            s,
            d,
            causal,
        }
    }

    /// FLOPs of the two products, `4 · b · h · s² · d`, halved when causal
    /// (the convention FlashAttention's and torch's benchmarks use).
    pub fn flops(&self) -> f64 {
        let full = 4.0 * (self.b * self.h) as f64 * (self.s * self.s) as f64 * self.d as f64;
        if self.causal {
            full / 2.0
        } else {
            full
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "b={} h={} hkv={} s={} d={}{}",
            self.b,
            self.h,
            self.hkv,
            self.s,
            self.d,
            if self.causal { " causal" } else { "" }
        )
    }
}

/// `O = softmax(Q Kᵀ / √d) V` per head, in f64 (query head `h` reads
/// key/value head `h / (H / HKV)`; causal: query `i` sees keys `j ≤ i`).
fn reference<E: Elem>(q: &[E], k: &[E], v: &[E], sh: Shape) -> Vec<f64> {
    let Shape {
        b,
        h,
        hkv,
        s,
        d,
        causal,
    } = sh;
    let scale = 1.0 / (d as f64).sqrt();
    let wide = |x: &[E]| -> Vec<f64> { x.iter().map(|e| e.to_f64()).collect() };
    let (q, k, v) = (wide(q), wide(k), wide(v));
    let mut o = vec![0f64; b * h * s * d];
    // The heads split over the host's cores: at S in the thousands this
    // reference, not the kernel, is what a check waits for.
    tile::testing::par_rows(&mut o, s * d, |first, out| {
        let mut w = vec![0f64; s];
        for (n, oh) in out.chunks_mut((s * d).max(1)).enumerate() {
            let (bi, hi) = ((first + n) / h, (first + n) % h);
            let qh = (bi * h + hi) * s;
            let kh = (bi * hkv + hi / (h / hkv)) * s;
            for i in 0..s {
                let keys = if causal { i + 1 } else { s };
                for (j, wj) in w[..keys].iter_mut().enumerate() {
                    *wj = (0..d)
                        .map(|c| q[(qh + i) * d + c] * k[(kh + j) * d + c])
                        .sum::<f64>()
                        * scale;
                }
                let mx = w[..keys].iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let mut sum = 0.0;
                for wj in w[..keys].iter_mut() {
                    *wj = (*wj - mx).exp();
                    sum += *wj;
                }
                for c in 0..d {
                    let x: f64 = (0..keys).map(|j| w[j] * v[(kh + j) * d + c]).sum();
                    oh[i * d + c] = x / sum;
                }
            }
        }
    });
    o
}

/// The element types every kernel of this file is built for (each kernel is
/// one source over `dtype`, compiled once per type ahead of time).
pub trait Elem:
    Element
    + flash_attention::Dtype
    + flash_attention_causal::Dtype
    + flash_attention_causal_persistent::Dtype
    + flash_attention_d128::Dtype
    + flash_attention_d128_causal::Dtype
    + flash_attention_d256::Dtype
    + flash_attention_d256_causal::Dtype
{
    /// The check's tolerance against the f64 reference (absolute, relative):
    /// P and the output are rounded to this type.
    const TOL: (f64, f64);
}
impl Elem for f16 {
    const TOL: (f64, f64) = (2e-3, 2e-2);
}
impl Elem for bf16 {
    const TOL: (f64, f64) = (1e-2, 2e-2);
}

/// The blocks of `flash_attention_causal_persistent` (its `blocks`).
const PERSISTENT_BLOCKS: usize = 264;

/// Whether the persistent head-dim-64 causal kernel spreads `sh`'s work
/// evenly enough to be chosen over the block-per-tile one: its busiest
/// block within 5% of the least any order could give, the larger of the
/// even share and the longest tile. A query tile's cost is its key tiles
/// of 64 plus a fixed three (`bench/causal_schedule_model.py`, whose
/// `alternating_over_bound` this is). Timed on an H100 at 37 shapes from
/// S = 512 to 16384, this choice ran 1.1% slower than the faster kernel
/// on average (geometric mean) and 14% at worst (B1 H20 S3584, where
/// the block per tile's last section of heads held 2 of 20); always a
/// block per tile, 2.5% and 14%; always persistent, 9% and 55%
/// (bench/RESULTS.md). Even sections (`causal_section`) have since made
/// the block per tile 1.42 times as fast at B1 H20 S3584, ahead of the
/// persistent kernel there, and 1.00–1.04 at the rule's three other
/// losses. Computed once per shape: a pass over the tiles.
pub fn persistent_balances(sh: Shape) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CHOICES: OnceLock<Mutex<HashMap<(usize, usize), bool>>> = OnceLock::new();
    let (nq, heads) = (sh.s.div_ceil(128), sh.b * sh.h);
    let choices = CHOICES.get_or_init(Default::default);
    let mut choices = choices.lock().unwrap_or_else(|e| e.into_inner());
    *choices.entry((nq, heads)).or_insert_with(|| {
        let work = |bx: usize| 2 * (bx + 1) + 3;
        let mut load = vec![0usize; PERSISTENT_BLOCKS];
        for lin in 0..nq * heads {
            // The kernel's order: tile `xt` of head `lin / nq`, reversed
            // on odd heads; block `lin % blocks` runs it.
            let (xt, head) = (lin % nq, lin / nq);
            let bx = if head % 2 == 0 { xt } else { nq - 1 - xt };
            load[lin % PERSISTENT_BLOCKS] += work(bx);
        }
        let total: usize = load.iter().sum();
        let bound = total.div_ceil(PERSISTENT_BLOCKS).max(work(nq.max(1) - 1));
        let busiest = load.iter().copied().max().unwrap_or(0);
        100 * busiest <= 105 * bound
    })
}

/// Which variant of the head-dim-128 kernels a launch takes (the two
/// kernels list the same space). `FA_D128=tune` or `FA_D128=<block_n>` sets
/// it for the benchmark commands.
#[derive(Clone, Copy)]
enum D128 {
    /// The default (key tiles of 128; `TILE_AUTOTUNE=1` tunes it).
    Default,
    /// Tuned on the call's shape.
    Tune,
    /// Variant `i` of their `CONFIGS`.
    Variant(usize),
}

/// [`D128`] from `FA_D128`; an unknown value is an error.
fn d128_pick() -> Result<D128, String> {
    match std::env::var("FA_D128").ok().as_deref() {
        None | Some("") => Ok(D128::Default),
        Some("tune") => Ok(D128::Tune),
        Some(n) => flash_attention_d128::CONFIGS
            .iter()
            .position(|c| n.parse() == Ok(c.block_n))
            .map(D128::Variant)
            .ok_or_else(|| {
                format!(
                    "FA_D128={n}: not `tune` nor a block_n of {:?}",
                    flash_attention_d128::LABELS
                )
            }),
    }
}

/// Launches the kernel for `sh` (head dim and causality pick it) on `st`,
/// at head dim 128 the variant `d128` picks.
fn launch<E: Elem>(
    st: &tile::Stream,
    sh: Shape,
    d128: D128,
    q: &Tensor<E>,
    k: &Tensor<E>,
    v: &Tensor<E>,
    o: &mut Tensor<E>,
) -> Result<(), tile::Error> {
    use flash_attention_d128 as nc;
    use flash_attention_d128_causal as c;
    match (sh.d, sh.causal, d128) {
        (64, false, _) => flash_attention::on(st).launch(q, k, v, o),
        (64, true, _) if persistent_balances(sh) => {
            flash_attention_causal_persistent::on(st).launch(q, k, v, o)
        }
        (64, true, _) => flash_attention_causal::on(st).launch(q, k, v, o),
        (256, false, _) => flash_attention_d256::on(st).launch(q, k, v, o),
        (256, true, _) => flash_attention_d256_causal::on(st).launch(q, k, v, o),
        // Any other head dim: the d128 kernels refuse the shape.
        (_, false, D128::Default) => nc::on(st).launch(q, k, v, o),
        (_, false, D128::Tune) => nc::tune().on(st).launch(q, k, v, o),
        (_, false, D128::Variant(i)) => nc::with(nc::CONFIGS[i]).on(st).launch(q, k, v, o),
        (_, true, D128::Default) => c::on(st).launch(q, k, v, o),
        (_, true, D128::Tune) => c::tune().on(st).launch(q, k, v, o),
        (_, true, D128::Variant(i)) => c::with(c::CONFIGS[i]).on(st).launch(q, k, v, o),
    }
}

/// Checks the kernel for `sh` in f16 and in bf16 against the host reference
/// on `dev`; returns the summary lines. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, sh: Shape) -> Result<String, Box<dyn std::error::Error>> {
    Ok(format!(
        "{}\n{}",
        run_as::<f16>(dev, sh)?,
        run_as::<bf16>(dev, sh)?
    ))
}

/// [`run`] in element type `E`.
pub fn run_as<E: Elem>(dev: Device, sh: Shape) -> Result<String, Box<dyn std::error::Error>> {
    let q = tile::testing::random_tensor::<E>(&[sh.b, sh.h, sh.s, sh.d], 31, dev)?;
    let k = tile::testing::random_tensor::<E>(&[sh.b, sh.hkv, sh.s, sh.d], 32, dev)?;
    let v = tile::testing::random_tensor::<E>(&[sh.b, sh.hkv, sh.s, sh.d], 33, dev)?;
    let mut o = Tensor::full(&[sh.b, sh.h, sh.s, sh.d], E::from_f64(f64::NAN), dev)?;
    let t = Instant::now();
    launch(
        &dev.default_stream()?,
        sh,
        D128::Default,
        &q,
        &k,
        &v,
        &mut o,
    )?;
    dev.synchronize()?;
    let el = t.elapsed();
    let want = reference(&q.to_vec()?, &k.to_vec()?, &v.to_vec()?, sh);
    let report = tile::testing::assert_allclose(&o.to_vec()?, &want, E::TOL.0, E::TOL.1)?;
    // Every other variant of the head-dim-128 kernels, on a poisoned output.
    if sh.d == 128 {
        for i in 1..flash_attention_d128::CONFIGS.len() {
            let mut o = Tensor::full(&[sh.b, sh.h, sh.s, sh.d], E::from_f64(f64::NAN), dev)?;
            launch(
                &dev.default_stream()?,
                sh,
                D128::Variant(i),
                &q,
                &k,
                &v,
                &mut o,
            )?;
            tile::testing::assert_allclose(&o.to_vec()?, &want, E::TOL.0, E::TOL.1)
                .map_err(|e| format!("{sh} {}: {e}", flash_attention_d128::LABELS[i]))?;
        }
    }
    Ok(format!(
        "flash_attention: device={dev} {sh} {} max_abs_err={:.3e} time={:.3} ms (first call)",
        E::DTYPE,
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

/// Median time of the kernel for `sh` on random inputs (L2 flushed between
/// runs), as a summary line with TFLOP/s ([`Shape::flops`]).
pub fn bench<E: Elem>(dev: Device, sh: Shape) -> Result<String, Box<dyn std::error::Error>> {
    let q = tile::testing::random_tensor::<E>(&[sh.b, sh.h, sh.s, sh.d], 41, dev)?;
    let k = tile::testing::random_tensor::<E>(&[sh.b, sh.hkv, sh.s, sh.d], 42, dev)?;
    let v = tile::testing::random_tensor::<E>(&[sh.b, sh.hkv, sh.s, sh.d], 43, dev)?;
    let mut o = Tensor::<E>::empty(&[sh.b, sh.h, sh.s, sh.d], dev)?;
    let pick = d128_pick()?;
    let r = tile::do_bench(
        &dev.default_stream()?,
        |st| launch(st, sh, pick, &q, &k, &v, &mut o),
        &tile::BenchOptions::default(),
    )?;
    Ok(format!(
        "flash_attention {sh}{}: {:.3} ms, {:.1} TFLOP/s ({})",
        if E::DTYPE == tile::DType::F16 {
            ""
        } else {
            " bf16"
        },
        r.median_ms,
        sh.flops() / (r.median_ms * 1e-3) / 1e12,
        r.method
    ))
}

/// The shapes of the attention benchmark (torch SDPA runs the same ones in
/// `bench/gpu_run.sh`).
pub const BENCH_SHAPES: [Shape; 8] = [
    Shape::new(4, 32, 32, 4096, 128, false),
    Shape::new(4, 32, 32, 4096, 128, true),
    Shape::new(1, 64, 64, 4096, 64, false),
    Shape::new(8, 16, 16, 1024, 64, false),
    Shape::new(1, 32, 8, 4096, 128, false),
    Shape::new(1, 64, 64, 4096, 64, true),
    Shape::new(4, 16, 16, 4096, 256, false),
    Shape::new(4, 16, 16, 4096, 256, true),
];

/// Head dim 128 over key lengths 1024 to 16384, non-causal and causal,
/// `(B, H, S)` chosen so that the grid is a whole number of waves of 132
/// blocks of 128 query rows (an H100's or H200's multiprocessors): 128, 64,
/// 32, 16 and 32 waves of blocks that walk 8, 16, 32, 64 and 128 key
/// tiles. A wave's time against its key tiles is a line whose slope is the
/// time of one key tile and whose intercept is what a block costs besides
/// (start, first loads, pipeline fill and drain, output), so the sweep
/// tells how much of the gap to another kernel (SDPA in `bench/sdpa.py
/// sweep`, the same shapes) is per block rather than per key tile.
pub const SWEEP_SHAPES: [(usize, usize, usize); 5] = [
    (1, 2112, 1024),
    (1, 528, 2048),
    (1, 132, 4096),
    (1, 33, 8192),
    (1, 33, 16384),
];

/// The example's command line (see the file's header in `flash_attention.rs`).
pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    // `flash_attention bench`: only the timed benchmark shapes (no checks).
    if std::env::args().nth(1).as_deref() == Some("bench") {
        return time_shapes(dev);
    }
    // `flash_attention time B H HKV S D [causal]`: one shape, timed in f16.
    if std::env::args().nth(1).as_deref() == Some("time") {
        let a: Vec<String> = std::env::args().skip(2).collect();
        let n = |i: usize| -> Result<usize, Box<dyn std::error::Error>> {
            Ok(a.get(i)
                .ok_or("usage: flash_attention time B H HKV S D [causal]")?
                .parse()?)
        };
        let causal = a.get(5).map(String::as_str) == Some("causal");
        let sh = Shape::new(n(0)?, n(1)?, n(2)?, n(3)?, n(4)?, causal);
        println!("{}", bench::<f16>(dev, sh)?);
        return Ok(());
    }
    if std::env::args().nth(1).as_deref() == Some("sweep") {
        for causal in [false, true] {
            for (b, h, s) in SWEEP_SHAPES {
                println!(
                    "{}",
                    bench::<f16>(dev, Shape::new(b, h, h, s, 128, causal))?
                );
            }
        }
        return Ok(());
    }
    // With no arguments on a GPU it also times the benchmark shapes.
    let timed = std::env::args().len() == 1 && dev.is_cuda();
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let mut next = |default: usize| args.next().transpose().map(|x| x.unwrap_or(default));
    let (b, h, hkv) = (next(1)?, next(4)?, next(2)?);
    let s = next(if dev == Device::Cpu { 200 } else { 1000 })?;
    for d in [64, 128, 256] {
        for causal in [false, true] {
            println!("{}", run(dev, Shape::new(b, h, hkv, s, d, causal))?);
        }
    }
    if timed {
        time_shapes(dev)?;
    }
    Ok(())
}

/// Times the benchmark shapes in f16, and the first (D128) shape in bf16,
/// causal and not.
fn time_shapes(dev: Device) -> Result<(), Box<dyn std::error::Error>> {
    for sh in BENCH_SHAPES {
        println!("{}", bench::<f16>(dev, sh)?);
    }
    for sh in &BENCH_SHAPES[..2] {
        println!("{}", bench::<bf16>(dev, *sh)?);
    }
    Ok(())
}
