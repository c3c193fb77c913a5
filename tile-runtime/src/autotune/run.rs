//! One tuning run: every alternative run once on the call's arguments and checked
//! against the first that ran, timed with `do_bench` (far-slower ones pruned after one
//! call), the finalists timed again in interleaved rounds; the outputs are left as the
//! caller passed them.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use super::outputs::Outputs;
use super::{Alternatives, Outcome, TuneReport, TuneRow};
use crate::arg::ArgRef;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::profile::{do_bench, do_bench_interleaved, BenchOptions};
use crate::stream::Stream;

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

/// Runs, checks and times every variant, leaving the written buffers as they were.
pub(super) fn run_variants(
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
