//! Inserts `__syncthreads()` where a statement touches shared memory that an
//! earlier statement (since the last barrier) wrote, or writes shared memory
//! an earlier one read. Loop bodies that touch shared memory also get a
//! barrier at their end when the next iteration would conflict with the
//! current one. `T::parallel` nests and `if` statements are treated as units:
//! no barrier is placed inside them (it could be divergent).
//!
//! Buffers that `merge_shared` placed on the same bytes count as one: the
//! first write of a buffer after the last access of another that shares its
//! bytes gets a barrier like any write-after-read of one buffer.

use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::BTreeSet;

pub fn run(mut f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    let body = std::mem::replace(&mut f.body, Stmt::Seq(Vec::new()));
    let mut st = State::default();
    let cx = Cx { f: &f };
    let body = seq(&cx, body, &mut st);
    f.body = body;
    Ok(f)
}

struct Cx<'a> {
    f: &'a PrimFunc,
}

#[derive(Default, Clone)]
pub(crate) struct State {
    pub reads: BTreeSet<BufId>,
    pub writes: BTreeSet<BufId>,
}

impl State {
    fn conflicts(&self, other: &State, pool: &SharedPool) -> bool {
        let hit = |a: &BTreeSet<BufId>, b: &BTreeSet<BufId>| {
            a.iter().any(|&x| b.iter().any(|&y| pool.overlaps(x, y)))
        };
        hit(&self.writes, &other.reads)
            || hit(&self.writes, &other.writes)
            || hit(&self.reads, &other.writes)
    }
    fn absorb(&mut self, other: &State) {
        self.reads.extend(other.reads.iter().copied());
        self.writes.extend(other.writes.iter().copied());
    }
    fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty()
    }
}

/// Shared-memory reads and writes anywhere within `s`.
pub(crate) fn accesses(f: &PrimFunc, s: &Stmt) -> State {
    let mut st = State::default();
    let shared = |b: &BufId| f.buf(*b).scope == Scope::Shared;
    s.visit_exprs(&mut |e| {
        if let Expr::Load(b, _, _) = e {
            if shared(b) {
                st.reads.insert(*b);
            }
        }
    });
    s.visit(&mut |x| match x {
        Stmt::Store { buf, .. } | Stmt::AtomicAdd { buf, .. } if shared(buf) => {
            st.writes.insert(*buf);
        }
        Stmt::Gemm(g) => {
            st.reads
                .extend([g.a, g.b].into_iter().filter(|b| shared(b)));
        }
        // A tile copy CUDA keeps whole (`lower_tile_ops::is_tile_copy`).
        Stmt::Copy { src, dst, .. } => {
            if shared(&src.buf) {
                st.reads.insert(src.buf);
            }
            if shared(&dst.buf) {
                st.writes.insert(dst.buf);
            }
        }
        Stmt::Reduce(r) => {
            if shared(&r.src) {
                st.reads.insert(r.src);
            }
            if shared(&r.dst) {
                st.reads.insert(r.dst);
                st.writes.insert(r.dst);
            }
        }
        _ => {}
    });
    st
}

fn seq(cx: &Cx, s: Stmt, pending: &mut State) -> Stmt {
    let f = cx.f;
    let items = match s {
        Stmt::Seq(v) => v,
        other => vec![other],
    };
    let mut out = Vec::new();
    for s in items {
        let mut acc = accesses(f, &s);
        // A copy a warp-specialized producer issues ahead of its stages
        // (`Pipeline::prologue`) lands on an mbarrier the consumers wait on,
        // not through the block: no barrier orders it.
        if let Stmt::Copy { dst, .. } = &s {
            if f.schedule
                .pipelines
                .values()
                .any(|p| p.prologue.contains(&dst.buf))
            {
                acc.writes.remove(&dst.buf);
            }
        }
        match s {
            Stmt::For {
                var,
                start,
                extent,
                kind,
                body,
                loc,
            } if kind != ForKind::Parallel && !acc.is_empty() => {
                if pending.conflicts(&acc, &f.smem) {
                    out.push(Stmt::Barrier);
                    *pending = State::default();
                }
                if let Some(p) = cx.f.schedule.pipelines.get(&var) {
                    // A software pipeline waits for its copies and syncs at
                    // the top of every iteration, and its producers (the
                    // first statements) fill the stage after the one the
                    // rest reads: only the rest is ordered, from a clean
                    // state, and the loop ends with a barrier of its own.
                    let mut items = match *body {
                        Stmt::Seq(v) => v,
                        other => vec![other],
                    };
                    let rest = items.split_off(p.tiles.len().min(items.len()));
                    let mut inner = State::default();
                    match seq(cx, Stmt::Seq(rest), &mut inner) {
                        Stmt::Seq(v) => items.extend(v),
                        other => items.push(other),
                    }
                    *pending = State::default();
                    out.push(Stmt::For {
                        loc,
                        var,
                        start,
                        extent,
                        kind,
                        body: Box::new(Stmt::Seq(items)),
                    });
                    continue;
                }
                let mut inner = pending.clone();
                let mut body = seq(cx, *body, &mut inner);
                // The next iteration's first accesses against this one's last.
                if inner.conflicts(&acc, &f.smem) {
                    if let Stmt::Seq(v) = &mut body {
                        v.push(Stmt::Barrier);
                    }
                    inner = State::default();
                }
                pending.absorb(&inner);
                pending.absorb(&acc);
                out.push(Stmt::For {
                    loc,
                    var,
                    start,
                    extent,
                    kind,
                    body: Box::new(body),
                });
            }
            Stmt::Seq(v) => {
                let inner = seq(cx, Stmt::Seq(v), pending);
                out.push(inner);
            }
            s => {
                if pending.conflicts(&acc, &f.smem) {
                    out.push(Stmt::Barrier);
                    *pending = State::default();
                }
                pending.absorb(&acc);
                out.push(s);
            }
        }
    }
    Stmt::Seq(out)
}
