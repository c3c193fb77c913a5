//! `tile inspect --emit passes`: the IR after every pass, per target; each
//! step reads back, and the last is `--emit lowered`'s text.

fn tile(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tile"))
        .args(args)
        .output()
        .expect("runs tile");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn emit_passes_prints_every_step_for_each_target() {
    let out = tile(&["inspect", "examples/vecadd.rs", "--emit", "passes"]);
    let headers: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("===") || l.starts_with("---"))
        .collect();
    // The frontend, then each pass of the pipeline that runs for the target.
    let mut want = Vec::new();
    for (target, name) in [(tile::Target::Cuda, "cuda"), (tile::Target::Cpu, "c")] {
        want.push(format!("=== kernel vecadd ({name}) ==="));
        want.push("--- 00 frontend ---".to_string());
        let passes = tile_core::passes::PASSES
            .iter()
            .filter(|p| p.targets.contains(&target));
        for (n, p) in passes.enumerate() {
            want.push(format!("--- {:02} {} ---", n + 1, p.name));
        }
    }
    assert_eq!(headers, want);
    let cpu = tile(&[
        "inspect",
        "examples/vecadd.rs",
        "--emit",
        "passes",
        "--target",
        "cpu",
    ]);
    let (_, last) = cpu
        .rsplit_once("--- 02 inject_bounds ---\n")
        .expect("the last step");
    let lowered = tile(&[
        "inspect",
        "examples/vecadd.rs",
        "--emit",
        "lowered",
        "--target",
        "cpu",
    ]);
    assert_eq!(last, lowered);
    let f = tile_core::ir::read::read(last).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.script(), last);
}
