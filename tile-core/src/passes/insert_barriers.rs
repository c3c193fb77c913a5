//! Inserts `__syncthreads()` where a statement touches shared memory that an
//! earlier statement (since the last barrier) wrote, or writes shared memory
//! an earlier one read. Loop bodies that touch shared memory also get a
//! barrier at their end when the next iteration would conflict with the
//! current one. `T::parallel` nests and `if` statements are treated as units:
//! no barrier is placed inside them (it could be divergent).

use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::BTreeSet;

pub fn run(mut f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    let body = std::mem::replace(&mut f.body, Stmt::Seq(Vec::new()));
    let mut st = State::default();
    f.body = seq(&f, body, &mut st);
    Ok(f)
}

#[derive(Default, Clone)]
struct State {
    reads: BTreeSet<BufId>,
    writes: BTreeSet<BufId>,
}

impl State {
    fn conflicts(&self, other: &State) -> bool {
        other
            .reads
            .iter()
            .chain(&other.writes)
            .any(|b| self.writes.contains(b))
            || other.writes.iter().any(|b| self.reads.contains(b))
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
fn accesses(f: &PrimFunc, s: &Stmt) -> State {
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

fn seq(f: &PrimFunc, s: Stmt, pending: &mut State) -> Stmt {
    let items = match s {
        Stmt::Seq(v) => v,
        other => vec![other],
    };
    let mut out = Vec::new();
    for s in items {
        let acc = accesses(f, &s);
        match s {
            Stmt::For {
                var,
                start,
                extent,
                kind,
                body,
            } if kind != ForKind::Parallel && !acc.is_empty() => {
                if pending.conflicts(&acc) {
                    out.push(Stmt::Barrier);
                    *pending = State::default();
                }
                let mut inner = pending.clone();
                let mut body = seq(f, *body, &mut inner);
                // The next iteration's first accesses against this one's last.
                if inner.conflicts(&acc) {
                    if let Stmt::Seq(v) = &mut body {
                        v.push(Stmt::Barrier);
                    }
                    inner = State::default();
                }
                pending.absorb(&inner);
                pending.absorb(&acc);
                out.push(Stmt::For {
                    var,
                    start,
                    extent,
                    kind,
                    body: Box::new(body),
                });
            }
            Stmt::Seq(v) => {
                let inner = seq(f, Stmt::Seq(v), pending);
                out.push(inner);
            }
            s => {
                if pending.conflicts(&acc) {
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
