//! `tile`: tools that need no GPU and no nvcc.
//!
//! `tile inspect FILE.rs [--kernel NAME] [--variant P=V,..] [--target cuda|cpu] [--arch sm_90a] [--emit ir|lowered|source|host|key|all|passes|names] [--out DIR]`
//! prints the IR script, the lowered IR, the generated source, the host side
//! (the launcher's checks, grid and launch) and the key fields of the kernels
//! in a Rust file. `--emit passes` prints the IR after every pass instead
//! (for the `--target` given, else for each target the kernel is built for).
//! `--emit source` prints one unit that compiles as it is, however many
//! kernels the file has; `--out DIR` writes one source file per kernel instead.
//!
//! `tile cache [show|clear] [--dir DIR]` lists the disk cache (every entry with
//! its kernel, target, size and whether it matches its manifest; tuned choices
//! with their device, shapes and variant) or removes it. `DIR` defaults to `TILE_CACHE_DIR`, else `~/.cache/tile`.
//!
//! The work runs on a thread with a large stack: parsing and lowering recurse
//! once per level of nesting of the input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tile_core::frontend::{
    instances, is_kernel_attr, kernel_attr, parse_kernel_in, Env, KernelDef,
};
use tile_runtime::cache::{CacheDir, EntryKind};

/// Tools for tile kernels that need no GPU and no nvcc.
#[derive(Parser)]
#[command(name = "tile", version, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the IR, lowered IR, generated source, host side and keys of the kernels in a
    /// Rust file
    Inspect(Inspect),
    /// Show or empty the disk cache of compiled kernels
    Cache(Cache),
}

#[derive(Args)]
struct Inspect {
    /// A Rust file with #[tile::kernel] functions
    file: PathBuf,
    /// Only the kernel of this name
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
    /// Only the variants of a kernel with a variant space whose listed parameters have
    /// these values (`block_m=64,threads=128`; a subset of the parameters is enough);
    /// `dtype=f16` keeps that instance of a dtype-generic kernel
    #[arg(long, value_name = "PARAM=VALUE,..")]
    variant: Option<String>,
    /// The target of the lowered IR, source and key [default: cuda; for --emit passes:
    /// every target the kernel is built for]
    #[arg(long, value_enum)]
    target: Option<TargetArg>,
    /// The CUDA arch of the cache entry's key
    #[arg(long, default_value = "sm_90a")]
    arch: String,
    /// What to print [default: all; source with --out]
    #[arg(long, value_enum)]
    emit: Option<Emit>,
    /// Write each kernel's source to DIR/<kernel>.cu (or .c) instead of printing it
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TargetArg {
    Cuda,
    Cpu,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Emit {
    /// The IR script
    Ir,
    /// The IR after lowering, for the target
    Lowered,
    /// The generated CUDA C++ or C: one unit for all kernels
    Source,
    /// The checks and launch of the typed function
    Host,
    /// The fields of the kernel's keys and its cache entry
    Key,
    /// All of the above, kernel by kernel
    All,
    /// The IR after each pass
    Passes,
    /// The kernels' names, one a line (each instance of a dtype-generic kernel and each
    /// variant of a variant space, as `--kernel` takes them)
    Names,
}

#[derive(Args)]
struct Cache {
    /// What to do
    #[arg(value_enum, default_value_t = CacheAction::Show)]
    action: CacheAction,
    /// The cache root [default: TILE_CACHE_DIR, else ~/.cache/tile]
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CacheAction {
    /// List every entry with its kernel, target, size and state
    Show,
    /// Remove every entry
    Clear,
}

/// The stack of the thread that does the work: enough for inputs nested thousands of
/// levels deep (syn's parser and the lowering recurse once per level).
const STACK_BYTES: usize = 256 << 20;

/// The deepest nesting of brackets read: a debug build parses and lowers 10,000 levels
/// in [`STACK_BYTES`]; deeper input is refused with an error, not a crash.
const MAX_NESTING: usize = 4096;

/// How deeply `text` nests `(`, `[` and `{` (brackets in literals and comments count
/// too: an upper bound is all that is needed).
fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for b in text.bytes() {
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let worker = std::thread::Builder::new()
        .name("tile".into())
        .stack_size(STACK_BYTES)
        .spawn(move || match cli.command {
            Command::Inspect(args) => inspect(&args),
            Command::Cache(args) => cache(&args),
        });
    let result = match worker.map(|w| w.join()) {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err("internal error (the worker thread panicked)".to_string()),
        Err(e) => Err(format!("cannot start the worker thread: {e}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tile: {e}");
            ExitCode::FAILURE
        }
    }
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn cache(args: &Cache) -> Result<(), String> {
    let cache = match &args.dir {
        Some(d) => CacheDir::at(d),
        None => CacheDir::from_env(),
    };
    if args.action == CacheAction::Clear {
        let c = cache.clear().map_err(|e| e.to_string())?;
        println!(
            "removed {} entries ({}) from {}",
            c.entries,
            human(c.bytes),
            cache.root().display()
        );
        return Ok(());
    }
    let entries = cache.entries();
    println!("cache root {}", cache.root().display());
    println!(
        "this runtime's namespace {}",
        tile_runtime::cache::namespace_name()
    );
    let mut namespace = "";
    for e in &entries {
        if e.namespace != namespace {
            namespace = &e.namespace;
            println!("{namespace}/");
        }
        let what = match e.kind {
            EntryKind::Kernel => format!(
                "{} {}{}",
                e.kernel.as_deref().unwrap_or("?"),
                e.target.as_deref().unwrap_or("?"),
                e.arch
                    .as_deref()
                    .map(|a| format!(" {a}"))
                    .unwrap_or_default()
            ),
            EntryKind::CudaBinary => "cubin".to_string(),
            EntryKind::Tuned => format!(
                "{} {}",
                e.kernel.as_deref().unwrap_or("?"),
                e.choice.as_deref().unwrap_or("?")
            ),
            EntryKind::Staging => "build in progress or left by a killed process".to_string(),
        };
        let status = match &e.damage {
            None => "ok".to_string(),
            Some(why) => format!("DAMAGED: {why}"),
        };
        println!(
            "  {:<11} {:<16} {:>10}  {what}  [{status}]",
            e.kind.to_string(),
            e.key.chars().take(16).collect::<String>(),
            human(e.bytes)
        );
    }
    let total: u64 = entries.iter().map(|e| e.bytes).sum();
    println!("{} entries, {}", entries.len(), human(total));
    Ok(())
}

/// The kernels of `file` (those named `only`, when given), parsed.
fn kernels_of(
    file: &Path,
    only: Option<&str>,
    variant: Option<&str>,
) -> Result<Vec<(String, KernelDef)>, String> {
    let shown = file.display();
    let text = std::fs::read_to_string(file).map_err(|e| format!("{shown}: {e}"))?;
    let depth = nesting(&text);
    if depth > MAX_NESTING {
        return Err(format!(
            "{shown}: brackets nested {depth} levels deep; tile reads at most {MAX_NESTING}"
        ));
    }
    let parsed = syn::parse_file(&text).map_err(|e| format!("{shown}: not valid Rust: {e}"))?;
    // `--variant`, split once: the dtypes its `dtype=` parts name, and the other
    // `param=value` parts.
    let filter = variant.map(|v| {
        let (dtypes, params): (Vec<&str>, Vec<&str>) = v
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .partition(|p| p.split('=').next().is_some_and(|k| k.trim() == "dtype"));
        let dtypes: Vec<&str> = dtypes
            .iter()
            .map(|p| p.split_once('=').map_or("", |(_, d)| d.trim()))
            .collect();
        (dtypes, params.join(","))
    });
    let mut out = Vec::new();
    for item in &parsed.items {
        let syn::Item::Fn(f) = item else { continue };
        let Some(attr) = kernel_attr(&f.attrs) else {
            continue;
        };
        let mut f = f.clone();
        f.attrs.retain(|a| !is_kernel_attr(a));
        let env = Env::for_fn(&parsed, &f.sig.ident.to_string());
        let shown_diags = |d: Vec<tile_core::Diagnostic>| {
            let msgs: Vec<String> = d
                .iter()
                .map(|x| {
                    let s = x.span.start.start();
                    format!("{shown}:{}:{}: {}", s.line, s.column + 1, x.message)
                })
                .collect();
            msgs.join("\n")
        };
        // A dtype-generic kernel is one kernel per dtype (`<name>_<dtype>`);
        // `--kernel` names the kernel or one instance.
        for i in instances(attr, &f).map_err(shown_diags)? {
            let name = i.item.sig.ident.to_string();
            if only.is_some_and(|k| f.sig.ident != k && name != k) {
                continue;
            }
            // `--variant` keeps the variants it names (and no kernel without variants);
            // its `dtype=` part names the instance of a dtype-generic kernel.
            if let Some((dtypes, params)) = &filter {
                let dtype_ok = dtypes
                    .iter()
                    .all(|&want| i.dtype.is_some_and(|d| d.rust_name() == want));
                let variant_ok = if params.is_empty() {
                    !dtypes.is_empty() || i.variant.is_some()
                } else {
                    i.variant.as_ref().is_some_and(|x| x.matches(params))
                };
                if !dtype_ok || !variant_ok {
                    continue;
                }
            }
            let def = parse_kernel_in(i.attr, &i.item, &env).map_err(shown_diags)?;
            out.push((name, def));
        }
    }
    if out.is_empty() {
        return Err(format!(
            "no #[tile::kernel] function{}{} in {shown}",
            only.map(|k| format!(" named {k}")).unwrap_or_default(),
            variant
                .map(|v| format!(" with a variant {v}"))
                .unwrap_or_default()
        ));
    }
    Ok(out)
}

fn inspect(args: &Inspect) -> Result<(), String> {
    let emit = match (args.emit, &args.out) {
        (None, Some(_)) | (Some(Emit::Source), _) => Emit::Source,
        (Some(_), Some(_)) => return Err("--out writes sources: use it with --emit source".into()),
        (Some(e), None) => e,
        (None, None) => Emit::All,
    };
    let kernels = kernels_of(&args.file, args.kernel.as_deref(), args.variant.as_deref())?;
    let target = args.target.unwrap_or(TargetArg::Cuda);
    if emit == Emit::Names {
        for (name, _) in &kernels {
            println!("{name}");
        }
        return Ok(());
    }
    if emit == Emit::Passes {
        for (name, def) in &kernels {
            print_passes(name, def, args.target, &args.arch)?;
        }
        return Ok(());
    }
    if emit == Emit::Source {
        let mut sources = Vec::new();
        for (name, def) in kernels {
            let c = tile_core::compile(def).map_err(|d| format!("{name}: {}", d[0].message))?;
            let code = match target {
                TargetArg::Cuda => cuda_code(&c, &args.arch).1.to_string(),
                TargetArg::Cpu => c.c_source,
            };
            sources.push((name, code));
        }
        return match &args.out {
            Some(dir) => write_sources(dir, target, &sources),
            None => one_unit(target, &args.file, &sources).map(|text| print!("{text}")),
        };
    }
    for (name, def) in kernels {
        print_kernel(&name, def, target, &args.arch, emit)?;
    }
    Ok(())
}

/// `--emit passes`: the IR after every pass, for `target`, else for each target the
/// kernel is built for.
fn print_passes(
    name: &str,
    def: &KernelDef,
    target: Option<TargetArg>,
    arch: &str,
) -> Result<(), String> {
    let targets = match (target, def.func.cuda_only) {
        (Some(t), _) => vec![core_target(t)],
        (None, true) => vec![tile_core::Target::Cuda],
        (None, false) => vec![tile_core::Target::Cuda, tile_core::Target::C],
    };
    for t in targets {
        let tname = tile_core::passes::target_name(t);
        println!("=== kernel {name} ({tname}) ===");
        let mut func = def.func.clone();
        if t == tile_core::Target::Cuda {
            func.arch = cuda_arch(arch);
        }
        tile_core::passes::run_observed(func, t, &mut |step, pass, f| {
            println!("--- {step:02} {pass} ---");
            print!("{}", f.script());
            Ok(())
        })
        .map_err(|d| format!("{name} ({tname}): {}", d.message))?;
    }
    Ok(())
}

/// The architecture the passes specialize for: Hopper's, or the portable code
/// for any other arch.
fn cuda_arch(arch: &str) -> tile_core::ir::CudaArch {
    match arch {
        "sm_90a" => tile_core::ir::CudaArch::Sm90a,
        _ => tile_core::ir::CudaArch::Any,
    }
}

/// The key and source of the CUDA code a device of `arch` runs.
fn cuda_code<'c>(c: &'c tile_core::Compiled, arch: &str) -> (&'c str, &'c str) {
    match c.cuda_sm90a.as_ref().filter(|v| v.arch.name() == arch) {
        Some(v) => (&v.key, &v.source),
        None => (&c.cuda_key, &c.cuda_source),
    }
}

fn core_target(t: TargetArg) -> tile_core::Target {
    match t {
        TargetArg::Cuda => tile_core::Target::Cuda,
        TargetArg::Cpu => tile_core::Target::C,
    }
}

fn target_word(t: TargetArg) -> &'static str {
    match t {
        TargetArg::Cuda => "cuda",
        TargetArg::Cpu => "cpu",
    }
}

/// One kernel's sections (`--emit all`) or the one asked for.
fn print_kernel(
    name: &str,
    def: KernelDef,
    target: TargetArg,
    arch: &str,
    emit: Emit,
) -> Result<(), String> {
    let tword = target_word(target);
    let lowered = tile_core::lowered_script(&def, core_target(target), cuda_arch(arch))
        .map_err(|d| format!("{name}: {}", d.message))?;
    let c = tile_core::compile(def).map_err(|d| format!("{name}: {}", d[0].message))?;
    let all = emit == Emit::All;
    let section = |which: Emit, title: &str| {
        if all {
            println!("--- {title} ---");
        }
        all || emit == which
    };
    if all {
        println!("=== kernel {name} ===");
    }
    if section(Emit::Ir, "ir") {
        print!("{}", c.script);
    }
    if section(Emit::Lowered, &format!("lowered ir ({tword})")) {
        print!("{lowered}");
    }
    if section(Emit::Source, &format!("source ({tword})")) {
        print!(
            "{}",
            match target {
                TargetArg::Cuda => cuda_code(&c, arch).1,
                TargetArg::Cpu => &c.c_source,
            }
        );
    }
    if section(Emit::Host, "host") {
        let spec = tile_core::abi::describe(&c).map_err(|m| format!("{name}: {m}"))?;
        // Leaked: this process exits soon.
        print!("{}", tile_runtime::host_source(spec.leak()));
    }
    if section(Emit::Key, "key") {
        print_key(&c, target, arch);
    }
    Ok(())
}

fn print_key(c: &tile_core::Compiled, target: TargetArg, arch: &str) {
    let (tname, opts) = match target {
        TargetArg::Cuda => ("cuda", tile_core::CUDA_OPTIONS),
        TargetArg::Cpu => ("c", tile_core::C_OPTIONS),
    };
    print!("{}", tile_core::key::describe(&c.script, tname, opts));
    let ns = tile_runtime::cache::namespace_name();
    match target {
        TargetArg::Cuda => {
            let key = cuda_code(c, arch).0;
            let entry = tile_runtime::entry_key(tile_runtime::Target::Cuda, key, Some(arch));
            println!("arch     {arch}");
            println!("entry    {ns}/kernels/{entry} (key + arch + NVRTC options)");
            println!(
                "binary   {ns}/cuda-binaries/<sha256 of source, arch, options, NVRTC version>"
            );
        }
        TargetArg::Cpu => {
            let entry = tile_runtime::entry_key(tile_runtime::Target::Cpu, &c.c_key, None);
            println!("symbol   {}", c.c_symbol);
            println!("entry    {ns}/kernels/{entry} (key + C compiler flags)");
        }
    }
}

/// `--out DIR`: each kernel's source, as it is compiled, in `DIR/<kernel>.cu` (`.c`).
fn write_sources(
    dir: &Path,
    target: TargetArg,
    sources: &[(String, String)],
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let ext = match target {
        TargetArg::Cuda => "cu",
        TargetArg::Cpu => "c",
    };
    for (name, code) in sources {
        if code.is_empty() {
            eprintln!("tile: {name} has no {} code", target_word(target));
            continue;
        }
        let path = dir.join(format!("{name}.{ext}"));
        std::fs::write(&path, code).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

/// The shared beginnings of every generated file of `target`, in order: the prelude, then
/// (CUDA, for kernels on tensor cores) the GEMM libraries.
fn shared_parts(target: TargetArg) -> Vec<&'static str> {
    match target {
        TargetArg::Cuda => vec![
            tile_core::codegen::cuda::PRELUDE,
            tile_core::codegen::cuda::FP8_HEADER,
            tile_core::codegen::cuda::GEMM_HEADER,
            tile_core::codegen::cuda::WGMMA_HEADER,
            tile_core::codegen::cuda::TMA_HEADER,
        ],
        TargetArg::Cpu => vec![tile_core::codegen::c::PRELUDE],
    }
}

/// `--emit source` to stdout: one kernel's source as it is; several as one unit that
/// compiles as it is (each shared part once, then every kernel's own code).
fn one_unit(
    target: TargetArg,
    file: &Path,
    sources: &[(String, String)],
) -> Result<String, String> {
    if let [(_, code)] = sources {
        return Ok(code.clone());
    }
    let parts = shared_parts(target);
    let mut used = vec![false; parts.len()];
    let mut bodies = Vec::new();
    for (name, code) in sources {
        if code.is_empty() {
            bodies.push(format!(
                "\n// kernel `{name}` has no {} code\n",
                target_word(target)
            ));
            continue;
        }
        // `// Generated by ..` line, the prelude, then the optional parts, each after a
        // blank line.
        let cannot =
            || format!("{name}: its source does not start with the shared prelude; use --out DIR");
        let (_, mut rest) = code.split_once('\n').ok_or_else(cannot)?;
        // A kernel's launch lines (`// tile:launch ..`, `// tile:tma ..`: what its
        // launcher adds) stay with its own code.
        let mut plan = String::new();
        while let Some((line, r)) = rest
            .split_once('\n')
            .filter(|(l, _)| l.starts_with("// tile:"))
        {
            plan.push('\n');
            plan.push_str(line);
            rest = r;
        }
        rest = rest.strip_prefix(parts[0]).ok_or_else(cannot)?;
        used[0] = true;
        for (i, part) in parts.iter().enumerate().skip(1) {
            if let Some(r) = rest.strip_prefix('\n').and_then(|r| r.strip_prefix(part)) {
                rest = r;
                used[i] = true;
            }
        }
        bodies.push(format!("\n// kernel `{name}`{plan}{rest}"));
    }
    let names: Vec<String> = sources.iter().map(|(n, _)| format!("`{n}`")).collect();
    let mut out = format!(
        "// Generated by tile {} from kernels {} of {} (target: {}). Do not edit.\n",
        env!("CARGO_PKG_VERSION"),
        names.join(", "),
        file.display(),
        target_word(target)
    );
    for (i, part) in parts.iter().enumerate() {
        if used[i] {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(part);
        }
    }
    for body in bodies {
        out.push_str(&body);
    }
    Ok(out)
}
