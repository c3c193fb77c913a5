//! tile-fuzz: mutates kernel sources and checks that the compiler either
//! accepts them, producing C that `cc` builds (and CUDA that `nvcc` builds,
//! when `NVCC` is set), or refuses them with errors at the user's code.
//! A panic, an internal or unplaced error, a timeout, or generated code a
//! compiler rejects is a bug; each is saved with its input.
//!
//! ```text
//! tile-fuzz [--seed N] [--inputs N | --minutes M] [--out DIR] [--root DIR]
//!           [--cc-every N] [--nvcc-every N] [--emit-cuda DIR] [--timeout SECS]
//!           [--focus variants]
//! ```
//!
//! `--emit-cuda DIR` writes the nvcc sample (every `--nvcc-every`-th
//! accepted kernel: `<n>.rs`, its input, and `<n>.sm_80.cu`, plus
//! `<n>.sm_90a.cu` for a Hopper specialization) instead of running nvcc, so
//! that a machine with many cores builds the sample afterwards
//! (`bench/fuzz_nvcc.sh DIR`), while the campaign runs where nvcc is slow.
//!
//! `--focus variants` fuzzes the variant syntax: every seed lists values in
//! its attribute (one is added where it does not), half the mutations change
//! the attribute (its lists, filter and `default(..)`, see `attr.rs`), and
//! every instance of an input is compiled (each variant the filter keeps, up
//! to 16), as the macro does; otherwise only the first instance is.
//!
//! Seeds are the kernels of `examples/`, `tests/kernels/`, `tests/ui/` and
//! `tile-core/tests/golden/`. A campaign runs with overflow checks on:
//! `cargo run --profile fuzz --bin tile-fuzz -- --minutes 60`. `cargo test`
//! runs a short fixed-seed budget (`tests/fuzz.rs`). The summary goes to
//! stdout and `DIR/summary.txt`; the bugs to `DIR/<class>-<n>.rs`. The exit
//! status is 1 when a bug was found.

mod attr;
mod check;
mod corpus;
mod mutate;

use check::{Class, Worker};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Args {
    seed: u64,
    inputs: Option<u64>,
    minutes: Option<f64>,
    out: PathBuf,
    root: PathBuf,
    cc_every: u64,
    nvcc_every: u64,
    timeout: Duration,
    /// `--focus variants`.
    variants: bool,
    /// `--emit-cuda`: where the nvcc sample is written instead of built.
    emit_cuda: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seed: 1,
        inputs: None,
        minutes: None,
        out: PathBuf::from("target/tile-fuzz"),
        root: PathBuf::from(env!("CARGO_MANIFEST_DIR")),
        cc_every: 20,
        nvcc_every: 200,
        timeout: Duration::from_secs(20),
        variants: false,
        emit_cuda: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let num = |v: String| v.parse::<u64>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--seed" => a.seed = num(value()?)?,
            "--inputs" => a.inputs = Some(num(value()?)?),
            "--minutes" => {
                a.minutes = Some(value()?.parse().map_err(|e| format!("--minutes: {e}"))?)
            }
            "--out" => a.out = PathBuf::from(value()?),
            "--root" => a.root = PathBuf::from(value()?),
            "--cc-every" => a.cc_every = num(value()?)?.max(1),
            "--nvcc-every" => a.nvcc_every = num(value()?)?.max(1),
            "--emit-cuda" => a.emit_cuda = Some(PathBuf::from(value()?)),
            "--timeout" => a.timeout = Duration::from_secs(num(value()?)?),
            "--focus" => match value()?.as_str() {
                "variants" => a.variants = true,
                f => return Err(format!("--focus: `{f}` is not a focus (`variants`)")),
            },
            "-h" | "--help" => {
                return Err(
                    "usage: tile-fuzz [--seed N] [--inputs N | --minutes M] [--out DIR] \
                            [--root DIR] [--cc-every N] [--nvcc-every N] [--emit-cuda DIR] \
                            [--timeout SECS] [--focus variants]"
                        .into(),
                )
            }
            f => return Err(format!("unknown flag {f} (--help lists them)")),
        }
    }
    if a.inputs.is_none() && a.minutes.is_none() {
        a.inputs = Some(1000);
    }
    Ok(a)
}

/// Counts and the saved examples of each class.
#[derive(Default)]
struct Tally {
    counts: BTreeMap<Class, u64>,
    /// Distinct bug messages (digits removed) already saved.
    seen: HashSet<(Class, String)>,
    saved: Vec<String>,
    /// How often each refusal message (digits removed, shortened) came up.
    refusals: BTreeMap<String, u64>,
    cc_checked: u64,
    /// Accepted kernels whose CUDA went through nvcc (sm_80, and sm_90a for
    /// a Hopper specialization).
    nvcc_checked: u64,
    /// Accepted kernels whose CUDA was written for a later nvcc run.
    cuda_emitted: u64,
}

impl Tally {
    fn add(&mut self, class: Class, message: &str, src: &str, out: &Path) {
        *self.counts.entry(class).or_default() += 1;
        let key: String = message.chars().filter(|c| !c.is_ascii_digit()).collect();
        if class == Class::Spanned {
            let short: String = key.chars().take(70).collect();
            *self.refusals.entry(short).or_default() += 1;
        }
        if !class.is_bug() {
            return;
        }
        if self.seen.len() < 500 && self.seen.insert((class, key)) {
            let n = self.seen.len();
            let path = out.join(format!("{}-{n}.rs", class.name()));
            let text = format!(
                "// {}: {}\n{src}\n",
                class.name(),
                message.replace('\n', " ")
            );
            if std::fs::write(&path, text).is_ok() {
                self.saved.push(format!("{}: {message}", path.display()));
            }
        }
    }

    fn bugs(&self) -> u64 {
        self.counts
            .iter()
            .filter(|(c, _)| c.is_bug())
            .map(|(_, n)| n)
            .sum()
    }

    fn summary(&self, inputs: u64, took: Duration, seed: u64) -> String {
        let mut s = format!(
            "tile-fuzz: {inputs} inputs in {:.1} s (seed {seed}); generated C built by cc: {}, \
             CUDA built by nvcc: {}, CUDA written for nvcc: {}\n",
            took.as_secs_f64(),
            self.cc_checked,
            self.nvcc_checked,
            self.cuda_emitted
        );
        for c in Class::ALL {
            s.push_str(&format!(
                "  {:16} {}\n",
                c.name(),
                self.counts.get(&c).copied().unwrap_or(0)
            ));
        }
        let mut top: Vec<(&String, &u64)> = self.refusals.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1));
        for (m, k) in top.into_iter().take(10) {
            s.push_str(&format!("  refused {k:6}x: {m}\n"));
        }
        for line in self.saved.iter().take(50) {
            s.push_str(&format!("  bug: {line}\n"));
        }
        s
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let mut rng = mutate::Rng(args.seed);
    let mut seeds = corpus::seeds(&args.root);
    if args.variants {
        seeds = seeds
            .iter()
            .map(|s| attr::with_variants(&mut rng, s))
            .filter(|s| attr::has_variant_list(s))
            .collect();
    }
    if seeds.is_empty() {
        eprintln!(
            "tile-fuzz: no kernels under {} ({})",
            args.root.display(),
            corpus::SEED_DIRS.join(", ")
        );
        std::process::exit(2);
    }
    if args.variants {
        eprintln!(
            "tile-fuzz: focus variants, {} seeds with variant lists",
            seeds.len()
        );
    }
    std::fs::create_dir_all(&args.out).expect("create the output folder");
    let scratch = args.out.join("scratch");
    std::fs::create_dir_all(&scratch).expect("create the scratch folder");
    let nvcc = std::env::var("NVCC").ok().filter(|s| !s.is_empty());
    if let Some(dir) = &args.emit_cuda {
        std::fs::create_dir_all(dir).expect("create the --emit-cuda folder");
    }
    check::install_panic_hook();
    let mut worker = Worker::new(match args.variants {
        true => check::compile_every_instance,
        false => check::compile,
    });
    let mut tally = Tally::default();
    let start = Instant::now();
    let deadline = args
        .minutes
        .map(|m| start + Duration::from_secs_f64(m * 60.0));
    let mut n = 0u64;
    let (mut accepted, mut last_report) = (0u64, Instant::now());
    loop {
        if args.inputs.is_some_and(|max| n >= max) || deadline.is_some_and(|d| Instant::now() >= d)
        {
            break;
        }
        n += 1;
        // The seeds themselves first, then mutants.
        let src = if (n as usize) <= seeds.len() {
            seeds[n as usize - 1].clone()
        } else {
            let a = rng.pick(&seeds).clone();
            let b = rng.pick(&seeds).clone();
            match (args.variants, rng.below(4)) {
                (true, 0 | 1) => attr::mutate_attr(&mut rng, &a),
                (true, 2) => {
                    let m = attr::mutate_attr(&mut rng, &a);
                    mutate::mutate(&mut rng, &m, &b)
                }
                _ => mutate::mutate(&mut rng, &a, &b),
            }
        };
        let o = worker.run(&src, args.timeout);
        tally.add(o.class, &o.message, &src, &args.out);
        if o.class == Class::Ok {
            accepted += 1;
            if !o.c.is_empty() && accepted % args.cc_every == 0 {
                tally.cc_checked += 1;
                if let Err(e) = check::cc(&scratch, &o.c) {
                    tally.add(Class::CcRejects, &e, &src, &args.out);
                }
            }
            if let Some(dir) = &args.emit_cuda {
                if accepted % args.nvcc_every == 0 {
                    tally.cuda_emitted += 1;
                    if let Err(e) = emit_cuda(dir, accepted, &src, &o) {
                        eprintln!("tile-fuzz: cannot write the nvcc sample: {e}");
                        std::process::exit(2);
                    }
                }
            } else if let Some(nv) = &nvcc {
                if accepted % args.nvcc_every == 0 {
                    // The portable code for sm_80, and the Hopper
                    // specialization (when there is one) for sm_90a.
                    tally.nvcc_checked += 1;
                    let hopper = o.cuda_sm90a.iter().map(|c| (c, "90a"));
                    for (cuda, arch) in std::iter::once((&o.cuda, "80")).chain(hopper) {
                        if let Err(e) = check::nvcc(nv, &scratch, cuda, arch) {
                            tally.add(
                                Class::NvccRejects,
                                &format!("sm_{arch}: {e}"),
                                &src,
                                &args.out,
                            );
                        }
                    }
                }
            }
        }
        if last_report.elapsed() > Duration::from_secs(60) {
            last_report = Instant::now();
            let s = tally.summary(n, start.elapsed(), args.seed);
            let _ = std::fs::write(args.out.join("summary.txt"), &s);
            eprintln!("{}", s.lines().next().unwrap_or(""));
        }
    }
    let s = tally.summary(n, start.elapsed(), args.seed);
    let _ = std::fs::write(args.out.join("summary.txt"), &s);
    print!("{s}");
    std::process::exit(if tally.bugs() > 0 { 1 } else { 0 });
}

/// Writes accepted kernel `n`'s input and generated CUDA (sm_80, and the
/// Hopper specialization for sm_90a when there is one) into `dir`.
fn emit_cuda(dir: &Path, n: u64, src: &str, o: &check::Outcome) -> std::io::Result<()> {
    std::fs::write(dir.join(format!("{n}.rs")), src)?;
    std::fs::write(dir.join(format!("{n}.sm_80.cu")), &o.cuda)?;
    if let Some(h) = &o.cuda_sm90a {
        std::fs::write(dir.join(format!("{n}.sm_90a.cu")), h)?;
    }
    Ok(())
}
