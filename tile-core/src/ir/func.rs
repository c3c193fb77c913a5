//! A kernel function: parameters, variable and buffer tables, the launch
//! frame, and the decisions passes record beside the body.

use super::*;
use std::fmt;

/// The launch frame of a kernel (`T::kernel`).
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// Grid extents, 1 to 3, over constants and dynamic dims.
    pub grid: Vec<Expr>,
    /// Block index variables, one per grid dim (x, y, z).
    pub block_vars: Vec<VarId>,
    pub threads: i64,
    /// `T::use_cluster(n)`: on Hopper, blocks `nk .. nk + n - 1` along x may
    /// run as a cluster of `n` (1, 2, 4 or 8), sharing the tile copies that
    /// `plan_pipelines` finds equal in all of them (`Pipeline::multicast`).
    pub cluster: i64,
    /// `T::use_cluster(nx, ny)`: clusters are `cluster` blocks along x by
    /// `cluster_y` along y (1 unless given). The blocks of a cluster row
    /// (one y) share the tiles whose origin reads no x block index, those of
    /// a cluster column the tiles whose origin reads no y block index
    /// (`Pipeline::multicast`, `Pipeline::multicast_y`).
    pub cluster_y: i64,
    /// `T::use_split_k(n)`: on Hopper, the warp-specialized pipeline's
    /// iterations may be split over `n` blocks (1, 2, 4 or 8) launched as one
    /// cluster, their accumulators summed into the first (`plan_pipelines`
    /// decides, `Pipeline::split`); elsewhere nothing changes.
    pub split_k: i64,
}

/// A compile-time parameter from the attribute, kept for the script.
#[derive(Debug, Clone, PartialEq)]
pub enum ConstVal {
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl fmt::Display for ConstVal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConstVal::Int(v) => write!(f, "{v}"),
            ConstVal::Float(v) => write!(f, "{v:?}"),
            ConstVal::Bool(v) => write!(f, "{v}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PrimFunc {
    pub name: String,
    pub consts: Vec<(String, ConstVal)>,
    /// Built for CUDA only (`target = "cuda"`): no C version is generated.
    pub cuda_only: bool,
    /// The CUDA architecture the passes specialize for (like TVM's `target`
    /// attribute): set by `compile` before the passes run, never by the
    /// frontend, so it is not part of the script the keys hash.
    pub arch: CudaArch,
    /// Buffer parameters, in signature order.
    pub params: Vec<BufId>,
    /// Dynamic dims (int32 vars), in ABI order.
    pub dims: Vec<VarId>,
    /// Scalar parameters (vars of their dtype, passed by value), in
    /// signature order; the ABI passes them after the dims.
    pub scalars: Vec<VarId>,
    pub vars: Vec<Var>,
    pub buffers: Vec<Buffer>,
    pub launch: Launch,
    pub body: Stmt,
    /// Where shared buffers sit in the block's shared memory; empty until
    /// `merge_shared` (CUDA) fills it.
    pub smem: SharedPool,
    /// How loops map to threads and stages; empty until the scheduling
    /// passes (CUDA) fill it.
    pub schedule: Schedule,
    /// The names taken by `vars` and `buffers`, for `new_var` and `new_buf`.
    pub names: NameIndex,
}

/// A CUDA architecture a kernel's code can be specialized for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CudaArch {
    /// Any GPU tile supports (sm_80 and newer): the portable code.
    #[default]
    Any,
    /// Hopper (sm_90a): `wgmma`, the bulk tensor copy engine.
    Sm90a,
}

impl CudaArch {
    /// The name nvcc and NVRTC use (`sm_90a`); empty for `Any`.
    pub fn name(self) -> &'static str {
        match self {
            CudaArch::Any => "",
            CudaArch::Sm90a => "sm_90a",
        }
    }
}

impl PrimFunc {
    /// A function of no parameters, variables, buffers or statements yet,
    /// launched as one block of `threads` (what the frontend and the reader
    /// fill in).
    pub fn empty(name: String, threads: i64) -> PrimFunc {
        PrimFunc {
            name,
            consts: Vec::new(),
            cuda_only: false,
            arch: CudaArch::Any,
            params: Vec::new(),
            dims: Vec::new(),
            scalars: Vec::new(),
            vars: Vec::new(),
            buffers: Vec::new(),
            launch: Launch {
                grid: Vec::new(),
                block_vars: Vec::new(),
                threads,
                cluster: 1,
                cluster_y: 1,
                split_k: 1,
            },
            body: Stmt::Seq(Vec::new()),
            smem: SharedPool::default(),
            schedule: Schedule::default(),
            names: NameIndex::default(),
        }
    }

    pub fn var(&self, v: VarId) -> &Var {
        &self.vars[v.0 as usize]
    }
    pub fn buf(&self, b: BufId) -> &Buffer {
        &self.buffers[b.0 as usize]
    }
    /// Adds a variable; names are made unique (`i`, `i_1`, ...) so that the
    /// script and generated code can use them directly.
    pub fn new_var(&mut self, name: &str, dtype: DType) -> VarId {
        let name = self.fresh_name(name);
        let id = VarId(self.vars.len() as u32);
        self.vars.push(Var { name, dtype });
        id
    }
    pub fn new_buf(&mut self, mut b: Buffer) -> BufId {
        b.name = self.fresh_name(&b.name);
        let id = BufId(self.buffers.len() as u32);
        self.buffers.push(b);
        id
    }
    fn fresh_name(&mut self, base: &str) -> String {
        self.names.fresh(base, &self.vars, &self.buffers)
    }
    pub fn script(&self) -> String {
        print::script(self)
    }
}
