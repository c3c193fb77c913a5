//! Software pipelines (`plan_pipelines`): stage buffers, the producer
//! copies issued ahead, and the GEMM main-loop schedule (the Hopper
//! warp-specialized form is `ws`).

use super::*;

/// How a tile copy moves its chunks (the device library's `tl::COPY_*`):
/// decided before a loop (vectors, or element by element) or per call.
pub(super) const COPY_VEC: &str = "tl::COPY_VEC";
pub(super) const COPY_SCALAR: &str = "tl::COPY_SCALAR";
pub(super) const COPY_CHECK: &str = "tl::COPY_CHECK";
pub(super) const COPY_WORDS: &str = "tl::COPY_WORDS";

/// A pipelined loop as the `cp.async` forms emit it: its number `k` (names
/// `tl_n{k}`, `tl_i{k}`, ..), loop variable, start, stages, stage tiles and
/// producer statements.
pub(super) struct Loop<'a, 's> {
    pub(super) k: usize,
    pub(super) name: &'a str,
    pub(super) s0: &'a str,
    pub(super) stages: i64,
    pub(super) tiles: &'a [BufId],
    pub(super) prod: &'a [&'s Stmt],
}

impl Loop<'_, '_> {
    /// The producers of iteration `iter` into stage `iter % stages`. `mode`
    /// (`tl::COPY_VEC`/`_SCALAR`/`_CHECK` for each tile copy in order; the
    /// last one for the rest): every producer is a tile copy whose chunk
    /// alignment was decided before the loop; past the last tile the copies
    /// still run, with no rows (zero fill of a stage nobody reads), so the
    /// loop body has no branch.
    pub(super) fn producers(
        &self,
        w: &mut Writer,
        iter: &str,
        mode: Option<&[&str]>,
    ) -> Result<(), Diagnostic> {
        let (k, stages) = (self.k, self.stages);
        let live = format!("{iter} < tl_n{k}");
        match mode {
            Some(_) => w.line("{"),
            None => w.line(&format!("if ({live}) {{")),
        }
        w.depth += 1;
        w.line(&format!("const int {} = {} + {iter};", self.name, self.s0));
        w.line(&format!("const int tl_stage_p{k} = ({iter}) % {stages};"));
        for &t in self.tiles {
            w.stage.insert(t, format!("tl_stage_p{k}"));
        }
        w.producer = true;
        let r = self.copies(w, &live, mode);
        w.producer = false;
        r?;
        w.depth -= 1;
        w.line("}");
        w.line("tl::cp_async_commit();");
        Ok(())
    }
}

impl Loop<'_, '_> {
    /// The producers' statements in order, each tile copy in its mode;
    /// two consecutive copies both element by element go as one pair
    /// (`Writer::copy_tile_pair`).
    fn copies(&self, w: &mut Writer, live: &str, mode: Option<&[&str]>) -> Result<(), Diagnostic> {
        let mode_of = |i: usize| mode.map(|m| m[i.min(m.len() - 1)]);
        let mut copies = 0;
        let mut i = 0;
        while i < self.prod.len() {
            let x = self.prod[i];
            let Some(c) = TileCopy::of(x) else {
                w.stmt(x)?;
                i += 1;
                continue;
            };
            let Some(m) = mode_of(copies) else {
                w.copy_tile(&c, COPY_CHECK, None)?;
                copies += 1;
                i += 1;
                continue;
            };
            let next = self.prod.get(i + 1).and_then(|y| TileCopy::of(y));
            if let Some(d) =
                next.filter(|_| m == COPY_SCALAR && mode_of(copies + 1) == Some(COPY_SCALAR))
            {
                if w.copy_tile_pair(&c, &d, Some(live))?.is_some() {
                    copies += 2;
                    i += 2;
                    continue;
                }
            }
            w.copy_tile(&c, m, Some(live))?;
            copies += 1;
            i += 1;
        }
        Ok(())
    }
}

impl Writer<'_> {
    /// The pipelined loop's consumer when it is one tensor-core gemm reading
    /// only this pipeline's tiles with an even number of 16-deep k steps: then
    /// the next stage's first fragments can be fetched during the current
    /// stage's last multiplies (`tl::GemmPipe::run`).
    pub(super) fn stage_gemm<'s>(&self, cons: &[&'s Stmt], tiles: &[BufId]) -> Option<&'s Gemm> {
        let [Stmt::Gemm(g)] = cons else {
            return None;
        };
        let (_, _, k) = self.gemm_shape(g).ok()?;
        let dt = self.f.buf(g.a).dtype;
        let wgmma_f8 = dt.is_f8() && matches!(g.inst, GemmInst::Wgmma { .. });
        ((matches!(dt, DType::F16 | DType::BF16) || wgmma_f8)
            && tiles.contains(&g.a)
            && tiles.contains(&g.b)
            && g.a != g.b
            && (k / 16) % 2 == 0)
            .then_some(g)
    }

    /// A pointer to the current stage of a (possibly multi-buffered) tile.
    pub(super) fn tile_base(&self, b: BufId) -> String {
        match self.stage.get(&b) {
            Some(st) => self.stage_base(b, st),
            None => self.name(b),
        }
    }

    /// A pointer to stage `stage` (an expression) of a multi-buffered tile.
    pub(super) fn stage_base(&self, b: BufId, stage: &str) -> String {
        let n = self.f.buf(b).const_elems();
        format!("{} + {stage} * {n}", self.name(b))
    }

    /// A software pipeline over `n` iterations with `stages` buffers: the
    /// producers (copies into shared tiles) of iteration `i + stages - 1` are
    /// issued, as `cp.async` where they are aligned chunks, before iteration
    /// `i` computes; `cp.async.wait_group` plus one barrier per iteration
    /// order them. The barrier at the top of iteration `i` also guarantees
    /// that every thread finished reading the buffer the next producers
    /// overwrite (it was last read in iteration `i - 1`).
    pub(super) fn pipeline(
        &mut self,
        var: VarId,
        start: &Expr,
        extent: &Expr,
        body: &Stmt,
        stages: i64,
        producers: usize,
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let k = self.nest_counter;
        self.nest_counter += 1;
        let items = body.items();
        let (prod, rest) = items.split_at(producers);
        // Barriers around the producers are replaced by the pipeline's own.
        let mut cons: Vec<&Stmt> = rest
            .iter()
            .copied()
            .skip_while(|x| matches!(x, Stmt::Barrier))
            .collect();
        while matches!(cons.last(), Some(Stmt::Barrier)) {
            cons.pop();
        }
        let tiles: Vec<BufId> = f.schedule.pipelines[&var].tiles.clone();
        let name = ident(&f.var(var).name);
        let s0 = self.expr(start)?;
        let n = self.expr(extent)?;
        if f.schedule.pipelines[&var].warp_specialized {
            return self.pipeline_ws(k, var, &s0, &n, stages, prod, &cons);
        }
        self.line(&format!(
            "// T.Pipelined: {stages} stages, {} producer copies overlapped with compute",
            prod.len()
        ));
        self.line("{");
        self.depth += 1;
        self.line(&format!("const int tl_n{k} = {n};"));
        let loop_ = Loop {
            k,
            name: &name,
            s0: &s0,
            stages,
            tiles: &tiles,
            prod,
        };
        if let Some(g) = self.stage_gemm(&cons, &tiles) {
            // All producers tile copies whose chunk alignment can be decided once:
            // two loops, one with only cp.async copies and one with element-wise
            // ones, so the hot loop has no branch between copies and multiplies.
            // (The warp-specialized fallback's per-operand loops,
            // `pipeline_gemm_unaligned`, spilled 140 bytes in the persistent
            // GEMM on sm_80 here, and were measured on Hopper only.)
            match self.copy_conds(prod) {
                Some(conds) => {
                    let all: BTreeSet<&String> = conds.iter().flatten().collect();
                    let all: Vec<&str> = all.into_iter().map(String::as_str).collect();
                    self.line(&format!("if ({}) {{", all.join(" && ")));
                    self.depth += 1;
                    self.pipeline_gemm(k, g, stages, |w, it| {
                        loop_.producers(w, it, Some(&[COPY_VEC]))
                    })?;
                    self.depth -= 1;
                    self.line("} else {");
                    self.depth += 1;
                    self.pipeline_gemm(k, g, stages, |w, it| {
                        loop_.producers(w, it, Some(&[COPY_SCALAR]))
                    })?;
                    self.depth -= 1;
                    self.line("}");
                }
                None => self.pipeline_gemm(k, g, stages, |w, it| loop_.producers(w, it, None))?,
            }
        } else {
            self.pipeline_loop(&loop_, &cons)?;
        }
        // Drain: no copy may still be in flight when the tiles are reused.
        self.line("tl::cp_async_wait<0>();");
        self.barrier();
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// Each producer's condition for whole 16-byte chunks (`Writer::vec_cond`),
    /// when every producer is a tile copy that has one.
    pub(super) fn copy_conds(&self, prod: &[&Stmt]) -> Option<Vec<Vec<String>>> {
        prod.iter()
            .map(|x| TileCopy::of(x).and_then(|c| self.vec_cond(&c)))
            .collect()
    }

    /// The GEMM loop of `l` when not all of its copies (conditions `conds`)
    /// can move whole 16-byte vectors. Two copies (A and B): a loop for each
    /// way of moving the two, decided before the loop: an operand moves whole
    /// 16-byte chunks when it can, else 4-byte `cp.async` words when its rows
    /// start on 4-byte boundaries (`words`), else element by element. An
    /// operand at an aligned pitch keeps cp.async when only the other is odd:
    /// 4096×4096×4095 ran about 2× faster than with both element-wise, and
    /// deciding per call inside the loop cost 3–20% where both are odd
    /// (bench/RESULTS.md). Words where one operand moves by elements would
    /// lose the pairing of the two element-wise copies: that case gathers
    /// both. With more copies, each decides per call.
    pub(super) fn pipeline_gemm_unaligned(
        &mut self,
        k: usize,
        g: &Gemm,
        l: &Loop,
        conds: &[Vec<String>],
        words: &[Option<Vec<String>>],
    ) -> Result<(), Diagnostic> {
        if conds.len() != 2 {
            return self.pipeline_gemm(k, g, l.stages, |w, it| {
                l.producers(w, it, Some(&[COPY_CHECK]))
            });
        }
        let word = |i: usize| words.get(i).cloned().flatten();
        let mut cases: Vec<(Vec<String>, [&str; 2])> = Vec::new();
        // One operand whole chunks, the other words or elements.
        for (v, o) in [(0, 1), (1, 0)] {
            let mut modes = [COPY_SCALAR; 2];
            modes[v] = COPY_VEC;
            if let Some(wc) = word(o) {
                let mut m = modes;
                m[o] = COPY_WORDS;
                cases.push(([conds[v].clone(), wc].concat(), m));
            }
            cases.push((conds[v].clone(), modes));
        }
        if let (Some(w0), Some(w1)) = (word(0), word(1)) {
            cases.push(([w0, w1].concat(), [COPY_WORDS; 2]));
        }
        for (i, (cond, modes)) in cases.iter().enumerate() {
            let open = if i == 0 { "if" } else { "} else if" };
            self.line(&format!("{open} ({}) {{", cond.join(" && ")));
            self.depth += 1;
            self.pipeline_gemm(k, g, l.stages, |w, it| l.producers(w, it, Some(modes)))?;
            self.depth -= 1;
        }
        self.line("} else {");
        self.depth += 1;
        self.pipeline_gemm(k, g, l.stages, |w, it| {
            l.producers(w, it, Some(&[COPY_SCALAR]))
        })?;
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// The `cp.async` pipeline's prologue and loop for consumers `cons` (any
    /// statements): at the top of iteration `i`, wait for its copies and
    /// pass one barrier, then issue the producers of iteration
    /// `i + stages - 1` and run the consumers on stage `i % stages`.
    pub(super) fn pipeline_loop(&mut self, l: &Loop, cons: &[&Stmt]) -> Result<(), Diagnostic> {
        let (k, stages) = (l.k, l.stages);
        let emit_producers = |w: &mut Writer, iter: &str| l.producers(w, iter, None);
        self.pipeline_prologue(k, stages, &emit_producers)?;
        self.line(&format!(
            "for (int tl_i{k} = 0; tl_i{k} < tl_n{k}; ++tl_i{k}) {{"
        ));
        self.depth += 1;
        self.line(&format!("tl::cp_async_wait<{}>();", stages - 2));
        self.barrier();
        emit_producers(self, &format!("tl_i{k} + {}", stages - 1))?;
        self.line(&format!("const int {} = {} + tl_i{k};", l.name, l.s0));
        self.line(&format!("const int tl_stage_c{k} = tl_i{k} % {stages};"));
        for &t in l.tiles {
            self.stage.insert(t, format!("tl_stage_c{k}"));
        }
        let r = cons.iter().try_for_each(|x| self.stmt(x));
        for t in l.tiles {
            self.stage.remove(t);
        }
        r?;
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// A pipeline's prologue: the producers of the first `stages - 1` iterations.
    pub(super) fn pipeline_prologue(
        &mut self,
        k: usize,
        stages: i64,
        emit_producers: &impl Fn(&mut Self, &str) -> Result<(), Diagnostic>,
    ) -> Result<(), Diagnostic> {
        self.line("#pragma unroll");
        self.line(&format!(
            "for (int tl_pi{k} = 0; tl_pi{k} < {}; ++tl_pi{k}) {{",
            stages - 1
        ));
        self.depth += 1;
        emit_producers(self, &format!("tl_pi{k}"))?;
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// The rest of [`Self::pipeline`] when its consumer is one tensor-core gemm
    /// (see [`Self::stage_gemm`]). The stage hand-off (wait for the copies of
    /// stage `i + 1`, one barrier) moves from the top of iteration `i + 1` to
    /// just before the last k step of iteration `i`, and the next stage's first
    /// fragments load right after it, overlapping that step's multiplies.
    /// Every ldmatrix of stage `i` (the last step's included) is issued before
    /// that barrier, so the producers of iteration `i + 1`, which refill the
    /// buffer stage `i` was read from, still find it free.
    pub(super) fn pipeline_gemm(
        &mut self,
        k: usize,
        g: &Gemm,
        stages: i64,
        emit_producers: impl Fn(&mut Self, &str) -> Result<(), Diagnostic>,
    ) -> Result<(), Diagnostic> {
        self.pipeline_prologue(k, stages, &emit_producers)?;
        let (lib, args, _) = self.gemm_shape(g)?;
        let base = |w: &Writer, b: BufId, stage: &str| w.stage_base(b, stage);
        self.line(&format!("{lib}::GemmPipe<{args}> tl_g{k};"));
        self.line(&format!("tl::cp_async_wait<{}>();", stages - 2));
        self.barrier();
        self.line(&format!(
            "if (tl_n{k} > 0) tl_g{k}.first({}, {});",
            base(self, g.a, "0"),
            base(self, g.b, "0")
        ));
        self.line(&format!(
            "for (int tl_i{k} = 0; tl_i{k} < tl_n{k}; ++tl_i{k}) {{"
        ));
        self.depth += 1;
        self.line(&format!("const int tl_stage_c{k} = tl_i{k} % {stages};"));
        self.line(&format!(
            "const int tl_stage_n{k} = (tl_i{k} + 1) % {stages};"
        ));
        let (cur, next) = (format!("tl_stage_c{k}"), format!("tl_stage_n{k}"));
        self.line(&format!(
            "tl_g{k}.run({}, {}, {}, [&] {{",
            base(self, g.a, &cur),
            base(self, g.b, &cur),
            self.name(g.c)
        ));
        // The producers go after the first step's multiplies: their address
        // arithmetic then issues while the tensor cores work.
        self.depth += 1;
        emit_producers(self, &format!("tl_i{k} + {}", stages - 1))?;
        self.depth -= 1;
        self.line("}, [&] {");
        self.depth += 1;
        self.line(&format!("tl::cp_async_wait<{}>();", stages - 2));
        self.barrier();
        self.line(&format!(
            "if (tl_i{k} + 1 < tl_n{k}) tl_g{k}.first({}, {});",
            base(self, g.a, &next),
            base(self, g.b, &next)
        ));
        self.depth -= 1;
        self.line("});");
        self.depth -= 1;
        self.line("}");
        Ok(())
    }
}
