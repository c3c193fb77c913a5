//! `T::parallel` nests: the thread partition `vectorize` chose, vector
//! accesses, and the per-chunk lanes.

use super::*;

impl Writer<'_> {
    /// Emits a partitioned `T::parallel` nest.
    pub(super) fn nest(&mut self, n: Nest<'_>) -> Result<(), Diagnostic> {
        let f = self.f;
        let acc = accesses(n.body)
            .into_iter()
            .find_map(|(b, _)| match f.buf(b).layout {
                Some(l) if l.is_accumulator() => Some((b, l)),
                _ => None,
            });
        if let Some((acc, layout)) = acc {
            return self.mma_nest(n, acc, layout);
        }
        let rows = accesses(n.body)
            .into_iter()
            .find_map(|(b, _)| f.buf(b).layout.filter(|l| l.is_rows()));
        if let Some(layout) = rows {
            return self.rows_nest(n, layout);
        }
        let plan = f.schedule.nests.get(&n.vars[0]);
        let v = plan.map_or(1, |p| p.vector);
        // Dynamic row lengths decide the width at run time (uniform per
        // launch): the widest form whose dims are multiples of it, then
        // 4-byte words, then the plain form.
        let tiers: Vec<(i64, Vec<VarId>, &[(BufId, Vec<Expr>)])> = plan
            .into_iter()
            .flat_map(|p| {
                let wide = p.wide.clone().map(|(w, d)| (w, d, &p.wide_vectorized[..]));
                let mid = p.mid.clone().map(|(w, d)| (w, d, &p.mid_vectorized[..]));
                wide.into_iter().chain(mid)
            })
            .collect();
        if !tiers.is_empty() {
            for (i, (width, dims, vectorized)) in tiers.iter().enumerate() {
                let dims: BTreeSet<VarId> = dims.iter().copied().collect();
                let cond: Vec<String> = dims
                    .iter()
                    .map(|d| format!("{} % {width} == 0", ident(&f.var(*d).name)))
                    .collect();
                let open = if i == 0 { "if" } else { "} else if" };
                self.line(&format!("{open} ({}) {{", cond.join(" && ")));
                self.depth += 1;
                self.nest_at(&n, *width, vectorized)?;
                self.depth -= 1;
            }
            self.line("} else {");
            self.depth += 1;
            let vectorized = plan.map(|p| p.vectorized.clone()).unwrap_or_default();
            self.nest_at(&n, v, &vectorized)?;
            self.depth -= 1;
            self.line("}");
            return Ok(());
        }
        let vectorized = plan.map(|p| p.vectorized.clone()).unwrap_or_default();
        self.nest_at(&n, v, &vectorized)
    }

    /// Emits a nest at width `v`, with the accesses `vectorize` chose done as
    /// one vector access per chunk.
    pub(super) fn nest_at(
        &mut self,
        n: &Nest<'_>,
        v: i64,
        vectorized: &[(BufId, Vec<Expr>)],
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let threads = f.launch.threads;
        let total: i64 = n.extents.iter().product();
        let per = threads * v;
        let iters = (total + per - 1) / per;
        let k = self.nest_counter;
        self.nest_counter += 1;
        let batch = f.schedule.nests.get(&n.vars[0]).map_or(1, |p| p.batch);
        if v == 1 && batch > 1 && self.row_owner.is_none() {
            if let Some(one) = n.one_store() {
                return self.batched(n, k, batch, &one);
            }
        }
        let it = format!("tl_it{k}");
        let flat = format!("tl_flat{k}");
        let inner_var = *n.vars.last().unwrap_or(&VarId(0));

        // Vectorized form: [let]* store, store contiguous and aligned; or
        // [let]* if (guard) { [let]* store }, whose guard `vectorize` showed
        // to have one value per chunk (tested once, at the first lane).
        let lets = lets_in(n.body);
        let chunk_guard = n.store_guard().filter(|_| !vectorized.is_empty() && v > 1);
        let items: Vec<&Stmt> = match (&chunk_guard, n.body) {
            (Some((_, pre, then)), _) => pre.iter().chain(then).copied().collect(),
            (None, Stmt::Seq(v)) => v.iter().collect(),
            (None, s) => vec![s],
        };
        let vec_ok = |b: BufId, idx: &[Expr]| -> bool {
            vectorized
                .iter()
                .any(|(x, y)| *x == b && y.as_slice() == idx)
        };
        let mut vloads = Vec::new();
        let mut vstore = None;
        if !vectorized.is_empty() {
            if let Some(Stmt::Store {
                buf, idx, value, ..
            }) = items.iter().find(|s| matches!(s, Stmt::Store { .. }))
            {
                if vec_ok(*buf, idx) {
                    vstore = Some((*buf, idx.clone(), format!("tl_st{k}.x[tl_v]")));
                }
                let mut loads = Vec::new();
                value.visit(&mut |e| {
                    if let Expr::Load(b, i, _) = e {
                        loads.push((*b, i.clone()));
                    }
                });
                for it_l in items.iter() {
                    if let Stmt::Let { value, .. } = it_l {
                        value.visit(&mut |e| {
                            if let Expr::Load(b, i, _) = e {
                                loads.push((*b, i.clone()));
                            }
                        });
                    }
                }
                for (b, i) in loads {
                    if vec_ok(b, &i)
                        && !vloads
                            .iter()
                            .any(|(x, y, _): &VecAccess| *x == b && *y == i)
                    {
                        let name = format!("tl_ld{k}_{}.x[tl_v]", vloads.len());
                        vloads.push((b, i, name));
                    }
                }
            }
        }

        self.line(&format!(
            "// T.Parallel{:?}: {total} elements over {threads} threads, {v} per chunk",
            n.extents
        ));
        // Register fragments need constant indices: unroll fully. A scalar
        // nest over memory only (bounds-checked edges, unaligned fallbacks)
        // keeps a few iterations in flight without the register cost.
        let registers = accesses(n.body)
            .iter()
            .any(|(b, _)| f.buf(*b).scope == Scope::Fragment);
        if registers || v > 1 || iters <= 8 {
            self.line("#pragma unroll");
        } else {
            self.line("#pragma unroll 4");
        }
        self.line(&format!("for (int {it} = 0; {it} < {iters}; ++{it}) {{"));
        self.depth += 1;
        let tid = "(int)threadIdx.x";
        if v == 1 {
            self.line(&format!("const int {flat} = {it} * {threads} + {tid};"));
        } else {
            self.line(&format!(
                "const int {flat} = ({it} * {threads} + {tid}) * {v};"
            ));
        }
        let guard = total % per != 0;
        if guard {
            self.line(&format!("if ({flat} < {total}) {{"));
            self.depth += 1;
        }
        self.nest_indices(n, &flat, (v > 1).then(|| format!("tl_base{k}")));
        // Hoisted vector loads, addressed at the chunk's first lane.
        let base_name = format!("tl_base{k}");
        let at_base = |w: &Writer, b: BufId, idx: &[Expr]| -> Result<String, Diagnostic> {
            let idx: Vec<Expr> = idx.iter().map(|e| e.inline_lets(&lets)).collect();
            let s = w.offset(b, &idx, Some((inner_var, base_name.as_str())))?;
            Ok(format!("{}[{s}]", w.name(b)))
        };
        // A pipeline producer's 16-byte chunk copy: one `cp.async`, no registers.
        let mut cp_async = None;
        if let (true, None, Some((sb, sidx, _)), [(gb, gidx, _)]) =
            (self.producer, &chunk_guard, &vstore, vloads.as_slice())
        {
            let plain_copy = items.iter().any(|x| {
                matches!(x, Stmt::Store { buf, value: Expr::Load(lb, li, _), .. }
                    if buf == sb && lb == gb && li == gidx)
            });
            if plain_copy
                && f.buf(*sb).dtype.bytes() * v == 16
                && f.buf(*gb).dtype == f.buf(*sb).dtype
            {
                cp_async = Some((at_base(self, *sb, sidx)?, at_base(self, *gb, gidx)?, *gb));
            }
        }
        if let Some((d, g, gb)) = cp_async {
            self.line(&format!("tl::cp_async16(&{d}, &{g}, true);"));
            self.note_align(gb, v);
        } else {
            self.chunk(
                n,
                k,
                v,
                &it,
                inner_var,
                vloads,
                vstore,
                &at_base,
                chunk_guard,
            )?;
        }
        if guard {
            self.depth -= 1;
            self.line("}");
        }
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// The nest's loop variables from the flat element index `flat` (outer
    /// ones shared by all lanes of a chunk); the innermost is declared as
    /// `inner` instead where given (a chunk's first lane).
    fn nest_indices(&mut self, n: &Nest<'_>, flat: &str, inner: Option<String>) {
        let f = self.f;
        let nd = n.vars.len();
        let mut stride = 1i64;
        let mut strides = vec![0i64; nd];
        for d in (0..nd).rev() {
            strides[d] = stride;
            stride *= n.extents[d];
        }
        for d in 0..nd {
            let name = ident(&f.var(n.vars[d]).name);
            let e = if d == 0 && nd == 1 {
                flat.to_string()
            } else if d == 0 {
                format!("{flat} / {}", strides[0])
            } else if d == nd - 1 {
                format!("{flat} % {}", n.extents[d])
            } else {
                format!("{flat} / {} % {}", strides[d], n.extents[d])
            };
            let decl = match &inner {
                Some(x) if d == nd - 1 => x.clone(),
                _ => name,
            };
            self.line(&format!("const int {decl} = {e};"));
        }
    }

    /// A one-element nest of one store in batches (`NestPlan::batch`): each
    /// thread evaluates the values and addresses of `batch` iterations, so
    /// their loads are in flight together, then stores them.
    fn batched(
        &mut self,
        n: &Nest<'_>,
        k: usize,
        batch: i64,
        one: &OneStore<'_>,
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let threads = f.launch.threads;
        let total: i64 = n.extents.iter().product();
        let iters = (total + threads - 1) / threads;
        let Stmt::Store {
            buf, idx, value, ..
        } = one.store
        else {
            return Err(err("internal error: a batched nest's body is not a store"));
        };
        let t = ty(f.buf(*buf).dtype)?;
        let (ib, u, it, flat) = (
            format!("tl_ib{k}"),
            format!("tl_u{k}"),
            format!("tl_it{k}"),
            format!("tl_flat{k}"),
        );
        self.line(&format!(
            "// T.Parallel{:?}: {total} elements over {threads} threads, 1 per chunk, \
             the loads of {batch} iterations before their stores",
            n.extents
        ));
        // One batch when the thread has no more iterations than that.
        let outer = iters > batch;
        if outer {
            self.line("#pragma unroll 1");
            self.line(&format!(
                "for (int {ib} = 0; {ib} < {iters}; {ib} += {batch}) {{"
            ));
            self.depth += 1;
        }
        // Past the last element: a ragged last iteration or a batch past
        // the thread's iterations. With neither and no guard, every lane
        // stores.
        let edge = total % (threads * batch) != 0;
        let some = edge || one.guard.is_some();
        self.line(&format!("{t} tl_val{k}[{batch}];"));
        self.line(&format!("{t}* tl_dst{k}[{batch}];"));
        if some {
            self.line(&format!("bool tl_ok{k}[{batch}];"));
        }
        self.line("#pragma unroll");
        self.line(&format!("for (int {u} = 0; {u} < {batch}; ++{u}) {{"));
        self.depth += 1;
        if outer {
            self.line(&format!("const int {it} = {ib} + {u};"));
        } else {
            self.line(&format!("const int {it} = {u};"));
        }
        self.line(&format!(
            "const int {flat} = {it} * {threads} + (int)threadIdx.x;"
        ));
        if some {
            self.line(&format!("tl_ok{k}[{u}] = false;"));
        }
        let mut open = 0;
        if edge {
            self.line(&format!("if ({flat} < {total}) {{"));
            self.depth += 1;
            open += 1;
        }
        self.nest_indices(n, &flat, None);
        self.lane = Some(Lane {
            slot: it.clone(),
            vloads: Vec::new(),
            vstore: None,
            row: None,
            thread_rows: None,
        });
        let r = (|| -> Result<(), Diagnostic> {
            for s in &one.pre {
                self.stmt(s)?;
            }
            if let Some(g) = one.guard {
                let c = self.expr(g)?;
                self.line(&format!("if ({c}) {{"));
                self.depth += 1;
                open += 1;
            }
            for s in &one.then {
                self.stmt(s)?;
            }
            let v = self.expr(value)?;
            let target = self.access(*buf, idx)?;
            self.line(&format!("tl_val{k}[{u}] = {v};"));
            self.line(&format!("tl_dst{k}[{u}] = &{target};"));
            if some {
                self.line(&format!("tl_ok{k}[{u}] = true;"));
            }
            Ok(())
        })();
        self.lane = None;
        r?;
        for _ in 0..open {
            self.depth -= 1;
            self.line("}");
        }
        self.depth -= 1;
        self.line("}");
        self.line("#pragma unroll");
        self.line(&format!("for (int {u} = 0; {u} < {batch}; ++{u}) {{"));
        let when = if some {
            format!("if (tl_ok{k}[{u}]) ")
        } else {
            String::new()
        };
        self.line(&format!("  {when}*tl_dst{k}[{u}] = tl_val{k}[{u}];"));
        self.line("}");
        if outer {
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }

    /// The lanes of one chunk of a nest: hoisted vector loads, the body per
    /// lane, the vector store.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn chunk(
        &mut self,
        n: &Nest<'_>,
        k: usize,
        v: i64,
        it: &str,
        inner_var: VarId,
        vloads: Vec<VecAccess>,
        vstore: Option<VecAccess>,
        at_base: &AtBase<'_>,
        guard: Option<ChunkGuard<'_>>,
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let name = ident(&f.var(inner_var).name);
        let thread_rows = Some((
            n.vars.len(),
            crate::analysis::ownership::thread_row_stride(&n.extents, f.launch.threads),
        ));
        // The bounds guard, uniform over the chunk: its lets, then the guard
        // at the first lane, in a scope of their own. A let may read a
        // register fragment (`let x = acc[(i, j)] * s;`): at the first lane's
        // register, with plain loads (the chunk's vector loads come after).
        let body = match &guard {
            Some((cond, pre, then)) => {
                self.line(&format!("bool tl_in{k};"));
                self.line("{");
                self.depth += 1;
                self.line(&format!("const int {name} = tl_base{k};"));
                self.lane = Some(Lane {
                    slot: if v == 1 {
                        it.to_string()
                    } else {
                        format!("{it} * {v}")
                    },
                    vloads: Vec::new(),
                    vstore: None,
                    row: None,
                    thread_rows,
                });
                let r = pre.iter().try_for_each(|s| self.stmt(s));
                let c = r.and_then(|()| self.expr(cond));
                self.lane = None;
                let c = c?;
                self.line(&format!("tl_in{k} = {c};"));
                self.depth -= 1;
                self.line("}");
                self.line(&format!("if (tl_in{k}) {{"));
                self.depth += 1;
                Stmt::Seq(pre.iter().chain(then).map(|&s| s.clone()).collect())
            }
            None => n.body.clone(),
        };
        for (i, (b, idx, _)) in vloads.iter().enumerate() {
            let t = ty(f.buf(*b).dtype)?;
            let a = at_base(self, *b, idx)?;
            self.line(&format!(
                "const tl::vec<{t}, {v}> tl_ld{k}_{i} = *(const tl::vec<{t}, {v}>*)(&{a});"
            ));
            self.note_align(*b, v);
        }
        if let Some((b, _, _)) = &vstore {
            let t = ty(f.buf(*b).dtype)?;
            self.line(&format!("tl::vec<{t}, {v}> tl_st{k};"));
        }
        let slot = if v == 1 {
            it.to_string()
        } else {
            format!("{it} * {v} + tl_v")
        };
        if v > 1 {
            self.line("#pragma unroll");
            self.line(&format!("for (int tl_v = 0; tl_v < {v}; ++tl_v) {{"));
            self.depth += 1;
            self.line(&format!("const int {name} = tl_base{k} + tl_v;"));
        }
        self.lane = Some(Lane {
            slot,
            vloads,
            vstore: vstore.clone(),
            row: None,
            thread_rows,
        });
        let r = self.stmt(&body);
        self.lane = None;
        r?;
        if v > 1 {
            self.depth -= 1;
            self.line("}");
        }
        if let Some((b, idx, _)) = &vstore {
            let t = ty(f.buf(*b).dtype)?;
            let a = at_base(self, *b, idx)?;
            self.line(&format!("*(tl::vec<{t}, {v}>*)(&{a}) = tl_st{k};"));
            self.note_align(*b, v);
        }
        if guard.is_some() {
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }
}
