//! Helpers shared by the integration tests: the kernels of the golden tests
//! and the examples, and the IR of every step of their pipelines.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use tile_core::ir::PrimFunc;
use tile_core::Target;

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `*.ext` files directly in `dir`, sorted.
pub fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

/// Every golden kernel and every example of the workspace, parsed.
pub fn kernels() -> Vec<(PathBuf, PrimFunc)> {
    let dirs = [root().join("tests/golden"), root().join("../examples")];
    let files: Vec<PathBuf> = dirs.iter().flat_map(|d| files_in(d, "rs")).collect();
    assert!(
        files.len() >= 6,
        "expected the golden kernels and the examples"
    );
    files
        .into_iter()
        .map(|p| {
            let src = std::fs::read_to_string(&p).expect("read kernel");
            let def = tile_core::frontend::parse_kernel_source(&src)
                .unwrap_or_else(|d| panic!("{}: {}", p.display(), d[0]));
            (p, def.func)
        })
        .collect()
}

/// The targets a function is built for.
pub fn targets(f: &PrimFunc) -> Vec<Target> {
    if f.cuda_only {
        vec![Target::Cuda]
    } else {
        vec![Target::C, Target::Cuda]
    }
}

/// The function after each step of the pipeline for `target`: (step name,
/// function), the frontend's first.
pub fn steps(f: &PrimFunc, target: Target) -> Vec<(String, PrimFunc)> {
    let mut out = Vec::new();
    tile_core::passes::run_observed(f.clone(), target, &mut |_, name, g| {
        out.push((name.to_string(), g.clone()));
        Ok(())
    })
    .unwrap_or_else(|d| panic!("{}: {d}", f.name));
    out
}

/// The generated code of a lowered function.
pub fn generate(f: &PrimFunc, target: Target) -> String {
    let code = match target {
        Target::C => tile_core::codegen::c::generate(f, "tile_kernel").map(|s| s.code),
        Target::Cuda => tile_core::codegen::cuda::generate(f).map(|s| s.code),
    };
    code.unwrap_or_else(|d| panic!("{}: {d}", f.name))
}

/// The Hopper (sm_90a) source the compiler prints for one kernel's source
/// text, from the kernel itself on (the library headers pasted above it
/// left out).
pub fn hopper_kernel_source(kernel: &str) -> String {
    let def =
        tile_core::frontend::parse_kernel_source(kernel).unwrap_or_else(|d| panic!("{}", d[0]));
    let c = tile_core::compile(def).unwrap_or_else(|d| panic!("{}", d[0]));
    let src = c.cuda_sm90a.expect("a Hopper specialization").source;
    let at = src.find("__global__").expect("a kernel");
    src[at..].to_string()
}

/// Byte offsets of every line of `src` containing `what`.
pub fn lines_with(src: &str, what: &str) -> Vec<usize> {
    let mut at = 0;
    let mut out = Vec::new();
    for line in src.split_inclusive('\n') {
        if line.contains(what) {
            out.push(at);
        }
        at += line.len();
    }
    out
}
