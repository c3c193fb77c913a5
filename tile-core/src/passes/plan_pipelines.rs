//! Decides which `T::pipelined` loops become software pipelines (CUDA) and
//! records them in `PrimFunc::schedule.pipelines`.
//!
//! A loop qualifies when its body opens with producers: statements that each
//! fill one shared tile from global memory only (a tile copy, a `T::parallel`
//! copy nest, or the interior/edge pair `inject_bounds` made of one), into
//! tiles that nothing outside the loop touches and nothing else in the loop
//! writes. Those tiles get `stages` buffers. Runs after `inject_bounds` (it
//! sees the final producer nests) and before `merge_shared` (which reserves
//! the extra buffers) and `insert_barriers` (a pipeline ends with a barrier
//! of its own).
//!
//! On Hopper it also decides which pipeline is warp-specialized
//! (`Pipeline::warp_specialized`): a producer warpgroup added to the block
//! issues the bulk tensor copies, the block's warpgroups run the `wgmma`s;
//! and whether its consumers' two gemms overlap across iterations
//! (`Pipeline::rotate`, `rotate`); and, in clusters of blocks, which of its
//! tiles the blocks of a cluster share (`Pipeline::multicast`, `multicast`);
//! whether they split its iterations (`Pipeline::split`, `split`); and which
//! tiles copied before it its producer issues (`Pipeline::prologue`,
//! `prologue`).

use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::BTreeMap;

mod multicast;
mod prologue;
pub use prologue::loop_sequence;
mod rotate;
mod split;
mod why;

pub fn run(mut f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    f.schedule.pipelines = plan(&f);
    let ws = warp_specialized(&f);
    if let Some((var, persistent)) = ws {
        if let Some(p) = f.schedule.pipelines.get_mut(&var) {
            p.warp_specialized = true;
            p.persistent = persistent;
        }
        let rotation = rotate::rotate(&mut f, var);
        if let Some(p) = f.schedule.pipelines.get_mut(&var) {
            if let Some((rotation, deferred)) = rotation {
                p.rotate = Some(rotation);
                p.deferred_tiles = deferred;
            }
        }
    } else {
        // None is: on Hopper, each pipeline with a `wgmma` says why.
        let vars: Vec<VarId> = f.schedule.pipelines.keys().copied().collect();
        for var in vars {
            let why = why::ws_refusal(&f, var);
            if let Some(p) = f.schedule.pipelines.get_mut(&var) {
                p.ws_why = why;
            }
        }
    }
    // What a cluster shares: the warp-specialized pipeline's tiles, or, when
    // there is none, nothing (each pipeline then says why).
    let vars: Vec<VarId> = match ws {
        Some((var, _)) => vec![var],
        None => f.schedule.pipelines.keys().copied().collect(),
    };
    for var in vars {
        let shared = multicast::multicast(&f, var);
        if let Some(p) = f.schedule.pipelines.get_mut(&var) {
            p.multicast = shared.x;
            p.multicast_y = shared.y;
            p.multicast_why = shared.why;
        }
    }
    // Whether a cluster's blocks split the warp-specialized pipeline's
    // iterations (`T::use_split_k`); every pipeline says why not otherwise.
    let vars: Vec<VarId> = f.schedule.pipelines.keys().copied().collect();
    for var in vars {
        let (split, why) = split::split(&f, var);
        if let Some(p) = f.schedule.pipelines.get_mut(&var) {
            p.split = split;
            p.split_why = why;
        }
    }
    // The tiles copied before the warp-specialized pipeline that its
    // producer issues ahead of the first stage.
    if let Some((var, _)) = ws {
        let tiles = prologue::prologue(&f, var);
        if let Some(p) = f.schedule.pipelines.get_mut(&var) {
            p.prologue = tiles;
        }
    }
    tma_requests_met(&f)?;
    Ok(f)
}

/// A copy the user asked to be a bulk tensor copy (`instruction = "tma"`,
/// recorded as `CopyInst::Tma` on Hopper) is issued so only by the producer
/// of a warp-specialized pipeline (a stage's copy, or one of its prologue):
/// anywhere else it would quietly run as `cp.async`, so that is an error at
/// the copy.
fn tma_requests_met(f: &PrimFunc) -> Result<(), Diagnostic> {
    let ws_tiles: Vec<BufId> = f
        .schedule
        .pipelines
        .values()
        .filter(|p| p.warp_specialized)
        .flat_map(|p| p.tiles.iter().chain(&p.prologue).copied())
        .collect();
    let mut err = None;
    f.body.visit(&mut |s| {
        if let Stmt::Copy {
            dst,
            loc,
            inst: CopyInst::Tma { .. },
            prefer: CopyPref::Tma,
            ..
        } = s
        {
            if err.is_none() && !ws_tiles.contains(&dst.buf) {
                err = Some(Diagnostic::at(
                    *loc,
                    format!(
                        "kernel `{}`: `instruction = \"tma\"`: a bulk tensor copy is issued by the producer of a \
                         warp-specialized pipeline, and this copy is not one's: the producers of a `T::pipelined` \
                         loop (all bulk tensor copies) whose body then runs a `wgmma` gemm over all the block's \
                         warpgroups, at the kernel's top level or in a persistent loop, or a copy into a tile nothing else \
                         writes, before that loop in its sequence (`tile inspect --emit passes`)",
                        f.name
                    ),
                ));
            }
        }
    });
    err.map_or(Ok(()), Err)
}

/// Threads a warp-specialized pipeline adds to the block: its producer warpgroup.
pub const PRODUCER_THREADS: i64 = 128;

/// The pipelined loop that becomes warp-specialized, if one does (at most one
/// per kernel). It must be a pipeline whose producers are all bulk tensor
/// copies (`CopyInst::Tma`) and whose consumers run at least one `wgmma` gemm
/// over all the block's warpgroups reading its tiles (see [`ws_body`]); it
/// must stand in the kernel's top-level sequence, after statements that only
/// bind scalars, declare buffers, write registers, or copy tiles into shared
/// memory with barriers between (the producer warpgroup runs the first kind
/// too, the consumers alone the copies, then the producer leaves at the
/// loop); and every reduction of the kernel must stay in registers (the
/// others synchronize the whole block, which the producer has left).
///
/// The pipelined loop may also be the body of such a top-level serial loop
/// (a persistent kernel's loop over its tiles, see [`persistent_body`]):
/// then the producer runs that loop too, and `true` comes back with the var.
fn warp_specialized(f: &PrimFunc) -> Option<(VarId, bool)> {
    if f.launch.threads % 128 != 0 || f.launch.threads + PRODUCER_THREADS > 1024 {
        return None;
    }
    let mut block_wide = false;
    f.body.visit(&mut |s| {
        if let Stmt::Reduce(r) = s {
            block_wide |= !in_registers(f, r);
        }
    });
    if block_wide {
        return None;
    }
    let top = f.body.items();
    for (i, s) in top.iter().enumerate() {
        let (pipe, persistent) = match s {
            Stmt::For {
                kind: ForKind::Pipelined { .. },
                ..
            } => (*s, false),
            Stmt::For {
                kind: ForKind::Serial,
                body,
                ..
            } if has_pipeline(body) => (persistent_body(f, body)?, true),
            _ => continue,
        };
        let Stmt::For {
            var,
            kind: ForKind::Pipelined { stages },
            body,
            ..
        } = pipe
        else {
            return None;
        };
        let prefix_ok = top[..i]
            .iter()
            .all(|x| registers_only(f, x) || consumer_tile_copy(f, x));
        // Every producer of the pipeline must be a bulk tensor copy.
        let producers = f.schedule.pipelines.get(var).map(|p| p.tiles.len());
        let ok = prefix_ok && *stages >= 2 && ws_body(f, body) == producers;
        return ok.then_some((*var, persistent));
    }
    None
}

/// Whether `s` is a pipelined loop.
fn is_pipelined(s: &Stmt) -> bool {
    matches!(
        s,
        Stmt::For {
            kind: ForKind::Pipelined { .. },
            ..
        }
    )
}

fn has_pipeline(s: &Stmt) -> bool {
    let mut found = false;
    s.visit(&mut |x| found |= is_pipelined(x));
    found
}

/// The pipelined loop of a serial loop's body that the producer warpgroup
/// can run across iterations: the body is statements the producer can skip
/// or evaluate alone (scalar bindings without loads, which it needs for the
/// copies' coordinates; stores into registers, which it skips; bulk tensor
/// copies into tiles nothing else writes, which it issues), then the
/// pipelined loop, then anything the consumers run alone (the epilogue), with
/// no other pipelined loop.
fn persistent_body<'a>(f: &PrimFunc, body: &'a Stmt) -> Option<&'a Stmt> {
    persistent_split(f, body).ok()
}

/// What keeps a serial loop's body from being a persistent body
/// ([`persistent_body`]), for `ws_why`.
enum NotPersistent<'a> {
    NoPipeline,
    SecondPipeline,
    /// The first statement before the pipelined loop the producer cannot
    /// run, and where it stands (from 0).
    Prefix(usize, &'a Stmt),
}

/// [`persistent_body`], or the reason it is not one.
fn persistent_split<'a>(f: &PrimFunc, body: &'a Stmt) -> Result<&'a Stmt, NotPersistent<'a>> {
    let items = body.items();
    let at = items
        .iter()
        .position(|x| is_pipelined(x))
        .ok_or(NotPersistent::NoPipeline)?;
    if items[at + 1..].iter().any(|x| has_pipeline(x)) {
        return Err(NotPersistent::SecondPipeline);
    }
    let prefix_ok = |x: &Stmt| match x {
        Stmt::Let { value, .. } => !has_load(value),
        Stmt::Barrier => true,
        // A tile the producer loads per tile ahead of its stages (attention's
        // Q, `prologue`).
        Stmt::Copy { .. } => prologue::ahead(f, x),
        x => register_stores_only(f, x),
    };
    match items[..at].iter().position(|x| !prefix_ok(x)) {
        Some(i) => Err(NotPersistent::Prefix(i, items[i])),
        None => Ok(items[at]),
    }
}

fn has_load(e: &Expr) -> bool {
    let mut found = false;
    e.visit(&mut |x| found |= matches!(x, Expr::Load(..)));
    found
}

/// Loops storing only into fragments or per-thread arrays, binding no
/// scalar the producer would need (`T::clear` of an accumulator).
fn register_stores_only(f: &PrimFunc, s: &Stmt) -> bool {
    let mut binds = false;
    s.visit(&mut |x| {
        binds |= matches!(
            x,
            Stmt::Let { .. } | Stmt::Local { .. } | Stmt::Assign { .. }
        )
    });
    !binds && registers_only(f, s)
}

/// A row reduction of a tensor-core accumulator into per-row registers whose
/// rows lie within quads (`wgmma`, or `mma.sync` with warps along M only):
/// partials and shuffles, no barrier.
pub fn in_registers(f: &PrimFunc, r: &Reduce) -> bool {
    let (src, dst) = (f.buf(r.src), f.buf(r.dst));
    let rows_in_quads = matches!(
        src.layout,
        Some(Layout::Wgmma { .. }) | Some(Layout::Mma { wn: 1, .. })
    );
    rows_in_quads && r.dim == 1 && dst.layout.is_some_and(Layout::is_rows)
}

/// A statement before the split that the consumers run alone: a tile copy
/// into shared memory (its barrier is the block's, which the producer still
/// joins), or a barrier.
fn consumer_tile_copy(f: &PrimFunc, s: &Stmt) -> bool {
    match s {
        Stmt::Barrier => true,
        Stmt::Copy {
            src,
            dst,
            inst: CopyInst::CpAsyncTile { .. } | CopyInst::Tma { .. },
            ..
        } => f.buf(src.buf).scope == Scope::Global && f.buf(dst.buf).scope == Scope::Shared,
        _ => false,
    }
}

/// The body of a pipelined loop that a producer warpgroup can feed: bulk
/// tensor copies, then the consumers: statements with at least one `wgmma`
/// gemm over all the block's warpgroups reading a tile the copies fill, no
/// gemm that clears its accumulator, and no pipelined loop of their own. Every gemm of the consumers is
/// synchronous, so a stage is free once its iteration's statements ran.
/// Returns the number of copies when the body qualifies.
fn ws_body(f: &PrimFunc, body: &Stmt) -> Option<usize> {
    let items = body.items();
    let tiles: Vec<BufId> = items
        .iter()
        .map_while(|x| match x {
            Stmt::Copy {
                dst,
                inst: CopyInst::Tma { .. },
                ..
            } => Some(dst.buf),
            _ => None,
        })
        .collect();
    if tiles.is_empty() {
        return None;
    }
    let (mut wgmma, mut nested) = (false, false);
    for x in &items[tiles.len()..] {
        x.visit(&mut |y| match y {
            Stmt::Gemm(g) => {
                wgmma |= matches!(g.inst, GemmInst::Wgmma { wgs } if wgs * 128 == f.launch.threads)
                    && (tiles.contains(&g.a) || tiles.contains(&g.b));
                // The asynchronous forms only accumulate.
                nested |= g.clear;
            }
            y if is_pipelined(y) => nested = true,
            _ => {}
        });
    }
    (wgmma && !nested).then_some(tiles.len())
}

/// A statement that touches no memory but registers: scalar bindings, buffer
/// declarations, and loops storing only into fragments or per-thread arrays.
pub(super) fn registers_only(f: &PrimFunc, s: &Stmt) -> bool {
    let mut ok = true;
    s.visit(&mut |x| match x {
        Stmt::Seq(_)
        | Stmt::Let { .. }
        | Stmt::Local { .. }
        | Stmt::Assign { .. }
        | Stmt::Alloc { .. }
        | Stmt::For { .. }
        | Stmt::If { .. } => {}
        Stmt::Store { buf, .. } => {
            ok &= matches!(f.buf(*buf).scope, Scope::Local | Scope::Fragment)
        }
        _ => ok = false,
    });
    s.visit_exprs(&mut |e| {
        if let Expr::Load(b, _, _) = e {
            ok &= matches!(f.buf(*b).scope, Scope::Local | Scope::Fragment);
        }
    });
    ok
}

/// The shared tile a pipeline producer fills: a tile copy, or a `T::parallel`
/// copy nest (or the interior/edge pair of one) storing only global data into
/// shared memory.
fn producer_target(f: &PrimFunc, s: &Stmt) -> Option<BufId> {
    match s {
        Stmt::Copy { dst, .. } => Some(dst.buf),
        Stmt::If {
            then, els: Some(e), ..
        } => {
            let (a, b) = (producer_target(f, then)?, producer_target(f, e)?);
            (a == b).then_some(a)
        }
        s => {
            let n = s.parallel_nest()?;
            let items = n.body.items();
            let store = match items.as_slice() {
                [Stmt::If {
                    then, els: None, ..
                }] => then,
                [x] => *x,
                _ => return None,
            };
            let Stmt::Store { buf, value, .. } = store else {
                return None;
            };
            let mut global_only = true;
            value.visit(&mut |e| {
                if let Expr::Load(b, _, _) = e {
                    global_only &= f.buf(*b).scope == Scope::Global;
                }
            });
            (f.buf(*buf).scope == Scope::Shared && global_only).then_some(*buf)
        }
    }
}

fn plan(f: &PrimFunc) -> BTreeMap<VarId, Pipeline> {
    let mut pipes = BTreeMap::new();
    f.body.visit(&mut |s| {
        let Stmt::For {
            var,
            kind: ForKind::Pipelined { stages },
            body,
            ..
        } = s
        else {
            return;
        };
        if *stages < 2 {
            return;
        }
        let items = body.items();
        let targets: Vec<BufId> = items.iter().map_while(|x| producer_target(f, x)).collect();
        if targets.is_empty() {
            return;
        }
        // The tiles must be touched only inside this loop, and written only by
        // its producers.
        let mut outside = false;
        let count = |st: &Stmt, b: BufId| {
            let mut n = 0;
            st.visit_exprs(&mut |e| n += matches!(e, Expr::Load(x, _, _) if *x == b) as usize);
            st.visit(&mut |x| match x {
                Stmt::Store { buf, .. } => n += (*buf == b) as usize,
                Stmt::Copy { src, dst, .. } => n += (src.buf == b || dst.buf == b) as usize,
                Stmt::Gemm(g) => n += (g.a == b || g.b == b) as usize,
                Stmt::Reduce(r) => n += (r.src == b || r.dst == b) as usize,
                _ => {}
            });
            n
        };
        for &b in &targets {
            outside |= count(&f.body, b) != count(s, b);
            let rest = items[targets.len()..].iter().any(|x| {
                let mut w = false;
                x.visit(&mut |y| w |= matches!(y, Stmt::Store { buf, .. } if *buf == b));
                w
            });
            outside |= rest;
        }
        if outside {
            return;
        }
        pipes.insert(
            *var,
            Pipeline {
                stages: *stages,
                tiles: targets,
                warp_specialized: false,
                persistent: false,
                rotate: None,
                deferred_tiles: Vec::new(),
                multicast: Vec::new(),
                multicast_y: Vec::new(),
                multicast_why: None,
                ws_why: None,
                split: None,
                split_why: None,
                prologue: Vec::new(),
            },
        );
    });
    pipes
}
