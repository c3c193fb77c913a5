//! The owned form of a kernel's spec: what the compiler describes, before it becomes
//! `'static` tables.
//!
//! One description serves both consumers of a compiled kernel: the macro quotes it
//! into the constants of a generated launcher (adding the ahead-of-time artifacts it
//! found), and tools that compile kernels in-process (`tile inspect`) turn it into a
//! [`KernelSpec`] with [`KernelDesc::leak`].

use crate::dtype::DType;
use crate::spec::{CpuKernel, CudaKernel, DimSpec, GridExpr, KernelSpec, ParamSpec, ScalarSpec};

/// An operator node of a grid expression (the operators of [`GridExpr`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GridOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`, rounded down.
    Div,
    /// `a % b`.
    Mod,
    /// `(a + b - 1) / b`.
    CeilDiv,
    /// The smaller of `a` and `b`.
    Min,
    /// The larger of `a` and `b`.
    Max,
}

impl GridOp {
    /// The name of the [`GridExpr`] variant of this operator.
    pub const fn variant_name(self) -> &'static str {
        match self {
            GridOp::Add => "Add",
            GridOp::Sub => "Sub",
            GridOp::Mul => "Mul",
            GridOp::Div => "Div",
            GridOp::Mod => "Mod",
            GridOp::CeilDiv => "CeilDiv",
            GridOp::Min => "Min",
            GridOp::Max => "Max",
        }
    }

    /// The [`GridExpr`] node of this operator over `a` and `b`.
    pub const fn node(self, a: &'static GridExpr, b: &'static GridExpr) -> GridExpr {
        match self {
            GridOp::Add => GridExpr::Add(a, b),
            GridOp::Sub => GridExpr::Sub(a, b),
            GridOp::Mul => GridExpr::Mul(a, b),
            GridOp::Div => GridExpr::Div(a, b),
            GridOp::Mod => GridExpr::Mod(a, b),
            GridOp::CeilDiv => GridExpr::CeilDiv(a, b),
            GridOp::Min => GridExpr::Min(a, b),
            GridOp::Max => GridExpr::Max(a, b),
        }
    }
}

/// A grid extent over the dynamic dims (owned form of [`GridExpr`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grid {
    /// An extent known when the kernel was compiled.
    Const(i64),
    /// Dynamic dim number `n`.
    Dim(u32),
    /// An operator over two sub-expressions.
    Op(GridOp, Box<Grid>, Box<Grid>),
}

impl Grid {
    /// The `'static` form (leaked: for processes that compile a few kernels and exit).
    pub fn leak(&self) -> &'static GridExpr {
        let e = match self {
            Grid::Const(c) => GridExpr::Const(*c),
            Grid::Dim(d) => GridExpr::Dim(*d),
            Grid::Op(op, a, b) => op.node(a.leak(), b.leak()),
        };
        Box::leak(Box::new(e))
    }
}

/// A buffer parameter (owned form of [`ParamSpec`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamDesc {
    /// The parameter's name in the kernel's signature.
    pub name: String,
    /// Its element type.
    pub dtype: DType,
    /// Its shape, static and dynamic dims.
    pub shape: Vec<DimSpec>,
    /// Written by the kernel (see [`ParamSpec::output`]).
    pub output: bool,
    /// Byte alignment the generated code assumes (see [`ParamSpec::align`]).
    pub align: u32,
}

/// The CPU target (owned form of [`CpuKernel`], without an ahead-of-time entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuDesc {
    /// The cache key (see [`CpuKernel::key`]).
    pub key: String,
    /// The exported symbol of the generated C.
    pub symbol: String,
    /// The generated C source.
    pub source: String,
}

/// The CUDA target (owned form of [`CudaKernel`], without embedded cubins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDesc {
    /// The cache key (see [`CudaKernel::key`]).
    pub key: String,
    /// The `extern "C"` name of the `__global__` function.
    pub entry: String,
    /// The generated CUDA C++ source.
    pub source: String,
    /// Dynamic shared memory per launch, in bytes (see [`CudaKernel::shared_bytes`]).
    pub shared_bytes: u32,
}

/// A compiled kernel as the runtime sees it (owned form of [`KernelSpec`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelDesc {
    /// The kernel's name (its Rust function's).
    pub name: String,
    /// Buffer parameters, in declaration order.
    pub params: Vec<ParamDesc>,
    /// Scalar parameters (name, dtype), in signature order.
    pub scalars: Vec<(String, DType)>,
    /// Names of the dynamic dims, in ABI order.
    pub dims: Vec<String>,
    /// Grid extents (x, y, z).
    pub grid: [Grid; 3],
    /// Threads per block on CUDA.
    pub threads: u32,
    /// The IR script the keys were derived from.
    pub ir: String,
    /// The CPU target.
    pub cpu: CpuDesc,
    /// The portable CUDA target (sm_80 and newer).
    pub cuda: CudaDesc,
    /// The Hopper specialization, if any (see [`KernelSpec::cuda_sm90a`]).
    pub cuda_sm90a: Option<CudaDesc>,
}

fn leak_str(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

fn leak_slice<T>(v: Vec<T>) -> &'static [T] {
    Box::leak(v.into_boxed_slice())
}

impl ParamDesc {
    fn leak(&self) -> ParamSpec {
        ParamSpec {
            name: leak_str(&self.name),
            dtype: self.dtype,
            shape: leak_slice(self.shape.clone()),
            output: self.output,
            align: self.align,
        }
    }
}

impl CudaDesc {
    fn leak(&self) -> CudaKernel {
        CudaKernel {
            key: leak_str(&self.key),
            entry: leak_str(&self.entry),
            source: leak_str(&self.source),
            cubins: &[],
            shared_bytes: self.shared_bytes,
        }
    }
}

impl KernelDesc {
    /// The `'static` spec a generated launcher would hold, without ahead-of-time
    /// artifacts. Leaked: for processes that compile a few kernels and exit.
    pub fn leak(&self) -> &'static KernelSpec {
        let spec = KernelSpec {
            name: leak_str(&self.name),
            params: leak_slice(self.params.iter().map(ParamDesc::leak).collect()),
            scalars: leak_slice(
                self.scalars
                    .iter()
                    .map(|(n, t)| ScalarSpec {
                        name: leak_str(n),
                        dtype: *t,
                    })
                    .collect(),
            ),
            dims: leak_slice(self.dims.iter().map(|d| leak_str(d)).collect()),
            grid: [
                self.grid[0].leak(),
                self.grid[1].leak(),
                self.grid[2].leak(),
            ],
            threads: self.threads,
            ir: leak_str(&self.ir),
            cpu: CpuKernel {
                key: leak_str(&self.cpu.key),
                symbol: leak_str(&self.cpu.symbol),
                source: leak_str(&self.cpu.source),
                aot: None,
            },
            cuda: self.cuda.leak(),
            cuda_sm90a: self.cuda_sm90a.as_ref().map(CudaDesc::leak),
        };
        Box::leak(Box::new(spec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Target;

    #[test]
    fn leaked_spec_matches_its_description() {
        let n = || Box::new(Grid::Dim(0));
        let c = |v| Box::new(Grid::Const(v));
        let desc = KernelDesc {
            name: "k".into(),
            params: vec![ParamDesc {
                name: "a".into(),
                dtype: DType::F16,
                shape: vec![DimSpec::Dyn(0), DimSpec::Static(4)],
                output: true,
                align: 8,
            }],
            scalars: vec![("temp".into(), DType::F32)],
            dims: vec!["N".into()],
            grid: [
                Grid::Op(GridOp::CeilDiv, n(), c(128)),
                Grid::Op(GridOp::Max, n(), c(2)),
                Grid::Const(1),
            ],
            threads: 128,
            ir: "ir".into(),
            cpu: CpuDesc {
                key: "ck".into(),
                symbol: "sym".into(),
                source: "c".into(),
            },
            cuda: CudaDesc {
                key: "uk".into(),
                entry: "e".into(),
                source: "cu".into(),
                shared_bytes: 64,
            },
            cuda_sm90a: None,
        };
        let spec = desc.leak();
        assert_eq!(spec.name, "k");
        assert_eq!(spec.params[0].shape, &[DimSpec::Dyn(0), DimSpec::Static(4)]);
        assert_eq!(spec.params[0].dtype, DType::F16);
        assert_eq!(spec.dims, &["N"]);
        assert_eq!(spec.scalars[0].name, "temp");
        let dims = [1000];
        let grid: Vec<_> = spec.grid.iter().map(|g| g.eval(&dims)).collect();
        assert_eq!(grid, [Some(8), Some(1000), Some(1)]);
        assert_eq!(spec.source(Target::Cuda), "cu");
        assert_eq!(spec.source(Target::C), "c");
        assert_eq!(spec.cuda.shared_bytes, 64);
        assert!(matches!(spec.grid[0], GridExpr::CeilDiv(..)));
        assert_eq!(GridOp::CeilDiv.variant_name(), "CeilDiv");
    }
}
