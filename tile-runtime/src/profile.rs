//! Timing and checking kernels: [`do_bench`] and the per-kernel [`Profiler`].
//!
//! Invariants:
//! - The first call of the benchmarked closure (which may compile and load the kernel)
//!   is never timed; warm-up and measured run counts are derived from an estimate, so
//!   short kernels get many samples and long ones few.
//! - CUDA: each sample is the time between two events recorded on the stream around the
//!   call (device time, launch gaps included only when the device waits for the host);
//!   with `flush_l2`, a 256 MiB scratch buffer is written on the stream before each
//!   sample so every sample starts with a cold L2. With `graph`, `calls_per_sample` calls
//!   are captured once into a [`Graph`] and each sample is one replay divided by that
//!   count: launch overhead is removed from the measurement.
//! - CPU: each sample is wall time around the (synchronous) call.
//! - The statistics are over the samples: median, min, mean, max, and all of them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{sys, CudaEvent, CudaSlice, CudaStream};

use crate::arg::ArgRef;
use crate::config::Config;
use crate::device::Device;
use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::launch::launch_with_scalars;
use crate::loaded::Origin;
use crate::slot::KernelSlot;
use crate::spec::ScalarArg;
use crate::spec::{DimSpec, KernelSpec};
use crate::stream::Stream;
use crate::tensor::Tensor;
use crate::testing::{self, Report};
use crate::{bf16, f16};

/// Size of the scratch buffer written to flush the L2 cache (H200: 60 MiB of L2).
pub const L2_FLUSH_BYTES: usize = 256 << 20;

/// How [`do_bench`] measures.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Time to spend warming up (at least one call besides the untimed first one).
    pub warmup: Duration,
    /// Time to spend measuring.
    pub rep: Duration,
    /// The fewest samples to take, however long the calls are.
    pub min_samples: usize,
    /// The most samples (and warm-up calls) to take, however short the calls are.
    pub max_samples: usize,
    /// CUDA: write a 256 MiB scratch buffer before each sample (cold L2).
    pub flush_l2: bool,
    /// Time replays of a graph of `calls_per_sample` captured calls instead of calls.
    pub graph: bool,
    /// Calls per graph replay (`0`: chosen so a replay takes about 100 µs, at most 100).
    pub calls_per_sample: usize,
    /// [`do_bench_interleaved`]: run each callable once, untimed, right before each of
    /// its timed calls (the L2 flush between them), so that no sample follows another
    /// callable. A GPU kernel run right after a different one of similar size can take
    /// half as long again, with the L2 flushed between them, where it takes its usual
    /// time after itself or after a small foreign kernel (1000³ GEMM tiles after each
    /// other and after cuBLAS: bench/RESULTS.md, 2026-12-06 fourth session).
    pub primed: bool,
}

impl Default for BenchOptions {
    fn default() -> BenchOptions {
        BenchOptions {
            warmup: Duration::from_millis(25),
            rep: Duration::from_millis(100),
            min_samples: 5,
            max_samples: 10_000,
            flush_l2: true,
            graph: false,
            calls_per_sample: 0,
            primed: false,
        }
    }
}

/// What [`do_bench`] measured, in milliseconds per call.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchResult {
    /// The median sample (NaN if there were none).
    pub median_ms: f64,
    /// The fastest sample.
    pub min_ms: f64,
    /// The mean of the samples.
    pub mean_ms: f64,
    /// The slowest sample.
    pub max_ms: f64,
    /// Every sample, in the order taken.
    pub times_ms: Vec<f64>,
    /// Calls per sample (1, or the graph's size).
    pub calls_per_sample: usize,
    /// `cuda-events`, `cuda-graph`, `cpu-clock` or `cpu-graph`.
    pub method: &'static str,
}

impl BenchResult {
    fn new(times_ms: Vec<f64>, calls_per_sample: usize, method: &'static str) -> BenchResult {
        let mut sorted = times_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len().max(1) as f64;
        let median_ms = match sorted.len() {
            0 => f64::NAN,
            len if len % 2 == 1 => sorted[len / 2],
            len => 0.5 * (sorted[len / 2 - 1] + sorted[len / 2]),
        };
        BenchResult {
            median_ms,
            min_ms: sorted.first().copied().unwrap_or(f64::NAN),
            mean_ms: sorted.iter().sum::<f64>() / n,
            max_ms: sorted.last().copied().unwrap_or(f64::NAN),
            times_ms,
            calls_per_sample,
            method,
        }
    }
}

fn counts(opts: &BenchOptions, est_ms: f64) -> (usize, usize) {
    let est = est_ms.max(1e-6);
    let warm = (opts.warmup.as_secs_f64() * 1e3 / est).ceil() as usize;
    let reps = (opts.rep.as_secs_f64() * 1e3 / est).ceil() as usize;
    let max = opts.max_samples.max(1);
    (
        warm.clamp(1, max),
        reps.clamp(opts.min_samples.max(1).min(max), max),
    )
}

fn calls_per_sample(opts: &BenchOptions, est_ms: f64) -> usize {
    if opts.calls_per_sample > 0 {
        return opts.calls_per_sample;
    }
    ((0.1 / est_ms.max(1e-6)).ceil() as usize).clamp(1, 100)
}

/// Times `f` (which launches on the stream it is given) on `stream`; see the module docs.
pub fn do_bench(
    stream: &Stream,
    mut f: impl FnMut(&Stream) -> Result<()>,
    opts: &BenchOptions,
) -> Result<BenchResult> {
    f(stream)?;
    stream.synchronize()?;
    match stream {
        Stream::Cpu => bench_cpu(stream, &mut f, opts),
        Stream::Cuda(s) => bench_cuda(stream, s, &mut f, opts),
    }
}

fn bench_cpu(
    stream: &Stream,
    f: &mut dyn FnMut(&Stream) -> Result<()>,
    opts: &BenchOptions,
) -> Result<BenchResult> {
    let est = time_calls(stream, f, 3)? / 3.0;
    if opts.graph {
        let k = calls_per_sample(opts, est);
        let g = Graph::capture(stream, |s| (0..k).try_for_each(|_| f(s)))?;
        let (warm, reps) = counts(opts, est * k as f64);
        for _ in 0..warm {
            g.replay()?;
        }
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = Instant::now();
            g.replay()?;
            times.push(t.elapsed().as_secs_f64() * 1e3 / k as f64);
        }
        return Ok(BenchResult::new(times, k, "cpu-graph"));
    }
    let (warm, reps) = counts(opts, est);
    for _ in 0..warm {
        f(stream)?;
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f(stream)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(BenchResult::new(times, 1, "cpu-clock"))
}

fn drv(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::driver(call, e)
}

/// A start and an end event for one timed sample on `s`'s context.
fn event_pair(s: &CudaStream) -> Result<(CudaEvent, CudaEvent)> {
    let event = || {
        s.context()
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(drv("cuEventCreate"))
    };
    Ok((event()?, event()?))
}

/// The scratch buffer written before each sample when the L2 is to be flushed.
fn l2_scratch(s: &Arc<CudaStream>, flush: bool) -> Result<Option<CudaSlice<u8>>> {
    match flush {
        true => Ok(Some(
            s.alloc_zeros::<u8>(L2_FLUSH_BYTES)
                .map_err(drv("cuMemAlloc"))?,
        )),
        false => Ok(None),
    }
}

/// Overwrites the L2 (on the stream) when there is a scratch buffer.
fn flush_l2(s: &Arc<CudaStream>, scratch: &mut Option<CudaSlice<u8>>) -> Result<()> {
    match scratch {
        Some(buf) => s.memset_zeros(buf).map_err(drv("cuMemsetD8Async")),
        None => Ok(()),
    }
}

/// Milliseconds between two recorded events, once the end one has completed.
fn elapsed_ms((a, b): &(CudaEvent, CudaEvent)) -> Result<f64> {
    b.synchronize().map_err(drv("cuEventSynchronize"))?;
    Ok(f64::from(
        a.elapsed_ms(b).map_err(drv("cuEventElapsedTime"))?,
    ))
}

fn bench_cuda(
    stream: &Stream,
    s: &Arc<CudaStream>,
    f: &mut dyn FnMut(&Stream) -> Result<()>,
    opts: &BenchOptions,
) -> Result<BenchResult> {
    let est = time_calls(stream, f, 5)? / 5.0;

    let (graph, k) = if opts.graph {
        let k = calls_per_sample(opts, est);
        (
            Some(Graph::capture(stream, |cs| (0..k).try_for_each(|_| f(cs)))?),
            k,
        )
    } else {
        (None, 1)
    };
    let call = |f: &mut dyn FnMut(&Stream) -> Result<()>| match &graph {
        Some(g) => g.replay_on(stream),
        None => f(stream),
    };
    let (warm, reps) = counts(opts, est * k as f64);
    for _ in 0..warm {
        call(f)?;
    }
    let mut scratch = l2_scratch(s, opts.flush_l2 && graph.is_none())?;
    let events = (0..reps)
        .map(|_| event_pair(s))
        .collect::<Result<Vec<_>>>()?;
    for (a, b) in &events {
        flush_l2(s, &mut scratch)?;
        a.record(s).map_err(drv("cuEventRecord"))?;
        call(f)?;
        b.record(s).map_err(drv("cuEventRecord"))?;
    }
    s.synchronize().map_err(drv("cuStreamSynchronize"))?;
    let times = events
        .iter()
        .map(|p| Ok(elapsed_ms(p)? / k as f64))
        .collect::<Result<Vec<_>>>()?;
    let method = if graph.is_some() {
        "cuda-graph"
    } else {
        "cuda-events"
    };
    Ok(BenchResult::new(times, k, method))
}

/// Milliseconds of `n` calls of `f` on `stream`, back to back: CUDA events around
/// them, or the host's clock up to the end of the last call on the CPU. No warm-up
/// and no L2 flush; the launch's host cost is included when the GPU was idle. The
/// estimate [`do_bench`] sizes its sample counts by, and the tuner's one-call check
/// for variants far slower than the best (see `autotune`).
pub(crate) fn time_calls(
    stream: &Stream,
    f: &mut dyn FnMut(&Stream) -> Result<()>,
    n: usize,
) -> Result<f64> {
    match stream {
        Stream::Cpu => {
            let t = Instant::now();
            for _ in 0..n {
                f(stream)?;
            }
            Ok(t.elapsed().as_secs_f64() * 1e3)
        }
        Stream::Cuda(s) => {
            let pair = event_pair(s)?;
            pair.0.record(s).map_err(drv("cuEventRecord"))?;
            for _ in 0..n {
                f(stream)?;
            }
            pair.1.record(s).map_err(drv("cuEventRecord"))?;
            elapsed_ms(&pair)
        }
    }
}

/// One callable of [`do_bench_interleaved`].
pub type BenchFn<'a> = &'a mut dyn FnMut(&Stream) -> Result<()>;

/// Times several callables against each other in rounds: each round calls every one
/// once, and each call is one sample of its callable. A clock that drifts (boost,
/// power or thermal limits: several percent over seconds on a loaded GPU) then moves
/// every callable's samples alike, where timing them one after the other would give
/// the drift to whichever ran in the slow period. Each timed round calls them in a
/// different order (a shuffle per round): a GPU kernel's time depends on the kernel that
/// ran before it, even with L2 flushed between them (by up to half of a 14 us GEMM's
/// time, bench/RESULTS.md), so in one fixed order every callable would keep one
/// predecessor and its times that predecessor's cost; with `opts.primed` each timed
/// call follows an untimed call of its own instead. Warm-up and round counts come
/// from `opts` as [`do_bench`]'s sample counts do, taking one round as the unit;
/// `graph` and `calls_per_sample` are not used. Results are in the order of `fs`.
pub fn do_bench_interleaved(
    stream: &Stream,
    fs: &mut [BenchFn<'_>],
    opts: &BenchOptions,
) -> Result<Vec<BenchResult>> {
    let round = |fs: &mut [BenchFn<'_>]| fs.iter_mut().try_for_each(|f| f(stream));
    // The first calls (module loads) and a timed round for the estimate.
    round(fs)?;
    stream.synchronize()?;
    let t = Instant::now();
    round(fs)?;
    stream.synchronize()?;
    // A primed round calls everything twice.
    let est = t.elapsed().as_secs_f64() * 1e3 * if opts.primed { 2.0 } else { 1.0 };
    let (warm, rounds) = counts(opts, est);
    for _ in 0..warm {
        round(fs)?;
    }
    stream.synchronize()?;
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); fs.len()];
    let method = match stream {
        Stream::Cpu => {
            for r in 0..rounds {
                for i in round_order(fs.len(), r) {
                    if opts.primed {
                        fs[i](stream)?;
                    }
                    let start = Instant::now();
                    fs[i](stream)?;
                    times[i].push(start.elapsed().as_secs_f64() * 1e3);
                }
            }
            "cpu-clock"
        }
        Stream::Cuda(s) => {
            let mut scratch = l2_scratch(s, opts.flush_l2)?;
            // One event pair per callable, recorded again every round: the round's
            // times are read (which waits for its last event) before the next
            // round records over them, so the device never waits for the host
            // within a round and no events are created while timing.
            let pairs = fs
                .iter()
                .map(|_| event_pair(s))
                .collect::<Result<Vec<_>>>()?;
            for r in 0..rounds {
                for i in round_order(fs.len(), r) {
                    let pair = &pairs[i];
                    if opts.primed {
                        fs[i](stream)?;
                    }
                    flush_l2(s, &mut scratch)?;
                    pair.0.record(s).map_err(drv("cuEventRecord"))?;
                    fs[i](stream)?;
                    pair.1.record(s).map_err(drv("cuEventRecord"))?;
                }
                for (p, t) in pairs.iter().zip(&mut times) {
                    t.push(elapsed_ms(p)?);
                }
            }
            "cuda-events"
        }
    };
    Ok(times
        .into_iter()
        .map(|t| BenchResult::new(t, 1, method))
        .collect())
}

/// The order of round `round` of [`do_bench_interleaved`] over `n` callables: a
/// permutation shuffled from the round number (the same for every run, so timings
/// can be repeated), so that over the rounds each callable follows each other one
/// about equally often.
pub(crate) fn round_order(n: usize, round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = crate::testing::Rng::new(round as u64);
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

macro_rules! any_tensor {
    ($($v:ident($t:ty)),* $(,)?) => {
        /// A tensor of any dtype (what [`Profiler`] creates from a kernel's parameters).
        #[derive(Debug, Clone)]
        pub enum AnyTensor {
            $(
                #[doc = concat!("A `Tensor<", stringify!($t), ">`.")]
                $v(Tensor<$t>),
            )*
        }

        impl AnyTensor {
            /// The element type.
            pub fn dtype(&self) -> DType {
                match self {
                    $(AnyTensor::$v(_) => <$t as Element>::DTYPE,)*
                }
            }

            /// The extent of each dim.
            pub fn shape(&self) -> &[usize] {
                match self {
                    $(AnyTensor::$v(t) => t.shape(),)*
                }
            }

            /// The elements as `f64`, row-major.
            pub fn to_f64(&self) -> Result<Vec<f64>> {
                match self {
                    $(AnyTensor::$v(t) => Ok(t.to_vec()?.into_iter().map(Element::to_f64).collect()),)*
                }
            }

            fn arg(&mut self, output: bool) -> ArgRef<'_> {
                match self {
                    $(AnyTensor::$v(t) => if output { ArgRef::output(t) } else { ArgRef::input(t) },)*
                }
            }

            /// Random data in [`testing::default_range`] (`None`: no element type).
            fn random(dtype: DType, shape: &[usize], seed: u64, device: Device) -> Result<Option<AnyTensor>> {
                $(if dtype == <$t as Element>::DTYPE {
                    return Ok(Some(AnyTensor::$v(testing::random_tensor::<$t>(shape, seed, device)?)));
                })*
                Ok(None)
            }

            fn zeros(dtype: DType, shape: &[usize], device: Device) -> Result<Option<AnyTensor>> {
                $(if dtype == <$t as Element>::DTYPE {
                    return Ok(Some(AnyTensor::$v(Tensor::<$t>::zeros(shape, device)?)));
                })*
                Ok(None)
            }
        }
    };
}

any_tensor!(
    Bool(bool),
    I8(i8),
    U8(u8),
    I16(i16),
    U16(u16),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F16(f16),
    BF16(bf16),
    F32(f32),
    F64(f64),
);

/// One parameter's data as the reference of [`Profiler::assert_allclose`] sees it.
#[derive(Debug, Clone)]
pub struct HostArg {
    /// The parameter's name, as declared.
    pub name: &'static str,
    /// The extent of each dim.
    pub shape: Vec<usize>,
    /// Row-major values (an output's initial contents: zeros).
    pub data: Vec<f64>,
    /// Whether the kernel writes it (the reference returns the expected values of these).
    pub output: bool,
}

/// Checks and times one kernel on generated inputs: `kernel::profiler()`.
///
/// ```ignore
/// let p = vecadd::profiler().dim("N", 1 << 20);
/// p.assert_allclose(|x| vec![x[0].data.iter().zip(&x[1].data).map(|(a, b)| a + b).collect()], 1e-3, 1e-3)?;
/// println!("{:.3} ms", p.do_bench(&Default::default())?.median_ms);
/// ```
#[derive(Debug, Clone)]
pub struct Profiler {
    spec: &'static KernelSpec,
    slot: &'static KernelSlot,
    device: Option<Device>,
    dims: Vec<Option<usize>>,
    /// The scalar parameters' values (1 until set with [`Profiler::scalar`]).
    scalars: Vec<ScalarArg>,
    seed: u64,
    error: Option<String>,
}

impl Profiler {
    /// A profiler for `spec` (launched through `slot`, the launcher's own).
    pub fn new(spec: &'static KernelSpec, slot: &'static KernelSlot) -> Profiler {
        Profiler {
            spec,
            slot,
            device: None,
            dims: vec![None; spec.dims.len()],
            scalars: spec
                .scalars
                .iter()
                .map(|s| scalar_of(s.dtype, 1.0))
                .collect(),
            seed: 0,
            error: None,
        }
    }

    /// Runs on `device` (default: [`Device::from_env`]).
    pub fn device(mut self, device: Device) -> Profiler {
        self.device = Some(device);
        self
    }

    /// Binds dynamic dim `name` to `value`.
    pub fn dim(mut self, name: &str, value: usize) -> Profiler {
        match self.spec.dims.iter().position(|d| *d == name) {
            Some(i) => self.dims[i] = Some(value),
            None => {
                self.error = Some(format!(
                    "no dynamic dim named {name} (the kernel has {:?})",
                    self.spec.dims
                ))
            }
        }
        self
    }

    /// Sets scalar parameter `name` to `value` (converted to its dtype as
    /// [`Element::from_f64`] does); scalars are 1 until set. A reference given to
    /// [`assert_allclose`](Self::assert_allclose) uses the values it set.
    pub fn scalar(mut self, name: &str, value: f64) -> Profiler {
        match self.spec.scalars.iter().position(|s| s.name == name) {
            Some(i) => self.scalars[i] = scalar_of(self.spec.scalars[i].dtype, value),
            None => {
                let names: Vec<&str> = self.spec.scalars.iter().map(|s| s.name).collect();
                self.error = Some(format!(
                    "no scalar parameter named {name} (the kernel has {names:?})"
                ))
            }
        }
        self
    }

    /// Seed of the random inputs (input `i` uses `seed + i`).
    pub fn seed(mut self, seed: u64) -> Profiler {
        self.seed = seed;
        self
    }

    fn err(&self, message: String) -> Error {
        Error::Profile {
            kernel: self.spec.name,
            message,
        }
    }

    fn resolved_device(&self) -> Result<Device> {
        match self.device {
            Some(d) => Ok(d),
            None => Device::from_env(),
        }
    }

    /// The shape of every parameter, with the bound dims.
    pub fn shapes(&self) -> Result<Vec<Vec<usize>>> {
        if let Some(e) = &self.error {
            return Err(self.err(e.clone()));
        }
        self.spec
            .params
            .iter()
            .map(|p| {
                p.shape
                    .iter()
                    .map(|d| match *d {
                        DimSpec::Static(v) => usize::try_from(v)
                            .map_err(|_| self.err(format!("negative static dim {v}"))),
                        DimSpec::Dyn(n) => {
                            self.dims.get(n as usize).copied().flatten().ok_or_else(|| {
                                let name = self.spec.dims.get(n as usize).copied().unwrap_or("?");
                                self.err(format!(
                                    "dynamic dim {name} is not bound (use .dim(\"{name}\", n))"
                                ))
                            })
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// Fresh arguments: random inputs (see [`testing::random_tensor`]), zeroed outputs.
    pub fn inputs(&self) -> Result<Vec<AnyTensor>> {
        let device = self.resolved_device()?;
        let shapes = self.shapes()?;
        let mut out = Vec::with_capacity(shapes.len());
        for (i, (p, shape)) in self.spec.params.iter().zip(&shapes).enumerate() {
            let t = if p.output {
                AnyTensor::zeros(p.dtype, shape, device)?
            } else {
                AnyTensor::random(p.dtype, shape, self.seed + i as u64, device)?
            };
            out.push(t.ok_or_else(|| {
                self.err(format!("cannot generate {} data for {}", p.dtype, p.name))
            })?);
        }
        Ok(out)
    }

    /// Launches the kernel on `args` (in parameter order) and `stream` (default: the
    /// device's default stream).
    pub fn run(&self, stream: Option<&Stream>, args: &mut [AnyTensor]) -> Result<()> {
        let refs: Vec<ArgRef<'_>> = args
            .iter_mut()
            .zip(self.spec.params)
            .map(|(t, p)| t.arg(p.output))
            .collect();
        if let Some(e) = &self.error {
            return Err(self.err(e.clone()));
        }
        launch_with_scalars(
            Config::get(),
            self.spec,
            self.slot,
            stream,
            &refs,
            &self.scalars,
        )
    }

    /// Where the kernel for the profiler's device came from, once it has run.
    pub fn origin(&self) -> Option<Origin> {
        let device = self.resolved_device().ok()?;
        self.slot.origin(device).cloned()
    }

    /// Runs the kernel on fresh random inputs and compares every output with
    /// `reference`, which gets every parameter's data and returns the expected values of
    /// the outputs, in parameter order: `|actual - expected| <= atol + rtol * |expected|`.
    pub fn assert_allclose(
        &self,
        reference: impl FnOnce(&[HostArg]) -> Vec<Vec<f64>>,
        atol: f64,
        rtol: f64,
    ) -> Result<Vec<Report>> {
        let mut args = self.inputs()?;
        let host = self
            .spec
            .params
            .iter()
            .zip(&args)
            .map(|(p, t)| {
                Ok(HostArg {
                    name: p.name,
                    shape: t.shape().to_vec(),
                    data: t.to_f64()?,
                    output: p.output,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.run(None, &mut args)?;
        let expected = reference(&host);
        let outputs: Vec<(&'static str, &AnyTensor)> = self
            .spec
            .params
            .iter()
            .zip(&args)
            .filter(|(p, _)| p.output)
            .map(|(p, t)| (p.name, t))
            .collect();
        if expected.len() != outputs.len() {
            return Err(self.err(format!(
                "the reference returned {} outputs, the kernel has {}",
                expected.len(),
                outputs.len()
            )));
        }
        let mut reports = Vec::with_capacity(outputs.len());
        for ((buffer, t), want) in outputs.into_iter().zip(&expected) {
            let got = t.to_f64()?;
            match testing::assert_allclose(&got, want, atol, rtol) {
                Ok(r) => reports.push(r),
                Err(message) => {
                    return Err(Error::Mismatch {
                        kernel: self.spec.name,
                        buffer,
                        message,
                    })
                }
            }
        }
        Ok(reports)
    }

    /// [`do_bench`] of the kernel on fresh random inputs, on the device's default stream.
    pub fn do_bench(&self, opts: &BenchOptions) -> Result<BenchResult> {
        let mut args = self.inputs()?;
        let stream = self.resolved_device()?.default_stream()?;
        do_bench(&stream, |s| self.run(Some(s), &mut args), opts)
    }
}

/// `v` as a scalar argument of `dtype`.
fn scalar_of(dtype: DType, v: f64) -> ScalarArg {
    use crate::launch::scalar_arg;
    match dtype {
        DType::Bool => scalar_arg(bool::from_f64(v)),
        DType::I8 => scalar_arg(i8::from_f64(v)),
        DType::U8 => scalar_arg(u8::from_f64(v)),
        DType::I16 => scalar_arg(i16::from_f64(v)),
        DType::U16 => scalar_arg(u16::from_f64(v)),
        DType::I32 => scalar_arg(i32::from_f64(v)),
        DType::U32 => scalar_arg(u32::from_f64(v)),
        DType::I64 => scalar_arg(i64::from_f64(v)),
        DType::U64 => scalar_arg(u64::from_f64(v)),
        DType::F16 => scalar_arg(half::f16::from_f64(v)),
        DType::BF16 => scalar_arg(half::bf16::from_f64(v)),
        DType::F32 => scalar_arg(f32::from_f64(v)),
        DType::F64 => scalar_arg(v),
        // Passed as their byte, like `u8` (should the compiler take f8 scalars).
        DType::F8E4M3 => scalar_arg(crate::f8e4m3::from_f64(v)),
        DType::F8E5M2 => scalar_arg(crate::f8e5m2::from_f64(v)),
        // Not a parameter dtype (the compiler rejects it): `v` in both halves.
        DType::F16x2 => {
            let h = u32::from(half::f16::from_f64(v).to_bits());
            scalar_arg(h | h << 16)
        }
        DType::BF16x2 => {
            let h = u32::from(half::bf16::from_f64(v).to_bits());
            scalar_arg(h | h << 16)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphs_and_profilers_cross_threads() {
        fn send_sync<X: Send + Sync>() {}
        send_sync::<Graph>();
        send_sync::<Profiler>();
        send_sync::<Tensor<f32>>();
    }

    #[test]
    fn statistics() {
        let r = BenchResult::new(vec![3.0, 1.0, 2.0, 10.0], 1, "cpu-clock");
        assert_eq!(r.median_ms, 2.5);
        assert_eq!(r.min_ms, 1.0);
        assert_eq!(r.max_ms, 10.0);
        assert_eq!(r.mean_ms, 4.0);
        assert_eq!(r.times_ms, [3.0, 1.0, 2.0, 10.0]);
        assert_eq!(BenchResult::new(vec![5.0, 1.0, 3.0], 1, "x").median_ms, 3.0);
    }

    #[test]
    fn interleaved_rounds_vary_each_callables_predecessor() {
        let n = 6;
        // follows[a][b]: rounds in which b ran right after a.
        let mut follows = vec![vec![0usize; n]; n];
        for r in 0..300 {
            let order = round_order(n, r);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "round {r}: {order:?}");
            for w in order.windows(2) {
                follows[w[0]][w[1]] += 1;
            }
        }
        assert_eq!(round_order(n, 7), round_order(n, 7));
        assert_ne!(round_order(n, 7), round_order(n, 8));
        // 300 rounds hold 1500 adjacent pairs, 50 per ordered pair on average.
        for (a, row) in follows.iter().enumerate() {
            for (b, &k) in row.iter().enumerate() {
                if a != b {
                    assert!((25..=80).contains(&k), "{b} after {a}: {k} of 300 rounds");
                }
            }
        }
        assert_eq!(round_order(1, 3), [0]);
        assert!(round_order(0, 3).is_empty());
    }

    #[test]
    fn sample_counts_follow_the_estimate() {
        let o = BenchOptions::default();
        assert_eq!(counts(&o, 1.0), (25, 100));
        assert_eq!(counts(&o, 1000.0), (1, 5));
        assert_eq!(counts(&o, 1e-9).1, o.max_samples);
        assert_eq!(calls_per_sample(&o, 0.001), 100);
        assert_eq!(calls_per_sample(&o, 1.0), 1);
    }

    #[test]
    fn cpu_bench_times_the_closure() -> Result<()> {
        let mut calls = 0usize;
        let opts = BenchOptions {
            warmup: Duration::from_millis(2),
            rep: Duration::from_millis(10),
            ..BenchOptions::default()
        };
        let r = do_bench(
            &Stream::Cpu,
            |_| {
                calls += 1;
                std::thread::sleep(Duration::from_micros(200));
                Ok(())
            },
            &opts,
        )?;
        assert_eq!(r.method, "cpu-clock");
        assert!(r.median_ms >= 0.2, "{r:?}");
        assert!(r.times_ms.len() >= 5);
        assert!(calls >= 1 + 3 + 1 + r.times_ms.len());
        Ok(())
    }
}
