//! Kernels the compiler accepts must build: each case here was accepted and
//! then rejected by the C compiler or nvcc (names escaped into collisions,
//! raw identifiers, a `T::print` label with a newline, an f32 constant
//! printed as `inff`, cp.async helpers used without the device library).
//! The generated C is compiled with `cc`; the CUDA with `$NVCC` when set.

use std::path::PathBuf;
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tile-accepted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join(name)
}

/// Compiles `src` and builds its C (and CUDA, with `NVCC`); returns the CUDA.
fn builds(name: &str, src: &str) -> String {
    let def = tile_core::frontend::parse_kernel_source(src)
        .unwrap_or_else(|d| panic!("{name}: {}", d[0]));
    let c = tile_core::compile(def).unwrap_or_else(|d| panic!("{name}: {}", d[0]));
    let cfile = scratch(&format!("{name}.c"));
    std::fs::write(&cfile, &c.c_source).expect("write C");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-c", "-std=c11", "-fno-strict-aliasing", "-O1", "-o"])
        .arg(cfile.with_extension("o"))
        .arg(&cfile)
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "{name}: cc rejects the generated C:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if let Ok(nvcc) = std::env::var("NVCC") {
        let cu = scratch(&format!("{name}.cu"));
        std::fs::write(&cu, &c.cuda_source).expect("write CUDA");
        let out = Command::new(nvcc)
            .args([
                "-cubin",
                "-gencode=arch=compute_80,code=sm_80",
                "-std=c++17",
                "-o",
            ])
            .arg(cu.with_extension("cubin"))
            .arg(&cu)
            .output()
            .expect("run nvcc");
        assert!(
            out.status.success(),
            "{name}: nvcc rejects the generated CUDA:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    c.cuda_source
}

#[test]
fn names_that_escape_into_each_other_or_are_raw() {
    builds(
        "names",
        "#[tile::kernel(threads = 128)]
         fn k(int: Tensor<f32, (N,)>, int_: TensorMut<f32, (N,)>, r#fn: Tensor<f32, (N,)>) {
             T::kernel(1, threads, |bx| {
                 let r#match = r#fn[bx];
                 let tl = 1.0f32;
                 let int32_t = 2.0f32;
                 int_[bx] = int[bx] + r#match + tl + int32_t;
             });
         }",
    );
}

/// Found by the fuzzer: a dim named like a math function the intrinsics call
/// (`expm1`) shadowed the function in the generated C.
#[test]
fn names_of_the_math_the_intrinsics_call() {
    builds(
        "math_names",
        "#[tile::kernel(threads = 128)]
         fn k(h: Tensor<f32, (expm1,)>, c: TensorMut<f32, (expm1,)>) {
             T::kernel(1, threads, |bx| {
                 let erff = h[bx];
                 let pow = 2.0f32;
                 c[bx] = T::expm1(erff) + T::erf(erff) + T::pow(erff, pow) + T::fma(erff, pow, 1.0)
                     + T::floor(erff) + T::sin(erff) + T::log1p(T::abs(erff));
             });
         }",
    );
}

#[test]
fn a_print_label_with_quotes_newlines_and_percent_signs() {
    builds(
        "label",
        r#"#[tile::kernel(threads = 128)]
         fn k(a: Tensor<f32, (N,)>) {
             T::kernel(1, threads, |bx| {
                 T::print(a[bx], "x\ny\"z\\ %d ??= é");
             });
         }"#,
    );
}

#[test]
fn constants_beyond_float_and_at_the_int_limits() {
    builds(
        "constants",
        "#[tile::kernel(threads = 128)]
         fn k(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>, i: TensorMut<i32, (N,)>, l: TensorMut<i64, (N,)>) {
             T::kernel(1, threads, |bx| {
                 c[0] = a[0] + 1e39;
                 c[1] = T::max_value::<f32>() * 2.0;
                 i[0] = -2147483648;
                 l[0] = -9223372036854775807 - 1;
                 i[1] = a[1] as i32;
             });
         }",
    );
}

#[test]
fn a_pipeline_without_a_gemm_has_the_cp_async_helpers() {
    let cuda = builds(
        "pipeline",
        "#[tile::kernel(block = 128, threads = 128)]
         fn k(a: Tensor<f16, (N,)>, c: TensorMut<f16, (N,)>) {
             T::kernel(1, threads, |bx| {
                 let s = T::alloc_shared::<f16>([block]);
                 let acc = T::alloc_fragment::<f32>([block]);
                 T::clear(acc);
                 for ko in T::pipelined(T::ceildiv(N, block), 3) {
                     T::copy(a.at([ko * block]), s);
                     for i in T::parallel(block) { acc[i] = acc[i] + s[i] as f32; }
                 }
                 for i in T::parallel(block) { c[i] = acc[i] as f16; }
             });
         }",
    );
    assert!(cuda.contains("tl::cp_async16("), "the case uses cp.async");
    assert!(
        cuda.contains(tile_core::codegen::cuda::GEMM_HEADER),
        "the device library defining tl::cp_async16 is missing"
    );
}

#[test]
fn a_store_and_an_atomic_add_in_one_nest_and_a_local_per_element() {
    builds(
        "atomic",
        "#[tile::kernel(threads = 128)]
         fn k(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
             T::kernel(T::ceildiv(N, 64), threads, |bx| {
                 for i in T::parallel(64) {
                     let z = T::alloc_local::<f32>([2]);
                     z[0] = a[bx * 64 + i];
                     c[bx * 64 + i] = z[0];
                     T::atomic_add(c[bx * 64 + i], 1.0);
                 }
             });
         }",
    );
}

/// Found by the fuzzer: an accumulator reduced along its rows in a block
/// of 33 threads (not whole warps) was given a one-warp tensor-core layout;
/// it must stay on the portable path and build.
#[test]
fn a_row_reduced_accumulator_in_a_block_of_partial_warps() {
    let src = r#"
        #[tile::kernel(block_m = 64, n = 64, block_k = 32, threads = 33)]
        fn k(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, n)>, c: TensorMut<f32, (M,)>) {
            T::kernel(T::ceildiv(M, block_m), threads, |bx| {
                let a_s = T::alloc_shared::<f16>([block_m, block_k]);
                let b_s = T::alloc_shared::<f16>([block_k, n]);
                let acc = T::alloc_fragment::<f32>([block_m, n]);
                let mx = T::alloc_fragment::<f32>([block_m]);
                T::clear(acc);
                for ko in T::pipelined(T::ceildiv(K, block_k), 2) {
                    T::copy(a.at([bx * block_m, ko * block_k]), a_s);
                    T::copy(b.at([ko * block_k, 0]), b_s);
                    T::gemm(a_s, b_s, acc);
                }
                T::reduce_max(acc, mx, 1);
                T::copy(mx, c.at(bx * block_m));
            });
        }"#;
    let cu = builds("row_reduced_partial_warps", src);
    assert!(!cu.contains("tl::gemm_ss<"), "{cu}");
}

/// Found by the fuzzer: a variant list on a parameter with a raw identifier
/// name (`r#match`) made an invalid kernel name and panicked.
#[test]
fn a_variant_parameter_with_a_raw_name() {
    let src = "#[tile::kernel(r#match = [64, 128], threads = 128)]
         fn k(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
             T::kernel(T::ceildiv(N, r#match), threads, |bx| {
                 for i in T::parallel(r#match) {
                     c[bx * r#match + i] = a[bx * r#match + i];
                 }
             });
         }";
    let def = tile_core::frontend::parse_kernel_source(src).unwrap_or_else(|d| panic!("{}", d[0]));
    tile_core::compile(def).unwrap_or_else(|d| panic!("{}", d[0]));
}

/// Found by the fuzzer: in a vectorized nest whose store is guarded (a
/// ragged edge), a `let` before the guard that reads a register fragment
/// (`let x = acc1[(i, j)] * s;`) was emitted where no lane was set, and the
/// kernel failed with an error at no span. The guard is tested at the
/// chunk's first lane, with that lane's register.
#[test]
fn a_let_reading_a_fragment_before_a_chunks_guard() {
    let src = r#"
        #[tile::kernel(bm = 64, bk = 32, threads = 128)]
        fn k(a: Tensor<f16, (bm, bk)>, b: Tensor<f16, (bk, bm)>, c: TensorMut<f32, (M, bm)>) {
            T::kernel(1, threads, |bx| {
                let a_s = T::alloc_shared::<f16>([bm, bk]);
                let b_s = T::alloc_shared::<f16>([bk, bm]);
                let acc1 = T::alloc_fragment::<f32>([bm, bm]);
                let acc2 = T::alloc_fragment::<f32>([bm, bm]);
                T::copy(a, a_s);
                T::copy(b, b_s);
                T::clear(acc1);
                T::clear(acc2);
                T::gemm(a_s, b_s, acc1);
                for (i, j) in T::parallel([bm, bm]) {
                    let x = acc1[(i, j)] * 1.0001;
                    c[(i, j)] = x + acc2[(j, i)];
                }
            });
        }"#;
    let cu = builds("let_of_a_fragment_before_a_guard", src);
    assert!(cu.contains("bool tl_in"), "the guarded chunk form: {cu}");
}
