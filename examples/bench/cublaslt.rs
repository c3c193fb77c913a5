//! cuBLASLt's fp8 GEMM, the baseline for tile's fp8 GEMM on Hopper:
//! `D = scale_a · scale_b · A · Bᵀ` with A (M×K) and B (N×K) row-major
//! `f8e4m3` (B given K-major, as an fp8 GEMM's second operand usually is),
//! f32 accumulation, and D (M×N) row-major bf16 or f16.
//!
//! Included by the benchmark example (`#[path = "bench/cublaslt.rs"] mod
//! cublaslt;`), so it carries its own `use`s and has no `main`.
//!
//! The column-major mapping: cuBLASLt only takes fp8 operands in the "TN"
//! form (its first operand transposed, its second not). A row-major M×N D is
//! a column-major N×M matrix Dᵀ = B·Aᵀ, and
//! - B's memory (N×K row-major) is a column-major K×N matrix: cuBLASLt's A,
//!   under `CUBLAS_OP_T` it is the N×K B;
//! - A's memory (M×K row-major) is a column-major K×M matrix, Aᵀ itself:
//!   cuBLASLt's B, under `CUBLAS_OP_N`.
//!
//! So cuBLASLt's m, n, k are N, M, K, both fp8 leading dimensions are K and
//! D's is N; cuBLASLt's A scale is `scale_b` and its B scale `scale_a` (the
//! product is the same; kept straight so a per-operand change stays right).
//!
//! Checked once on an H200 (CUDA 13's libcublasLt) from a scratch harness
//! that includes this file: bf16 and f16 outputs, with and without fast
//! accumulation, four shapes up to 1000×1008×2048, matched a host f64
//! reference of the scaled product within the output's rounding. The
//! benchmark example itself has not run it yet.

// Not every includer uses every entry point (`cublaslt_available`, both
// output types, the fast-accumulation switch).
#![allow(dead_code)]

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};

/// cuBLASLt's recommended workspace on Hopper.
const WORKSPACE_BYTES: usize = 32 << 20;

/// The heuristic picks algorithms for the default minimum operand alignment
/// (`CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES`, 256): every device
/// allocation is that aligned, so `run` asks the same of its pointers.
const ALIGN: u64 = 256;

/// The element type of D (and of C, which cuBLASLt requires to match it for
/// fp8 inputs with a 16-bit output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutType {
    Bf16,
    F16,
}

impl OutType {
    fn cuda(self) -> sys::cudaDataType {
        match self {
            OutType::Bf16 => sys::cudaDataType_t::CUDA_R_16BF,
            OutType::F16 => sys::cudaDataType_t::CUDA_R_16F,
        }
    }
}

/// Whether libcublasLt can be loaded (cudarc loads it on first use and
/// panics if it cannot; [`Fp8Gemm::new`] asks this first and errs instead).
#[cfg(not(feature = "cuda-dynamic-linking"))]
pub(crate) fn cublaslt_available() -> bool {
    // SAFETY: only tries to dlopen the library's candidate names.
    unsafe { sys::is_culib_present() }
}

/// Linked (feature `cuda-dynamic-linking`): the process started, so it is there.
#[cfg(feature = "cuda-dynamic-linking")]
pub(crate) fn cublaslt_available() -> bool {
    true
}

/// One fp8 GEMM shape, planned once (handle, descriptors, algorithm,
/// workspace), then enqueued by [`Fp8Gemm::run`] as often as needed.
pub(crate) struct Fp8Gemm {
    stream: Arc<CudaStream>,
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    /// cuBLASLt's A (our B), B (our A), and C = D.
    layout_a: sys::cublasLtMatrixLayout_t,
    layout_b: sys::cublasLtMatrixLayout_t,
    layout_d: sys::cublasLtMatrixLayout_t,
    pref: sys::cublasLtMatmulPreference_t,
    algo: sys::cublasLtMatmulAlgo_t,
    /// Held for its memory; `workspace_ptr` is its address, taken once so a
    /// timed run records no cudarc events for it (everything runs on `stream`).
    _workspace: CudaSlice<u8>,
    workspace_ptr: u64,
    /// The scale pointers the descriptor holds now (set again only on change).
    scales: (u64, u64),
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) out: OutType,
}

fn err(what: &str) -> impl Fn(lt::CublasError) -> String + '_ {
    move |e| format!("cuBLASLt {what}: {e:?}")
}

/// Sets a matmul descriptor attribute from a plain value.
///
/// # Safety
///
/// `desc` is a live descriptor and `T` is the attribute's documented type.
unsafe fn set_desc<T>(
    desc: sys::cublasLtMatmulDesc_t,
    attr: sys::cublasLtMatmulDescAttributes_t,
    v: &T,
) -> Result<(), String> {
    // SAFETY: forwarded; `v` is read for `size_of::<T>()` bytes during the call.
    unsafe {
        lt::set_matmul_desc_attribute(
            desc,
            attr,
            (v as *const T).cast::<c_void>(),
            std::mem::size_of::<T>(),
        )
    }
    .map_err(|e| format!("cuBLASLt matmul attribute {attr:?}: {e:?}"))
}

impl Fp8Gemm {
    /// Plans `D (m×n) = scale_a · scale_b · A (m×k) · B (n×k)ᵀ` on `stream`,
    /// accumulating exactly in f32 (no fast accumulation).
    pub(crate) fn new(
        stream: &Arc<CudaStream>,
        m: usize,
        n: usize,
        k: usize,
        out: OutType,
    ) -> Result<Self, String> {
        Self::new_with(stream, m, n, k, out, false)
    }

    /// [`new`](Self::new), with `fast_accum` choosing cuBLASLt's fast fp8
    /// accumulation (`CUBLASLT_MATMUL_DESC_FAST_ACCUM`: the tensor cores'
    /// reduced-precision sums are not promoted to f32 along K).
    pub(crate) fn new_with(
        stream: &Arc<CudaStream>,
        m: usize,
        n: usize,
        k: usize,
        out: OutType,
        fast_accum: bool,
    ) -> Result<Self, String> {
        if !cublaslt_available() {
            return Err(
                "libcublasLt could not be loaded (is the CUDA toolkit's or the \
                        nvidia-cublas wheel's lib folder on LD_LIBRARY_PATH?)"
                    .into(),
            );
        }
        if m == 0 || n == 0 || k == 0 {
            return Err(format!(
                "fp8 GEMM {m}x{n}x{k}: every extent must be positive"
            ));
        }
        // cuBLASLt's fp8 rule: leading dimensions of the fp8 operands are
        // multiples of 16 elements; D's (N 16-bit elements) a multiple of 8.
        if !k.is_multiple_of(16) || !n.is_multiple_of(8) {
            return Err(format!(
                "fp8 GEMM {m}x{n}x{k}: cuBLASLt needs K a multiple of 16 and N of 8"
            ));
        }
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| format!("binding the stream's context: {e:?}"))?;
        // SAFETY: allocation of plain bytes that only cuBLASLt writes.
        let workspace = unsafe { stream.alloc::<u8>(WORKSPACE_BYTES) }
            .map_err(|e| format!("allocating the cuBLASLt workspace: {e:?}"))?;
        let (workspace_ptr, sync) = workspace.device_ptr(stream);
        drop(sync);
        let handle = lt::create_handle().map_err(err("create handle"))?;
        // From here on `plan` owns every object made; on an error its Drop
        // releases those made so far (null ones are skipped).
        let mut plan = Fp8Gemm {
            stream: stream.clone(),
            handle,
            desc: std::ptr::null_mut(),
            layout_a: std::ptr::null_mut(),
            layout_b: std::ptr::null_mut(),
            layout_d: std::ptr::null_mut(),
            pref: std::ptr::null_mut(),
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
            _workspace: workspace,
            workspace_ptr,
            scales: (0, 0),
            m,
            n,
            k,
            out,
        };
        let (m64, n64, k64) = (m as u64, n as u64, k as u64);
        let e4m3 = sys::cudaDataType_t::CUDA_R_8F_E4M3;
        plan.desc = lt::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType_t::CUDA_R_32F,
        )
        .map_err(err("create matmul descriptor"))?;
        // cuBLASLt's A = our B's memory, K×N column-major, used transposed;
        // its B = our A's memory, K×M column-major, used as is; D is N×M.
        plan.layout_a =
            lt::create_matrix_layout(e4m3, k64, n64, k as i64).map_err(err("layout of B"))?;
        plan.layout_b =
            lt::create_matrix_layout(e4m3, k64, m64, k as i64).map_err(err("layout of A"))?;
        plan.layout_d =
            lt::create_matrix_layout(out.cuda(), n64, m64, n as i64).map_err(err("layout of D"))?;
        type Attr = sys::cublasLtMatmulDescAttributes_t;
        // SAFETY: a live descriptor; TRANSA/TRANSB are int32 cublasOperation_t,
        // FAST_ACCUM an int8.
        unsafe {
            set_desc(
                plan.desc,
                Attr::CUBLASLT_MATMUL_DESC_TRANSA,
                &(cublasOperation_t::CUBLAS_OP_T as i32),
            )?;
            set_desc(
                plan.desc,
                Attr::CUBLASLT_MATMUL_DESC_TRANSB,
                &(cublasOperation_t::CUBLAS_OP_N as i32),
            )?;
            set_desc(
                plan.desc,
                Attr::CUBLASLT_MATMUL_DESC_FAST_ACCUM,
                &(fast_accum as i8),
            )?;
        }
        plan.pref = lt::create_matmul_pref().map_err(err("create preference"))?;
        // SAFETY: a live preference; MAX_WORKSPACE_BYTES is a uint64.
        unsafe {
            lt::set_matmul_pref_attribute(
                plan.pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&(WORKSPACE_BYTES as u64) as *const u64).cast::<c_void>(),
                std::mem::size_of::<u64>(),
            )
        }
        .map_err(err("workspace preference"))?;
        // The heuristic does not read the scale pointers' values, only whether
        // the descriptor is fp8-scaled; they are set for real by `run`.
        // SAFETY: all five objects are live and describe this problem.
        let heuristic = unsafe {
            lt::get_matmul_algo_heuristic(
                plan.handle,
                plan.desc,
                plan.layout_a,
                plan.layout_b,
                plan.layout_d,
                plan.layout_d,
                plan.pref,
            )
        }
        .map_err(|e| format!("cuBLASLt has no fp8 algorithm for {m}x{n}x{k} -> {out:?}: {e:?}"))?;
        if heuristic.workspaceSize > WORKSPACE_BYTES {
            return Err(format!(
                "cuBLASLt's algorithm wants {} workspace bytes",
                heuristic.workspaceSize
            ));
        }
        plan.algo = heuristic.algo;
        Ok(plan)
    }

    /// Enqueues `D = scale_a · scale_b · A · Bᵀ` on the stream. `a`: M×K
    /// row-major e4m3, `b`: N×K row-major e4m3, `d`: M×N row-major output,
    /// `scale_a`/`scale_b`: one f32 each; all device pointers of the stream's
    /// device, 256-byte aligned (as allocations are).
    pub(crate) fn run(
        &mut self,
        a: u64,
        b: u64,
        d: u64,
        scale_a: u64,
        scale_b: u64,
    ) -> Result<(), String> {
        for (name, p) in [("A", a), ("B", b), ("D", d)] {
            if p == 0 || !p.is_multiple_of(ALIGN) {
                return Err(format!(
                    "fp8 GEMM: {name} at {p:#x} is not {ALIGN}-byte aligned"
                ));
            }
        }
        if scale_a == 0 || scale_b == 0 || !scale_a.is_multiple_of(4) || !scale_b.is_multiple_of(4)
        {
            return Err("fp8 GEMM: the scales must be aligned device pointers to f32".into());
        }
        if self.scales != (scale_a, scale_b) {
            type Attr = sys::cublasLtMatmulDescAttributes_t;
            // SAFETY: a live descriptor; the scale attributes are device
            // pointers (`void*`). cuBLASLt's A is our B, its B our A.
            unsafe {
                set_desc(
                    self.desc,
                    Attr::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                    &scale_b,
                )?;
                set_desc(
                    self.desc,
                    Attr::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                    &scale_a,
                )?;
            }
            self.scales = (scale_a, scale_b);
        }
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| format!("binding the stream's context: {e:?}"))?;
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the objects are live and describe these buffers (the caller
        // vouches for their sizes: k·n and k·m fp8 bytes, m·n outputs); alpha
        // and beta are host f32 values (the default host pointer mode, read
        // during the call); C = D is not read since beta is 0; the workspace
        // holds WORKSPACE_BYTES and is used only on this stream.
        unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                b as *const c_void,
                self.layout_a,
                a as *const c_void,
                self.layout_b,
                d as *const c_void,
                self.layout_d,
                d as *mut c_void,
                self.layout_d,
                &self.algo,
                self.workspace_ptr as *mut c_void,
                WORKSPACE_BYTES,
                self.stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(err("matmul"))
    }

    /// FLOPs of one run (2·M·N·K).
    pub(crate) fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

impl Drop for Fp8Gemm {
    fn drop(&mut self) {
        // No wait needed: cuBLASLt's objects are host-side descriptions that
        // queued matmuls no longer read, and cudarc frees the workspace in
        // the stream's order, after them.
        // SAFETY: each object was made by this plan and is destroyed once;
        // null ones were never made. Errors cannot be reported from a drop.
        unsafe {
            if !self.pref.is_null() {
                let _ = lt::destroy_matmul_pref(self.pref);
            }
            for l in [self.layout_a, self.layout_b, self.layout_d] {
                if !l.is_null() {
                    let _ = lt::destroy_matrix_layout(l);
                }
            }
            if !self.desc.is_null() {
                let _ = lt::destroy_matmul_desc(self.desc);
            }
            let _ = lt::destroy_handle(self.handle);
        }
    }
}
