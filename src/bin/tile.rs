//! `tile`: compile-only tools that need no GPU and no nvcc.
//!
//! `tile inspect FILE.rs [--kernel NAME] [--target cuda|cpu] [--arch sm_90a] [--emit ir|lowered|source|key|all]`
//! prints the IR script, the lowered IR, the generated source and the key
//! fields of the kernels in a Rust file.

use std::process::ExitCode;
use tile_core::frontend::{is_kernel_attr, kernel_attr, parse_kernel};

const USAGE: &str = "usage: tile inspect FILE.rs [--kernel NAME] [--target cuda|cpu] [--arch sm_90a] [--emit ir|lowered|source|key|all]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("inspect") => match inspect(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("tile: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn inspect(args: &[String]) -> Result<(), String> {
    let mut file = None;
    let mut kernel = None;
    let mut target = "cuda".to_string();
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
            "--target" => target = val()?,
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
    if !matches!(emit.as_str(), "ir" | "lowered" | "source" | "key" | "all") {
        return Err(format!(
            "--emit is ir, lowered, source, key or all, got {emit}"
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
        let lowered =
            tile_core::lowered_script(&def, t).map_err(|d| format!("{name}: {}", d.message))?;
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
            print!(
                "{}",
                if target == "cuda" {
                    &c.cuda_source
                } else {
                    &c.c_source
                }
            );
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
            if target == "cuda" {
                println!("arch     {arch} (appended per device: cuda-binaries/<key>-{arch})");
            } else {
                println!("symbol   {}", c.c_symbol);
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
