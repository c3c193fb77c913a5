//! Layout conflicts: a `T::parallel` nest that needs two fixed fragment
//! layouts that cannot both hold.
//!
//! A `T::gemm` fixes the layout of its accumulator: which thread holds
//! which element is decided by the gemm (on CUDA, the `mma.sync` register
//! order), not by the loops that read it. A `T::parallel` nest is mapped to
//! threads so that each iteration runs where the elements it touches live.
//! One fixed fragment in a nest decides that mapping, however it is indexed.
//! Two fixed fragments (or one, indexed two ways) placed differently in the
//! same iteration (`acc1[i, j]` and `acc2[j, i]`) leave no mapping that
//! keeps both in their threads' registers: that is a conflict, reported at
//! the statement of the nest that makes it, with both buffers and accesses.
//!
//! What is not a conflict: a fixed fragment read at a position that is not a
//! placement of the whole nest (a broadcast `acc[i, 0]`, a shifted
//! `acc[i, j + 1]`): that is a read of another thread's element, which
//! `demote_fragments` serves from shared memory, as it does for non-fixed
//! fragments (`row_max[i]`). And one accumulator fed by several gemms: its
//! layout depends only on its shape and the block size, so they agree.
//!
//! This runs at the end of the frontend, target-independently (so a kernel
//! compiles for both targets or for neither). The message points at the
//! source statement of the nest that makes the conflict, which the frontend
//! records per nest (`NestInfo`): one source statement may become several
//! IR statements.

use crate::diag::{Diagnostic, SpanRange};
use crate::ir::*;
use std::collections::{BTreeSet, HashMap};

/// Where the frontend found a `T::parallel` nest: its header, its loop
/// variables' source names, and for each source statement of its body the
/// index of the first IR statement it became, with its span.
#[derive(Debug, Clone)]
pub struct NestInfo {
    pub header: SpanRange,
    pub names: Vec<String>,
    pub stmts: Vec<(usize, SpanRange)>,
}

/// Nests by their outermost loop variable.
pub type NestSpans = HashMap<VarId, NestInfo>;

pub fn check(f: &PrimFunc, nests: &NestSpans) -> Vec<Diagnostic> {
    let mut fixed = BTreeSet::new();
    f.body.visit(&mut |s| {
        if let Stmt::Gemm(g) = s {
            fixed.insert(g.c);
        }
    });
    let mut out = Vec::new();
    if fixed.is_empty() {
        return out;
    }
    f.body.visit(&mut |s| {
        let Some(n) = s.parallel_nest() else {
            return;
        };
        // Only whole nests: the inner loops of `T::parallel([m, n])` are
        // nests too.
        let Some(info) = nests.get(&n.vars[0]) else {
            return;
        };
        // (buffer, indices, placement, top-level statement of the body)
        let mut seen: Vec<(BufId, Vec<Expr>, Vec<usize>, usize)> = Vec::new();
        let items = n.body.items();
        for (k, item) in items.into_iter().enumerate() {
            let mut note = |b: BufId, idx: &[Expr]| {
                if !fixed.contains(&b) {
                    return;
                }
                let shape = f.buf(b).const_shape().unwrap_or_default();
                let Some(p) = placement(&shape, idx, &n) else {
                    return;
                };
                if !seen.iter().any(|(x, i, _, _)| *x == b && i == idx) {
                    seen.push((b, idx.to_vec(), p, k));
                }
            };
            item.visit_exprs(&mut |e| {
                if let Expr::Load(b, idx, _) = e {
                    note(*b, idx);
                }
            });
            item.visit(&mut |x| {
                if let Stmt::Store { buf, idx, .. } = x {
                    note(*buf, idx);
                }
            });
        }
        let clash = seen.iter().enumerate().find_map(|(k, a)| {
            seen[k + 1..]
                .iter()
                .find(|b| b.2 != a.2)
                .map(|b| (a.clone(), b.clone()))
        });
        if let Some(((b1, i1, _, _), (b2, i2, _, at))) = clash {
            let show = |b: BufId, idx: &[Expr]| {
                let parts: Vec<String> = idx
                    .iter()
                    .map(|e| match e {
                        Expr::Var(v, _) => n
                            .vars
                            .iter()
                            .position(|x| x == v)
                            .and_then(|p| info.names.get(p).cloned())
                            .unwrap_or_else(|| f.var(*v).name.clone()),
                        e => e.as_int().map(|x| x.to_string()).unwrap_or_default(),
                    })
                    .collect();
                format!("{}[{}]", f.buf(b).name, parts.join(", "))
            };
            let (a1, a2) = (show(b1, &i1), show(b2, &i2));
            let msg = if b1 == b2 {
                format!(
                    "layout conflict: one `T::parallel` iteration accesses the gemm accumulator \
                     `{n1}` as `{a1}` and as `{a2}`; `{n1}`'s layout is fixed by its `T::gemm`, and no thread \
                     holds both elements. Copy `{n1}` into a shared tile (`T::copy({n1}, s)`) and \
                     read the other access from there",
                    n1 = f.buf(b1).name,
                )
            } else {
                format!(
                    "layout conflict: one `T::parallel` iteration accesses `{a1}` and `{a2}`, but \
                     `{n1}` and `{n2}` are gemm accumulators whose layouts are fixed by their `T::gemm`s, and \
                     no thread holds both elements. Index both the same way, or copy `{n2}` into a \
                     shared tile (`T::copy({n2}, s)`) and read it from there",
                    n1 = f.buf(b1).name,
                    n2 = f.buf(b2).name,
                )
            };
            // The source statement holding the second access.
            let span = info
                .stmts
                .iter()
                .rev()
                .find(|(first, _)| *first <= at)
                .map_or(info.header, |(_, s)| *s);
            out.push(Diagnostic::new(span, msg));
        }
    });
    out
}

/// If `buf[idx]` places the buffer over the whole nest (after leading unit
/// dims indexed by 0, each index is a distinct nest variable running over
/// that dim), the nest dim of each buffer dim.
fn placement(shape: &[i64], idx: &[Expr], n: &Nest<'_>) -> Option<Vec<usize>> {
    let lead = shape.len().checked_sub(n.vars.len())?;
    if idx.len() != shape.len()
        || shape[..lead].iter().any(|&d| d != 1)
        || idx[..lead].iter().any(|e| e.as_int() != Some(0))
    {
        return None;
    }
    let mut perm = Vec::new();
    for (d, e) in idx[lead..].iter().enumerate() {
        let Expr::Var(v, _) = e else {
            return None;
        };
        let p = n.vars.iter().position(|x| x == v)?;
        if perm.contains(&p) || n.extents[p] != shape[lead + d] {
            return None;
        }
        perm.push(p);
    }
    Some(perm)
}

#[cfg(test)]
mod tests {
    use crate::frontend::parse_kernel_source;

    fn kernel(body: &str) -> String {
        format!(
            r#"
            #[tile::kernel(b = 64, threads = 128)]
            fn k(a: Tensor<f16, (b, b)>, c: TensorMut<f32, (b, b)>) {{
                T::kernel(1, threads, |bx| {{
                    let a_s = T::alloc_shared::<f16>([b, b]);
                    let acc1 = T::alloc_fragment::<f32>([b, b]);
                    let acc2 = T::alloc_fragment::<f32>([b, b]);
                    let f = T::alloc_fragment::<f32>([b, b]);
                    T::copy(a, a_s);
                    T::clear(acc1);
                    T::clear(acc2);
                    T::gemm(a_s, a_s, acc1);
                    T::gemm(a_s, a_s, acc2, transpose_b = true);
                    {body}
                }});
            }}"#
        )
    }

    fn errors(body: &str) -> Vec<String> {
        match parse_kernel_source(&kernel(body)) {
            Ok(_) => Vec::new(),
            Err(d) => d.into_iter().map(|d| d.message).collect(),
        }
    }

    #[test]
    fn transposed_accumulators_conflict() {
        let e = errors(
            "for (i, j) in T::parallel([b, b]) { c[(i, j)] = acc1[(i, j)] + acc2[(j, i)]; }",
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("`acc1[i, j]` and `acc2[j, i]`"), "{}", e[0]);
    }

    #[test]
    fn one_accumulator_indexed_two_ways_conflicts() {
        let e = errors(
            "for (i, j) in T::parallel([b, b]) { c[(i, j)] = acc1[(i, j)] - acc1[(j, i)]; }",
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("as `acc1[i, j]` and as `acc1[j, i]`"),
            "{}",
            e[0]
        );
    }

    #[test]
    fn agreeing_or_broadcast_accesses_do_not() {
        for body in [
            // Same placement of both.
            "for (i, j) in T::parallel([b, b]) { c[(i, j)] = acc1[(i, j)] + acc2[(i, j)]; }",
            // Both transposed the same way.
            "for (i, j) in T::parallel([b, b]) { c[(i, j)] = acc1[(j, i)] + acc2[(j, i)]; }",
            // One fixed fragment, read transposed: the nest follows it.
            "for (i, j) in T::parallel([b, b]) { c[(i, j)] = acc1[(j, i)]; }",
            // A broadcast read is not a placement.
            "for (i, j) in T::parallel([b, b]) { c[(i, j)] = acc1[(i, j)] - acc2[(i, 0)]; }",
            // A fragment no gemm writes is not fixed.
            "for (i, j) in T::parallel([b, b]) { f[(i, j)] = acc1[(i, j)]; }
             for (i, j) in T::parallel([b, b]) { c[(i, j)] = f[(j, i)] + acc2[(i, j)]; }",
        ] {
            assert!(errors(body).is_empty(), "{body}: {:?}", errors(body));
        }
    }
}
