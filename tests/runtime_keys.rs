//! What enters a kernel's cache keys: the compiler's own stamp and every
//! option do, the target arch does for CUDA entries, and a comment (or
//! formatting) in the kernel does not.

use tile::Target;
use tile_core::key::{derive, derive_with_stamp, COMPILER_STAMP};
use tile_runtime::{binary_key, entry_key};

mod plain {
    #[tile::kernel(block_n = 128, threads = 128)]
    pub fn scale(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
        T::kernel(T::ceildiv(N, block_n), threads, |bx| {
            for i in T::parallel(block_n) {
                c[bx * block_n + i] = a[bx * block_n + i] * 2.0;
            }
        });
    }
}

mod commented {
    /// The same kernel, documented, commented and formatted differently.
    #[tile::kernel(block_n = 128, threads = 128)]
    pub fn scale(
        a: Tensor<f32, (N,)>, // input
        c: TensorMut<f32, (N,)>,
    ) {
        // One block per tile of `block_n` elements.
        T::kernel(T::ceildiv(N, block_n), threads, |bx| {
            /* every element of the tile */
            for i in T::parallel(block_n) {
                c[bx * block_n + i] = a[bx * block_n + i] * 2.0; // doubled
            }
        });
    }
}

mod other_param {
    #[tile::kernel(block_n = 64, threads = 128)]
    pub fn scale(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
        T::kernel(T::ceildiv(N, block_n), threads, |bx| {
            for i in T::parallel(block_n) {
                c[bx * block_n + i] = a[bx * block_n + i] * 2.0;
            }
        });
    }
}

#[test]
fn a_comment_does_not_change_the_key() {
    assert_eq!(plain::scale::ir(), commented::scale::ir());
    assert_eq!(plain::scale::SPEC.cpu.key, commented::scale::SPEC.cpu.key);
    assert_eq!(plain::scale::SPEC.cuda.key, commented::scale::SPEC.cuda.key);
    let e = |s: &'static tile::__private::KernelSpec| entry_key(Target::Cpu, s.cpu.key, None);
    assert_eq!(e(&plain::scale::SPEC), e(&commented::scale::SPEC));
}

#[test]
fn a_compile_time_parameter_changes_the_key() {
    assert_ne!(plain::scale::ir(), other_param::scale::ir());
    assert_ne!(plain::scale::SPEC.cpu.key, other_param::scale::SPEC.cpu.key);
    assert_ne!(
        plain::scale::SPEC.cuda.key,
        other_param::scale::SPEC.cuda.key
    );
}

#[test]
fn the_compiler_stamp_and_options_change_the_key() {
    let spec = &plain::scale::SPEC;
    // The launcher's keys are exactly the key function over its script, target and
    // options, with this compiler's stamp.
    assert_eq!(spec.cpu.key, derive(spec.ir, "c", tile_core::C_OPTIONS));
    assert_eq!(
        spec.cuda.key,
        derive(spec.ir, "cuda", tile_core::CUDA_OPTIONS)
    );
    assert_eq!(
        spec.cpu.key,
        derive_with_stamp(spec.ir, "c", tile_core::C_OPTIONS, COMPILER_STAMP)
    );
    // Another compiler (a changed pass or code generator) gives another key.
    let other_stamp = format!("{COMPILER_STAMP}x");
    assert_ne!(
        spec.cpu.key,
        derive_with_stamp(spec.ir, "c", tile_core::C_OPTIONS, &other_stamp)
    );
    assert_ne!(
        spec.cuda.key,
        derive_with_stamp(spec.ir, "cuda", tile_core::CUDA_OPTIONS, &other_stamp)
    );
    // So does an option (fast math changes the binary, not the source).
    let fast = format!("{} --use_fast_math", tile_core::CUDA_OPTIONS);
    assert_ne!(spec.cuda.key, derive(spec.ir, "cuda", &fast));
    assert_ne!(spec.cpu.key, derive(spec.ir, "c", "-O2"));
    // And the disk entries follow: per arch for CUDA, per source/arch/NVRTC for cubins.
    let k = spec.cuda.key;
    assert_ne!(
        entry_key(Target::Cuda, k, Some("sm_90a")),
        entry_key(Target::Cuda, k, Some("sm_80"))
    );
    assert_ne!(
        entry_key(Target::Cuda, k, Some("sm_90a")),
        entry_key(
            Target::Cuda,
            &derive(spec.ir, "cuda", &fast),
            Some("sm_90a")
        )
    );
    let src = plain::scale::source(Target::Cuda);
    assert_ne!(
        binary_key(src, "sm_90a", (13, 0)),
        binary_key(src, "sm_90a", (13, 1))
    );
    assert_ne!(
        binary_key(src, "sm_90a", (13, 0)),
        binary_key(&format!("{src}\n"), "sm_90a", (13, 0))
    );
}
