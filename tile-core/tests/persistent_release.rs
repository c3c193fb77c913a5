//! When the consumers of a persistent, warp-specialized loop release the
//! tiles the producer loads per tile ahead of the pipeline (the prologue:
//! attention's Q). Released right after the pipeline when nothing else
//! holds their bytes, so the next tile's copies overlap this tile's
//! epilogue; released at the end of the loop's body when an output staging
//! tile declared after the pipeline took those bytes (`merge_shared`), so
//! the next tile's copies cannot overwrite the staged output before the
//! consumers have stored it.

mod common;

use common::lines_with;

/// A persistent GEMM whose `a` tile is the producer's per-tile prologue; with
/// `staged`, `a_s` is declared in the loop's body and the output leaves
/// through a shared tile declared after the pipeline.
fn kernel(staged: bool) -> String {
    let (a_top, a_body) = if staged {
        ("", "let a_s = T::alloc_shared::<f16>([block_m, dim]);")
    } else {
        ("let a_s = T::alloc_shared::<f16>([block_m, dim]);", "")
    };
    let store = if staged {
        "let c_s = T::alloc_shared::<f16>([block_m, block_n]);
         T::annotate_layout(c_s, T::swizzled);
         T::copy(acc, c_s);
         T::copy(c_s, c.at([by * block_m, bx * block_n]));"
    } else {
        "T::copy(acc, c.at([by * block_m, bx * block_n]));"
    };
    format!(
        r#"#[tile::kernel(block_m = 128, block_n = 64, dim = 64, stages = 3, threads = 256, blocks = 5)]
        fn pers(a: Tensor<f16, (M, dim)>, b: Tensor<f16, (R, N)>, c: TensorMut<f16, (M, N)>) {{
            T::kernel(blocks, threads, |bid| {{
                {a_top}
                let b_s = T::alloc_shared::<f16>([dim, block_n]);
                let acc = T::alloc_fragment::<f32>([block_m, block_n]);
                for (bx, by) in T::persistent([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], blocks, bid) {{
                    {a_body}
                    T::copy(a.at([by * block_m, 0]), a_s);
                    T::clear(acc);
                    for kt in T::pipelined(T::ceildiv(R, dim), stages) {{
                        T::copy(b.at([kt * dim, bx * block_n]), b_s);
                        T::gemm(a_s, b_s, acc);
                    }}
                    {store}
                }}
            }});
        }}"#
    )
}

/// The kernel's Hopper source, from the kernel itself on.
fn hopper_source(staged: bool) -> String {
    common::hopper_kernel_source(&kernel(staged))
}

const RELEASE: &str = "tl::tma::arrive(tl_wpro + 1)";

#[test]
fn prologue_released_after_the_pipeline_when_its_bytes_are_its_own() {
    let src = hopper_source(false);
    let release = lines_with(&src, RELEASE);
    assert_eq!(release.len(), 1, "one release: {release:?}");
    let fallback = lines_with(&src, "tl::wg::copy_tile<half, 128, 64, 256");
    assert!(
        !fallback.is_empty() && release[0] < fallback[0],
        "released in the bulk-copy branch, before the fallback's copies"
    );
    let stores = lines_with(&src, "&c[");
    assert!(
        stores.iter().all(|&s| s > release[0]),
        "released before the output is stored"
    );
}

#[test]
fn prologue_released_after_the_staged_output_that_took_its_bytes() {
    let src = hopper_source(true);
    let shared = lines_with(&src, "bytes reused by c_s");
    assert!(!shared.is_empty(), "the staging tile takes a_s's bytes");
    let release = lines_with(&src, RELEASE);
    assert_eq!(release.len(), 1, "one release: {release:?}");
    let staged_reads = lines_with(&src, "&c_s[");
    assert!(!staged_reads.is_empty(), "the output leaves through c_s");
    assert!(
        staged_reads.iter().all(|&r| r < release[0]),
        "released after every access of the staging tile"
    );
    // Whether one of the four lines right before the release contains `what`.
    let just_before = |what: &str| {
        src[..release[0]]
            .lines()
            .rev()
            .take(4)
            .any(|l| l.contains(what))
    };
    assert!(
        just_before("fence_proxy_async"),
        "the generic-proxy reads are fenced before the bulk copies that follow"
    );
    assert!(
        just_before("if (tl_wuse)"),
        "only the bulk-copy path has a producer to release"
    );
}

/// The kernel's Hopper source, where the producer waits for the consumers'
/// release of the last tile's prologue tiles, and where it acquires stages.
fn producer_order(staged: bool) -> (String, Vec<usize>, Vec<usize>) {
    let src = hopper_source(staged);
    let wait = lines_with(&src, "tl::tma::wait(tl_wpro + 1");
    let acquire = lines_with(&src, "producer_acquire");
    (src, wait, acquire)
}

#[test]
fn producer_loads_the_prologue_first_when_its_bytes_are_its_own() {
    let (_, wait, acquire) = producer_order(false);
    assert_eq!(wait.len(), 1, "one wait: {wait:?}");
    assert!(
        !acquire.is_empty() && wait[0] < acquire[0],
        "the prologue's tiles are copied before the stages"
    );
}

#[test]
fn producer_fills_the_freed_stages_before_a_late_release() {
    let (src, wait, acquire) = producer_order(true);
    // In the stage loop, after the stages the last tile freed; and after
    // it, for a tile without stages.
    assert_eq!(wait.len(), 2, "two waits: {wait:?}");
    assert!(
        !acquire.is_empty() && acquire[0] < wait[0],
        "the stages' copies are issued before the wait for the release"
    );
    assert!(
        !lines_with(&src, "if (tl_i0 == tl_pro0)").is_empty(),
        "the prologue's copies follow the last stage the last tile freed"
    );
    assert!(
        !lines_with(&src, "const int tl_pro0 = (tl_n0 < 3 ? tl_n0 : 3) - 1;").is_empty(),
        "at most `stages` stages ahead of the prologue"
    );
}
