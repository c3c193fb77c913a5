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

/// Decisions of the CUDA scheduling passes, keyed by the loop variable or
/// buffer they concern (names are unique in a function, so the printer shows
/// each decision on the loop or allocation it belongs to).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schedule {
    /// `plan_pipelines`: the `T::pipelined` loops that overlap copies with
    /// compute.
    pub pipelines: std::collections::BTreeMap<VarId, Pipeline>,
    /// `vectorize`: how each `T::parallel` nest (by its outermost loop
    /// variable) is split over the block's threads.
    pub nests: std::collections::BTreeMap<VarId, NestPlan>,
    /// `vectorize`: elements per chunk of each register fragment (`T::parallel`
    /// nests over it use the same width, so each thread touches only the
    /// elements it holds).
    pub fragments: std::collections::BTreeMap<BufId, i64>,
}

/// A software pipeline: the loop body opens with one producer per tile (a
/// copy of global data into a shared tile used nowhere else), and each tile
/// gets `stages` buffers so the producers run `stages - 1` iterations ahead.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    pub stages: i64,
    /// The tiles the producers fill, in the order of the producers.
    pub tiles: Vec<BufId>,
}

/// The thread partition of a `T::parallel` nest: element `e` of the flattened
/// nest belongs to thread `(e / vector) % threads`, in iteration
/// `e / (vector * threads)`; contiguous aligned accesses of a chunk become one
/// vector access.
#[derive(Debug, Clone, PartialEq)]
pub struct NestPlan {
    pub vector: i64,
    /// A wider width used when the listed dynamic dims are multiples of it
    /// (tested at run time, falling back to `vector`).
    pub wide: Option<(i64, Vec<VarId>)>,
    /// The accesses (buffer, index) done as one vector access per chunk at
    /// width `vector`: contiguous along the innermost loop and aligned.
    pub vectorized: Vec<(BufId, Vec<Expr>)>,
    /// The same at the `wide` width.
    pub wide_vectorized: Vec<(BufId, Vec<Expr>)>,
    /// A nest over a tensor-core accumulator whose body is one (possibly
    /// guarded) store contiguous along the last loop: each thread's register
    /// pairs `(i, j), (i, j + 1)` are stored as one 2-element vector when
    /// these dynamic dims are even (tested at run time).
    pub pair_store_if: Option<Vec<VarId>>,
}

impl Schedule {
    /// Shared tiles a pipeline multi-buffers → number of buffers.
    pub fn multibuffered(&self) -> std::collections::HashMap<BufId, i64> {
        self.pipelines
            .values()
            .flat_map(|p| p.tiles.iter().map(|&b| (b, p.stages)))
            .collect()
    }
}

/// The block's shared memory as one byte array: each shared buffer's byte
/// range in it. Buffers whose ranges overlap are never live at the same time.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SharedPool {
    /// Buffer → (byte offset, bytes reserved: the tile times its pipeline stages).
    pub slots: std::collections::BTreeMap<BufId, (i64, i64)>,
    /// Bytes of the whole array (the peak of the live buffers, with padding).
    pub bytes: i64,
}

impl SharedPool {
    /// Whether buffers `a` and `b` may occupy the same bytes.
    pub fn overlaps(&self, a: BufId, b: BufId) -> bool {
        if a == b {
            return true;
        }
        match (self.slots.get(&a), self.slots.get(&b)) {
            (Some(&(oa, na)), Some(&(ob, nb))) => oa < ob + nb && ob < oa + na,
            _ => false,
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
            vars: Vec::new(),
            buffers: Vec::new(),
            launch: Launch {
                grid: Vec::new(),
                block_vars: Vec::new(),
                threads,
            },
            body: Stmt::Seq(Vec::new()),
            smem: SharedPool::default(),
            schedule: Schedule::default(),
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
    fn fresh_name(&self, base: &str) -> String {
        let taken = |n: &str| {
            self.vars.iter().any(|v| v.name == n) || self.buffers.iter().any(|b| b.name == n)
        };
        if !taken(base) {
            return base.to_string();
        }
        (1..)
            .map(|i| format!("{base}_{i}"))
            .find(|n| !taken(n))
            .unwrap_or_default()
    }
    pub fn script(&self) -> String {
        print::script(self)
    }
}
