//! The warp-specialized form of a software pipeline on Hopper
//! (`Pipeline::warp_specialized`): a producer warpgroup issuing bulk tensor
//! copies on full/empty mbarrier pairs (`tl/tma.cuh`), the block's own
//! warpgroups consuming; across a persistent loop; and, in clusters of
//! blocks, the tiles they share (`Pipeline::multicast`).

use super::cluster::Group;
use super::pipeline::Loop;
use super::*;
use crate::passes::plan_pipelines::{loop_sequence, PRODUCER_THREADS};
/// What the kernel as a whole needs for its warp-specialized pipeline (at most
/// one, `plan_pipelines`), fixed before the body is written: the signature
/// takes its tensor maps, the launch bounds and the shared pool grow.
pub(super) struct WsPlan {
    pub var: VarId,
    /// The serial loop around the pipeline that the producer runs too
    /// (`Pipeline::persistent`): one pipe for all its iterations.
    pub outer: Option<VarId>,
    pub stages: i64,
    /// One tensor map per source tensor and box, in parameter order
    /// `tl_tma0, tl_tma1, ..`.
    pub maps: Vec<MapKey>,
    /// Byte offset of the pipe's mbarriers (`tl::tma::Pipe`) in the pool.
    pub pipe_offset: i64,
    /// Blocks per multiprocessor the launch bounds ask for (1 or 2).
    pub min_blocks: i64,
    /// The tiles shared by the blocks of a cluster (`Pipeline::multicast`,
    /// `Pipeline::multicast_y`) and by which of them: each also has a tensor
    /// map of one block's part of its rows (`rows / Group::parts`) in `maps`.
    pub multicast: Vec<(BufId, Group)>,
    /// Registers per thread of the consumers after `setmaxnreg` (the producer
    /// keeps [`WS_PRODUCER_REGS`]).
    pub consumer_regs: i64,
    /// The loop's iterations split over the blocks of a cluster
    /// (`Pipeline::split`).
    pub split: Option<Split>,
    /// The copies before the loop that the producer issues ahead of its
    /// first stage (`Pipeline::prologue`), on one mbarrier after the pipe's.
    pub prologue: Vec<TileCopy>,
    /// The stage tiles on the pipe's second full/empty pair
    /// (`Pipeline::deferred_tiles`; empty: one pair a stage).
    pub deferred: Vec<BufId>,
    /// In a persistent loop with a prologue, whether the consumers release its
    /// tiles at the end of the loop's body instead of right after the
    /// pipeline: another shared buffer took their bytes (`merge_shared`,
    /// e.g. an output staging tile declared after the pipeline), and the
    /// next tile's prologue copies may overwrite them only once that
    /// buffer's last reader is done.
    pub release_late: bool,
}

pub(super) const WS_PRODUCER_REGS: i64 = 40;

/// A tensor map: its source tensor and its box, `rows` by `cols` (one
/// swizzle panel of the destination tile: 128 bytes of columns, or the whole
/// row where that is 64 or 32 bytes; `tl::tma::Panels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapKey {
    pub src: BufId,
    pub rows: i64,
    pub cols: i64,
}

impl MapKey {
    /// The map that copies into the shared tile `dst` from `src` use, in
    /// boxes of `rows` rows (the tile's, or a cluster part's).
    pub(super) fn of(f: &PrimFunc, src: BufId, dst: BufId, rows: i64) -> MapKey {
        let b = f.buf(dst);
        let cols = b
            .const_shape()
            .unwrap_or_default()
            .get(1)
            .copied()
            .unwrap_or(0);
        let eb = b.dtype.bytes();
        MapKey {
            src,
            rows,
            cols: cols.min(128 / eb),
        }
    }
}

impl WsPlan {
    /// The kernel's warp-specialized pipeline, if it has one.
    pub(super) fn of(f: &PrimFunc) -> Option<WsPlan> {
        let (&var, p) = f
            .schedule
            .pipelines
            .iter()
            .find(|(_, p)| p.warp_specialized)?;
        let mut maps = Vec::new();
        f.body.visit(&mut |s| {
            if let Stmt::For { var: v, body, .. } = s {
                if *v == var {
                    body.visit(&mut |x| {
                        if let Stmt::Copy {
                            src,
                            dst,
                            inst: CopyInst::Tma { .. },
                            ..
                        } = x
                        {
                            let rows = f.buf(dst.buf).const_shape().unwrap_or_default()[0];
                            add_map(&mut maps, MapKey::of(f, src.buf, dst.buf, rows));
                            if let Some(g) = Group::of(p, dst.buf) {
                                add_map(
                                    &mut maps,
                                    MapKey::of(f, src.buf, dst.buf, rows / g.parts(f)),
                                );
                            }
                        }
                    });
                }
            }
        });
        // The prologue's copies, in program order; their maps follow the
        // stages' (the parameter order of existing kernels stays).
        let mut prologue = Vec::new();
        let before = loop_sequence(f, var).map_or(Vec::new(), |(items, at)| items[..at].to_vec());
        for s in before {
            if let (
                Stmt::Copy {
                    inst: CopyInst::Tma { .. },
                    ..
                },
                Some(c),
            ) = (s, TileCopy::of(s))
            {
                if p.prologue.contains(&c.dst) {
                    let rows = f.buf(c.dst).const_shape().unwrap_or_default()[0];
                    add_map(&mut maps, MapKey::of(f, c.src, c.dst, rows));
                    prologue.push(c);
                }
            }
        }
        let mut outer = None;
        if p.persistent {
            f.body.visit(&mut |s| {
                if let Stmt::For {
                    var: o,
                    kind: ForKind::Serial,
                    body,
                    ..
                } = s
                {
                    let items = body.items();
                    if items
                        .iter()
                        .any(|x| matches!(x, Stmt::For { var: v, .. } if *v == var))
                    {
                        outer = Some(*o);
                    }
                }
            });
        }
        let release_late = outer.is_some()
            && prologue.iter().any(|c| {
                f.smem
                    .slots
                    .keys()
                    .any(|&b| b != c.dst && f.smem.overlaps(b, c.dst))
            });
        let pipe_offset = (f.smem.bytes + 7) / 8 * 8;
        let pool = pool_end(
            pipe_offset,
            p.stages * groups(&p.deferred_tiles),
            prologue_bars(!prologue.is_empty(), p.persistent),
        );
        let threads = f.launch.threads + PRODUCER_THREADS;
        // Two blocks per multiprocessor when one warpgroup consumes and two
        // blocks' shared memory fits (each with 1 KiB of alignment slack and
        // the 1 KiB the driver reserves): one block's epilogue then overlaps
        // the other's main loop.
        let min_blocks = if f.launch.threads == 128 && 2 * (pool + 2048) <= 228 * 1024 {
            2
        } else {
            1
        };
        // The register cap at entry (what ptxas allocates when the kernel
        // uses setmaxnreg), then what the consumers can take once the
        // producer has given back all but WS_PRODUCER_REGS of its registers.
        let cap = (65536 / (min_blocks * threads) / 8 * 8).min(255);
        let consumer_regs =
            ((cap * threads - WS_PRODUCER_REGS * PRODUCER_THREADS) / f.launch.threads / 8 * 8)
                .min(240);
        Some(WsPlan {
            var,
            outer,
            stages: p.stages,
            maps,
            pipe_offset,
            min_blocks,
            multicast: p
                .tiles
                .iter()
                .filter_map(|&t| Group::of(p, t).map(|g| (t, g)))
                .collect(),
            consumer_regs,
            split: p.split.clone(),
            prologue,
            deferred: p.deferred_tiles.clone(),
            release_late,
        })
    }

    /// The pipe's type.
    pub(super) fn pipe_type(&self) -> String {
        match groups(&self.deferred) {
            1 => format!("tl::tma::Pipe<{}>", self.stages),
            g => format!("tl::tma::Pipe<{}, {g}>", self.stages),
        }
    }

    /// Byte offset of the prologue's mbarriers, right after the pipe's.
    pub(super) fn prologue_bar(&self) -> i64 {
        pool_end(self.pipe_offset, self.stages * groups(&self.deferred), 0)
    }

    pub(super) fn prologue_bars(&self) -> i64 {
        prologue_bars(!self.prologue.is_empty(), self.outer.is_some())
    }

    /// Bytes of the shared pool with the mbarriers.
    pub(super) fn pool_bytes(&self) -> i64 {
        pool_end(
            self.pipe_offset,
            self.stages * groups(&self.deferred),
            self.prologue_bars(),
        )
    }
}

/// Full/empty pairs a stage: two when the deferred gemm's tiles
/// (`Pipeline::deferred_tiles`) have their own.
fn groups(deferred: &[BufId]) -> i64 {
    1 + !deferred.is_empty() as i64
}

/// The prologue's mbarriers: none without one; its full barrier; in a
/// persistent loop also the empty one the consumers arrive on once they
/// have read a tile's prologue tiles (the next tile's copies wait for it).
fn prologue_bars(prologue: bool, persistent: bool) -> i64 {
    match (prologue, persistent) {
        (false, _) => 0,
        (true, false) => 1,
        (true, true) => 2,
    }
}

/// The end of the shared pool: the tiles up to `pipe_offset`, the pipe's
/// `pairs` full/empty mbarrier pairs, then the prologue's `bars` mbarriers.
fn pool_end(pipe_offset: i64, pairs: i64, bars: i64) -> i64 {
    pipe_offset + 16 * pairs + 8 * bars
}

/// Adds a tensor map (source tensor, box rows) unless the kernel has it.
fn add_map(maps: &mut Vec<MapKey>, m: MapKey) {
    if !maps.contains(&m) {
        maps.push(m);
    }
}

impl Writer<'_> {
    /// The warp-specialized form of a pipeline (`Pipeline::warp_specialized`),
    /// at the kernel's top level: the producer warpgroup (threads
    /// `launch.threads ..`) gives back its registers and one of its threads
    /// issues every stage's bulk tensor copies, each stage behind its empty
    /// mbarrier and completing on its full one; then it leaves the kernel.
    /// The block's own warpgroups take the registers and run the consumers
    /// on each stage once its full barrier completes, then release it. A
    /// consumer that is one gemm of two stage tiles keeps one `wgmma` group
    /// in flight (a stage is released once the group that read it has
    /// completed); other consumers run their statements as written (their
    /// gemms are synchronous) and release the stage after them. Barriers
    /// after the split are named barriers of the consumers alone. When the
    /// run-time test of the copies fails (a row stride not a multiple of 16
    /// bytes, a misaligned tensor) the producer only leaves and the consumers
    /// run the element-wise `cp.async` pipeline.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pipeline_ws(
        &mut self,
        k: usize,
        var: VarId,
        s0: &str,
        n: &str,
        stages: i64,
        prod: &[&Stmt],
        cons: &[&Stmt],
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let (pipe_offset, persistent, pipe) = match &self.ws {
            Some(p) if p.var == var => (p.pipe_offset, p.outer.is_some(), p.pipe_type()),
            _ => {
                return Err(err(
                    "internal error: a warp-specialized pipeline without its plan",
                ))
            }
        };
        let name = ident(&f.var(var).name);
        let tiles: Vec<BufId> = f.schedule.pipelines[&var].tiles.clone();
        let (prologue, pro_off) = match &self.ws {
            Some(p) => (p.prologue.clone(), p.prologue_bar()),
            None => (Vec::new(), 0),
        };
        let (copies, cond) = self.ws_copies(prod, &prologue)?;
        let gemm = self.stage_gemm(cons, &tiles);
        self.line(&format!(
            "// T.Pipelined: {stages} stages, warp-specialized: a producer warpgroup issues {} bulk tensor copies per stage{}",
            prod.len(),
            if persistent { " (its loop runs in the producer's copy of the persistent loop)" } else { "" }
        ));
        self.line("{");
        self.depth += 1;
        let split = self.ws.as_ref().and_then(|p| p.split.clone());
        let s0 = match &split {
            // This block's range of the iterations: the r-th of `blocks`
            // contiguous ones (none past the end); all of them when the
            // launch is not in clusters (then only the first block runs).
            Some(sp) => {
                let b = sp.blocks;
                self.line(&format!("const int tl_kall{k} = {n};"));
                self.line(&format!(
                    "const int tl_kper{k} = (tl_kall{k} + {}) / {b};",
                    b - 1
                ));
                self.line(&format!(
                    "const int tl_klo{k} = tl_ksplit ? (int)tl_krank * tl_kper{k} : 0;"
                ));
                self.line(&format!(
                    "const int tl_n{k} = tl_ksplit ? max(min(tl_kper{k}, tl_kall{k} - tl_klo{k}), 0) : tl_kall{k};"
                ));
                format!("({s0} + tl_klo{k})")
            }
            None => {
                self.line(&format!("const int tl_n{k} = {n};"));
                s0.to_string()
            }
        };
        let s0 = s0.as_str();
        self.line(&format!(
            "{pipe}* tl_pipe{k} = reinterpret_cast<{pipe}*>(tl_smem + {pipe_offset});"
        ));
        self.line(&format!("const bool tl_use_tma{k} = {cond};"));
        // In a persistent loop the prologue's barriers and the consumers'
        // parity (`tl_wpar`) are the loop's (`persistent_ws`).
        let pro = if persistent {
            "tl_wpro".to_string()
        } else {
            format!("tl_pro{k}")
        };
        if !prologue.is_empty() && !persistent {
            self.line(&format!(
                "tl::tma::Barrier* {pro} = reinterpret_cast<tl::tma::Barrier*>(tl_smem + {pro_off});"
            ));
        }
        let shares = self.shares_tiles();
        if shares {
            // Launched in clusters (a grid whose extents the cluster's
            // divide): each block loads its part of every multicast tile, for
            // the blocks of its group. `tl_mc`: the blocks whose stages this
            // block's copies fill and whose copies fill its own (the union of
            // its groups; 0: no cluster).
            let n = f.launch.cluster * f.launch.cluster_y;
            self.line(&format!(
                "const bool tl_cl{k} = tl::tma::cluster_ctas() == {n};"
            ));
            self.line(&format!(
                "const unsigned tl_rank{k} = tl::tma::cluster_rank();"
            ));
            // (Every group holds the block itself, which fills the tiles it
            // loads alone.)
            let groups: BTreeSet<String> = self
                .ws
                .as_ref()
                .map(|p| p.multicast.iter().map(|&(_, g)| g.mask(f, k)).collect())
                .unwrap_or_default();
            let mask = match groups.len() {
                1 => groups.into_iter().collect::<Vec<_>>().join(""),
                _ => format!("({})", groups.into_iter().collect::<Vec<_>>().join(" | ")),
            };
            self.line(&format!(
                "const unsigned tl_mc{k} = (tl_use_tma{k} && tl_cl{k}) ? {mask} : 0u;"
            ));
        }
        if !persistent {
            self.ws_split_roles(
                &format!("tl_pipe{k}"),
                &format!("tl_use_tma{k}"),
                shares.then_some(k),
                (!prologue.is_empty()).then_some((pro.as_str(), 1)),
                |w| {
                    // The prologue's copies first, on their own barrier.
                    if !prologue.is_empty() {
                        let bytes: i64 = prologue.iter().map(|c| f.buf(c.dst).const_bytes()).sum();
                        w.line(&format!("tl::tma::arrive_expect_tx({pro}, {bytes});"));
                        for c in &prologue {
                            w.tma_load(c, &w.name(c.dst), &pro)?;
                        }
                    }
                    w.line(&format!("{pipe}::State tl_st{k};"));
                    w.ws_produce(k, &name, s0, &copies, &[])
                },
            )?;
        }
        // The consumers.
        self.ws_split = true;
        self.line(&format!("if (tl_use_tma{k}) {{"));
        self.depth += 1;
        let parity = if persistent { "tl_wpar" } else { "0" };
        if !prologue.is_empty() {
            self.line(&format!(
                "tl::tma::wait({pro}, {parity});  // the prologue's tiles have landed"
            ));
        }
        match (gemm, f.schedule.pipelines[&var].rotate) {
            (Some(g), _) => self.ws_consume_gemm(k, g, &pipe)?,
            (None, Some(rot)) => self.ws_consume_rotated(k, &name, s0, &pipe, &tiles, cons, rot)?,
            (None, None) => self.ws_consume(k, &name, s0, &pipe, &tiles, cons)?,
        }
        if !prologue.is_empty() && persistent && !self.ws.as_ref().is_some_and(|p| p.release_late) {
            // Every gemm that read the prologue's tiles has completed: the
            // producer may load the next tile's.
            self.release_prologue();
        }
        self.depth -= 1;
        self.line("} else {");
        self.depth += 1;
        // The fallback: the cp.async pipeline of the same loop, where an
        // operand at an aligned pitch keeps cp.async when only the other one
        // is odd (`pipeline_gemm_unaligned`).
        if !prologue.is_empty() {
            // Without bulk copies the consumers copy the prologue's tiles.
            for c in &prologue {
                self.copy_tile(c, super::pipeline::COPY_CHECK, None)?;
            }
            self.line("tl::cp_async_commit();");
            self.line("tl::cp_async_wait<0>();");
            self.barrier();
        }
        let loop_ = Loop {
            k,
            name: &name,
            s0,
            stages,
            tiles: &tiles,
            prod,
        };
        match (gemm, self.copy_conds(prod)) {
            (Some(g), Some(conds)) => {
                let words: Vec<Option<Vec<String>>> = prod
                    .iter()
                    .map(|x| TileCopy::of(x).and_then(|c| self.words_cond(&c)))
                    .collect();
                self.pipeline_gemm_unaligned(k, g, &loop_, &conds, &words)?
            }
            (Some(g), None) => self.pipeline_gemm(k, g, stages, |w, it| {
                loop_.producers(w, it, Some(&[super::pipeline::COPY_SCALAR]))
            })?,
            (None, _) => self.pipeline_loop(&loop_, cons)?,
        }
        self.line("tl::cp_async_wait<0>();");
        self.depth -= 1;
        self.line("}");
        // Every consumer has read its last stage before the tiles' bytes
        // are reused.
        self.barrier();
        if let Some(sp) = split {
            self.split_sum(&sp)?;
        }
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// The bulk tensor copies of a warp-specialized pipeline's producers and
    /// the run-time test that they can run (else the `cp.async` fallback).
    /// `prologue`: the copies it issues before them, which the test covers
    /// too (a misaligned Q then sends K and V to the fallback as well: one
    /// test for the producer's every copy).
    pub(super) fn ws_copies(
        &self,
        prod: &[&Stmt],
        prologue: &[TileCopy],
    ) -> Result<(Vec<TileCopy>, String), Diagnostic> {
        let copies: Vec<TileCopy> = prod
            .iter()
            .map(|x| TileCopy::of(x))
            .collect::<Option<_>>()
            .ok_or_else(|| err("internal error: a warp-specialized producer is not a tile copy"))?;
        let mut cond: Vec<String> = copies
            .iter()
            .chain(prologue)
            .filter_map(|c| self.vec_cond(c))
            .flatten()
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect();
        if cond.is_empty() {
            cond.push("true".into());
        }
        Ok((copies, cond.join(" && ")))
    }

    /// The split of a warp-specialized block into its roles: one thread
    /// initializes `pipe` (and the `prologue` mbarrier, when the producer
    /// issues copies ahead of the stages) and the block syncs; the producer warpgroup gives
    /// back its registers, its first thread runs `produce` when `use_tma`
    /// holds, and it leaves the kernel; the consumers take the registers.
    /// `shared`: the number `k` of a pipeline whose tiles the blocks of a
    /// cluster share (its flags `tl_cl{k}`, `tl_mc{k}`).
    pub(super) fn ws_split_roles(
        &mut self,
        pipe: &str,
        use_tma: &str,
        shared: Option<usize>,
        prologue: Option<(&str, i64)>,
        produce: impl FnOnce(&mut Self) -> Result<(), Diagnostic>,
    ) -> Result<(), Diagnostic> {
        let threads = self.f.launch.threads;
        let (consumer_regs, maps) = match &self.ws {
            Some(p) => (p.consumer_regs, p.maps.len()),
            None => {
                return Err(err(
                    "internal error: a warp-specialized split without its plan",
                ))
            }
        };
        // The producer thread asks for its tensor maps first: the copy
        // engine's fetch of a descriptor then overlaps the barrier setup
        // instead of delaying the first copy.
        let prefetch: Vec<String> = (0..maps)
            .map(|i| format!("tl::tma::prefetch(&tl_tmap{i});"))
            .collect();
        self.line(&format!(
            "if ({use_tma} && threadIdx.x == {threads}) {{ {} }}",
            prefetch.join(" ")
        ));
        if let Some(k) = shared {
            if prologue.is_some() {
                return Err(err(
                    "internal error: a prologue in a pipeline whose tiles a cluster shares",
                ));
            }
            // Each empty barrier waits for the consumer warps of every block
            // in `tl_mc` (the block itself among them; 0: no cluster, its
            // own warps); the barriers are set up in all blocks before any
            // copies or arrives into another.
            self.line(&format!(
                "if (threadIdx.x == 0) {pipe}->init((tl_mc{k} ? __popc(tl_mc{k}) : 1) * {});",
                threads / 32
            ));
            self.line(&format!(
                "if (tl_cl{k}) tl::tma::cluster_sync_init(); else __syncthreads();"
            ));
        } else {
            // The prologue's full barrier takes the producer's one arrival,
            // its empty one (a persistent loop's second) one per consumer
            // warp; the pipe's init fences them all.
            let init = format!("{pipe}->init({});", threads / 32);
            self.line(&match prologue {
                Some((b, 1)) => format!("if (threadIdx.x == 0) {{ tl::tma::init({b}, 1); {init} }}"),
                Some((b, _)) => format!(
                    "if (threadIdx.x == 0) {{ tl::tma::init({b}, 1); tl::tma::init({b} + 1, {}); {init} }}",
                    threads / 32
                ),
                None => format!("if (threadIdx.x == 0) {init}"),
            });
            self.line("__syncthreads();");
        }
        self.line(&format!("if (threadIdx.x >= {threads}) {{"));
        self.depth += 1;
        self.line(&format!("tl::tma::setmaxnreg_dec<{WS_PRODUCER_REGS}>();"));
        self.line(&format!("if ({use_tma} && threadIdx.x == {threads}) {{"));
        self.depth += 1;
        produce(self)?;
        self.depth -= 1;
        self.line("}");
        self.line("return;");
        self.depth -= 1;
        self.line("}");
        self.line(&format!("tl::tma::setmaxnreg_inc<{consumer_regs}>();"));
        Ok(())
    }

    /// The producer thread's loop over one pipeline's `tl_n{k}` stages on
    /// state `tl_st{k}`: wait for the stage to be free, announce its bytes,
    /// issue its copies. `late`: a persistent loop's prologue copies, issued
    /// after the first `stages` stages' (`WsPlan::release_late`).
    pub(super) fn ws_produce(
        &mut self,
        k: usize,
        name: &str,
        s0: &str,
        copies: &[TileCopy],
        late: &[TileCopy],
    ) -> Result<(), Diagnostic> {
        let deferred = self.ws.as_ref().map_or(Vec::new(), |p| p.deferred.clone());
        if !late.is_empty() {
            // The stage whose copies come last before the prologue's: the
            // earlier stages were freed by the last tile's consumers inside
            // its loop, a later one needs this tile's consumers, who wait
            // for the prologue's tiles.
            let stages = self.ws.as_ref().map_or(1, |p| p.stages);
            self.line(&format!(
                "const int tl_pro{k} = (tl_n{k} < {stages} ? tl_n{k} : {stages}) - 1;"
            ));
        }
        self.line(&format!(
            "for (int tl_i{k} = 0; tl_i{k} < tl_n{k}; ++tl_i{k}) {{"
        ));
        self.depth += 1;
        self.line(&format!("const int {name} = {s0} + tl_i{k};"));
        // Each group of the stage's tiles (`WsPlan::deferred`: the second)
        // behind its own empty barrier, completing on its own full one.
        let (first, second): (Vec<&TileCopy>, Vec<&TileCopy>) =
            copies.iter().partition(|c| !deferred.contains(&c.dst));
        for (g, group) in [first, second].into_iter().enumerate() {
            if group.is_empty() {
                continue;
            }
            let bytes: i64 = group.iter().map(|c| self.f.buf(c.dst).const_bytes()).sum();
            let tg = if g == 0 {
                String::new()
            } else {
                format!("<{g}>")
            };
            self.line(&format!(
                "tl_pipe{k}->producer_acquire{tg}(tl_st{k}, {bytes});"
            ));
            for c in group {
                let dst = self.stage_base(c.dst, &format!("tl_st{k}.stage"));
                let bar = format!("tl_pipe{k}->full_bar{tg}(tl_st{k})");
                let shared = self
                    .ws
                    .as_ref()
                    .and_then(|p| p.multicast.iter().find(|m| m.0 == c.dst).map(|m| m.1));
                if let Some(g) = shared {
                    self.line(&format!("if (tl_mc{k}) {{"));
                    self.depth += 1;
                    self.tma_load_part(c, &dst, &bar, g, k)?;
                    self.depth -= 1;
                    self.line("} else {");
                    self.depth += 1;
                    self.tma_load(c, &dst, &bar)?;
                    self.depth -= 1;
                    self.line("}");
                } else {
                    self.tma_load(c, &dst, &bar)?;
                }
            }
        }
        self.line(&format!("tl_st{k}.advance();"));
        if !late.is_empty() {
            self.persistent_prologue(late, Some(&format!("tl_i{k} == tl_pro{k}")))?;
        }
        self.depth -= 1;
        self.line("}");
        if !late.is_empty() {
            // A tile without stages still gets its prologue's tiles.
            self.persistent_prologue(late, Some(&format!("tl_n{k} <= 0")))?;
        }
        if self.shares_tiles() {
            // No block leaves while another block's consumers may still
            // arrive on its barriers: the producer waits for the last
            // releases (the other blocks' copies into this one landed before
            // its consumers finished), instead of a cluster barrier at the
            // end, whose releasing arrival is a whole-GPU memory barrier.
            self.line(&format!(
                "if (tl_mc{k}) tl_pipe{k}->producer_tail(tl_st{k});"
            ));
        }
        Ok(())
    }

    /// The consumers of a warp-specialized pipeline whose stage is one gemm
    /// (`stage_gemm`): one `wgmma` group in flight.
    fn ws_consume_gemm(&mut self, k: usize, g: &Gemm, pipe: &str) -> Result<(), Diagnostic> {
        let (lib, args, _) = self.gemm_shape(g)?;
        if lib != "tl::wg" {
            return Err(err(
                "internal error: a warp-specialized pipeline needs a wgmma gemm",
            ));
        }
        let mma = format!("tl::wg::MmaAsync<{args}>");
        let acc = self.name(g.c);
        self.line(&format!("{mma}::begin({acc});"));
        if self.f.buf(g.a).dtype.is_f8() {
            return self.ws_consume_gemm_f8(k, g, pipe, &mma);
        }
        self.ws_state(k, pipe, true);
        self.line(&format!(
            "for (int tl_i{k} = 0; tl_i{k} < tl_n{k}; ++tl_i{k}) {{"
        ));
        self.depth += 1;
        self.line(&format!("tl_pipe{k}->consumer_wait(tl_st{k});"));
        let st = format!("tl_st{k}.stage");
        self.line(&format!(
            "{mma}::issue({}, {}, {acc});",
            self.stage_base(g.a, &st),
            self.stage_base(g.b, &st)
        ));
        self.line(&format!("{mma}::wait<1>({acc});"));
        let cl = self.release_cluster(k);
        self.line(&format!(
            "if (tl_i{k} > 0) tl_pipe{k}->consumer_release(tl_prev{k}{cl});"
        ));
        self.line(&format!("tl_prev{k} = tl_st{k};"));
        self.line(&format!("tl_st{k}.advance();"));
        self.depth -= 1;
        self.line("}");
        self.line(&format!("{mma}::wait<0>({acc});"));
        self.line(&format!(
            "if (tl_n{k} > 0) tl_pipe{k}->consumer_release(tl_prev{k}{cl});"
        ));
        Ok(())
    }

    /// [`Self::ws_consume_gemm`] for fp8 operands: each stage is summed into
    /// a register tile of its own and added to the accumulator in f32 once
    /// its group completed (the tensor cores' fp8 sums are narrower than
    /// f32). `MmaAsync::consume_promoted` alternates two such tiles, so one
    /// group stays in flight while the previous stage is added.
    fn ws_consume_gemm_f8(
        &mut self,
        k: usize,
        g: &Gemm,
        pipe: &str,
        mma: &str,
    ) -> Result<(), Diagnostic> {
        let acc = self.name(g.c);
        let (a, b) = (self.stage_base(g.a, "tl_s"), self.stage_base(g.b, "tl_s"));
        self.ws_state(k, pipe, false);
        let cl = self.release_cluster(k);
        self.line(&format!(
            "{mma}::consume_promoted(tl_pipe{k}, tl_st{k}, tl_n{k}, {acc}, \
             [&](int tl_s) {{ return {a}; }}, [&](int tl_s) {{ return {b}; }}{cl});"
        ));
        Ok(())
    }

    /// The consumers of a warp-specialized pipeline in general: each
    /// iteration waits for its stage, runs the loop's statements on it and
    /// releases it (after the warp's lanes all finished: `__syncwarp`).
    fn ws_consume(
        &mut self,
        k: usize,
        name: &str,
        s0: &str,
        pipe: &str,
        tiles: &[BufId],
        cons: &[&Stmt],
    ) -> Result<(), Diagnostic> {
        self.ws_state(k, pipe, false);
        self.line(&format!(
            "for (int tl_i{k} = 0; tl_i{k} < tl_n{k}; ++tl_i{k}) {{"
        ));
        self.depth += 1;
        self.line(&format!("const int {name} = {s0} + tl_i{k};"));
        self.line(&format!("tl_pipe{k}->consumer_wait(tl_st{k});"));
        for &t in tiles {
            self.stage.insert(t, format!("tl_st{k}.stage"));
        }
        let r = cons.iter().try_for_each(|x| self.stmt(x));
        for t in tiles {
            self.stage.remove(t);
        }
        r?;
        self.line("__syncwarp();");
        let cl = self.release_cluster(k);
        self.line(&format!("tl_pipe{k}->consumer_release(tl_st{k}{cl});"));
        self.line(&format!("tl_st{k}.advance();"));
        self.depth -= 1;
        self.line("}");
        Ok(())
    }
}
