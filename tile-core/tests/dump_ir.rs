//! `TILE_DUMP_IR=dir`: `passes::run` writes the IR of every step, per
//! target. (A test binary of its own: it sets the variable for the process.)
//! Also `passes::run_one`'s refusals.

mod common;

use tile_core::ir::CudaArch;
use tile_core::passes::run_one;
use tile_core::Target;

#[test]
fn every_step_is_dumped_per_target() {
    let dir = std::env::temp_dir().join(format!("tile-dump-ir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::env::set_var("TILE_DUMP_IR", &dir);
    let src = std::fs::read_to_string(common::root().join("tests/golden/vecadd.rs")).expect("read");
    let def = tile_core::frontend::parse_kernel_source(&src).expect("parses");
    let lowered = tile_core::lowered_script(&def, Target::Cuda, CudaArch::Any).expect("lowers");
    tile_core::compile(def).expect("compiles");
    std::env::remove_var("TILE_DUMP_IR");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("the dump folder")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let want = [
        "vecadd.c.00-frontend.ir",
        "vecadd.c.01-lower_tile_ops.ir",
        "vecadd.c.02-inject_bounds.ir",
        "vecadd.cuda.00-frontend.ir",
        "vecadd.cuda.01-plan_mma.ir",
        "vecadd.cuda.02-lower_tile_ops.ir",
        "vecadd.cuda.03-demote_fragments.ir",
        "vecadd.cuda.04-inject_bounds.ir",
        "vecadd.cuda.05-plan_pipelines.ir",
        "vecadd.cuda.06-merge_shared.ir",
        "vecadd.cuda.07-insert_barriers.ir",
        "vecadd.cuda.08-vectorize.ir",
        "vecadd.cuda-sm_90a.00-frontend.ir",
        "vecadd.cuda-sm_90a.01-plan_mma.ir",
        "vecadd.cuda-sm_90a.02-lower_tile_ops.ir",
        "vecadd.cuda-sm_90a.03-demote_fragments.ir",
        "vecadd.cuda-sm_90a.04-inject_bounds.ir",
        "vecadd.cuda-sm_90a.05-plan_pipelines.ir",
        "vecadd.cuda-sm_90a.06-merge_shared.ir",
        "vecadd.cuda-sm_90a.07-insert_barriers.ir",
        "vecadd.cuda-sm_90a.08-vectorize.ir",
    ];
    let mut want = want.to_vec();
    want.sort();
    assert_eq!(names, want);
    let last = std::fs::read_to_string(dir.join("vecadd.cuda.08-vectorize.ir")).expect("read");
    assert_eq!(last, lowered);
    for n in want {
        let text = std::fs::read_to_string(dir.join(n)).expect("read");
        let f = tile_core::ir::read::read(&text).unwrap_or_else(|e| panic!("{n}: {e}"));
        assert_eq!(f.script(), text, "{n}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_one_refuses_unknown_passes_and_other_targets() {
    let src = std::fs::read_to_string(common::root().join("tests/golden/vecadd.rs")).expect("read");
    let f = tile_core::frontend::parse_kernel_source(&src)
        .expect("parses")
        .func;
    let e = run_one("fuse_everything", f.clone(), Target::Cuda).expect_err("unknown");
    assert_eq!(
        e.message,
        "no pass named `fuse_everything` (the passes: plan_mma, lower_tile_ops, demote_fragments, inject_bounds, plan_pipelines, merge_shared, insert_barriers, vectorize)"
    );
    let e = run_one("plan_mma", f.clone(), Target::C).expect_err("CUDA only");
    assert_eq!(e.message, "`plan_mma` does not run for the c target");
    let g = run_one("lower_tile_ops", f, Target::C).expect("runs");
    assert!(!g.script().contains("T.copy"));
}
