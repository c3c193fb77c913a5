//! Running the compiler on one input and classifying what happened; building
//! accepted outputs with `cc` and `nvcc`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// What compiling one input did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Accepted: both sources generated.
    Ok,
    /// Refused with errors that all point into the source.
    Spanned,
    /// Refused with an error that has no position.
    Unspanned,
    /// Refused with an internal error (a compiler bug reported as an error).
    Internal,
    /// The compiler panicked.
    Panic,
    /// The compiler ran past the time limit.
    Timeout,
    /// Accepted, and the C compiler rejected the generated C.
    CcRejects,
    /// Accepted, and nvcc rejected the generated CUDA (or ran past its limit).
    NvccRejects,
}

impl Class {
    pub const ALL: [Class; 8] = [
        Class::Ok,
        Class::Spanned,
        Class::Unspanned,
        Class::Internal,
        Class::Panic,
        Class::Timeout,
        Class::CcRejects,
        Class::NvccRejects,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Class::Ok => "ok",
            Class::Spanned => "spanned-error",
            Class::Unspanned => "unspanned-error",
            Class::Internal => "internal-error",
            Class::Panic => "panic",
            Class::Timeout => "timeout",
            Class::CcRejects => "cc-rejects",
            Class::NvccRejects => "nvcc-rejects",
        }
    }
    /// Whether the class is a bug of the compiler.
    pub fn is_bug(self) -> bool {
        !matches!(self, Class::Ok | Class::Spanned)
    }
}

/// The outcome of one input: its class, a message, and the generated sources
/// when accepted.
pub struct Outcome {
    pub class: Class,
    pub message: String,
    pub c: String,
    pub cuda: String,
    /// The Hopper specialization, when the passes made other decisions there.
    pub cuda_sm90a: Option<String>,
}

impl Outcome {
    fn of(class: Class, message: impl Into<String>) -> Outcome {
        Outcome {
            class,
            message: message.into(),
            c: String::new(),
            cuda: String::new(),
            cuda_sm90a: None,
        }
    }
}

/// Compiles `src` (both targets), catching panics: its first instance (a
/// kernel with a dtype list or a variant space has several, see
/// [`compile_every_instance`]).
pub fn compile(src: &str) -> Outcome {
    classify(std::panic::catch_unwind(|| {
        let def = tile_core::frontend::parse_kernel_source(src)?;
        tile_core::compile(def)
    }))
}

/// At most this many instances of one input are compiled.
const MAX_INSTANCES: usize = 16;

/// Compiles every instance of `src` as the macro does (each dtype and each
/// variant the filter keeps, up to [`MAX_INSTANCES`]), catching panics. The
/// input is accepted when every instance is (the generated code of the last
/// one is kept for the C and CUDA checks), else refused with the errors of
/// the instances that failed.
pub fn compile_every_instance(src: &str) -> Outcome {
    classify(std::panic::catch_unwind(|| {
        use tile_core::frontend::{instances, is_kernel_attr, kernel_attr, parse_kernel_in, Env};
        let file: syn::File = syn::parse_str(src).map_err(|e| {
            vec![tile_core::Diagnostic::new(
                e.span(),
                format!("not valid Rust: {e}"),
            )]
        })?;
        let env = Env::of_items(&file.items);
        let Some((attr, mut f)) = file.items.iter().find_map(|item| match item {
            syn::Item::Fn(f) => kernel_attr(&f.attrs).map(|a| (a, f.clone())),
            _ => None,
        }) else {
            return Err(vec![tile_core::Diagnostic::new(
                tile_core::diag::range(&file),
                "no #[tile::kernel] function found",
            )]);
        };
        f.attrs.retain(|a| !is_kernel_attr(a));
        let (mut last, mut diags) = (None, Vec::new());
        for i in instances(attr, &f)?.into_iter().take(MAX_INSTANCES) {
            match parse_kernel_in(i.attr, &i.item, &env).and_then(tile_core::compile) {
                Ok(c) => last = Some(c),
                Err(d) => diags.extend(d),
            }
        }
        match (last, diags.is_empty()) {
            (Some(c), true) => Ok(c),
            (None, true) => Err(vec![tile_core::Diagnostic::new(
                proc_macro2::Span::call_site(),
                "no instance",
            )]),
            (_, false) => Err(diags),
        }
    }))
}

fn classify(
    run: std::thread::Result<Result<tile_core::Compiled, Vec<tile_core::Diagnostic>>>,
) -> Outcome {
    match run {
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            let at = PANIC_AT.with(|a| a.take()).unwrap_or_default();
            Outcome::of(Class::Panic, format!("{msg} (at {at})"))
        }
        Ok(Ok(c)) => Outcome {
            class: Class::Ok,
            message: String::new(),
            c: c.c_source,
            cuda: c.cuda_source,
            cuda_sm90a: c.cuda_sm90a.map(|v| v.source),
        },
        Ok(Err(diags)) => {
            let internal = diags.iter().find(|d| d.message.contains("internal error"));
            let unspanned = diags.iter().find(|d| d.span.start.byte_range() == (0..0));
            match (internal, unspanned) {
                (Some(d), _) => Outcome::of(Class::Internal, d.message.clone()),
                (None, Some(d)) => Outcome::of(Class::Unspanned, d.message.clone()),
                (None, None) => Outcome::of(Class::Spanned, diags[0].message.clone()),
            }
        }
    }
}

thread_local! {
    /// Where the last panic on this thread happened (set by the hook).
    static PANIC_AT: std::cell::Cell<Option<String>> = const { std::cell::Cell::new(None) };
}

/// A quiet panic hook that records where a panic happened.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        PANIC_AT.with(|a| a.set(Some(at)));
    }));
}

/// Compiles inputs on a worker thread so that one that hangs becomes a
/// timeout instead of stopping the run. The thread is replaced after a
/// timeout (the stuck one is left to finish) and every so many inputs
/// (proc-macro2 keeps every parsed text in a thread-local source map).
pub struct Worker {
    jobs: mpsc::Sender<String>,
    results: mpsc::Receiver<Outcome>,
    done: usize,
    how: fn(&str) -> Outcome,
}

impl Worker {
    /// A worker that compiles each input with `how` ([`compile`] or
    /// [`compile_every_instance`]).
    pub fn new(how: fn(&str) -> Outcome) -> Worker {
        let (jobs, rx) = mpsc::channel::<String>();
        let (tx, results) = mpsc::channel();
        std::thread::Builder::new()
            .name("tile-fuzz-worker".into())
            .stack_size(256 << 20)
            .spawn(move || {
                for src in rx {
                    if tx.send(how(&src)).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the worker");
        Worker {
            jobs,
            results,
            done: 0,
            how,
        }
    }

    /// Compiles `src` within `limit`.
    pub fn run(&mut self, src: &str, limit: Duration) -> Outcome {
        if self.done >= 2000 {
            *self = Worker::new(self.how);
        }
        self.done += 1;
        if self.jobs.send(src.to_string()).is_err() {
            *self = Worker::new(self.how);
            return Outcome::of(Class::Panic, "the worker thread died");
        }
        match self.results.recv_timeout(limit) {
            Ok(o) => o,
            Err(_) => {
                *self = Worker::new(self.how);
                Outcome::of(Class::Timeout, format!("no result within {limit:?}"))
            }
        }
    }
}

/// Runs `cmd`, killing it after `limit`; `Err` holds why it failed.
fn run_tool(mut cmd: Command, limit: Duration) -> Result<(), String> {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let start = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                return if status.success() {
                    Ok(())
                } else {
                    Err(first_error(&err))
                };
            }
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("ran past {limit:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The first line of a compiler's output that says `error`.
fn first_error(out: &str) -> String {
    out.lines()
        .find(|l| l.contains("error"))
        .unwrap_or(out.lines().next().unwrap_or("failed"))
        .to_string()
}

/// Builds generated C with the system compiler.
pub fn cc(dir: &Path, c: &str) -> Result<(), String> {
    let file = dir.join("input.c");
    std::fs::write(&file, c).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cmd.args(["-c", "-O0", "-std=c11", "-fno-strict-aliasing", "-o"])
        .arg(dir.join("input.o"))
        .arg(&file);
    run_tool(cmd, Duration::from_secs(60))
}

/// Builds generated CUDA with `nvcc` for `arch` (`80`, or `90a` for the
/// Hopper specialization; the limit reports a compile that takes
/// unreasonably long).
pub fn nvcc(nvcc: &str, dir: &Path, cuda: &str, arch: &str) -> Result<(), String> {
    let file = dir.join("input.cu");
    std::fs::write(&file, cuda).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(nvcc);
    cmd.args([
        "-cubin",
        &format!("-gencode=arch=compute_{arch},code=sm_{arch}"),
        "-std=c++17",
        "-O3",
        "-o",
    ])
    .arg(dir.join("input.cubin"))
    .arg(&file);
    run_tool(cmd, Duration::from_secs(300))
}
