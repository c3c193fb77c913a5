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
//! issues the bulk tensor copies, the block's warpgroups run the `wgmma`s.

use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::BTreeMap;

pub fn run(mut f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    f.schedule.pipelines = plan(&f);
    if let Some(var) = warp_specialized(&f) {
        if let Some(p) = f.schedule.pipelines.get_mut(&var) {
            p.warp_specialized = true;
        }
    }
    Ok(f)
}

/// Threads a warp-specialized pipeline adds to the block: its producer warpgroup.
pub const PRODUCER_THREADS: i64 = 128;

/// The pipelined loop that becomes warp-specialized, if one does (at most one
/// per kernel). It must be a pipeline whose producers are all bulk tensor
/// copies (`CopyInst::Tma`) and whose consumer is one `wgmma` gemm of two of
/// its tiles over all the block's warpgroups; it must stand in the kernel's
/// top-level sequence, after statements that only bind scalars, declare
/// buffers or write registers (the producer warpgroup runs those too, then
/// leaves at the loop); and the kernel must have no block reduction (their
/// code synchronizes the whole block, which the producer has left).
fn warp_specialized(f: &PrimFunc) -> Option<VarId> {
    if f.launch.threads % 128 != 0 || f.launch.threads + PRODUCER_THREADS > 1024 {
        return None;
    }
    let mut reduces = false;
    f.body
        .visit(&mut |s| reduces |= matches!(s, Stmt::Reduce(_)));
    if reduces {
        return None;
    }
    let top: Vec<&Stmt> = match &f.body {
        Stmt::Seq(v) => v.iter().collect(),
        x => vec![x],
    };
    for (i, s) in top.iter().enumerate() {
        if let Stmt::For {
            var,
            kind: ForKind::Pipelined { stages },
            body,
            ..
        } = s
        {
            let prefix_ok = top[..i].iter().all(|x| registers_only(f, x));
            return (prefix_ok && *stages >= 2 && ws_body(f, body)).then_some(*var);
        }
    }
    None
}

/// The body of a pipelined loop that a producer warpgroup can feed: bulk
/// tensor copies, then one `wgmma` gemm over all the block's warpgroups
/// reading two distinct tiles the copies fill.
fn ws_body(f: &PrimFunc, body: &Stmt) -> bool {
    let items: Vec<&Stmt> = match body {
        Stmt::Seq(v) => v.iter().collect(),
        x => vec![x],
    };
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
    let rest: Vec<&&Stmt> = items[tiles.len()..]
        .iter()
        .filter(|x| !matches!(x, Stmt::Barrier))
        .collect();
    let [Stmt::Gemm(g)] = rest.as_slice() else {
        return false;
    };
    matches!(g.inst, GemmInst::Wgmma { wgs } if wgs * 128 == f.launch.threads)
        && !g.clear
        && g.a != g.b
        && tiles.contains(&g.a)
        && tiles.contains(&g.b)
}

/// A statement that touches no memory but registers: scalar bindings, buffer
/// declarations, and loops storing only into fragments or per-thread arrays.
fn registers_only(f: &PrimFunc, s: &Stmt) -> bool {
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
            let items: Vec<&Stmt> = match n.body {
                Stmt::Seq(v) => v.iter().collect(),
                x => vec![x],
            };
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
        let items: Vec<&Stmt> = match &**body {
            Stmt::Seq(v) => v.iter().collect(),
            x => vec![x],
        };
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
            },
        );
    });
    pipes
}
