//! `tile`: tools that need no GPU and no nvcc.
//!
//! `tile inspect FILE.rs [--kernel NAME] [--target cuda|cpu] [--arch sm_90a] [--emit ir|lowered|source|host|key|all|passes]`
//! prints the IR script, the lowered IR, the generated source, the host side
//! (the launcher's checks, grid and launch) and the key fields of the kernels
//! in a Rust file. `--emit passes` prints the IR after every pass instead
//! (for the `--target` given, else for each target the kernel is built for).
//!
//! `tile cache [show|clear] [--dir DIR]` lists the disk cache (every entry with
//! its kernel, target, size and whether it matches its manifest) or removes
//! it. `DIR` defaults to `TILE_CACHE_DIR`, else `~/.cache/tile`.

use std::process::ExitCode;
use tile_core::frontend::{is_kernel_attr, kernel_attr, parse_kernel};
use tile_runtime::cache::{CacheDir, EntryKind};

const USAGE: &str = "usage: tile inspect FILE.rs [--kernel NAME] [--target cuda|cpu] [--arch sm_90a] [--emit ir|lowered|source|host|key|all|passes]
       tile cache [show|clear] [--dir DIR]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("inspect") => inspect(&args[1..]),
        Some("cache") => cache(&args[1..]),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
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

fn cache(args: &[String]) -> Result<(), String> {
    let mut action = "show";
    let mut dir = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "show" | "clear" => action = if a == "show" { "show" } else { "clear" },
            "--dir" => dir = Some(it.next().ok_or(format!("--dir needs a value\n{USAGE}"))?),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    let cache = match dir {
        Some(d) => CacheDir::at(d),
        None => CacheDir::from_env(),
    };
    if action == "clear" {
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

fn inspect(args: &[String]) -> Result<(), String> {
    let mut file = None;
    let mut kernel = None;
    let mut target = "cuda".to_string();
    let mut target_given = false;
    let mut arch = "sm_90a".to_string();
    let mut emit = "all".to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or(format!("{a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--kernel" => kernel = Some(val()?),
            "--target" => {
                target = val()?;
                target_given = true;
            }
            "--arch" => arch = val()?,
            "--emit" => emit = val()?,
            s if s.starts_with("--") => return Err(format!("unknown option {s}\n{USAGE}")),
            s => file = Some(s.to_string()),
        }
    }
    let file = file.ok_or(USAGE)?;
    if !matches!(target.as_str(), "cuda" | "cpu") {
        return Err(format!("--target is cuda or cpu, got {target}"));
    }
    if !matches!(
        emit.as_str(),
        "ir" | "lowered" | "source" | "host" | "key" | "all" | "passes"
    ) {
        return Err(format!(
            "--emit is ir, lowered, source, host, key, all or passes, got {emit}"
        ));
    }
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{file}: {e}"))?;
    let parsed = syn::parse_file(&text).map_err(|e| format!("{file}: not valid Rust: {e}"))?;
    let mut found = 0;
    for item in &parsed.items {
        let syn::Item::Fn(f) = item else { continue };
        let Some(attr) = kernel_attr(&f.attrs) else {
            continue;
        };
        if kernel.as_deref().is_some_and(|k| f.sig.ident != k) {
            continue;
        }
        found += 1;
        let mut f = f.clone();
        f.attrs.retain(|a| !is_kernel_attr(a));
        let name = f.sig.ident.to_string();
        let def = parse_kernel(attr, &f).map_err(|d| {
            let msgs: Vec<String> = d
                .iter()
                .map(|x| {
                    let s = x.span.start.start();
                    format!("{file}:{}:{}: {}", s.line, s.column + 1, x.message)
                })
                .collect();
            msgs.join("\n")
        })?;
        let t = if target == "cuda" {
            tile_core::Target::Cuda
        } else {
            tile_core::Target::C
        };
        // The passes specialize for Hopper only; any other arch gets the
        // portable code.
        let cuda_arch = match (t, arch.as_str()) {
            (tile_core::Target::Cuda, "sm_90a") => tile_core::ir::CudaArch::Sm90a,
            _ => tile_core::ir::CudaArch::Any,
        };
        if emit == "passes" {
            let targets = match (target_given, def.func.cuda_only) {
                (true, _) => vec![t],
                (false, true) => vec![tile_core::Target::Cuda],
                (false, false) => vec![tile_core::Target::Cuda, tile_core::Target::C],
            };
            for t in targets {
                let tname = tile_core::passes::target_name(t);
                println!("=== kernel {name} ({tname}) ===");
                let mut func = def.func.clone();
                if t == tile_core::Target::Cuda {
                    func.arch = cuda_arch;
                }
                tile_core::passes::run_observed(func, t, &mut |step, pass, f| {
                    println!("--- {step:02} {pass} ---");
                    print!("{}", f.script());
                    Ok(())
                })
                .map_err(|d| format!("{name} ({tname}): {}", d.message))?;
            }
            continue;
        }
        let lowered = tile_core::lowered_script(&def, t, cuda_arch)
            .map_err(|d| format!("{name}: {}", d.message))?;
        let c = tile_core::compile(def).map_err(|d| format!("{name}: {}", d[0].message))?;
        let all = emit == "all";
        if all {
            println!("=== kernel {name} ===");
        }
        if all || emit == "ir" {
            if all {
                println!("--- ir ---");
            }
            print!("{}", c.script);
        }
        if all || emit == "lowered" {
            if all {
                println!("--- lowered ir ({target}) ---");
            }
            print!("{lowered}");
        }
        if all || emit == "source" {
            if all {
                println!("--- source ({target}) ---");
            }
            let hopper = c.cuda_sm90a.as_ref().filter(|_| arch == "sm_90a");
            print!(
                "{}",
                match (target.as_str(), hopper) {
                    ("cuda", Some(v)) => &v.source,
                    ("cuda", None) => &c.cuda_source,
                    _ => &c.c_source,
                }
            );
        }
        if all || emit == "host" {
            if all {
                println!("--- host ---");
            }
            let spec = tile_core::abi::describe(&c).map_err(|m| format!("{name}: {m}"))?;
            // Leaked: this process exits soon.
            print!("{}", tile_runtime::host_source(spec.leak()));
        }
        if all || emit == "key" {
            if all {
                println!("--- key ---");
            }
            let (tname, opts) = if target == "cuda" {
                ("cuda", tile_core::CUDA_OPTIONS)
            } else {
                ("c", tile_core::C_OPTIONS)
            };
            print!("{}", tile_core::key::describe(&c.script, tname, opts));
            let ns = tile_runtime::cache::namespace_name();
            if target == "cuda" {
                let key = match c.cuda_sm90a.as_ref().filter(|_| arch == "sm_90a") {
                    Some(v) => &v.key,
                    None => &c.cuda_key,
                };
                let entry = tile_runtime::entry_key(tile_runtime::Target::Cuda, key, Some(&arch));
                println!("arch     {arch}");
                println!("entry    {ns}/kernels/{entry} (key + arch + NVRTC options)");
                println!(
                    "binary   {ns}/cuda-binaries/<sha256 of source, arch, options, NVRTC version>"
                );
            } else {
                let entry = tile_runtime::entry_key(tile_runtime::Target::Cpu, &c.c_key, None);
                println!("symbol   {}", c.c_symbol);
                println!("entry    {ns}/kernels/{entry} (key + C compiler flags)");
            }
        }
    }
    if found == 0 {
        return Err(format!(
            "no #[tile::kernel] function{} in {file}",
            kernel.map(|k| format!(" named {k}")).unwrap_or_default()
        ));
    }
    Ok(())
}
