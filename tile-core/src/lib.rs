//! tile-core: the tile compiler.
//!
//! One pipeline, used identically by the `#[tile::kernel]` macro and by build
//! scripts (so both derive the same IR text and cache keys):
//!
//! ```text
//! syn::ItemFn ─frontend─▶ PrimFunc ─passes (per target)─▶ lowered PrimFunc ─codegen─▶ C / CUDA C++
//! ```
//!
//! This crate never touches a GPU; only `build` touches the file system.

pub mod abi;
pub mod analysis;
pub mod build;
pub mod codegen;
pub mod diag;
pub mod frontend;
pub mod ir;
pub mod key;
pub mod passes;
pub mod verify;

pub use diag::Diagnostic;

/// A code-generation target (`Target::C` is the CPU target), shared with the runtime.
pub use tile_abi::Target;

/// Everything generated for one kernel: the script, both sources and keys.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub def: frontend::KernelDef,
    /// The IR script (before lowering) that the keys are derived from.
    pub script: String,
    pub c_key: String,
    pub c_symbol: String,
    pub c_source: String,
    pub cuda_key: String,
    pub cuda_entry: String,
    pub cuda_source: String,
    pub cuda_shared_bytes: i64,
    /// Alignment (bytes) each buffer parameter needs: the strictest of the
    /// portable CUDA code and any specialization (one check serves every GPU).
    pub param_align: Vec<u32>,
    /// The code specialized for Hopper (sm_90a), when the passes made any
    /// other decision there than in the portable code; a Hopper GPU runs it
    /// instead.
    pub cuda_sm90a: Option<CudaVariant>,
    /// Why a pipeline whose gemm runs on `wgmma` is not warp-specialized on
    /// Hopper (each pipeline's `ws_why`), for the build to say: the kernel
    /// still runs, at a fraction of the speed, and nothing else shows it.
    pub hopper_notes: Vec<String>,
}

/// CUDA code specialized for one architecture.
#[derive(Debug, Clone)]
pub struct CudaVariant {
    pub arch: ir::CudaArch,
    pub key: String,
    pub entry: String,
    pub source: String,
    pub shared_bytes: i64,
}

/// Compile options that change generated code (part of every key).
pub const C_OPTIONS: &str = "-O3 -std=c11 -fno-strict-aliasing";
pub const CUDA_OPTIONS: &str = "-O3 -std=c++17";

/// Runs the whole pipeline for both targets.
pub fn compile(def: frontend::KernelDef) -> Result<Compiled, Vec<Diagnostic>> {
    let script = def.func.script();
    let c_key = key::derive(&script, "c", C_OPTIONS);
    let cuda_key = key::derive(&script, "cuda", CUDA_OPTIONS);
    let c_symbol = format!("tile_{}_{}", def.func.name, &c_key[..16]);
    // A CUDA-only kernel has no C version (its source is empty; the runtime
    // refuses a CPU launch with a named error).
    let c_code = if def.func.cuda_only {
        String::new()
    } else {
        let lowered_c = passes::run(def.func.clone(), Target::C).map_err(|d| vec![d])?;
        codegen::c::generate(&lowered_c, &c_symbol)
            .map_err(|d| vec![d])?
            .code
    };
    let lowered_cuda = passes::run(def.func.clone(), Target::Cuda).map_err(|d| vec![d])?;
    let cu = codegen::cuda::generate(&lowered_cuda).map_err(|d| vec![d])?;
    let mut param_align = cu.param_align;
    // The Hopper specialization, kept only when the passes decided something
    // else for it (then it is a source of its own, with a key of its own).
    let mut hopper = def.func.clone();
    hopper.arch = ir::CudaArch::Sm90a;
    let lowered_90 = passes::run(hopper, Target::Cuda).map_err(|d| vec![d])?;
    let hopper_notes: Vec<String> = lowered_90
        .schedule
        .pipelines
        .values()
        .filter_map(|p| p.ws_why.clone())
        .collect();
    let mut same = lowered_90.clone();
    same.arch = ir::CudaArch::Any;
    let cuda_sm90a = if same == lowered_cuda {
        None
    } else {
        let cu90 = codegen::cuda::generate(&lowered_90).map_err(|d| vec![d])?;
        for (a, b) in param_align.iter_mut().zip(&cu90.param_align) {
            *a = (*a).max(*b);
        }
        let arch = ir::CudaArch::Sm90a;
        Some(CudaVariant {
            arch,
            key: key::derive(&script, &format!("cuda-{}", arch.name()), CUDA_OPTIONS),
            entry: cu90.entry,
            source: cu90.code,
            shared_bytes: cu90.shared_bytes,
        })
    };
    Ok(Compiled {
        def,
        script,
        c_key,
        c_symbol,
        c_source: c_code,
        cuda_key,
        cuda_entry: cu.entry,
        cuda_source: cu.code,
        cuda_shared_bytes: cu.shared_bytes,
        param_align,
        cuda_sm90a,
        hopper_notes,
    })
}

/// The lowered IR script for a target (for `tile inspect --emit lowered`),
/// specialized for `arch` on CUDA.
pub fn lowered_script(
    def: &frontend::KernelDef,
    target: Target,
    arch: ir::CudaArch,
) -> Result<String, Diagnostic> {
    let mut f = def.func.clone();
    if target == Target::Cuda {
        f.arch = arch;
    }
    Ok(passes::run(f, target)?.script())
}
