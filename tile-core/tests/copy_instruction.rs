//! `T::copy(src, dst, instruction = "..", pad = v)`: the passes honour the
//! instruction asked for, or say at the copy why they cannot; a padded copy
//! is a loop nest whose reads outside the tensor give the pad.

/// A GEMM main loop whose B copy carries `option` (`""` for none), and
/// whose epilogue copy carries `epilogue`.
fn gemm(option: &str, epilogue: &str) -> String {
    format!(
        r#"#[tile::kernel(block_m = 128, block_n = 128, block_k = 64, stages = 3, threads = 128)]
        fn k(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f16, (M, N)>) {{
            T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx, by| {{
                let a_s = T::alloc_shared::<f16>([block_m, block_k]);
                let b_s = T::alloc_shared::<f16>([block_k, block_n]);
                let acc = T::alloc_fragment::<f32>([block_m, block_n]);
                T::clear(acc);
                for ko in T::pipelined(T::ceildiv(K, block_k), stages) {{
                    T::copy(a.at([by * block_m, ko * block_k]), a_s);
                    T::copy(b.at([ko * block_k, bx * block_n]), b_s{option});
                    T::gemm(a_s, b_s, acc);
                }}
                T::copy(acc, c.at([by * block_m, bx * block_n]){epilogue});
            }});
        }}"#
    )
}

/// The lowered IR scripts (portable CUDA, then Hopper's), or the first
/// error's message and the source text it points at.
fn compile(src: &str) -> Result<(String, String), (String, String)> {
    use tile_core::{ir::CudaArch, lowered_script, Target};
    let at = |d: &tile_core::diag::Diagnostic| -> (String, String) {
        let r = d.span.start.byte_range();
        (d.message.clone(), src[r.start..].chars().take(40).collect())
    };
    let def = tile_core::frontend::parse_kernel_source(src).map_err(|d| at(&d[0]))?;
    tile_core::compile(def.clone()).map_err(|d| at(&d[0]))?;
    let portable = lowered_script(&def, Target::Cuda, CudaArch::Any).map_err(|d| at(&d))?;
    let hopper = lowered_script(&def, Target::Cuda, CudaArch::Sm90a).map_err(|d| at(&d))?;
    Ok((portable, hopper))
}

#[test]
fn each_instruction_is_honoured() {
    // By default the Hopper main loop is warp-specialized on bulk tensor copies.
    let (_, hopper) = compile(&gemm("", "")).unwrap();
    assert!(hopper.contains("warp_specialized=true"), "{hopper}");
    // "cp_async" keeps B off the copy engine: the pipeline is not specialized.
    let (_, hopper) = compile(&gemm(r#", instruction = "cp_async""#, "")).unwrap();
    assert!(
        hopper.contains(r#"prefer="cp_async", inst="cp_async_tile""#),
        "{hopper}"
    );
    assert!(!hopper.contains("warp_specialized=true"), "{hopper}");
    // "tma" where the engine can: the same specialized loop.
    let (_, hopper) = compile(&gemm(r#", instruction = "tma""#, "")).unwrap();
    assert!(hopper.contains(r#"prefer="tma", inst="tma""#), "{hopper}");
    assert!(hopper.contains("warp_specialized=true"), "{hopper}");
    // "loops": a nest of loads and stores, on every target.
    let (portable, hopper) = compile(&gemm(r#", instruction = "loops""#, "")).unwrap();
    for s in [&portable, &hopper] {
        assert!(!s.contains(r#"prefer="loops", inst"#), "{s}");
        assert!(!s.contains("warp_specialized=true"), "{s}");
    }
}

#[test]
fn an_instruction_that_cannot_run_is_an_error_at_the_copy() {
    let cases = [
        // Fragment to global: no tile copy at all.
        (
            gemm("", r#", instruction = "cp_async""#),
            "is not a tile copy",
        ),
        (gemm("", r#", instruction = "tma""#), "is not a tile copy"),
        (
            gemm(r#", instruction = "dma""#, ""),
            "`instruction` is one of",
        ),
        (
            gemm(r#", kind = "tma""#, ""),
            "the options are `instruction` and `pad`",
        ),
        (gemm(r#", 3"#, ""), "are `instruction = ..` and `pad = ..`"),
    ];
    for (src, says) in cases {
        let (msg, at) = compile(&src).expect_err(says);
        assert!(msg.contains(says), "{msg}");
        assert!(
            at.starts_with("T::copy")
                || at.starts_with('"')
                || at.starts_with("kind")
                || at.starts_with('3'),
            "{msg} at {at}"
        );
    }
}

#[test]
fn tma_outside_a_specialized_pipeline_is_an_error() {
    // A copy into a wgmma operand tile, but not in a pipeline: the engine's
    // copies are issued only by a specialized pipeline's producer.
    let src = r#"#[tile::kernel(block_m = 128, block_n = 128, block_k = 64, threads = 128)]
        fn k(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {
            T::kernel([T::ceildiv(N, block_n), T::ceildiv(M, block_m)], threads, |bx, by| {
                let a_s = T::alloc_shared::<f16>([block_m, block_k]);
                let b_s = T::alloc_shared::<f16>([block_k, block_n]);
                let acc = T::alloc_fragment::<f32>([block_m, block_n]);
                T::clear(acc);
                T::copy(a.at([by * block_m, 0]), a_s, instruction = "tma");
                T::copy(b.at([0, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
                T::copy(acc, c.at([by * block_m, bx * block_n]));
            });
        }"#;
    let (msg, at) = compile(src).expect_err("tma outside a pipeline");
    assert!(msg.contains("warp-specialized pipeline"), "{msg}");
    assert!(at.starts_with("T::copy(a.at"), "{msg} at {at}");
}

#[test]
fn a_padded_copy_is_a_nest_that_reads_the_pad_outside_the_tensor() {
    // A pad of 0 is every copy's: the tile copy and the specialized loop stay.
    let (_, hopper) = compile(&gemm(", pad = 0.0", "")).unwrap();
    assert!(hopper.contains("warp_specialized=true"), "{hopper}");
    // Another pad: a nest whose guarded read selects the pad, on every
    // target; no `padded` survives the bounds pass.
    let (portable, hopper) = compile(&gemm(", pad = -1.0", "")).unwrap();
    for s in [&portable, &hopper] {
        assert!(!s.contains("padded"), "{s}");
        assert!(s.contains("float16(-1"), "{s}");
        assert!(!s.contains("warp_specialized=true"), "{s}");
    }
    let cases = [
        (
            gemm(r#", instruction = "tma", pad = -1.0"#, ""),
            "fills the tile's part outside the tensor with zeros",
        ),
        (gemm(", pad = 1.0, pad = 2.0", ""), "`pad` is given twice"),
        (
            gemm("", ", pad = 1.0"),
            "`pad` is for copies that read a tensor argument",
        ),
    ];
    for (src, says) in cases {
        let (msg, at) = compile(&src).expect_err(says);
        assert!(msg.contains(says), "{msg}");
        assert!(
            at.starts_with('-') || at.starts_with("pad") || at.starts_with('1'),
            "{msg} at {at}"
        );
    }
}
