//! A short, fixed-seed run of `tile-fuzz` (see `src/bin/tile-fuzz/main.rs`):
//! a few thousand mutated kernels must each be accepted (with C that `cc`
//! builds) or refused with errors at the user's code; no panic, internal or
//! unplaced error, timeout or rejected output. A campaign runs longer:
//! `cargo run --profile fuzz --bin tile-fuzz -- --minutes 60`.

use std::process::Command;

#[test]
fn a_fixed_seed_budget_finds_nothing() {
    budget(
        "plain",
        &["--seed", "1", "--inputs", "3000", "--cc-every", "10"],
    );
}

/// The variant syntax (lists, filters, `default(..)`), every instance compiled.
#[test]
fn a_fixed_seed_budget_of_variant_syntax_finds_nothing() {
    budget(
        "variants",
        &[
            "--seed",
            "2",
            "--inputs",
            "1500",
            "--cc-every",
            "10",
            "--focus",
            "variants",
        ],
    );
}

fn budget(tag: &str, args: &[&str]) {
    let out = std::env::temp_dir().join(format!("tile-fuzz-test-{tag}-{}", std::process::id()));
    let run = Command::new(env!("CARGO_BIN_EXE_tile-fuzz"))
        .args(args)
        .arg("--out")
        .arg(&out)
        .env_remove("NVCC")
        .output()
        .expect("run tile-fuzz");
    let report = String::from_utf8_lossy(&run.stdout);
    eprintln!("{report}");
    assert!(
        run.status.success(),
        "tile-fuzz found bugs (inputs saved in {}):\n{report}\n{}",
        out.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    let _ = std::fs::remove_dir_all(&out);
}
