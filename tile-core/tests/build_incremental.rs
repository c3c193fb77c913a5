//! The build API reuses every artifact whose key the previous build made from
//! the same source, and compiles only new keys or changed sources; strict mode turns a kernel that fails into an
//! error naming it and its `file:line`.
//!
//! One test: it sets `OUT_DIR`, `NVCC` and `TILE_NO_NVCC` for the whole process.

use tile_core::build::Builder;

const KERNEL: &str = r#"
#[tile::kernel(block_n = 64, threads = 64)]
pub fn scale(x: Tensor<f32, (N,)>, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            y[bx * block_n + i] = x[bx * block_n + i] * FACTOR;
        }
    });
}
"#;

const OTHER: &str = r#"
#[tile::kernel(threads = 32)]
pub fn copy1(x: Tensor<f32, (N,)>, y: TensorMut<f32, (N,)>) {
    T::kernel(N, threads, |bx| {
        y[bx] = x[bx];
    });
}
"#;

fn source(factor: &str, extra: &str) -> String {
    format!(
        "// a comment\nuse tile::prelude::*;\n{extra}\n{}\n{OTHER}",
        KERNEL.replace("FACTOR", factor)
    )
}

#[test]
fn rebuild_reuses_artifacts_by_key() {
    let root = std::env::temp_dir().join(format!("tile-build-incr-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let out = root.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::env::set_var("OUT_DIR", &out);
    std::env::set_var("TILE_NO_NVCC", "1");
    // What cargo gives a build script, which the C compiler driver reads.
    let vv = std::process::Command::new(std::env::var("RUSTC").unwrap_or("rustc".into()))
        .arg("-vV")
        .output()
        .unwrap();
    let host = String::from_utf8_lossy(&vv.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap();
    std::env::set_var("TARGET", &host);
    std::env::set_var("HOST", &host);
    let file = root.join("kernels.rs");
    let build = |strict: bool| Builder::new().file(&file).strict(strict).compile();

    std::fs::write(&file, source("2.0", "")).unwrap();
    let r = build(false).unwrap();
    assert_eq!((r.kernels, r.c_libs, r.reused), (2, 2, 0), "{r:?}");

    // Only comments and blank lines change: every key is the same.
    std::fs::write(&file, source("2.0", "// edited\n\n")).unwrap();
    let r = build(false).unwrap();
    assert_eq!((r.kernels, r.c_libs, r.reused), (2, 2, 2), "{r:?}");

    // One kernel changes: it alone is compiled.
    std::fs::write(&file, source("3.0", "")).unwrap();
    let r = build(false).unwrap();
    assert_eq!((r.kernels, r.c_libs, r.reused), (2, 2, 1), "{r:?}");

    // A library that vanished (a cleaned directory) is compiled again, even
    // though the manifest lists it.
    for e in std::fs::read_dir(out.join("tile")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with("libtile_copy1_") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let r = build(false).unwrap();
    assert_eq!((r.c_libs, r.reused), (2, 1), "{r:?}");

    // A kernel the frontend rejects: skipped in lenient mode (the macro
    // reports it at its spans when the crate compiles), an error naming the
    // file and line in strict mode.
    let broken = "#[tile::kernel(threads = 32)]\npub fn broken(x: Tensor<f32, (N,)>) {\n    T::kernel(N, threads, |bx| { let v = undefined_name; });\n}\n";
    std::fs::write(&file, source("3.0", broken)).unwrap();
    let r = build(false).unwrap();
    assert_eq!((r.kernels, r.reused), (2, 2), "{r:?}");
    assert!(r.warnings.is_empty(), "{r:?}");
    let at = format!("{}:5", file.display());
    let e = build(true).unwrap_err();
    assert!(e.contains(&at) && e.contains("undefined_name"), "{e}");

    // Cubins outlive a build without nvcc: a stand-in nvcc (it logs each run
    // and writes the output file) builds them, a build without nvcc writes a
    // manifest without cubins, and the next build with the same nvcc reuses
    // every cubin; another nvcc (a different file) rebuilds them.
    std::fs::write(&file, source("3.0", "")).unwrap();
    let log = root.join("nvcc.log");
    let fake = |name: &str, extra: &str| {
        let p = root.join(name);
        let script = format!(
            "#!/bin/sh\n# {extra}\necho run >> '{}'\nwhile [ $# -gt 0 ]; do if [ \"$1\" = -o ]; then echo cubin > \"$2\"; fi; shift; done\n",
            log.display()
        );
        std::fs::write(&p, script).unwrap();
        let _ = std::process::Command::new("chmod")
            .arg("+x")
            .arg(&p)
            .status();
        p
    };
    let runs = || {
        std::fs::read_to_string(&log)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let nvcc_a = fake("nvcc-a", "first");
    let nvcc_b = fake("nvcc-b", "second, a longer file");
    std::env::set_var("TILE_CUDA_ARCHS", "sm_80");
    std::env::set_var("NVCC", &nvcc_a);
    std::env::remove_var("TILE_NO_NVCC");
    let r = build(false).unwrap();
    assert_eq!((r.cubins, runs()), (2, 2), "{r:?}");
    std::env::set_var("TILE_NO_NVCC", "1");
    let r = build(false).unwrap();
    assert_eq!(r.cubins, 0, "{r:?}");
    std::env::remove_var("TILE_NO_NVCC");
    let r = build(false).unwrap();
    assert_eq!((r.cubins, r.reused, runs()), (2, 4, 2), "{r:?}");
    std::env::set_var("NVCC", &nvcc_b);
    let r = build(false).unwrap();
    assert_eq!((r.cubins, runs()), (2, 4), "{r:?}");

    // An artifact recorded under the same key but built from other source text
    // (what a wrong compiler stamp once caused: changed code generation, old
    // keys) is compiled again: its record's source digest is not the one of
    // the source generated now. Each record line ends in that digest.
    for record in ["cubins.txt", "clibs.txt"] {
        let p = out.join("tile").join(record);
        let text = std::fs::read_to_string(&p).unwrap();
        let stale: String = text
            .lines()
            .map(|l| format!("{} {}\n", &l[..l.rfind(' ').unwrap()], "0".repeat(32)))
            .collect();
        assert_eq!(stale.lines().count(), 2, "{text}");
        std::fs::write(&p, stale).unwrap();
    }
    let r = build(false).unwrap();
    assert_eq!(
        (r.cubins, r.c_libs, r.reused, runs()),
        (2, 2, 0, 6),
        "{r:?}"
    );
    std::env::set_var("TILE_NO_NVCC", "1");

    let _ = std::fs::remove_dir_all(&root);
}
