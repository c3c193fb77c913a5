//! `verify_at`: each stage rule rejects a function that breaks it, with a
//! message naming the stage and what is wrong.

use tile_core::ir::read::read;
use tile_core::ir::{Layout, PrimFunc};
use tile_core::passes::PassId::{self, *};
use tile_core::verify::{verify_at, Stage};
use tile_core::Target::{self, Cuda};

const C: Target = Target::C;

/// A kernel over `a` (f16, M x 64) and `o` (f32, M x 64) with `body`
/// (lines at the body's indentation); `cuda` adds `target="cuda"`.
fn kernel(body: &str, cuda: bool, extra: &str) -> PrimFunc {
    let consts = if cuda { "target=\"cuda\"" } else { "" };
    let text = format!(
        "# tile.prim_func consts({consts})\n\
         def k(a: Tensor((M, 64), float16), o: TensorMut((M, 64), float32)):\n    \
         M = T.dynamic(\"M\", int32)\n    \
         with T.Kernel(M, threads=128{extra}) as (bx):\n{body}"
    );
    read(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn body(lines: &[&str]) -> String {
    lines.iter().map(|l| format!("        {l}\n")).collect()
}

fn after(p: PassId, t: Target) -> Stage {
    Stage::After(p, t)
}

/// The error `f` gets at `stage`, which must exist.
fn error(f: &PrimFunc, stage: Stage) -> String {
    match verify_at(f, stage) {
        Ok(()) => panic!("{stage} accepts:\n{}", f.script()),
        Err(d) => d.message,
    }
}

fn ok(f: &PrimFunc, stage: Stage) {
    if let Err(d) = verify_at(f, stage) {
        panic!("{d}\n{}", f.script());
    }
}

const ACC: &str = "acc = T.alloc_buffer((64, 64), float32, scope=\"local.fragment\")";
const A_S: &str = "a_s = T.alloc_buffer((64, 64), float16, scope=\"shared\")";
const A_SW: &str = "a_s = T.alloc_buffer((64, 64), float16, scope=\"shared\", layout=\"swizzled\")";

#[test]
fn messages_name_the_function_and_the_stage() {
    let f = kernel(&body(&["T.sync_threads()"]), true, "");
    assert_eq!(
        error(&f, Stage::Frontend),
        "internal error: invalid IR in `k` from the frontend: a barrier before `insert_barriers` placed any"
    );
    assert!(error(&f, after(InjectBounds, Cuda)).contains("after `inject_bounds` (cuda):"));
}

#[test]
fn a_stage_exists_only_for_the_targets_its_pass_runs_for() {
    let f = kernel(&body(&["pass"]), false, "");
    ok(&f, after(InjectBounds, C));
    assert!(error(&f, after(PlanMma, C)).contains("`plan_mma` does not run for this target"));
}

#[test]
fn names_are_unique() {
    let mut f = kernel(&body(&["x: int32 = bx"]), false, "");
    f.vars[2].name = "M".into();
    assert!(error(&f, Stage::Frontend).contains("the name `M` is used twice"));
}

#[test]
fn layouts_fit_their_buffers() {
    let mut f = kernel(&body(&["pass"]), false, "");
    f.buffers[0].layout = Some(Layout::Swizzled);
    assert!(error(&f, Stage::Frontend).contains("global buffer `a` has a layout"));
    let f = kernel(
        &body(&["s = T.alloc_buffer((64, 64), float32, scope=\"shared\", layout=\"swizzled\")"]),
        false,
        "",
    );
    assert!(error(&f, Stage::Frontend)
        .contains("`s` is swizzled but not a 2-D shared tile of 2-byte elements"));
    let mma =
        "acc = T.alloc_buffer((64, 64), float32, scope=\"local.fragment\", layout=\"mma(2x2)\")";
    let f = kernel(&body(&[mma]), true, "");
    assert!(error(&f, Stage::Frontend)
        .contains("`acc` has the tensor-core layout before `plan_mma` chose it"));
    ok(&f, after(PlanMma, Cuda));
    let shared = mma.replace("local.fragment", "shared");
    let f = kernel(&body(&[&shared]), true, "");
    assert!(error(&f, after(PlanMma, Cuda))
        .contains("has the tensor-core layout but is not a 2-D fragment"));
    let f = kernel(&body(&[&mma.replace("2x2", "4x2")]), true, "");
    assert!(error(&f, after(PlanMma, Cuda))
        .contains("`acc`'s tensor-core layout spreads over 4x2 warps, the block has 128 threads"));
}

#[test]
fn the_thread_index_is_cuda_only() {
    let b = body(&["x: int32 = T.get_thread_binding(0)"]);
    let msg = "the thread index is used in a function built for the CPU";
    assert!(error(&kernel(&b, false, ""), Stage::Frontend).contains(msg));
    let f = kernel(&b, true, "");
    ok(&f, Stage::Frontend);
    assert!(error(&f, after(LowerTileOps, C)).contains(msg));
}

#[test]
fn barriers_come_from_insert_barriers_and_are_reached_by_every_thread() {
    let f = kernel(&body(&["T.sync_threads()"]), true, "");
    let msg = "a barrier before `insert_barriers` placed any";
    for stage in [
        Stage::Frontend,
        after(MergeShared, Cuda),
        after(InjectBounds, C),
    ] {
        assert!(error(&f, stage).contains(msg), "{stage}");
    }
    ok(&f, after(InsertBarriers, Cuda));
    let inside = "a barrier inside a `T.Parallel` loop or an `if`";
    let f = kernel(
        &body(&["for i in T.Parallel(0, 4):", "    T.sync_threads()"]),
        true,
        "",
    );
    assert!(error(&f, after(InsertBarriers, Cuda)).contains(inside));
    let f = kernel(&body(&["if (bx < 4):", "    T.sync_threads()"]), true, "");
    assert!(error(&f, after(InsertBarriers, Cuda)).contains(inside));
    let f = kernel(
        &body(&["for i in T.serial(0, 4):", "    T.sync_threads()"]),
        true,
        "",
    );
    ok(&f, after(InsertBarriers, Cuda));
}

#[test]
fn lowering_leaves_only_the_tile_ops_cuda_keeps() {
    let fill = kernel(
        &body(&[ACC, "T.fill(acc[0, 0; 64, 64], T.float32(0.0))"]),
        false,
        "",
    );
    ok(&fill, Stage::Frontend);
    ok(&fill, after(PlanMma, Cuda));
    for t in [C, Cuda] {
        assert!(error(&fill, after(LowerTileOps, t)).contains("a `T.fill` after `lower_tile_ops`"));
    }
    let add = kernel(
        &body(&[ACC, "T.atomic_add(o[0, 0; 64, 64], acc[0, 0; 64, 64])"]),
        false,
        "",
    );
    assert!(error(&add, after(InjectBounds, Cuda)).contains("`T.atomic_add` of a tile after"));
    // A copy into a plain shared tile is lowered on both targets; into a
    // swizzled one CUDA keeps it whole.
    let copy = |dst: &str, inst: &str| {
        let op = format!("T.copy(a[bx, 0; 64, 64], a_s[0, 0; 64, 64]{inst})");
        kernel(&body(&[dst, &op]), false, "")
    };
    let tile = ", inst=\"cp_async_tile\"";
    assert!(error(&copy(A_S, tile), after(LowerTileOps, Cuda))
        .contains("`T.copy` that is not a tile copy"));
    assert!(error(&copy(A_SW, ""), after(LowerTileOps, Cuda))
        .contains("`T.copy` with no instruction chosen"));
    assert!(error(&copy(A_SW, ""), after(LowerTileOps, C)).contains("a `T.copy` after"));
    ok(&copy(A_SW, tile), after(LowerTileOps, Cuda));
    let gemm = |a_s: &str, acc: &str| {
        let b_s = a_s.replace("a_s", "b_s");
        let inst = if acc.contains("mma(") {
            ", inst=\"mma_sync(2x2)\""
        } else {
            ""
        };
        let op = format!(
            "T.gemm(a_s, b_s, acc, transpose_A=false, transpose_B=false, clear_accum=false{inst})"
        );
        kernel(&body(&[a_s, &b_s, acc, &op]), false, "")
    };
    let mma = format!("{}, layout=\"mma(2x2)\")", ACC.trim_end_matches(')'));
    assert!(
        error(&gemm(A_S, ACC), after(LowerTileOps, Cuda)).contains("`T.gemm` not on tensor cores")
    );
    assert!(error(&gemm(A_S, ACC), after(LowerTileOps, C)).contains("a `T.gemm` after"));
    ok(&gemm(A_SW, &mma), after(LowerTileOps, Cuda));
    let reduce = kernel(
        &body(&[
            A_S.replace("float16", "float32").as_str(),
            "r = T.alloc_buffer((64,), float32, scope=\"shared\")",
            "T.reduce_sum(a_s, r, dim=1, clear=true)",
        ]),
        false,
        "",
    );
    assert!(error(&reduce, after(InjectBounds, C)).contains("a `T.reduce_*` after"));
    ok(&reduce, after(InjectBounds, Cuda));
}

#[test]
fn after_demotion_fragments_are_only_touched_by_their_owners() {
    let reduce = |src: &str, dst: &str| {
        kernel(
            &body(&[
                &format!("s = T.alloc_buffer((64, 64), float32, scope=\"{src}\")"),
                &format!("r = T.alloc_buffer((64,), float32, scope=\"{dst}\")"),
                "T.reduce_max(s, r, dim=0, clear=true)",
            ]),
            true,
            "",
        )
    };
    let msg = "the reduction of `s` into `r` uses a fragment that `demote_fragments` moves to shared memory";
    ok(
        &reduce("shared", "local.fragment"),
        after(LowerTileOps, Cuda),
    );
    assert!(error(
        &reduce("shared", "local.fragment"),
        after(DemoteFragments, Cuda)
    )
    .contains(msg));
    // Along dim 0 is not reduced in registers.
    assert!(error(
        &reduce("local.fragment", "shared"),
        after(InjectBounds, Cuda)
    )
    .contains(msg));
    ok(&reduce("shared", "shared"), after(InjectBounds, Cuda));
    // A serial loop over a fragment: every thread would read every element.
    let serial = kernel(
        &body(&[ACC, "for i in T.serial(0, 64):", "    o[bx, i] = acc[0, i]"]),
        true,
        "",
    );
    ok(&serial, after(LowerTileOps, Cuda));
    assert!(error(&serial, after(DemoteFragments, Cuda))
        .contains("fragment `acc` is touched by threads that do not hold its elements"));
    let owner = kernel(
        &body(&[
            ACC,
            "for i in T.Parallel(0, 64):",
            "    for j in T.Parallel(0, 64):",
            "        acc[i, j] = T.float32(1.0)",
        ]),
        true,
        "",
    );
    ok(&owner, after(InsertBarriers, Cuda));
}

#[test]
fn the_shared_pool_is_placed_by_merge_shared_and_covers_every_shared_buffer() {
    let placed = |slot: &str, extra: &str| {
        let alloc = format!("{}{slot})", A_S.trim_end_matches(')'));
        kernel(&body(&[&alloc]), true, extra)
    };
    let good = placed(", smem=[0, 8192)", ", smem_bytes=8192");
    ok(&good, after(MergeShared, Cuda));
    ok(&good, after(InsertBarriers, Cuda));
    let msg = "shared memory is placed before `merge_shared`";
    assert!(error(&good, after(InjectBounds, Cuda)).contains(msg));
    assert!(error(&good, Stage::Frontend).contains(msg));
    assert!(error(&good, after(InjectBounds, C)).contains(msg));
    assert!(error(&placed("", ""), after(MergeShared, Cuda))
        .contains("shared buffer `a_s` has no place in the pool"));
    let bad_place = "`a_s` sits at bytes";
    for (slot, bytes) in [
        ("[64, 8256)", 8256),
        ("[0, 4096)", 8192),
        ("[0, 8192)", 4096),
    ] {
        let f = placed(&format!(", smem={slot}"), &format!(", smem_bytes={bytes}"));
        assert!(
            error(&f, after(MergeShared, Cuda)).contains(bad_place),
            "{slot} of {bytes}"
        );
    }
    let mut f = good.clone();
    f.smem.slots.insert(tile_core::ir::BufId(0), (0, 8192));
    assert!(error(&f, after(MergeShared, Cuda))
        .contains("`a` has a place in the pool but is not an allocated shared buffer"));
}
