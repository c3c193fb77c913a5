//! The `tile` command: usage and help, argument errors, `--emit source` of a file with
//! several kernels (one unit that compiles, or one file per kernel with `--out`), and
//! deeply nested input (read or refused, never a crash).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `tile` binary: `TILE_BIN` when set (test binaries copied to another machine),
/// else the one cargo built beside this test.
fn tile_bin() -> PathBuf {
    std::env::var_os("TILE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tile")))
}

fn tile(args: &[&str]) -> Output {
    Command::new(tile_bin())
        .args(args)
        .output()
        .expect("run tile")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The output of a run that must succeed.
fn stdout_of(args: &[&str]) -> String {
    let out = tile(args);
    assert!(
        out.status.success(),
        "tile {args:?}: {}\n{}",
        out.status,
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tile-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    dir
}

#[test]
fn help_prints_usage_and_exits_zero() {
    for args in [
        &["--help"][..],
        &["-h"],
        &["help"],
        &["cache", "--help"],
        &["cache", "-h"],
        &["help", "cache"],
        &["inspect", "--help"],
    ] {
        let out = stdout_of(args);
        assert!(out.contains("Usage: tile"), "tile {args:?}:\n{out}");
    }
    let cache = stdout_of(&["cache", "--help"]);
    for word in ["show", "clear", "--dir <DIR>"] {
        assert!(cache.contains(word), "{word} missing:\n{cache}");
    }
    let inspect = stdout_of(&["inspect", "--help"]);
    for word in [
        "--kernel <NAME>",
        "--target <TARGET>",
        "--arch <ARCH>",
        "--out <DIR>",
        "ir",
        "lowered",
        "source",
        "host",
        "key",
        "all",
        "passes",
    ] {
        assert!(inspect.contains(word), "{word} missing:\n{inspect}");
    }
    assert!(stdout_of(&["--version"]).starts_with("tile "));
}

#[test]
fn bad_arguments_are_usage_errors() {
    for args in [
        &[][..],
        &["frobnicate"],
        &["cache", "--bogus"],
        &["cache", "wipe"],
        &["cache", "--dir"],
        &["inspect"],
        &["inspect", "examples/vecadd.rs", "--target", "gpu"],
        &["inspect", "examples/vecadd.rs", "--emit", "everything"],
    ] {
        let out = tile(args);
        assert_eq!(out.status.code(), Some(2), "tile {args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("Usage: tile") || err.starts_with("error: "),
            "tile {args:?}:\n{err}"
        );
    }
    // Errors of the work itself: one line, status 1.
    let out = tile(&["inspect", "examples/vecadd.rs", "--kernel", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "tile: no #[tile::kernel] function named nope in examples/vecadd.rs\n"
    );
    let out = tile(&[
        "inspect",
        "examples/vecadd.rs",
        "--emit",
        "ir",
        "--out",
        "x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--out writes sources"));
}

/// The names of the top-level kernels of `file`.
/// The kernels of an example file as `tile inspect` lists them: one per
/// instance of a dtype-generic kernel (`gemm_nn_f16`, `gemm_nn_bf16`).
fn kernel_names(file: &str) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("read an example");
    let parsed = syn::parse_file(&text).expect("parse an example");
    let mut out = Vec::new();
    for item in &parsed.items {
        let syn::Item::Fn(f) = item else { continue };
        let Some(attr) = tile_core::frontend::kernel_attr(&f.attrs) else {
            continue;
        };
        for i in tile_core::frontend::instances(attr, f).expect("instances") {
            out.push(i.item.sig.ident.to_string());
        }
    }
    out
}

fn cc_compiles(source: &Path) {
    let obj = source.with_extension("o");
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-c", "-o"])
        .arg(&obj)
        .arg(source)
        .output()
        .expect("run the C compiler");
    assert!(
        out.status.success(),
        "{} does not compile:\n{}",
        source.display(),
        text(&out.stderr)
    );
}

#[test]
fn emit_source_of_several_kernels_is_one_unit_that_compiles() {
    let file = "examples/gemm.rs";
    let names = kernel_names(file);
    assert!(names.len() > 1, "{names:?}");
    let dir = temp_dir("unit");

    let c = stdout_of(&["inspect", file, "--emit", "source", "--target", "cpu"]);
    assert_eq!(c.matches("static inline float tl_h2f(").count(), 1);
    for name in &names {
        assert!(c.contains(&format!("\n// kernel `{name}`\n")), "{name}");
    }
    let path = dir.join("all.c");
    std::fs::write(&path, &c).expect("write the unit");
    cc_compiles(&path);

    // The prelude and the GEMM library once each: as many includes as in one kernel.
    let one = stdout_of(&["inspect", file, "--kernel", &names[0], "--emit", "source"]);
    let cuda = stdout_of(&["inspect", file, "--emit", "source"]);
    assert_eq!(cuda.matches("struct alignas(sizeof(T) * N) vec").count(), 1);
    assert_eq!(cuda.matches("__global__ void").count(), names.len());
    let includes = |s: &str| s.matches("#include <cuda_fp16.h>").count();
    assert_eq!(includes(&cuda), includes(&one));
    // Where nvcc is at hand, the unit compiles with it too.
    if let Some(nvcc) = std::env::var_os("NVCC") {
        let path = dir.join("all.cu");
        std::fs::write(&path, &cuda).expect("write the unit");
        let out = Command::new(nvcc)
            .args([
                "-cubin",
                "-gencode=arch=compute_80,code=sm_80",
                "-std=c++17",
                "-o",
            ])
            .arg(dir.join("all.cubin"))
            .arg(&path)
            .output()
            .expect("run nvcc");
        assert!(out.status.success(), "{}", text(&out.stderr));
    }

    // One kernel: its source exactly as it is compiled.
    assert!(one.starts_with(&format!(
        "// Generated by tile {} from kernel `{}`",
        env!("CARGO_PKG_VERSION"),
        names[0]
    )));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn out_writes_one_source_per_kernel() {
    let file = "examples/gemm.rs";
    let names = kernel_names(file);
    let dir = temp_dir("out");
    let d = dir.to_string_lossy().into_owned();
    let listed = stdout_of(&["inspect", file, "--target", "cpu", "--out", &d]);
    assert_eq!(listed.lines().count(), names.len(), "{listed}");
    for name in &names {
        let path = dir.join(format!("{name}.c"));
        assert!(listed.contains(&path.display().to_string()), "{listed}");
        cc_compiles(&path);
    }
    stdout_of(&["inspect", file, "--emit", "source", "--out", &d]);
    for name in &names {
        let written = std::fs::read_to_string(dir.join(format!("{name}.cu"))).expect("a .cu");
        let printed = stdout_of(&["inspect", file, "--kernel", name, "--emit", "source"]);
        assert_eq!(written, printed, "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A kernel whose one expression is wrapped in `depth` parentheses, or whose body is
/// nested `depth` blocks deep.
fn deep_kernel(depth: usize, blocks: bool) -> String {
    let access = "a[bx * block_n + i]";
    let inner = if blocks {
        format!(
            "{}for i in T::parallel(block_n) {{ c[bx * block_n + i] = {access}; }}{}",
            "{".repeat(depth),
            "}".repeat(depth)
        )
    } else {
        format!(
            "for i in T::parallel(block_n) {{ c[bx * block_n + i] = {}{access}{}; }}",
            "(".repeat(depth),
            ")".repeat(depth)
        )
    };
    format!(
        "#[tile::kernel(block_n = 256, threads = 128)]\n\
         pub fn deep(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {{\n\
         T::kernel(T::ceildiv(N, block_n), threads, |bx| {{\n{inner}\n}});\n}}\n"
    )
}

#[test]
fn deeply_nested_input_is_read_or_refused_never_a_crash() {
    let dir = temp_dir("deep");
    for blocks in [false, true] {
        let path = dir.join(format!("deep-{blocks}.rs"));
        // Within the compiler's nesting limit: read and compiled.
        std::fs::write(&path, deep_kernel(200, blocks)).expect("write a deep kernel");
        let p = path.to_string_lossy().into_owned();
        let out = stdout_of(&["inspect", &p, "--target", "cpu"]);
        assert!(out.contains("=== kernel deep ==="), "{out}");

        // Deeper: parsed (on the large stack), then refused at its span.
        std::fs::write(&path, deep_kernel(1500, blocks)).expect("write a deep kernel");
        let out = tile(&["inspect", &p, "--target", "cpu"]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("levels deep"),
            "{}",
            text(&out.stderr)
        );

        // Far deeper: refused with a message.
        std::fs::write(&path, deep_kernel(100_000, blocks)).expect("write a deeper kernel");
        let out = tile(&["inspect", &p]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("levels deep; tile reads at most"),
            "{}",
            text(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inspect_shows_one_variant_of_a_variant_space() {
    let ir = stdout_of(&[
        "inspect",
        "tests/autotune.rs",
        "--kernel",
        "tuned_axpy",
        "--variant",
        "block_n=128,threads=64",
        "--emit",
        "ir",
    ]);
    assert!(ir.contains("consts(block_n=128, threads=64)"), "{ir}");
    assert_eq!(ir.matches("def tuned_axpy__").count(), 1, "{ir}");
    // A subset of the parameters keeps every variant it matches.
    let ir = stdout_of(&[
        "inspect",
        "tests/autotune.rs",
        "--kernel",
        "tuned_axpy",
        "--variant",
        "threads=32",
        "--emit",
        "ir",
    ]);
    assert_eq!(ir.matches("def tuned_axpy__").count(), 3, "{ir}");
    // `--emit names`: each variant as `--kernel` takes it.
    let names = stdout_of(&[
        "inspect",
        "tests/autotune.rs",
        "--kernel",
        "tuned_axpy",
        "--emit",
        "names",
    ]);
    assert_eq!(
        names,
        "tuned_axpy__block_n64_threads32\ntuned_axpy__block_n128_threads32\n\
         tuned_axpy__block_n128_threads64\ntuned_axpy__block_n256_threads32\n"
    );
    let one = stdout_of(&[
        "inspect",
        "tests/autotune.rs",
        "--kernel",
        "tuned_axpy__block_n128_threads64",
        "--emit",
        "names",
    ]);
    assert_eq!(one, "tuned_axpy__block_n128_threads64\n");
    // A variant the filter dropped is not there.
    let out = tile(&[
        "inspect",
        "tests/autotune.rs",
        "--kernel",
        "tuned_axpy",
        "--variant",
        "block_n=64,threads=64",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("with a variant block_n=64,threads=64"));
}

#[test]
fn inspect_variant_names_the_dtype_of_a_generic_kernel() {
    let names = stdout_of(&[
        "inspect",
        "examples/gemm.rs",
        "--kernel",
        "gemm_nn",
        "--variant",
        "dtype=bf16,block_m=192",
        "--emit",
        "names",
    ]);
    assert_eq!(names.lines().count(), 1, "{names}");
    assert!(names.starts_with("gemm_nn_bf16__block_m192_"), "{names}");
    // `dtype=` alone keeps that instance of every dtype-generic kernel, with or
    // without a variant space, and nothing else.
    let names = stdout_of(&[
        "inspect",
        "examples/gemm.rs",
        "--variant",
        "dtype=f16",
        "--emit",
        "names",
    ]);
    assert!(names.lines().all(|l| l.contains("_f16")), "{names}");
    assert!(names.contains("gemm_nn_f16__"), "{names}");
    assert!(names.contains("gemm_persistent_f16\n"), "{names}");
    let out = tile(&["inspect", "examples/gemm.rs", "--variant", "dtype=f32"]);
    assert_eq!(out.status.code(), Some(1));
}
