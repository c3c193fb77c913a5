//! Golden files: the IR script, generated CUDA and generated C of each kernel
//! in `tests/golden/*.rs` are checked in beside it. A change in generated code
//! fails this test until the files are regenerated with `TILE_BLESS=1`.

use std::path::{Path, PathBuf};

/// Generated code without the fixed preludes every file starts with (they are
/// checked once, where they are written), so each golden file shows only
/// what the compiler generated for its kernel.
fn strip_preludes(code: &str) -> String {
    use tile_core::codegen::{c, cuda};
    code.replace(cuda::GEMM_HEADER, "// <tl/gemm.cuh>\n")
        .replace(cuda::WGMMA_HEADER, "// <tl/wgmma.cuh>\n")
        .replace(cuda::TMA_HEADER, "// <tl/tma.cuh>\n")
        .replace(cuda::MATH_HEADER, "// <tl/math.cuh>\n")
        .replace(cuda::BITS_HEADER, "// <tl/bits.cuh>\n")
        .replace(cuda::PRELUDE, "// <tile CUDA prelude>\n")
        .replace(c::PRELUDE, "// <tile C prelude>\n")
}

fn check(path: &Path, actual: &str, failures: &mut Vec<String>) {
    let actual = strip_preludes(actual);
    let actual = actual.as_str();
    if std::env::var("TILE_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(path, actual).expect("write golden file");
        return;
    }
    match std::fs::read_to_string(path) {
        Ok(expected) if expected == actual => {}
        Ok(_) => failures.push(format!(
            "{} differs (regenerate with TILE_BLESS=1 and review the diff)",
            path.display()
        )),
        Err(_) => failures.push(format!(
            "{} is missing (create it with TILE_BLESS=1)",
            path.display()
        )),
    }
}

/// The kernel files checked: this folder's, and every example of the
/// workspace (their golden files go to `golden/examples/`).
fn kernel_files() -> Vec<(PathBuf, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for (src_dir, gold_dir) in [
        (root.join("tests/golden"), root.join("tests/golden")),
        (root.join("../examples"), root.join("tests/golden/examples")),
    ] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&src_dir)
            .expect("kernel dir")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        v.sort();
        for p in v {
            let gold = gold_dir.join(p.file_name().expect("file name"));
            out.push((p, gold));
        }
    }
    out
}

#[test]
fn generated_code_matches_golden_files() {
    let mut failures = Vec::new();
    let files = kernel_files();
    for (p, gold) in &files {
        let src = std::fs::read_to_string(p).expect("read kernel");
        let def = tile_core::frontend::parse_kernel_source(&src)
            .unwrap_or_else(|d| panic!("{}: {}", p.display(), d[0]));
        let c = tile_core::compile(def).unwrap_or_else(|d| panic!("{}: {}", p.display(), d[0]));
        check(&gold.with_extension("ir"), &c.script, &mut failures);
        check(&gold.with_extension("cu"), &c.cuda_source, &mut failures);
        // The Hopper specialization, where the passes made one.
        let hopper = gold.with_extension("sm90a.cu");
        match &c.cuda_sm90a {
            Some(v) => check(&hopper, &v.source, &mut failures),
            None if hopper.exists() => failures.push(format!(
                "{} exists but the kernel has no Hopper specialization",
                hopper.display()
            )),
            None => {}
        }
        // The C symbol carries the key, which moves with every compiler change;
        // the golden file names it generically.
        check(
            &gold.with_extension("c"),
            &c.c_source.replace(&c.c_symbol, "tile_kernel"),
            &mut failures,
        );
    }
    assert!(
        files.len() >= 6,
        "expected the golden kernels and the examples"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn vectorized_and_bounds_checked_forms() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let compile = |f: &str| {
        let src = std::fs::read_to_string(dir.join(f)).expect("read");
        tile_core::compile(tile_core::frontend::parse_kernel_source(&src).expect("parse"))
            .expect("compile")
    };
    let v = compile("vecadd.rs").cuda_source;
    assert!(
        v.contains("tl::vec<half, 8>"),
        "divisible N uses 128-bit vectors:\n{v}"
    );
    assert!(
        !v.contains("if ("),
        "divisible N needs no bounds check:\n{v}"
    );
    let b = compile("vecadd_2047.rs").cuda_source;
    assert!(b.contains("< 2047"), "N = 2047 keeps a bounds check:\n{b}");
    assert!(
        !b.contains("tl::vec"),
        "the bounds-checked form is scalar:\n{b}"
    );
}

#[test]
fn shared_buffers_with_disjoint_lifetimes_share_bytes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let compile = |f: &str| {
        let src = std::fs::read_to_string(dir.join(f)).expect("read");
        tile_core::compile(tile_core::frontend::parse_kernel_source(&src).expect("parse"))
            .expect("compile")
            .cuda_source
    };
    // Two 16 KiB tiles, one after the other: 16 KiB, not 32.
    let two = compile("two_phase_shared.rs");
    assert!(two.contains("unsigned char tl_smem[16384];"), "{two}");
    assert!(two.contains("float* s1 = reinterpret_cast<float*>(tl_smem + 0);"));
    assert!(two.contains("float* s2 = reinterpret_cast<float*>(tl_smem + 0);"));
    // Barriers: s1 written → read; s1 last read → s2 first write (the reuse);
    // s2 written → read. The middle one exists only because of the reuse.
    let first_write_s2 = two.find("s2[").expect("s2 is written");
    let last_read_s1 = two.rfind("s1[").expect("s1 is read");
    assert!(last_read_s1 < first_write_s2);
    assert!(
        two[last_read_s1..first_write_s2].contains("__syncthreads();"),
        "{two}"
    );
    assert_eq!(two.matches("__syncthreads();").count(), 3, "{two}");
    // GEMM tiles (2 stages × 8 KiB each) and the 16 KiB epilogue tile: the
    // peak is 16 KiB; the pipeline's closing barrier orders the reuse.
    let gemm = compile("gemm_staged_epilogue.rs");
    assert!(gemm.contains("unsigned char tl_smem[16384];"), "{gemm}");
    assert!(gemm.contains("float* c_s = reinterpret_cast<float*>(tl_smem + 0);"));
    let drain = gemm.find("tl::cp_async_wait<0>();\n    __syncthreads();");
    let first_c_s = gemm.find("c_s[").expect("c_s is written");
    assert!(drain.is_some_and(|d| d < first_c_s), "{gemm}");
}
