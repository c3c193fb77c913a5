//! Kernel variants and the autotuner.
//!
//! A kernel whose attribute lists values (`block_m = [64, 128]`) is built once per
//! valid combination, each a kernel with its own spec and slot; the launcher hands
//! the runtime a [`VariantSet`] and asks [`pick`] which one to launch:
//!
//! - [`Pick::Fixed`]: the variant the caller named (`kernel::with(Config { .. })`);
//! - [`Pick::Auto`] (a plain call): the choice tuned for these shapes earlier in the
//!   process if there is one, else variant 0 (the default); with `TILE_AUTOTUNE=1`,
//!   as [`Pick::Tune`];
//! - [`Pick::Tune`] (`kernel::tune()`): the choice in memory, else the one on disk,
//!   else every variant is run once on the call's arguments (its output compared with
//!   the first variant that ran), timed with [`do_bench`] (L2 flushed; a variant
//!   whose one timed call is over 1.5 times the best so far keeps that time); the ones
//!   within 25% of the fastest are timed again in interleaved rounds, each timed run
//!   right after an untimed run of its own, and the fastest of those is chosen,
//!   published to the disk cache and remembered.
//!
//! Invariants:
//! - Nothing is timed unless tuning is asked for (`tune()` or `TILE_AUTOTUNE=1`); a
//!   plain call costs two loads more than a kernel without variants (whether a choice
//!   exists in the process, whether `TILE_AUTOTUNE` is set) until a choice exists,
//!   then a hash of the shapes and a read lock.
//! - Tuning never changes what the call computes: the buffers the kernel writes are
//!   saved first and restored before each variant runs and after the last one, so the
//!   chosen variant's final launch sees exactly what the caller passed (kernels that
//!   accumulate into their outputs included). On a CUDA device the saved copies, the
//!   reference and the comparison stay on the device (see `outputs`).
//! - Tuning inside a graph capture is an error (nothing can be timed while capturing);
//!   a choice that exists is captured like any launch.
//! - The disk entry (`autotune/<key>/choice.json`) is keyed by the variant set (every
//!   variant's keys), the device (name and compute capability), the dtype signature and
//!   the shape bucket; it is published and verified as kernel entries are
//!   ([`crate::cache`]). A damaged entry is removed and the shapes tuned again; when
//!   several processes tune at once, every one of them ends up with the published
//!   entry's choice.
//!
//! [`PlanSet`] and [`pick_plan`] (in `plans`) apply the same policies, checks, timing
//! and disk cache to alternatives above the kernel: host-level plans that launch one or
//! more kernels each. Both go through `Alternatives`, the one view tuning needs.

mod outputs;
mod plans;
mod store;

pub use plans::{pick_plan, PlanSet};
use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The buffers of a call that [`pick_plan`] saves, restores and compares.
pub use crate::arg::ArgRef;
use crate::config::Config;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::launch_with_scalars;
use crate::profile::{do_bench, do_bench_interleaved, BenchOptions};
use crate::slot::KernelSlot;
use crate::spec::{KernelSpec, ScalarArg};
use crate::stream::Stream;
use outputs::Outputs;

/// How a launch of a kernel with variants chooses one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// A plain call: the choice tuned for these shapes in this process, else variant 0;
    /// tunes when `TILE_AUTOTUNE=1`.
    Auto,
    /// Tune if no choice exists for these shapes (in memory or on disk).
    Tune,
    /// This variant, never tuned.
    Fixed(usize),
}

/// The variants of one instance of a kernel (one dtype of a dtype-generic kernel), as
/// the launcher's expansion declares them: `'static` tables plus the choices tuned in
/// this process.
pub struct VariantSet {
    /// The kernel's name (`gemm`).
    pub kernel: &'static str,
    /// The dtype of this instance (`f16`), or empty for a kernel that is not dtype-generic.
    pub dtype: &'static str,
    /// Each variant as users name it (`block_m=64, threads=128`), variant 0 first.
    pub labels: &'static [&'static str],
    /// Each variant's kernel spec, in the order of `labels`.
    pub specs: &'static [&'static KernelSpec],
    /// Each variant's in-process cache slot, in the order of `labels`.
    pub slots: &'static [&'static KernelSlot],
    choices: Choices,
    key: OnceLock<String>,
}

/// The choices tuned (or read from disk) in this process, per device and shapes.
struct Choices {
    /// Whether any choice was recorded (the one load a plain call makes until then).
    any: AtomicBool,
    map: RwLock<Option<HashMap<u64, Vec<Choice>>>>,
}

struct Choice {
    device: Device,
    dims: Vec<usize>,
    index: usize,
    report: Arc<TuneReport>,
}

/// What tuning found for one call's shapes: every variant's outcome, and the choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    /// The kernel's name with its dtype (`gemm[f16]`).
    pub kernel: String,
    /// `cuda:0 NVIDIA H200 (sm_90)` or `cpu x86_64`.
    pub device: String,
    /// The dtypes of the buffers and scalars, in parameter order.
    pub dtypes: String,
    /// The shape of every buffer, after bucketing (`exact` or `pow2`).
    pub shapes: Vec<Vec<usize>>,
    /// How shapes were bucketed: `exact`, or `pow2` (each dim rounded up to a power of
    /// two, with `TILE_AUTOTUNE_BUCKET=pow2`).
    pub bucket: String,
    /// Every variant's outcome, variant 0 first.
    pub rows: Vec<TuneRow>,
    /// The chosen variant (an index into `rows`).
    pub chosen: usize,
    /// The chosen variant's label.
    pub chosen_label: String,
    /// Milliseconds spent timing variants (`do_bench`, L2 flushes included).
    pub timing_ms: f64,
    /// Milliseconds spent on each variant's first launch (module loads, JIT compiles
    /// when there are no ahead-of-time artifacts).
    pub first_launch_ms: f64,
    /// Milliseconds spent checking (saving, restoring, reading back and comparing the
    /// outputs).
    #[serde(default)]
    pub check_ms: f64,
    /// Where the outputs were saved and compared: `host`, `device`, or `device copies,
    /// compared on the host` (no NVRTC, or no memory for the reference on the device).
    #[serde(default)]
    pub checked_on: String,
    /// Which process measured it (`pid <pid> at <unix time>`).
    pub measured_by: String,
    /// Read from the disk cache rather than measured by this process.
    #[serde(skip)]
    pub from_cache: bool,
}

/// One variant's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneRow {
    /// The variant's label (`block_m=64, threads=128`).
    pub variant: String,
    /// What happened when it was tried.
    pub outcome: Outcome,
}

/// What happened to one variant during tuning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Outcome {
    /// Ran, matched and was timed (milliseconds per call).
    Timed {
        /// The median time of one call, in milliseconds.
        median_ms: f64,
        /// The fastest call, in milliseconds.
        min_ms: f64,
    },
    /// Failed to build, load or launch on this device.
    Failed(String),
    /// Ran but its output differs from the first variant's.
    Mismatch(String),
}

impl TuneRow {
    /// The median time, if the variant was timed.
    pub fn median_ms(&self) -> Option<f64> {
        match self.outcome {
            Outcome::Timed { median_ms, .. } => Some(median_ms),
            _ => None,
        }
    }
}

impl VariantSet {
    /// A set as a launcher's expansion declares it: `labels`, `specs` and `slots` hold
    /// one entry per variant, in the same order, variant 0 (the default) first.
    pub const fn new(
        kernel: &'static str,
        dtype: &'static str,
        labels: &'static [&'static str],
        specs: &'static [&'static KernelSpec],
        slots: &'static [&'static KernelSlot],
    ) -> VariantSet {
        VariantSet {
            kernel,
            dtype,
            labels,
            specs,
            slots,
            choices: Choices::new(),
            key: OnceLock::new(),
        }
    }

    /// The number of variants.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether the set has no variants.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The kernel's name with its dtype (`gemm[f16]`), for messages.
    fn name(&self) -> String {
        match self.dtype {
            "" => self.kernel.to_string(),
            t => format!("{}[{t}]", self.kernel),
        }
    }

    /// The identity of the set: every variant's label and keys (a change to any
    /// variant makes earlier choices stale).
    fn key(&self) -> &str {
        self.key.get_or_init(|| {
            let mut parts = vec![self.kernel, self.dtype];
            for (l, s) in self.labels.iter().zip(self.specs) {
                parts.push(l);
                parts.push(s.cpu.key);
                parts.push(s.cuda.key);
                if let Some(h) = &s.cuda_sm90a {
                    parts.push(h.key);
                }
            }
            crate::cache::key_of(&parts)
        })
    }

    /// Every report of this process: tuned here, or read from disk.
    pub fn reports(&self) -> Vec<Arc<TuneReport>> {
        self.choices.reports()
    }

    /// Forgets the choices of this process (the disk cache is left alone).
    pub fn forget(&self) {
        self.choices.forget()
    }

    /// The index of the variant whose label is `label`.
    pub fn index_of(&self, label: &str) -> Option<usize> {
        self.labels.iter().position(|l| *l == label)
    }
}

impl Choices {
    const fn new() -> Choices {
        Choices {
            any: AtomicBool::new(false),
            map: RwLock::new(None),
        }
    }

    fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    fn reports(&self) -> Vec<Arc<TuneReport>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<Arc<TuneReport>> = map
            .iter()
            .flat_map(|m| m.values())
            .flatten()
            .map(|c| c.report.clone())
            .collect();
        out.sort_by(|a, b| a.shapes.cmp(&b.shapes));
        out
    }

    /// The choice recorded for `args` on `device`, if any.
    fn lookup(&self, device: Device, args: &[ArgRef<'_>], pow2: bool) -> Option<usize> {
        let h = shape_hash(device, args, pow2);
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let list = map.as_ref()?.get(&h)?;
        list.iter()
            .find(|c| c.device == device && same_dims(&c.dims, args, pow2))
            .map(|c| c.index)
    }

    fn record(&self, device: Device, args: &[ArgRef<'_>], pow2: bool, report: Arc<TuneReport>) {
        let h = shape_hash(device, args, pow2);
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let list = map.get_or_insert_with(HashMap::new).entry(h).or_default();
        list.retain(|c| !(c.device == device && same_dims(&c.dims, args, pow2)));
        list.push(Choice {
            device,
            dims: bucketed(args, pow2),
            index: report.chosen,
            report,
        });
        self.any.store(true, Ordering::Release);
    }

    fn forget(&self) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        *map = None;
        self.any.store(false, Ordering::Release);
    }
}

/// The variant a launch of `set` runs (see [`Pick`]); tunes when asked to and no
/// choice exists.
#[inline]
pub fn pick(
    set: &'static VariantSet,
    how: Pick,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    scalars: &[ScalarArg],
) -> Result<usize> {
    match how {
        Pick::Fixed(i) if i < set.len() => Ok(i),
        Pick::Auto if !set.choices.any() && !Config::get().autotune => Ok(0),
        _ => pick_slow(Config::get(), set, how, stream, args, scalars),
    }
}

#[inline(never)]
fn pick_slow(
    cfg: &Config,
    set: &'static VariantSet,
    how: Pick,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    scalars: &[ScalarArg],
) -> Result<usize> {
    if let Pick::Fixed(i) = how {
        return Err(Error::Tune {
            kernel: set.kernel,
            message: format!("no variant {i}: it has {}", set.len()),
        });
    }
    let device = device_of(stream, args);
    let pow2 = cfg.autotune_pow2;
    if let Some(i) = set.choices.lookup(device, args, pow2) {
        return Ok(i);
    }
    if how == Pick::Auto && !cfg.autotune {
        return Ok(0);
    }
    measure_variants(cfg, set, stream, args, scalars, false).map(|r| r.chosen)
}

/// Tunes `set` on these arguments now (even if a choice exists: it is replaced) and
/// returns the report; the caller's buffers are left as they were.
pub fn retune(
    set: &'static VariantSet,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    scalars: &[ScalarArg],
) -> Result<Arc<TuneReport>> {
    measure_variants(Config::get(), set, stream, args, scalars, true)
}

/// [`measure`] over a kernel's variants: the arguments are checked as a launch checks
/// them before anything is read or written (a variant whose static shapes differ is
/// checked when it runs).
fn measure_variants(
    cfg: &Config,
    set: &'static VariantSet,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    scalars: &[ScalarArg],
    force: bool,
) -> Result<Arc<TuneReport>> {
    let check = || {
        let mut checks = set
            .specs
            .iter()
            .map(|spec| crate::check::check_args(spec, args));
        match checks.find(|r| r.is_ok()) {
            Some(_) => Ok(()),
            None => match set.specs.first() {
                Some(spec) => crate::check::check_args(spec, args).map(|_| ()),
                None => Ok(()),
            },
        }
    };
    let launch = |i: usize, s: &Stream| {
        launch_with_scalars(cfg, set.specs[i], set.slots[i], Some(s), args, scalars)
    };
    let alt = Alternatives {
        kernel: set.kernel,
        name: set.name(),
        labels: set.labels,
        key: set.key(),
        choices: &set.choices,
        launch: &launch,
    };
    measure(cfg, &alt, stream, args, scalars, force, check)
}

/// What tuning needs of a set of alternatives, whichever kind: a kernel's variants
/// ([`VariantSet`]) or host-level plans ([`PlanSet`]).
struct Alternatives<'x> {
    /// The kernel (or plan set) the errors name.
    kernel: &'static str,
    /// The name in messages and reports (`gemm[f16]`).
    name: String,
    /// Each alternative's label, alternative 0 (the default) first.
    labels: &'static [&'static str],
    /// The set's identity in the disk cache's keys.
    key: &'x str,
    /// The choices of this process.
    choices: &'x Choices,
    /// Runs alternative `i` once on the stream (queued, not waited for).
    launch: &'x dyn Fn(usize, &Stream) -> Result<()>,
}

fn device_of(stream: Option<&Stream>, args: &[ArgRef<'_>]) -> Device {
    match (stream, args.first()) {
        (Some(s), _) => s.device(),
        (None, Some(a)) => a.device,
        (None, None) => Device::Cpu,
    }
}

fn bucket(d: usize, pow2: bool) -> usize {
    match pow2 {
        true => d.checked_next_power_of_two().unwrap_or(d),
        false => d,
    }
}

/// Each argument's rank, then its dims (bucketed), in one list.
fn bucketed(args: &[ArgRef<'_>], pow2: bool) -> Vec<usize> {
    let mut out = Vec::new();
    for a in args {
        out.push(a.shape.len());
        out.extend(a.shape.iter().map(|&d| bucket(d, pow2)));
    }
    out
}

fn same_dims(dims: &[usize], args: &[ArgRef<'_>], pow2: bool) -> bool {
    let mut it = dims.iter();
    for a in args {
        if it.next() != Some(&a.shape.len()) {
            return false;
        }
        for &d in a.shape {
            if it.next() != Some(&bucket(d, pow2)) {
                return false;
            }
        }
    }
    it.next().is_none()
}

/// FNV-1a over the device and the bucketed dims (no allocation: a warm lookup).
fn shape_hash(device: Device, args: &[ArgRef<'_>], pow2: bool) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |v: u64| {
        h ^= v;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    eat(match device {
        Device::Cpu => u64::MAX,
        Device::Cuda(n) => n as u64,
    });
    for a in args {
        eat(a.shape.len() as u64);
        for &d in a.shape {
            eat(bucket(d, pow2) as u64);
        }
    }
    h
}

/// `cuda:0 NVIDIA H200 (sm_90)`, or `cpu x86_64`.
fn device_label(device: Device) -> String {
    match device {
        Device::Cpu => format!("cpu {}", std::env::consts::ARCH),
        Device::Cuda(n) => match crate::cuda::device(n) {
            Ok(d) => {
                let name = d.ctx.name().unwrap_or_else(|_| "?".into());
                format!("cuda:{n} {name} (sm_{}{})", d.cc.0, d.cc.1)
            }
            Err(_) => format!("cuda:{n}"),
        },
    }
}

fn dtype_signature(args: &[ArgRef<'_>], scalars: &[ScalarArg]) -> String {
    let mut parts: Vec<String> = args.iter().map(|a| a.dtype.to_string()).collect();
    parts.extend(scalars.iter().map(|s| s.dtype.to_string()));
    parts.join(",")
}

/// The first pass's settings: a screen, short (the finalists are timed again).
fn bench_options() -> BenchOptions {
    BenchOptions {
        warmup: Duration::from_millis(5),
        rep: Duration::from_millis(15),
        min_samples: 3,
        max_samples: 200,
        flush_l2: true,
        graph: false,
        calls_per_sample: 0,
        primed: false,
    }
}

/// The final round's settings: a few rounds at least, each timing every finalist once.
fn final_options() -> BenchOptions {
    BenchOptions {
        warmup: Duration::from_millis(10),
        rep: Duration::from_millis(60),
        min_samples: 5,
        primed: true,
        ..bench_options()
    }
}

/// The choice for these arguments: in memory, else on disk, else measured (`force`:
/// measured even if a choice exists). `check` validates the arguments before anything
/// is read or written.
fn measure(
    cfg: &Config,
    set: &Alternatives<'_>,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    scalars: &[ScalarArg],
    force: bool,
    check: impl FnOnce() -> Result<()>,
) -> Result<Arc<TuneReport>> {
    let device = device_of(stream, args);
    let pow2 = cfg.autotune_pow2;
    let name = &set.name;
    if !force {
        if let Some(i) = set.choices.lookup(device, args, pow2) {
            if let Some(r) = set.choices.reports().into_iter().find(|r| r.chosen == i) {
                return Ok(r);
            }
        }
    }
    let dev_label = device_label(device);
    let dtypes = dtype_signature(args, scalars);
    let shapes: Vec<Vec<usize>> = args
        .iter()
        .map(|a| a.shape.iter().map(|&d| bucket(d, pow2)).collect())
        .collect();
    let bucket_name = if pow2 { "pow2" } else { "exact" };
    let key = crate::cache::key_of(&[
        "autotune",
        set.key,
        &dev_label,
        &dtypes,
        bucket_name,
        &format!("{shapes:?}"),
    ]);
    let store = store::Store::open(cfg, set.key, set.labels);
    if !force {
        let t = Instant::now();
        let found = store.as_ref().and_then(|s| s.read(&key));
        if cfg.diagnostics {
            let outcome = match &found {
                Some(r) => format!("hit chosen={}", r.chosen_label),
                None => "miss".to_string(),
            };
            crate::find::print_done(&format!("autotune-cache {name}"), t, &outcome);
        }
        if let Some(r) = found {
            let r = Arc::new(r);
            set.choices.record(device, args, pow2, r.clone());
            return Ok(r);
        }
    }
    if crate::graph::capture_for(stream, device).is_some() {
        return Err(Error::Tune {
            kernel: set.kernel,
            message: format!(
                "cannot tune inside a graph capture (nothing runs while capturing); tune \
                 these shapes first, outside the capture (`{}::tune()` or TILE_AUTOTUNE=1), \
                 then capture: the choice is used",
                set.kernel
            ),
        });
    }
    check()?;
    let owned;
    let s = match stream {
        Some(s) => s,
        None => {
            owned = device.default_stream()?;
            &owned
        }
    };
    let mut report = run_variants(cfg, set, s, args)?;
    report.device = dev_label;
    report.dtypes = dtypes;
    report.shapes = shapes;
    report.bucket = bucket_name.to_string();
    // Publish, then adopt whatever the cache holds: when processes race, every one of
    // them uses the entry that won.
    if let Some(store) = &store {
        store.publish(&key, &report);
        if let Some(mut won) = store.read(&key) {
            won.from_cache = won.measured_by != report.measured_by;
            report = won;
        }
    }
    let report = Arc::new(report);
    set.choices.record(device, args, pow2, report.clone());
    Ok(report)
}

/// Runs, checks and times every variant, leaving the written buffers as they were.
fn run_variants(
    cfg: &Config,
    set: &Alternatives<'_>,
    stream: &Stream,
    args: &[ArgRef<'_>],
) -> Result<TuneReport> {
    let name = set.name.clone();
    let count = set.labels.len();
    let started = Instant::now();
    if cfg.diagnostics {
        eprintln!("tile phase start: autotune {name} variants={count}");
    }
    // Reborrow with one lifetime for the saved copies.
    let args: &[ArgRef<'_>] = args;
    let (mut timing, mut first_launches, mut checks) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let t = Instant::now();
    let mut saved = Outputs::take(args, stream, cfg.diagnostics)?;
    checks += t.elapsed();
    let bar = progress_bar(&name, count);
    let opts = bench_options();
    let mut rows = Vec::with_capacity(count);
    let mut reference: Option<usize> = None;
    let mut best: Option<(usize, f64)> = None;
    for (i, &label) in set.labels.iter().enumerate() {
        let launch = |s: &Stream| (set.launch)(i, s);
        // The correctness run: restore the outputs, launch (the variant's first launch:
        // module load, or JIT without ahead-of-time artifacts), read back, compare.
        let t = Instant::now();
        let restored = saved.restore();
        checks += t.elapsed();
        let t = Instant::now();
        let launched = restored
            .and_then(|()| launch(stream))
            .and_then(|()| stream.synchronize());
        first_launches += t.elapsed();
        let t = Instant::now();
        // The first variant that runs is the reference; the others are compared with it.
        let ran = launched.and_then(|()| match reference {
            None => saved.keep_reference().map(|()| None),
            Some(_) => saved.compare(),
        });
        let timed = Outcome::Timed {
            median_ms: f64::NAN,
            min_ms: f64::NAN,
        };
        let outcome = match (ran, reference) {
            (Err(e), _) => Outcome::Failed(e.to_string()),
            (Ok(None), None) => {
                reference = Some(i);
                timed
            }
            (Ok(None), Some(_)) => timed,
            (Ok(Some(why)), r) => {
                Outcome::Mismatch(format!("{why} (against `{}`)", set.labels[r.unwrap_or(i)]))
            }
        };
        checks += t.elapsed();
        let outcome = match outcome {
            Outcome::Timed { .. } => {
                let t = Instant::now();
                let r = time_variant(stream, launch, &opts, best.map(|(_, b)| b));
                timing += t.elapsed();
                match r {
                    Ok((median_ms, min_ms)) => Outcome::Timed { median_ms, min_ms },
                    Err(e) => Outcome::Failed(e.to_string()),
                }
            }
            other => other,
        };
        if let Outcome::Timed { median_ms, .. } = outcome {
            if best.is_none_or(|(_, b)| median_ms < b) {
                best = Some((i, median_ms));
            }
        }
        if cfg.diagnostics {
            let what = match &outcome {
                Outcome::Timed { median_ms, .. } => format!("median={median_ms:.4}ms"),
                Outcome::Failed(e) => format!("failed: {e}"),
                Outcome::Mismatch(e) => format!("mismatch: {e}"),
            };
            eprintln!(
                "tile autotune {name} variant {}/{} `{label}`: {what}",
                i + 1,
                count
            );
        }
        if let Some(b) = &bar {
            let best_text = best
                .map(|(j, t)| format!("best {t:.4} ms `{}`", set.labels[j]))
                .unwrap_or_default();
            b.set_message(best_text);
            b.inc(1);
        }
        rows.push(TuneRow {
            variant: label.to_string(),
            outcome,
        });
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let t = Instant::now();
    let best = final_round(cfg, set, stream, &mut rows).or(best);
    timing += t.elapsed();
    saved.restore()?;
    let Some((chosen, _)) = best else {
        let why: Vec<String> = rows
            .iter()
            .map(|r| format!("`{}`: {:?}", r.variant, r.outcome))
            .collect();
        return Err(Error::Tune {
            kernel: set.kernel,
            message: format!("no variant ran: {}", why.join("; ")),
        });
    };
    if cfg.diagnostics {
        crate::find::print_done(
            &format!("autotune {name}"),
            started,
            &format!(
                "chosen=`{}` timing={:.3}ms first-launches={:.3}ms checks={:.3}ms on={}",
                set.labels[chosen],
                timing.as_secs_f64() * 1e3,
                first_launches.as_secs_f64() * 1e3,
                checks.as_secs_f64() * 1e3,
                saved.place()
            ),
        );
    }
    Ok(TuneReport {
        kernel: name,
        device: String::new(),
        dtypes: String::new(),
        shapes: Vec::new(),
        bucket: String::new(),
        rows,
        chosen,
        chosen_label: set.labels[chosen].to_string(),
        timing_ms: timing.as_secs_f64() * 1e3,
        first_launch_ms: first_launches.as_secs_f64() * 1e3,
        check_ms: checks.as_secs_f64() * 1e3,
        checked_on: saved.place().to_string(),
        measured_by: format!(
            "pid {} at {}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ),
        from_cache: false,
    })
}

/// A variant whose one timed call takes more than this many times the best median so
/// far, and more than [`PRUNE_MIN_MS`], keeps that call's time and is not timed
/// further: it cannot become a finalist (within [`FINALISTS_WITHIN`] of the fastest)
/// unless that one call was 20% off. At a shape where a GEMM takes 6 ms, the decode
/// tile's variants take several times that, and timing each in full (ten calls and
/// more) took a quarter of the tuning time (`bench/RESULTS.md`); the narrow tiles meant
/// for one-wave shapes (128 × 64, in clusters of one to eight) take 1.6–1.9 times the
/// best there, which the factor 2 of the first version timed in full.
const PRUNE_ABOVE: f64 = 1.5;
/// Below this a call is too short for one timing to say much (a launch's host cost
/// may be in it), and the full timing is cheap anyway.
const PRUNE_MIN_MS: f64 = 0.5;

/// The first pass's (median, min) milliseconds of one variant: [`do_bench`], unless
/// one call already shows it far slower than `best` (see [`PRUNE_ABOVE`]).
fn time_variant(
    stream: &Stream,
    mut launch: impl FnMut(&Stream) -> Result<()>,
    opts: &BenchOptions,
    best: Option<f64>,
) -> Result<(f64, f64)> {
    if let Some(best) = best {
        let once = crate::profile::time_calls(stream, &mut launch, 1)?;
        if once > PRUNE_MIN_MS && once > PRUNE_ABOVE * best {
            return Ok((once, once));
        }
    }
    let b = do_bench(stream, launch, opts)?;
    Ok((b.median_ms, b.min_ms))
}

/// How close to the fastest a variant must come in the first pass to be timed again
/// in the final round, and how many are.
const FINALISTS_WITHIN: f64 = 1.25;
const MAX_FINALISTS: usize = 6;

/// The final round: the variants within [`FINALISTS_WITHIN`] of the fastest are timed
/// again in interleaved rounds ([`do_bench_interleaved`], primed), and their rows take
/// those times. The first pass runs each variant for a few milliseconds, one after the
/// other, and a GPU's clock drifts by several percent over the seconds of tuning; in
/// rounds every finalist sees the same drift. Each timed run follows an untimed run of
/// the same variant (then the L2 flush): at 1000³ a GEMM tile run right after another
/// tile of the space took up to 50% longer than after itself or after cuBLAS, and by
/// how much depended on which tile came before (the finalists evict each other's
/// code; a variant of 200 KiB of code lost most), so finalists timed after each other
/// ranked by what ran before them (two processes chose differently, 12% apart in a
/// program; bench/RESULTS.md, 2026-12-06 fourth session).
/// Returns the fastest finalist, or `None` when fewer than two qualify or the round
/// fails (the first pass's times then stand).
fn final_round(
    cfg: &Config,
    set: &Alternatives<'_>,
    stream: &Stream,
    rows: &mut [TuneRow],
) -> Option<(usize, f64)> {
    let mut timed: Vec<(usize, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.median_ms().map(|m| (i, m)))
        .collect();
    timed.sort_by(|a, b| a.1.total_cmp(&b.1));
    let &(_, fastest) = timed.first()?;
    let finalists: Vec<usize> = timed
        .iter()
        .take_while(|(_, m)| *m <= fastest * FINALISTS_WITHIN)
        .take(MAX_FINALISTS)
        .map(|&(i, _)| i)
        .collect();
    if finalists.len() < 2 {
        return None;
    }
    // One closure type for every finalist (they differ only in what they capture).
    let mut launches: Vec<_> = finalists
        .iter()
        .map(|&i| move |s: &Stream| (set.launch)(i, s))
        .collect();
    let mut fs: Vec<crate::profile::BenchFn<'_>> = launches
        .iter_mut()
        .map(|f| f as crate::profile::BenchFn<'_>)
        .collect();
    // A failure here (every finalist already ran once) keeps the first pass's times.
    let results = match do_bench_interleaved(stream, &mut fs, &final_options()) {
        Ok(r) => r,
        Err(e) => {
            if cfg.diagnostics {
                eprintln!("tile autotune {} final round failed: {e}", set.name);
            }
            return None;
        }
    };
    let mut best: Option<(usize, f64)> = None;
    for (&i, r) in finalists.iter().zip(&results) {
        if cfg.diagnostics {
            eprintln!(
                "tile autotune {} final `{}`: median={:.4}ms (first pass {:.4}ms)",
                set.name,
                set.labels.get(i).copied().unwrap_or("?"),
                r.median_ms,
                rows[i].median_ms().unwrap_or(f64::NAN)
            );
        }
        rows[i].outcome = Outcome::Timed {
            median_ms: r.median_ms,
            min_ms: r.min_ms,
        };
        if best.is_none_or(|(_, b)| r.median_ms < b) {
            best = Some((i, r.median_ms));
        }
    }
    best
}

/// A progress bar on stderr while tuning, when stderr is a terminal.
fn progress_bar(name: &str, n: usize) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(n as u64);
    let style = indicatif::ProgressStyle::with_template(
        "tile autotune {prefix} [{bar:24}] {pos}/{len} {msg}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(name.to_string());
    Some(bar)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        assert_eq!(bucket(100, false), 100);
        assert_eq!(bucket(100, true), 128);
        assert_eq!(bucket(128, true), 128);
        assert_eq!(bucket(0, true), 1);
    }
}
