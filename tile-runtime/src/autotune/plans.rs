//! Plans: alternatives above the kernel. A kernel's variants differ in their
//! compile-time parameters; some choices are not a kernel's to make, such as copying
//! operands into padded buffers before an aligned kernel runs (two or three launches
//! where one would do). A [`PlanSet`] names such alternatives, and [`pick_plan`]
//! chooses among them as [`super::pick`] does among variants: the same policies, the
//! same timing, the same check against the first plan's output, the same disk cache.
//!
//! The caller owns the plans: it passes the call's buffers (those the plans write
//! marked as outputs) and a closure that runs plan `i` on a stream. A plan may launch
//! kernels that are tuned themselves; their tuning then happens during the plan's first
//! (checked, untimed) run, and the plan is timed with their choices.

use std::sync::{Arc, OnceLock};

use super::{device_of, measure, Alternatives, Choices, Pick, TuneReport, VariantSet};
use crate::arg::ArgRef;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::stream::Stream;

/// Host-level alternatives that compute the same outputs (see the module's notes).
pub struct PlanSet {
    /// The set's name, in messages and reports (`gemm_any_pitch[f16]`).
    pub name: &'static str,
    /// Each plan as reports name it, plan 0 (the default) first.
    pub labels: &'static [&'static str],
    /// The kernels the plans launch with variants: their identities are part of this
    /// set's, so a change to any of them makes earlier choices stale.
    deps: fn() -> Vec<&'static VariantSet>,
    choices: Choices,
    key: OnceLock<String>,
}

impl PlanSet {
    /// A set of `labels.len()` plans; `deps` lists the variant sets the plans launch.
    pub const fn new(
        name: &'static str,
        labels: &'static [&'static str],
        deps: fn() -> Vec<&'static VariantSet>,
    ) -> PlanSet {
        PlanSet {
            name,
            labels,
            deps,
            choices: Choices::new(),
            key: OnceLock::new(),
        }
    }

    /// The set's identity: its name, its labels and its dependencies' identities.
    fn key(&self) -> &str {
        self.key.get_or_init(|| {
            let deps = (self.deps)();
            let mut parts: Vec<&str> = vec!["plans", self.name];
            parts.extend(self.labels.iter().copied());
            parts.extend(deps.iter().map(|d| d.key()));
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
}

/// The plan a call with these buffers runs (policies as [`super::pick`]'s): `Fixed(i)`
/// is plan `i`; `Auto` is the choice made for these shapes in this process, else plan
/// 0, or tuned with `TILE_AUTOTUNE=1`; `Tune` is the choice in memory, else on disk,
/// else measured now. `args` are the call's buffers, with those the plans write made
/// by [`ArgRef::output`] (their contents are saved before tuning and restored after
/// each plan and at the end). `run(i, stream)` queues plan `i` on `stream`; it is
/// called only while tuning, and the caller then runs the plan returned.
pub fn pick_plan(
    set: &'static PlanSet,
    how: Pick,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
    run: &mut dyn FnMut(usize, &Stream) -> Result<()>,
) -> Result<usize> {
    let cfg = Config::get();
    match how {
        Pick::Fixed(i) if i < set.labels.len() => return Ok(i),
        Pick::Fixed(i) => {
            return Err(Error::Tune {
                kernel: set.name,
                message: format!("no plan {i}: it has {}", set.labels.len()),
            })
        }
        Pick::Auto if !set.choices.any() && !cfg.autotune => return Ok(0),
        _ => {}
    }
    let device = device_of(stream, args);
    if let Some(i) = set.choices.lookup(device, args, cfg.autotune_pow2) {
        return Ok(i);
    }
    if how == Pick::Auto && !cfg.autotune {
        return Ok(0);
    }
    // `measure` times alternatives through a shared closure; the plans' runner is the
    // caller's, used by one call at a time.
    let run = std::cell::RefCell::new(run);
    let launch = |i: usize, s: &Stream| (run.borrow_mut())(i, s);
    let alt = Alternatives {
        kernel: set.name,
        name: set.name.to_string(),
        labels: set.labels,
        key: set.key(),
        choices: &set.choices,
        launch: &launch,
    };
    measure(cfg, &alt, stream, args, &[], false, || Ok(())).map(|r| r.chosen)
}
