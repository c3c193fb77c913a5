//! The contract between `#[tile::kernel]` expansions and the runtime.
//!
//! Everything here is `'static` data that the macro emits as constants: the
//! kernel's parameters (dtype, shape with static and dynamic dims), its grid as a
//! small expression over the dynamic dims, and per target the generated source,
//! its cache key and any ahead-of-time artifact (a linked C entry point, embedded
//! cubins). The runtime never parses kernel syntax; it only reads these tables. The
//! macro builds them from a [`KernelDesc`](crate::KernelDesc), the owned form.
//!
//! ABI of the generated code (both targets take parameters in declaration order):
//! - CPU: `void sym(void *const *bufs, const int64_t *dims, const int64_t *grid,
//!   int64_t begin, int64_t end)` runs linear block indices `begin..end`; block
//!   `l` is `bx = l % gx, by = (l / gx) % gy, bz = l / (gx * gy)`. `dims` holds
//!   the dynamic dims, then one slot per scalar parameter with the value's bytes
//!   in its low bytes ([`ScalarArg::bits`]).
//! - CUDA: `extern "C" __global__ void entry(T *buf0, ..., int dim0, ..., S s0, ...)`:
//!   one device pointer per buffer, then one `int` (i32) per dynamic dim, then
//!   each scalar parameter by value in its own type.
//!
//! Scalars come last on both targets so that a kernel without them has the ABI
//! it always had.

use crate::dtype::DType;
use crate::target::Target;

/// One dimension of a buffer parameter's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DimSpec {
    /// Known when the kernel was compiled.
    Static(i64),
    /// Dynamic dim number `n` (index into `KernelSpec::dims`), bound at launch
    /// from the first parameter that carries it.
    Dyn(u32),
}

/// A buffer parameter of the kernel.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    /// The parameter's name in the kernel's signature (errors name it).
    pub name: &'static str,
    /// Its element type; a tensor of another dtype is refused.
    pub dtype: DType,
    /// Its shape: static dims are checked, dynamic ones bound at launch.
    pub shape: &'static [DimSpec],
    /// Written by the kernel (`TensorMut`); inputs are never written.
    pub output: bool,
    /// Byte alignment the generated code assumes for the data pointer
    /// (vector width of its widest vectorized access; element size otherwise).
    pub align: u32,
}

/// A scalar parameter of the kernel (`temp: f32`), passed by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalarSpec {
    /// The parameter's name in the kernel's signature.
    pub name: &'static str,
    /// Its type; a value of another dtype is refused.
    pub dtype: DType,
}

/// The value of a scalar argument: its dtype and its bytes, zero-extended
/// into the low bytes of a `u64` (as the host stores them, little-endian on
/// every target tile runs on), which is what both ABIs read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalarArg {
    /// The value's type.
    pub dtype: DType,
    /// The value's bytes in the low bytes, the rest zero.
    pub bits: u64,
}

/// The grid size as an expression over dynamic dims (evaluated at launch).
#[derive(Debug, Clone, Copy)]
pub enum GridExpr {
    /// An extent known when the kernel was compiled.
    Const(i64),
    /// Dynamic dim number `n` (index into [`KernelSpec::dims`]).
    Dim(u32),
    /// `a + b`.
    Add(&'static GridExpr, &'static GridExpr),
    /// `a - b`.
    Sub(&'static GridExpr, &'static GridExpr),
    /// `a * b`.
    Mul(&'static GridExpr, &'static GridExpr),
    /// Floor division (operands are non-negative in valid grids).
    Div(&'static GridExpr, &'static GridExpr),
    /// `a % b`.
    Mod(&'static GridExpr, &'static GridExpr),
    /// `(a + b - 1) / b`.
    CeilDiv(&'static GridExpr, &'static GridExpr),
    /// The smaller of `a` and `b`.
    Min(&'static GridExpr, &'static GridExpr),
    /// The larger of `a` and `b`.
    Max(&'static GridExpr, &'static GridExpr),
}

impl GridExpr {
    /// Evaluates with the bound dynamic dims; `None` on division by zero or overflow.
    pub fn eval(&self, dims: &[i64]) -> Option<i64> {
        match *self {
            GridExpr::Const(c) => Some(c),
            GridExpr::Dim(d) => dims.get(d as usize).copied(),
            _ => {
                let (a, b) = self.operands()?;
                self.apply(a.eval(dims)?, b.eval(dims)?)
            }
        }
    }

    /// [`eval`](Self::eval) with its first two levels written out, so that where `self`
    /// is a constant (a generated launcher's spec, inlined) a grid such as
    /// `ceildiv(N, 128)` folds into straight-line code; deeper levels call `eval`.
    #[inline(always)]
    pub fn eval_inline(&self, dims: &[i64]) -> Option<i64> {
        let leaf = |e: &GridExpr| match *e {
            GridExpr::Const(c) => Some(c),
            GridExpr::Dim(d) => dims.get(d as usize).copied(),
            _ => e.eval(dims),
        };
        match self.operands() {
            None => leaf(self),
            Some((a, b)) => self.apply(leaf(a)?, leaf(b)?),
        }
    }

    /// The operands of an operator node.
    #[inline(always)]
    fn operands(&self) -> Option<(&'static GridExpr, &'static GridExpr)> {
        use GridExpr::*;
        match *self {
            Const(_) | Dim(_) => None,
            Add(a, b)
            | Sub(a, b)
            | Mul(a, b)
            | Div(a, b)
            | Mod(a, b)
            | CeilDiv(a, b)
            | Min(a, b)
            | Max(a, b) => Some((a, b)),
        }
    }

    /// This operator applied to evaluated operands.
    #[inline(always)]
    fn apply(&self, a: i64, b: i64) -> Option<i64> {
        use GridExpr::*;
        match *self {
            Const(_) | Dim(_) => None,
            Add(..) => a.checked_add(b),
            Sub(..) => a.checked_sub(b),
            Mul(..) => a.checked_mul(b),
            Div(..) => a.checked_div_euclid(b),
            Mod(..) => a.checked_rem_euclid(b),
            CeilDiv(..) => {
                if b == 0 {
                    return None;
                }
                Some(a.checked_add(b - 1)?.div_euclid(b))
            }
            Min(..) => Some(a.min(b)),
            Max(..) => Some(a.max(b)),
        }
    }
}

/// Entry point of a CPU kernel (see the module docs for the ABI).
pub type CpuEntry = unsafe extern "C" fn(
    bufs: *const *mut core::ffi::c_void,
    dims: *const i64,
    grid: *const i64,
    begin: i64,
    end: i64,
);

/// The CPU target of a kernel: generated C.
#[derive(Debug, Clone, Copy)]
pub struct CpuKernel {
    /// sha256 (hex) of everything that determines the binary.
    pub key: &'static str,
    /// Exported symbol name (unique per key).
    pub symbol: &'static str,
    /// The generated C source (compiled at run time when there is no `aot` entry).
    pub source: &'static str,
    /// Linked ahead of time by the crate's build script, when it was.
    pub aot: Option<CpuEntry>,
}

/// The CUDA target of a kernel: generated CUDA C++.
#[derive(Debug, Clone, Copy)]
pub struct CudaKernel {
    /// sha256 (hex) of source, options and compiler stamp (arch is added per device).
    pub key: &'static str,
    /// The `extern "C"` name of the `__global__` function.
    pub entry: &'static str,
    /// The generated CUDA C++ source (compiled by NVRTC when no cubin fits the device).
    pub source: &'static str,
    /// Cubins built at compile time by nvcc: (arch such as "sm_90a", bytes).
    pub cubins: &'static [(&'static str, &'static [u8])],
    /// Dynamic shared memory each launch provides, in bytes (0 when the kernel
    /// only declares static shared memory); above 48 KiB the runtime raises the
    /// kernel's limit when it loads it.
    pub shared_bytes: u32,
}

/// Everything the runtime needs to check arguments, pick a binary and launch.
#[derive(Debug, Clone, Copy)]
pub struct KernelSpec {
    /// The kernel's name (its Rust function's; errors name it).
    pub name: &'static str,
    /// Buffer parameters, in declaration order (their ABI order).
    pub params: &'static [ParamSpec],
    /// Scalar parameters, in signature order (their ABI order).
    pub scalars: &'static [ScalarSpec],
    /// Names of the dynamic dims, in ABI order.
    pub dims: &'static [&'static str],
    /// Grid extents (x, y, z).
    pub grid: [&'static GridExpr; 3],
    /// Threads per block on CUDA.
    pub threads: u32,
    /// The IR script the keys were derived from (for `ir()` and diagnostics).
    pub ir: &'static str,
    /// The CPU target.
    pub cpu: CpuKernel,
    /// The portable CUDA code (sm_80 and newer).
    pub cuda: CudaKernel,
    /// The code specialized for Hopper, when the compiler made any other
    /// decision there (`wgmma`, the bulk tensor copy engine); a device of
    /// compute capability 9.0 runs it instead of `cuda`.
    pub cuda_sm90a: Option<CudaKernel>,
}

impl KernelSpec {
    /// The CUDA code a device runs, by the architecture it is compiled for
    /// (`sm_90a` for compute capability 9.0).
    pub const fn cuda_for(&self, arch: &str) -> &CudaKernel {
        match &self.cuda_sm90a {
            Some(k) if is_sm90a(arch) => k,
            _ => &self.cuda,
        }
    }

    /// The generated source for `target` (C for the CPU, CUDA C++ for CUDA).
    pub const fn source(&self, target: Target) -> &'static str {
        match target {
            Target::Cpu => self.cpu.source,
            Target::Cuda => self.cuda.source,
        }
    }
}

/// `arch == "sm_90a"`, usable in a `const fn`.
const fn is_sm90a(arch: &str) -> bool {
    let (a, b) = (arch.as_bytes(), b"sm_90a");
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
