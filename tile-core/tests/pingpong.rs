//! The ping-pong of a rotated attention loop (`Rotation::pingpong`), as the
//! CUDA backend prints it for Hopper: with two consumer warpgroups, each
//! steady iteration waits for its warpgroup's turn right before issuing its
//! first gemm and passes the turn right after issuing the deferred one;
//! warpgroup 0 takes the first turn before the loop and the last one after
//! it. With one warpgroup there is no one to take turns with.

mod common;

use common::lines_with;

/// An attention forward kernel (the example's body, head dim 64) on
/// `threads` consumer threads.
fn attention(threads: usize) -> String {
    format!(
        r#"#[tile::kernel(dim = 64, block_m = 128, block_n = 64, stages = 3, threads = {threads})]
        fn attn(q: Tensor<f16, (S, dim)>, k: Tensor<f16, (S, dim)>, v: Tensor<f16, (S, dim)>, o: TensorMut<f16, (S, dim)>) {{
            T::kernel(T::ceildiv(S, block_m), threads, |bx| {{
                let q_s = T::alloc_shared::<f16>([block_m, dim]);
                let k_s = T::alloc_shared::<f16>([block_n, dim]);
                let v_s = T::alloc_shared::<f16>([block_n, dim]);
                let s = T::alloc_fragment::<f32>([block_m, block_n]);
                let p = T::alloc_fragment::<f16>([block_m, block_n]);
                let acc = T::alloc_fragment::<f32>([block_m, dim]);
                let m = T::alloc_fragment::<f32>([block_m]);
                let m_prev = T::alloc_fragment::<f32>([block_m]);
                let rescale = T::alloc_fragment::<f32>([block_m]);
                let l = T::alloc_fragment::<f32>([block_m]);
                let row_sum = T::alloc_fragment::<f32>([block_m]);
                T::copy(q.at([bx * block_m, 0]), q_s);
                T::fill(acc, 0.0);
                T::fill(l, 0.0);
                T::fill(m, -T::infinity::<f32>());
                for kt in T::pipelined(T::ceildiv(S, block_n), stages) {{
                    T::copy(k.at([kt * block_n, 0]), k_s);
                    T::copy(v.at([kt * block_n, 0]), v_s);
                    T::clear(s);
                    T::gemm(q_s, k_s, s, transpose_b = true);
                    for (i, j) in T::parallel([block_m, block_n]) {{
                        s[(i, j)] = T::if_then_else(kt * block_n + j < S, s[(i, j)] * 0.18, -T::infinity::<f32>());
                    }}
                    T::copy(m, m_prev);
                    T::reduce_max(s, m, 1, false);
                    for i in T::parallel(block_m) {{
                        rescale[i] = T::exp2(m_prev[i] - m[i]);
                    }}
                    for (i, j) in T::parallel([block_m, dim]) {{
                        acc[(i, j)] = acc[(i, j)] * rescale[i];
                    }}
                    for (i, j) in T::parallel([block_m, block_n]) {{
                        s[(i, j)] = T::exp2(s[(i, j)] - m[i]);
                    }}
                    T::reduce_sum(s, row_sum, 1);
                    for i in T::parallel(block_m) {{
                        l[i] = l[i] * rescale[i] + row_sum[i];
                    }}
                    T::copy(s, p);
                    T::gemm(p, v_s, acc);
                }}
                for (i, j) in T::parallel([block_m, dim]) {{
                    acc[(i, j)] = acc[(i, j)] / l[i];
                }}
                T::copy(acc, o.at([bx * block_m, 0]));
            }});
        }}"#
    )
}

/// The Hopper source of the kernel.
fn hopper_source(threads: usize) -> String {
    common::hopper_kernel_source(&attention(threads))
}

#[test]
fn two_warpgroups_take_turns_around_their_gemm_issues() {
    let src = hopper_source(256);
    let one = |what: &str| -> usize {
        let v = lines_with(&src, what);
        assert_eq!(v.len(), 1, "`{what}` once in the kernel, found {}", v.len());
        v[0]
    };
    let begin = one("tl::tma::pingpong_begin<256>(");
    let wait = one("tl::tma::pingpong_wait<256>(");
    let pass = one("tl::tma::pingpong_pass<256>(");
    let end = one("tl::tma::pingpong_end<256>(");
    let steady = lines_with(&src, "for (int tl_i")
        .into_iter()
        .find(|&a| a > begin)
        .expect("the consumers' steady loop");
    // The first gemm's issues (the prologue's, then the loop's) and the
    // deferred gemm's (the loop's, then the last one after it).
    let issued = |kind: &str| -> Vec<usize> {
        lines_with(&src, kind)
            .into_iter()
            .filter(|&a| {
                src[a..]
                    .lines()
                    .next()
                    .is_some_and(|l| l.contains("::issue("))
            })
            .collect()
    };
    let (issues, deferred) = (issued("tl::wg::MmaAsync<"), issued("tl::wg::RsAsync<"));
    assert_eq!(
        issues.len(),
        2,
        "the first gemm issued in the prologue and the loop"
    );
    assert_eq!(
        deferred.len(),
        2,
        "the deferred gemm issued in the loop and after it"
    );
    assert!(
        begin < issues[0],
        "warpgroup 0 takes the first turn before the loop"
    );
    assert!(
        steady < wait && wait < issues[1],
        "the turn is waited for right before the issue"
    );
    assert!(
        src[wait..issues[1]].lines().count() == 1,
        "nothing between the turn and the issue"
    );
    assert!(
        deferred[0] < pass && src[deferred[0]..pass].lines().count() == 1,
        "the turn passes right after the deferred issue"
    );
    assert!(
        deferred[1] < end,
        "warpgroup 0 takes the last turn after the last deferred gemm"
    );
}

#[test]
fn one_warpgroup_takes_no_turns() {
    let src = hopper_source(128);
    assert!(src.contains("tl::wg::RsAsync<"), "the loop is rotated");
    assert!(!src.contains("pingpong_"), "but has no turns to take");
}
