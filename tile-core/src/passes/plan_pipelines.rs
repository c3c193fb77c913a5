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

use crate::diag::Diagnostic;
use crate::ir::*;
use std::collections::BTreeMap;

pub fn run(mut f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    f.schedule.pipelines = plan(&f);
    Ok(f)
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
            },
        );
    });
    pipes
}
