//! The build API: compiles the kernels of a crate ahead of time from its build
//! script, so the binary links them instead of compiling at run time.
//!
//! ```no_run
//! // build.rs of a crate whose src/ holds #[tile::kernel] functions
//! fn main() {
//!     tile_core::build::Builder::new().dir("src").compile().expect("tile kernels");
//! }
//! ```
//!
//! For each kernel it writes, under `$OUT_DIR/tile/`: a static library
//! `lib<symbol>.a` with the C kernel, and with nvcc available (`NVCC` or
//! `PATH`, unless `TILE_NO_NVCC=1`) one cubin per arch (`TILE_CUDA_ARCHS`,
//! default `sm_90a,sm_80`). `manifest.txt` lists them; the `#[tile::kernel]`
//! macro reads it and links or embeds exactly the artifacts whose key matches
//! the kernel it expands, so a stale artifact can never be used.
//!
//! Rebuilds are incremental: every artifact is named by its key (a hash of the
//! kernel's IR, the compile options and the compiler's own sources), and one
//! still on disk is reused only when it was built from the very source text
//! generated now: each artifact's record holds a digest of its source. The key
//! alone does not suffice: two checkouts sharing one target directory once
//! gave every kernel the compiler stamp of the other checkout's sources (its
//! build script had the other's path compiled in), so changed code generation
//! kept old keys and old cubins. Cubins are reused only when the nvcc that
//! built them is also the one found now (its path, size and modification
//! time). The records are `cubins.txt` and `clibs.txt` beside the manifest; a
//! build without nvcc leaves `cubins.txt` alone, so a later build with nvcc
//! still reuses those cubins.
//! A failed C or nvcc compile is a cargo warning naming the kernel and its
//! `file:line`; with [`Builder::strict`] it fails the build instead.

// The example above is a build script, whose `fn main` is the point.
#![allow(clippy::needless_doctest_main)]
// The build API is public for users' build scripts: every item says what it is.
#![deny(missing_docs)]

use crate::frontend::{instances, is_kernel_attr, kernel_attr, parse_kernel_in, Env};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernels of a crate to compile ahead of time: add source files or
/// directories, then [`compile`](Builder::compile) them.
#[derive(Debug, Default)]
pub struct Builder {
    files: Vec<PathBuf>,
    archs: Option<Vec<String>>,
    strict: bool,
}

/// What a build produced.
#[derive(Debug, Default)]
pub struct Report {
    /// Kernels found (each dtype and variant instance counts once).
    pub kernels: usize,
    /// C static libraries on disk for them, built now or reused.
    pub c_libs: usize,
    /// Cubins on disk for them (one per kernel and arch), built now or reused.
    pub cubins: usize,
    /// The nvcc used, or `None` when none was found ([`find_nvcc`]).
    pub nvcc: Option<PathBuf>,
    /// One line per kernel that failed to compile, naming it and its
    /// `file:line` (also printed as cargo warnings).
    pub warnings: Vec<String>,
    /// Artifacts (C libraries and cubins) reused from the previous build.
    pub reused: usize,
    /// One line per kernel (at its `file:line`) whose `wgmma` main loop is not
    /// warp-specialized on sm_90a, with the reason (a kernel of several
    /// variants or dtypes says each reason once). When sm_90a is built the
    /// build prints one cargo warning that counts them, every one of them
    /// with `TILE_PERF_NOTES=1`, none with `TILE_PERF_NOTES=0`: such a kernel
    /// runs right but often several times slower, and says so nowhere else
    /// but `tile inspect --emit passes`.
    pub notes: Vec<String>,
}

impl Builder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds one source file.
    pub fn file(mut self, p: impl AsRef<Path>) -> Self {
        self.files.push(p.as_ref().to_path_buf());
        self
    }
    /// Adds every `*.rs` file directly inside a directory (not recursive).
    pub fn dir(mut self, d: impl AsRef<Path>) -> Self {
        if let Ok(rd) = std::fs::read_dir(d.as_ref()) {
            let mut v: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "rs"))
                .collect();
            v.sort();
            self.files.extend(v);
        }
        println!("cargo:rerun-if-changed={}", d.as_ref().display());
        self
    }
    /// CUDA archs to build cubins for (default `TILE_CUDA_ARCHS` or sm_90a, sm_80).
    pub fn cuda_archs(mut self, archs: &[&str]) -> Self {
        self.archs = Some(archs.iter().map(|s| s.to_string()).collect());
        self
    }

    /// Any kernel that fails to compile (frontend, C or nvcc) makes
    /// [`Builder::compile`] return `Err` listing every failure, instead of a
    /// cargo warning: for crates whose tests need every kernel linked.
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Builds every kernel found. Kernels with errors are skipped here: the
    /// macro reports them with their spans when the crate compiles.
    pub fn compile(self) -> Result<Report, String> {
        let out = std::env::var_os("OUT_DIR")
            .ok_or("OUT_DIR is not set: call the tile build API from a build script")?;
        let dir = PathBuf::from(out).join("tile");
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        for v in [
            "NVCC",
            "TILE_NO_NVCC",
            "TILE_CUDA_ARCHS",
            "CUDA_HOME",
            "CUDA_PATH",
            "TILE_PERF_NOTES",
        ] {
            println!("cargo:rerun-if-env-changed={v}");
        }
        let archs = self.archs.unwrap_or_else(default_archs);
        let nvcc = find_nvcc();
        let mut report = Report {
            nvcc: nvcc.clone(),
            ..Report::default()
        };
        let mut clibs = ArtifactRecord::read(&dir, ArtifactRecord::C_FILE);
        let nvcc_id = nvcc.as_deref().map(tool_identity);
        // Each file is read, parsed and compiled on a worker thread (syn's
        // spans stay on the thread that made them; what comes back is text).
        let per_file = parallel_map(&self.files, |f| compile_file(f));
        let mut compiled = Vec::new();
        // Where each kernel is defined, for messages: symbol -> "file:line".
        let mut place = std::collections::HashMap::new();
        let mut frontend_errors = Vec::new();
        for (f, r) in self.files.iter().zip(per_file) {
            println!("cargo:rerun-if-changed={}", f.display());
            let r = r?;
            for (at, c) in r.kernels {
                place.insert(c.c_symbol.clone(), at);
                compiled.push(c);
            }
            frontend_errors.extend(r.frontend_errors);
            report.warnings.extend(r.warnings);
            report.notes.extend(r.notes);
        }
        // The same kernel in two files has one symbol and key: build it once.
        let mut seen = std::collections::HashSet::new();
        compiled.retain(|c| seen.insert(c.c_symbol.clone()));
        report.kernels = compiled.len();
        let mut manifest = String::new();
        if let Some(id) = &nvcc_id {
            manifest.push_str(&format!("nvcc {id}\n"));
        }
        let at = |sym: &str| place.get(sym).cloned().unwrap_or_default();
        // C: one static library per kernel, compiled in parallel; a library
        // an earlier build made from the same source for the same symbol
        // (symbols carry the key) is reused.
        // (symbol, source, who, the source's digest)
        let mut c_jobs: Vec<(String, String, String, String)> = Vec::new();
        for c in compiled.iter().filter(|c| !c.c_source.is_empty()) {
            let lib = dir.join(format!("lib{}.a", c.c_symbol));
            let digest = source_digest(&c.c_source);
            if clibs.built_by(&c.c_symbol, "c") == Some(digest.as_str()) && lib.is_file() {
                manifest.push_str(&format!("c {}\n", c.c_symbol));
                report.c_libs += 1;
                report.reused += 1;
                continue;
            }
            let who = format!("{} ({})", c.name, at(&c.c_symbol));
            c_jobs.push((c.c_symbol.clone(), c.c_source.clone(), who, digest));
        }
        // Entries of symbols no longer built go (the record does not grow with
        // every edit), and those about to be rebuilt until they are.
        let current: std::collections::HashSet<&str> =
            compiled.iter().map(|c| c.c_symbol.as_str()).collect();
        clibs
            .by
            .retain(|(sym, _), _| current.contains(sym.as_str()));
        for (sym, _, _, _) in &c_jobs {
            clibs.forget(sym, "c");
        }
        clibs.write(&dir)?;
        let results = parallel_map(&c_jobs, |(sym, code, name, _)| {
            let src = dir.join(format!("{sym}.c"));
            std::fs::write(&src, code).map_err(|e| e.to_string())?;
            cc::Build::new()
                .file(&src)
                .out_dir(&dir)
                .opt_level(3)
                .flag_if_supported("-std=c11")
                .flag("-fno-strict-aliasing")
                .warnings(false)
                .cargo_metadata(false)
                .try_compile(sym)
                .map_err(|e| format!("{name}: C compile failed: {e}"))
        });
        for ((sym, _, _, digest), r) in c_jobs.iter().zip(results) {
            match r {
                Ok(()) => {
                    manifest.push_str(&format!("c {sym}\n"));
                    report.c_libs += 1;
                    clibs.set(sym, "c", digest);
                }
                Err(e) => report.warnings.push(e),
            }
        }
        clibs.write(&dir)?;
        println!("cargo:rustc-link-search=native={}", dir.display());
        if let Some(nvcc) = &nvcc {
            // Each arch gets the code specialized for it when there is one,
            // else the portable code.
            // (key, source, who, arch, the record's identity: nvcc's and the source's digest)
            let mut jobs: Vec<(String, String, String, String, String)> = Vec::new();
            let nvcc_id = nvcc_id.clone().unwrap_or_default();
            let mut record = ArtifactRecord::read(&dir, ArtifactRecord::CUBIN_FILE);
            let mut queued = std::collections::HashSet::new();
            for c in &compiled {
                for a in &archs {
                    let (key, source) = match &c.cuda_sm90a {
                        Some((arch, key, source)) if a == arch => (key, source),
                        _ => (&c.cuda_key, &c.cuda_source),
                    };
                    if !queued.insert((key.clone(), a.clone())) {
                        continue;
                    }
                    let bin = dir.join(format!("{key}.{a}.cubin"));
                    let id = format!("{nvcc_id} {}", source_digest(source));
                    if record.built_by(key, a) == Some(id.as_str()) && bin.is_file() {
                        manifest.push_str(&format!("cubin {key} {a} {}\n", bin.display()));
                        report.cubins += 1;
                        report.reused += 1;
                        continue;
                    }
                    let who = format!("{} ({})", c.name, at(&c.c_symbol));
                    jobs.push((key.clone(), source.clone(), who, a.clone(), id));
                }
            }
            for (key, _, _, arch, _) in &jobs {
                record.forget(key, arch);
            }
            record.write(&dir)?;
            let results = parallel_map(&jobs, |(key, code, name, arch, _)| {
                let src = dir.join(format!("{key}.{arch}.cu"));
                std::fs::write(&src, code).map_err(|e| e.to_string())?;
                let bin = dir.join(format!("{key}.{arch}.cubin"));
                let out = Command::new(nvcc)
                    .arg("-cubin")
                    .arg(gencode(arch))
                    .args(crate::CUDA_OPTIONS.split(' '))
                    .arg("-o")
                    .arg(&bin)
                    .arg(&src)
                    .output()
                    .map_err(|e| format!("running {}: {e}", nvcc.display()))?;
                if !out.status.success() {
                    return Err(format!(
                        "{name} ({arch}): nvcc failed:\n{}",
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                Ok(bin)
            });
            for ((key, _, _, arch, id), r) in jobs.iter().zip(results) {
                match r {
                    Ok(bin) => {
                        manifest.push_str(&format!("cubin {key} {arch} {}\n", bin.display()));
                        report.cubins += 1;
                        record.set(key, arch, id);
                    }
                    Err(e) => {
                        record.forget(key, arch);
                        report.warnings.push(e)
                    }
                }
            }
            record.write(&dir)?;
        }
        let mpath = dir.join("manifest.txt");
        std::fs::write(&mpath, manifest)
            .map_err(|e| format!("writing {}: {e}", mpath.display()))?;
        if self.strict && !(report.warnings.is_empty() && frontend_errors.is_empty()) {
            let all: Vec<String> = frontend_errors.into_iter().chain(report.warnings).collect();
            return Err(format!(
                "{} kernel build failure(s):\n{}",
                all.len(),
                all.join("\n")
            ));
        }
        for w in &report.warnings {
            println!("cargo:warning=tile: {}", w.lines().next().unwrap_or(""));
        }
        if archs.iter().any(|a| a == "sm_90a") {
            let setting = std::env::var("TILE_PERF_NOTES").unwrap_or_default();
            for line in perf_note_lines(&report.notes, &setting) {
                println!("cargo:warning=tile: {line}");
            }
        }
        let off = std::env::var("TILE_NO_NVCC").is_ok_and(|v| v == "1");
        if let Some(note) = nvcc_note(report.nvcc.is_some(), off, cuda_driver_present()) {
            println!("cargo:warning={note}");
        }
        Ok(report)
    }
}

/// The one line a build prints about nvcc: only when none was found, the
/// user did not turn it off (`TILE_NO_NVCC=1`), and CUDA is in use here (a
/// driver is installed). A machine without CUDA builds in silence.
fn nvcc_note(found: bool, off: bool, driver: bool) -> Option<&'static str> {
    (!found && !off && driver).then_some(
        "tile: nvcc not found (set NVCC or put it on PATH); CUDA kernels will be compiled \
         at run time with NVRTC on first use",
    )
}

/// Whether this machine has an NVIDIA driver (its kernel module's version
/// file, or the driver library where distributions install it).
fn cuda_driver_present() -> bool {
    [
        "/proc/driver/nvidia/version",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
        "/usr/lib64/libcuda.so.1",
        "/usr/lib/wsl/lib/libcuda.so.1",
        "C:\\Windows\\System32\\nvcuda.dll",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
}

/// What built each artifact of the directory, and from which source: lines
/// `name target identity` (`cubins.txt`: key, arch, nvcc's identity and the
/// source's digest; `clibs.txt`: symbol, `c`, the source's digest). Builds
/// with nvcc rewrite `cubins.txt`; builds without nvcc never touch it, so
/// their manifest (which lists no cubins) does not make the next nvcc build
/// recompile cubins that are still on disk. An entry is written only after
/// its artifact was, and an artifact about to be rebuilt loses its entry
/// first, so an entry never names an artifact that another compiler, or
/// another source, wrote over.
#[derive(Default)]
struct ArtifactRecord {
    file: &'static str,
    by: std::collections::BTreeMap<(String, String), String>,
}

impl ArtifactRecord {
    const CUBIN_FILE: &'static str = "cubins.txt";
    const C_FILE: &'static str = "clibs.txt";

    /// A missing or unreadable record means nothing is reused.
    fn read(dir: &Path, file: &'static str) -> ArtifactRecord {
        let mut r = ArtifactRecord {
            file,
            ..ArtifactRecord::default()
        };
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        for line in text.lines() {
            let mut it = line.splitn(3, ' ');
            if let (Some(k), Some(a), Some(id)) = (it.next(), it.next(), it.next()) {
                r.by.insert((k.to_string(), a.to_string()), id.to_string());
            }
        }
        r
    }

    fn built_by(&self, key: &str, arch: &str) -> Option<&str> {
        self.by
            .get(&(key.to_string(), arch.to_string()))
            .map(String::as_str)
    }

    fn set(&mut self, key: &str, arch: &str, id: &str) {
        self.by
            .insert((key.to_string(), arch.to_string()), id.to_string());
    }

    fn forget(&mut self, key: &str, arch: &str) {
        self.by.remove(&(key.to_string(), arch.to_string()));
    }

    /// Writes through a temporary file and a rename: a crash leaves the old
    /// record or the new one, never a torn line.
    fn write(&self, dir: &Path) -> Result<(), String> {
        let text: String = self
            .by
            .iter()
            .map(|((k, a), id)| format!("{k} {a} {id}\n"))
            .collect();
        let tmp = dir.join(format!("{}.{}.tmp", self.file, std::process::id()));
        let path = dir.join(self.file);
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| format!("writing {}: {e}", path.display()))
    }
}

/// The digest of an artifact's source text, recorded beside the artifact.
fn source_digest(source: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(source.as_bytes());
    d.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// A compiler's identity for reuse: its path, size and modification time
/// (a new nvcc at the same path has a different size or time).
fn tool_identity(path: &Path) -> String {
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let (len, mtime) = std::fs::metadata(&resolved)
        .map(|m| {
            let t = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            (m.len(), t)
        })
        .unwrap_or((0, 0));
    // Spaces would split the manifest line; paths with them still compare equal.
    format!("{}|{len}|{mtime}", resolved.display()).replace(' ', "%20")
}

fn collect_fns<'a>(items: &'a [syn::Item], out: &mut Vec<&'a syn::ItemFn>) {
    for it in items {
        match it {
            syn::Item::Fn(f) => out.push(f),
            syn::Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    collect_fns(items, out);
                }
            }
            _ => {}
        }
    }
}

fn default_archs() -> Vec<String> {
    match std::env::var("TILE_CUDA_ARCHS") {
        Ok(s) if !s.trim().is_empty() => s.split(',').map(|x| x.trim().to_string()).collect(),
        _ => vec!["sm_90a".to_string(), "sm_80".to_string()],
    }
}

/// `sm_90a` → `-gencode=arch=compute_90a,code=sm_90a`.
pub fn gencode(arch: &str) -> String {
    let num = arch.trim_start_matches("sm_");
    format!("-gencode=arch=compute_{num},code=sm_{num}")
}

/// `NVCC`, else `nvcc` on `PATH`, else `$CUDA_HOME/bin/nvcc`; none with `TILE_NO_NVCC=1`.
pub fn find_nvcc() -> Option<PathBuf> {
    if std::env::var("TILE_NO_NVCC").is_ok_and(|v| v == "1") {
        return None;
    }
    if let Some(p) = std::env::var_os("NVCC") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let p = d.join("nvcc");
        if p.is_file() {
            return Some(p);
        }
    }
    for v in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(h) = std::env::var_os(v) {
            let p = PathBuf::from(h).join("bin").join("nvcc");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// `f` over `items` on up to 8 threads, each taking the next item when it is
/// done with one (files and kernels differ in cost); results in order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 8)
        .min(items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break };
                        done.push((i, f(item)));
                    }
                    done
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// What the build needs of one compiled kernel (plain text: it crosses
/// threads, which syn's spans cannot).
struct Built {
    name: String,
    c_symbol: String,
    c_source: String,
    cuda_key: String,
    cuda_source: String,
    /// (arch name, key, source) of the sm_90a specialization, if any.
    cuda_sm90a: Option<(String, String, String)>,
}

/// The kernels of one file: (file:line, kernel) each, and the messages.
struct FileKernels {
    kernels: Vec<(String, Built)>,
    frontend_errors: Vec<String>,
    warnings: Vec<String>,
    /// `Report::notes` of this file.
    notes: Vec<String>,
}

/// Reads, parses and compiles every kernel of file `f`. A file that does not
/// parse has no kernels here (rustc reports it); a kernel the frontend
/// rejects is skipped (the macro reports it at its spans when the crate
/// compiles), and listed for strict builds, which stop before that.
fn compile_file(f: &Path) -> Result<FileKernels, String> {
    let text = std::fs::read_to_string(f).map_err(|e| format!("reading {}: {e}", f.display()))?;
    let mut out = FileKernels {
        kernels: Vec::new(),
        frontend_errors: Vec::new(),
        warnings: Vec::new(),
        notes: Vec::new(),
    };
    let Ok(file) = syn::parse_file(&text) else {
        return Ok(out);
    };
    let mut fns = Vec::new();
    collect_fns(&file.items, &mut fns);
    for item in fns {
        let Some(attr) = kernel_attr(&item.attrs) else {
            continue;
        };
        let mut item = item.clone();
        item.attrs.retain(|a| !is_kernel_attr(a));
        let env = Env::for_fn(&file, &item.sig.ident.to_string());
        let at = format!("{}:{}", f.display(), item.sig.ident.span().start().line);
        let rejected = |d: Vec<crate::diag::Diagnostic>| {
            let line = d.first().map_or(0, |d| d.span.start.start().line);
            let msg = d.first().map(|d| d.message.clone()).unwrap_or_default();
            format!("{}:{line}: {msg}", f.display())
        };
        // Every instance of a dtype-generic kernel.
        let instances = match instances(attr, &item) {
            Ok(v) => v,
            Err(d) => {
                out.frontend_errors.push(rejected(d));
                continue;
            }
        };
        for i in instances {
            let def = match parse_kernel_in(i.attr, &i.item, &env) {
                Ok(def) => def,
                Err(d) => {
                    out.frontend_errors.push(rejected(d));
                    continue;
                }
            };
            match crate::compile(def) {
                Ok(c) => {
                    for why in &c.hopper_notes {
                        let note = hopper_note(&at, &item.sig.ident.to_string(), why);
                        if !out.notes.contains(&note) {
                            out.notes.push(note);
                        }
                    }
                    out.kernels.push((
                        at.clone(),
                        Built {
                            name: c.def.func.name.clone(),
                            cuda_sm90a: c
                                .cuda_sm90a
                                .map(|v| (v.arch.name().to_string(), v.key, v.source)),
                            c_symbol: c.c_symbol,
                            c_source: c.c_source,
                            cuda_key: c.cuda_key,
                            cuda_source: c.cuda_source,
                        },
                    ))
                }
                Err(d) => out.warnings.push(format!("{at}: {}", d[0])),
            }
        }
    }
    Ok(out)
}

/// The build's line for kernel `name` (defined at `at`) whose `wgmma` main loop
/// is not warp-specialized on sm_90a because of `why`.
fn hopper_note(at: &str, name: &str, why: &str) -> String {
    format!(
        "{at}: `{name}` is not warp-specialized on sm_90a (no producer warpgroup, \
         no bulk-copy pipeline): {why}"
    )
}

/// What the build prints of `notes` for a `TILE_PERF_NOTES` of `setting`:
/// every note (`1`), nothing (`0`), else one line that counts them (a crate
/// whose kernels lose warp specialization on purpose, comparison tiles or
/// tests, would otherwise print a screen of warnings at every build).
fn perf_note_lines(notes: &[String], setting: &str) -> Vec<String> {
    match (setting, notes.len()) {
        ("0", _) | (_, 0) => Vec::new(),
        ("1", _) => notes.to_vec(),
        (_, n) => vec![format!(
            "{n} kernel(s) here are not warp-specialized on sm_90a (often several \
             times slower there); TILE_PERF_NOTES=1 lists them and why, =0 hides this"
        )],
    }
}

/// Artifacts the build script produced for one kernel (read by the macro).
#[derive(Debug, Default)]
pub struct Artifacts {
    /// Name of the static library (without `lib`/`.a`) holding the C symbol.
    pub c_lib: Option<String>,
    /// (arch, absolute cubin path).
    pub cubins: Vec<(String, PathBuf)>,
    /// The manifest file, so the macro can make the build depend on it.
    pub manifest: Option<PathBuf>,
}

/// Looks up `$OUT_DIR/tile/manifest.txt` for a kernel's keys.
pub fn lookup_artifacts(c_symbol: &str, cuda_key: &str) -> Artifacts {
    let Some(out) = std::env::var_os("OUT_DIR") else {
        return Artifacts::default();
    };
    let mpath = PathBuf::from(out).join("tile").join("manifest.txt");
    let Ok(text) = std::fs::read_to_string(&mpath) else {
        return Artifacts::default();
    };
    let mut a = Artifacts {
        manifest: Some(mpath),
        ..Artifacts::default()
    };
    for line in text.lines() {
        let parts: Vec<&str> = line.splitn(4, ' ').collect();
        match parts.as_slice() {
            ["c", sym] if *sym == c_symbol => a.c_lib = Some(sym.to_string()),
            ["cubin", key, arch, path] if *key == cuda_key => {
                let p = PathBuf::from(path);
                if p.is_file() {
                    a.cubins.push((arch.to_string(), p));
                }
            }
            _ => {}
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::{compile_file, nvcc_note, perf_note_lines};

    /// A GEMM over a variant list of `fill`, in a file of its own: with
    /// `fill = 1` it zeroes its output staging tile before the loop, a
    /// shared-memory write that keeps the producer warpgroup out.
    fn gemm_file(tag: &str, fill: &str) -> std::path::PathBuf {
        let src = format!(
            r#"#[tile::kernel(dtype = [f16, bf16], block_m = 128, block_n = 128, block_k = 64, stages = 3, threads = 128, fill = {fill})]
            fn gemm(a: Tensor<dtype, (M, K)>, b: Tensor<dtype, (K, N)>, c: TensorMut<dtype, (M, N)>) {{
                T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx, by| {{
                    let a_s = T::alloc_shared::<dtype>([block_m, block_k]);
                    let b_s = T::alloc_shared::<dtype>([block_k, block_n]);
                    let c_s = T::alloc_shared::<dtype>([block_m, block_n]);
                    let acc = T::alloc_fragment::<f32>([block_m, block_n]);
                    T::clear(acc);
                    if fill == 1 {{
                        T::fill(c_s, 0.0);
                    }}
                    for ko in T::pipelined(T::ceildiv(K, block_k), stages) {{
                        T::copy(a.at([by * block_m, ko * block_k]), a_s);
                        T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                        T::gemm(a_s, b_s, acc);
                    }}
                    T::copy(acc, c_s);
                    T::copy(c_s, c.at([by * block_m, bx * block_n]));
                }});
            }}"#
        );
        let p = std::env::temp_dir().join(format!("tile-notes-{tag}-{}.rs", std::process::id()));
        std::fs::write(&p, src).expect("write the kernel file");
        p
    }

    #[test]
    fn a_gemm_that_loses_warp_specialization_on_hopper_is_named_once() {
        // Four instances (two dtypes, two `fill` values), the two that fill
        // `c_s` before the loop not warp-specialized for the same reason: one
        // note per reason. (The other two fold `if fill == 1` away.)
        let p = gemm_file("lost", "[0, 1]");
        let out = compile_file(&p).expect("compile the file");
        let _ = std::fs::remove_file(&p);
        assert_eq!(out.kernels.len(), 4);
        assert_eq!(out.notes.len(), 1, "{:?}", out.notes);
        let note = &out.notes[0];
        assert!(
            note.contains("`gemm` is not warp-specialized on sm_90a"),
            "{note}"
        );
        assert!(note.contains("statement 6"), "{note}");
        assert!(note.starts_with(&format!("{}:2: ", p.display())), "{note}");
        // By default one line counts the notes; 1 prints them, 0 nothing.
        assert_eq!(perf_note_lines(&out.notes, "1"), out.notes);
        assert!(perf_note_lines(&out.notes, "0").is_empty());
        let summary = perf_note_lines(&out.notes, "");
        assert_eq!(summary.len(), 1);
        assert!(summary[0].starts_with("1 kernel(s)"), "{summary:?}");
        // No fill: warp-specialized, nothing to say.
        let p = gemm_file("kept", "0");
        let out = compile_file(&p).expect("compile the file");
        let _ = std::fs::remove_file(&p);
        assert!(out.notes.is_empty(), "{:?}", out.notes);
    }

    #[test]
    fn the_nvcc_line_only_where_cuda_is_in_use_and_nvcc_is_missing() {
        // (found, turned off, driver present) -> a line?
        for (found, off, driver, line) in [
            (false, false, true, true),
            (false, false, false, false),
            (false, true, true, false),
            (true, false, true, false),
            (true, false, false, false),
        ] {
            assert_eq!(
                nvcc_note(found, off, driver).is_some(),
                line,
                "found={found} off={off} driver={driver}"
            );
        }
    }
}
