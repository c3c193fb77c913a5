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
//!   the first variant that ran), timed with [`do_bench`](crate::profile::do_bench) (L2 flushed; a variant
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
mod run;
mod store;

pub use plans::{pick_plan, PlanSet};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The buffers of a call that [`pick_plan`] saves, restores and compares.
pub use crate::arg::ArgRef;
use crate::config::Config;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::launch::launch_with_scalars;
use crate::slot::KernelSlot;
use crate::spec::{KernelSpec, ScalarArg};
use crate::stream::Stream;

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
    let mut report = run::run_variants(cfg, set, s, args)?;
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
