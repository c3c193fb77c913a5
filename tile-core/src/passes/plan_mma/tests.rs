//! Planning cases: which gemms take tensor cores, and the layouts they imply.

use crate::frontend::parse_kernel_source;

/// Two gemms into one accumulator: `k2` = 32 qualifies for tensor cores,
/// `k2` = 8 does not.
fn two_gemms(k2: i64) -> String {
    format!(
        r#"
        #[tile::kernel(bm = 64, bn = 64, bk = 32, k2 = {k2}, threads = 128)]
        fn k(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {{
            T::kernel(1, threads, |bx| {{
                let a1 = T::alloc_shared::<f16>([bm, bk]);
                let b1 = T::alloc_shared::<f16>([bk, bn]);
                let a2 = T::alloc_shared::<f16>([bm, k2]);
                let b2 = T::alloc_shared::<f16>([k2, bn]);
                let acc = T::alloc_fragment::<f32>([bm, bn]);
                T::clear(acc);
                T::copy(a.at([0, 0]), a1);
                T::copy(b.at([0, 0]), b1);
                T::copy(a.at([0, bk]), a2);
                T::copy(b.at([bk, 0]), b2);
                T::gemm(a1, b1, acc);
                T::gemm(a2, b2, acc);
                T::copy(acc, c.at([0, 0]));
            }});
        }}"#
    )
}

fn cuda(src: &str) -> String {
    let def = parse_kernel_source(src).expect("parses");
    crate::compile(def).expect("compiles").cuda_source
}

#[test]
fn every_qualifying_gemm_into_an_accumulator_reads_swizzled_tiles() {
    let src = two_gemms(32);
    let def = parse_kernel_source(&src).expect("parses");
    let f = super::run(def.func).expect("plans");
    for name in ["a1", "b1", "a2", "b2"] {
        let b = f.buffers.iter().find(|b| b.name == name).expect("buffer");
        assert_eq!(b.layout, Some(crate::ir::Layout::Swizzled), "{name}");
    }
    assert_eq!(cuda(&src).matches("tl::gemm_ss<").count(), 2);
}

/// One attention step written with fragments: scores reduced along
/// their rows, per-row statistics, probabilities converted in registers
/// and fed to the second product.
const ATTENTION: &str = r#"
    #[tile::kernel(bm = 64, bn = 64, d = 64, threads = 128)]
    fn k(q: Tensor<f16, (bm, d)>, kk: Tensor<f16, (bn, d)>, v: Tensor<f16, (bn, d)>, o: TensorMut<f32, (bm, d)>) {
        T::kernel(1, threads, |bx| {
            let q_s = T::alloc_shared::<f16>([bm, d]);
            let k_s = T::alloc_shared::<f16>([bn, d]);
            let v_s = T::alloc_shared::<f16>([bn, d]);
            let s = T::alloc_fragment::<f32>([bm, bn]);
            let p = T::alloc_fragment::<f16>([bm, bn]);
            let acc = T::alloc_fragment::<f32>([bm, d]);
            let m = T::alloc_fragment::<f32>([bm]);
            let l = T::alloc_fragment::<f32>([bm]);
            T::copy(q, q_s);
            T::copy(kk, k_s);
            T::copy(v, v_s);
            T::clear(s);
            T::clear(acc);
            T::gemm(q_s, k_s, s, transpose_b = true);
            T::reduce_max(s, m, 1);
            for (i, j) in T::parallel([bm, bn]) {
                s[(i, j)] = T::exp(s[(i, j)] - m[i]);
            }
            T::reduce_sum(s, l, 1);
            T::copy(s, p);
            T::gemm(p, v_s, acc);
            for (i, j) in T::parallel([bm, d]) {
                acc[(i, j)] = acc[(i, j)] / l[i];
            }
            T::copy(acc, o);
        });
    }"#;

#[test]
fn per_row_values_and_a_register_operand_stay_in_registers() {
    use crate::ir::{GemmInst, Layout, Stmt};
    let def = parse_kernel_source(ATTENTION).expect("parses");
    let f = super::run(def.func).expect("plans");
    let layout = |n: &str| f.buffers.iter().find(|b| b.name == n).expect(n).layout;
    // Full rows: each warp holds 16 whole rows, so a row reduction is
    // register work and two shuffles, and P's rows are A's rows.
    for n in ["s", "p", "acc"] {
        assert_eq!(layout(n), Some(Layout::Mma { wm: 4, wn: 1 }), "{n}");
    }
    for n in ["m", "l"] {
        assert_eq!(layout(n), Some(Layout::MmaRows { wm: 4, wn: 1 }), "{n}");
    }
    let mut insts = Vec::new();
    f.body.visit(&mut |s| {
        if let Stmt::Gemm(g) = s {
            insts.push(g.inst);
        }
    });
    assert_eq!(insts, [GemmInst::MmaSync { wm: 4, wn: 1 }; 2]);
    let cu = cuda(ATTENTION);
    assert!(
        cu.contains("tl::gemm_rs<half, 64, 64, 64, 4, false>(p, v_s, acc);"),
        "{cu}"
    );
    assert!(cu.contains("float m[2];"), "{cu}");
    assert!(cu.contains("__shfl_xor_sync(0xffffffffu, tl_part"), "{cu}");
    // No shared memory beyond the three operand tiles.
    assert!(!cu.contains("__shared__ float"), "{cu}");
}

#[test]
fn a_gemm_that_does_not_qualify_visits_the_tensor_core_layout() {
    let cu = cuda(&two_gemms(8));
    assert_eq!(cu.matches("tl::gemm_ss<").count(), 1, "{cu}");
    // The second gemm is a dot product per element over acc's registers.
    let second = cu.find("tl::gemm_ss<").expect("first gemm");
    let rest = &cu[second..];
    assert!(rest.contains("tl::acc_coord<64, 64, 2, 2>"), "{cu}");
    assert!(rest.contains("for (int k = 0; k < 8; ++k)"), "{cu}");
}

/// An NT gemm into a `bm` x 48 accumulator over `threads` threads.
fn nt_48_wide(bm: i64, threads: i64) -> String {
    nt_wide(bm, 48, threads)
}

/// An NT gemm into a `bm` x `bn` accumulator over `threads` threads.
fn nt_wide(bm: i64, bn: i64, threads: i64) -> String {
    format!(
        r#"
        #[tile::kernel(bm = {bm}, bn = {bn}, bk = 32, threads = {threads})]
        fn k(a: Tensor<f16, (M, K)>, b: Tensor<f16, (N, K)>, c: TensorMut<f32, (M, N)>) {{
            T::kernel(1, threads, |bx| {{
                let a_s = T::alloc_shared::<f16>([bm, bk]);
                let b_s = T::alloc_shared::<f16>([bn, bk]);
                let acc = T::alloc_fragment::<f32>([bm, bn]);
                T::clear(acc);
                T::copy(a.at([0, 0]), a_s);
                T::copy(b.at([0, 0]), b_s);
                T::gemm(a_s, b_s, acc, transpose_b = true);
                T::copy(acc, c.at([0, 0]));
            }});
        }}"#
    )
}

#[test]
fn a_tile_48_wide_takes_tensor_cores_when_the_warps_split_it_in_16_column_steps() {
    // Two warps along M: each holds 32 rows of all 48 columns (three
    // 16-column steps).
    assert_eq!(cuda(&nt_48_wide(64, 64)).matches("tl::gemm_ss<").count(), 1);
    // Four warps over 32 rows put two along N, 24 columns each: the gemm
    // stays portable, and says why.
    let src = nt_48_wide(32, 128);
    assert_eq!(cuda(&src).matches("tl::gemm_ss<").count(), 0);
    let def = parse_kernel_source(&src).expect("parses");
    let f = super::run(def.func).expect("plans");
    let why = super::gemms(&f)[0].why.clone().unwrap_or_default();
    assert!(
        why.contains("no split of the block's 4 warps over the 32x48 accumulator"),
        "{why}"
    );
}

#[test]
fn a_split_off_the_table_is_found_when_the_table_does_not_fit() {
    // 128 x 176 over 8 warps: the table's 4 x 2 gives 88 columns a warp
    // (not 16-column steps); 8 x 1 gives 16 rows by 176.
    let cu = cuda(&nt_wide(128, 176, 256));
    assert!(cu.contains("tl::acc_coord<128, 176, 8, 1>"), "{cu}");
    // 32 x 48 over 2 warps: the table's 1 x 2 gives 24 columns a warp;
    // 2 x 1 gives 16 rows by 48.
    let cu = cuda(&nt_48_wide(32, 64));
    assert!(cu.contains("tl::acc_coord<32, 48, 2, 1>"), "{cu}");
    // 16 warps, beyond the table: of the splits that fit, the one whose
    // warp tile reads least a k step: 256 x 64 as 8 x 2 warps of 32 x 32
    // (64 rows and columns), not 16 x 1 of 16 x 64 (80).
    let cu = cuda(&nt_wide(256, 64, 512));
    assert!(cu.contains("tl::acc_coord<256, 64, 8, 2>"), "{cu}");
}

/// Q loaded into registers once, then read as the A operand of a product
/// with each key tile of a loop (`threads` threads over 128 rows).
fn loaded_q(threads: i64) -> String {
    format!(
        r#"
        #[tile::kernel(bm = 128, bn = 64, d = 64, threads = {threads})]
        fn k(q: Tensor<f16, (bm, d)>, kk: Tensor<f16, (S, d)>, o: TensorMut<f32, (bm, bn)>) {{
            T::kernel(1, threads, |bx| {{
                let q_s = T::alloc_shared::<f16>([bm, d]);
                let q_f = T::alloc_fragment::<f16>([bm, d]);
                let k_s = T::alloc_shared::<f16>([bn, d]);
                let s = T::alloc_fragment::<f32>([bm, bn]);
                T::copy(q, q_s);
                T::copy(q_s, q_f);
                T::clear(s);
                for kt in T::serial(T::ceildiv(S, bn)) {{
                    T::copy(kk.at([kt * bn, 0]), k_s);
                    T::gemm(q_f, k_s, s, transpose_b = true);
                }}
                T::copy(s, o);
            }});
        }}"#
    )
}

#[test]
fn a_tile_loaded_into_registers_is_a_register_a_operand() {
    use crate::ir::{CudaArch, GemmInst, Layout};
    let src = loaded_q(256);
    // mma.sync: A's registers in the order of an accumulator with the
    // warps along M (16 rows each), as the gemm reads a converted one.
    let def = parse_kernel_source(&src).expect("parses");
    let f = super::run(def.func.clone()).expect("plans");
    let layout =
        |f: &crate::ir::PrimFunc, n: &str| f.buffers.iter().find(|b| b.name == n).expect(n).layout;
    assert_eq!(layout(&f, "q_f"), Some(Layout::Mma { wm: 8, wn: 1 }));
    assert_eq!(layout(&f, "s"), Some(Layout::Mma { wm: 8, wn: 1 }));
    assert_eq!(super::gemms(&f)[0].inst, GemmInst::MmaSync { wm: 8, wn: 1 });
    let cu = cuda(&src);
    assert!(
        cu.contains("tl::gemm_rs<half, 128, 64, 64, 8, true>(q_f, "),
        "{cu}"
    );
    // wgmma: one 64-row strip per warpgroup.
    let mut hopper = def.func;
    hopper.arch = CudaArch::Sm90a;
    let f = super::run(hopper).expect("plans");
    assert_eq!(layout(&f, "q_f"), Some(Layout::Wgmma { wgs: 2 }));
    assert_eq!(super::gemms(&f)[0].inst, GemmInst::Wgmma { wgs: 2 });
}

#[test]
fn a_loaded_operand_tied_to_another_fragment_stays_portable() {
    // q_f also meets a second fragment of its shape in a nest: its layout
    // is not the gemm's alone to choose, so the gemm stays a dot product.
    let src = loaded_q(256).replace(
        "T::copy(q_s, q_f);",
        "T::copy(q_s, q_f);
                let q2 = T::alloc_fragment::<f16>([bm, d]);
                for (i, j) in T::parallel([bm, d]) {
                    q2[(i, j)] = q_f[(i, j)];
                }",
    );
    let cu = cuda(&src);
    assert!(!cu.contains("tl::gemm_rs<"), "{cu}");
}
