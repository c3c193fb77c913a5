//! The records of the CUDA scheduling passes: how loops map to threads and
//! stages, and where shared buffers sit (`PrimFunc::schedule`, `PrimFunc::smem`).

use super::{BufId, Expr, VarId};

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
    /// Hopper: every producer is a `CopyInst::Tma` copy and the consumer one
    /// `wgmma` gemm, so the loop becomes a producer warpgroup (one thread
    /// issuing the bulk tensor copies, `setmaxnreg` giving its registers
    /// away) and the block's own warpgroups consuming, on a full/empty
    /// mbarrier pair per stage (`plan_pipelines` says when).
    pub warp_specialized: bool,
    /// Hopper: why a pipeline whose consumers run a `wgmma` gemm is not
    /// warp-specialized (`tile inspect` shows it).
    pub ws_why: Option<String>,
    /// A warp-specialized pipeline that is the body of a serial loop (a
    /// persistent kernel's loop over its tiles) whose iterations the producer
    /// runs too: one pipe for every tile, so the producer fills the next
    /// tile's stages while the consumers run this tile's epilogue.
    pub persistent: bool,
    /// Shared tiles a warp-specialized pipeline's producer fills before its
    /// first stage: bulk tensor copies at the kernel's top level ahead of
    /// the loop (attention's Q tile), issued by the producer thread with the
    /// first stages' copies on a barrier of their own, so their latency
    /// overlaps the stages' instead of preceding it (`plan_pipelines`).
    pub prologue: Vec<BufId>,
    /// A warp-specialized pipeline whose consumers run two `wgmma` gemms,
    /// the second one last, is rotated (FA3's intra-warpgroup overlap): in
    /// iteration `i` the consumers issue the first gemm of `i`, then the last
    /// gemm of `i - 1` (with the statements that `late` counts, which moved
    /// there), and run the register work of `i` while both are in flight.
    pub rotate: Option<Rotation>,
    /// The tiles of a rotated pipeline that only its deferred (last) gemm
    /// reads (attention's V). They get a full/empty mbarrier pair of their
    /// own in each stage and are released once that gemm completed, while
    /// the other tiles (K) are released as soon as the first gemm completed:
    /// the producer refills K half an iteration sooner, which lets two
    /// stages rotate. Empty when the stage's tiles share one pair.
    pub deferred_tiles: Vec<BufId>,
    /// The tiles of a warp-specialized pipeline that the `n` blocks of a
    /// cluster row (`Launch::cluster` blocks along x) all fill from the same
    /// origin: each block loads `1/n` of the tile's rows and the copy engine
    /// multicasts them into every block's shared memory.
    pub multicast: Vec<BufId>,
    /// The same for the `Launch::cluster_y` blocks of a cluster column (a
    /// tile whose origin reads no y block index: a GEMM's B). A tile in
    /// both lists is shared by the whole cluster.
    pub multicast_y: Vec<BufId>,
    /// Why nothing is in `multicast` when the kernel asks for clusters
    /// (`tile inspect` shows it).
    pub multicast_why: Option<String>,
    /// The kernel asks to split K (`Launch::split_k`) and this
    /// warp-specialized pipeline can be: its iterations are divided into
    /// `blocks` contiguous ranges, one per block of a cluster along x (the
    /// grid's x extent times `blocks`), and the accumulators its gemms add
    /// into are summed into the cluster's first block, which alone runs the
    /// statements after the loop.
    pub split: Option<Split>,
    /// Why the pipeline is not split when the kernel asks for it (`tile
    /// inspect` shows it).
    pub split_why: Option<String>,
}

/// A pipeline's K range split over the blocks of a cluster (`Pipeline::split`).
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Blocks per output tile: 2, 4 or 8.
    pub blocks: i64,
    /// The register fragments the loop's gemms accumulate into (each block
    /// starts them at zero), summed in rank order into the first block's.
    pub accs: Vec<BufId>,
}

/// Where a rotated pipeline's consumer statements (its body after the
/// producers, as `plan_pipelines` reordered them) split. The last statement
/// is the deferred gemm; the `late` statements before it touch its
/// accumulator and run right before it is issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Index of the gemm issued early (its accumulator is waited for right
    /// after the deferred gemm is issued).
    pub first: usize,
    /// How many statements before the deferred gemm run with it.
    pub late: usize,
    /// Index of the first statement that needs the deferred gemm completed
    /// (it writes that gemm's A operand); the stage it read is released
    /// there.
    pub wait: usize,
    /// Two consumer warpgroups take turns issuing their gemms (FA3's
    /// ping-pong): each waits for its turn before issuing an iteration's two
    /// gemms and hands the turn over once they are issued, so one
    /// warpgroup's softmax runs while the other's gemms hold the tensor
    /// cores, instead of both softmaxes at once with the tensor cores idle.
    pub pingpong: bool,
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
    /// Tested when `wide`'s test fails: 4-byte words of narrower elements
    /// when the listed dynamic dims are multiples of their width (rows at an
    /// even pitch off 16 bytes), before falling back to `vector`.
    pub mid: Option<(i64, Vec<VarId>)>,
    /// The accesses done as one word per chunk at the `mid` width.
    pub mid_vectorized: Vec<(BufId, Vec<Expr>)>,
    /// A nest over a tensor-core accumulator whose body is one (possibly
    /// guarded) store contiguous along the last loop: each thread's register
    /// pairs `(i, j), (i, j + 1)` are stored as one 2-element vector when
    /// these dynamic dims are even (tested at run time).
    pub pair_store_if: Option<Vec<VarId>>,
    /// In the nest's one-element form (width 1: the only form, or the
    /// fallback of `wide`), iterations taken `batch` at a time: each thread
    /// evaluates the stored values of `batch` iterations (their loads in
    /// flight together), then does their stores. A nest of one (possibly
    /// guarded) store over memory only; 1 for every other nest. Without it a
    /// guarded store waits for its own load before the next load issues, so
    /// a ragged edge of an element-wise copy runs one load per thread at a
    /// time.
    pub batch: i64,
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
