//! The serial loop around a persistent warp-specialized pipeline
//! (`WsPlan::outer`, a `T::persistent` kernel's loop over its tiles): the
//! producer's own copy of the loop, the consumers' pipe states carried from
//! tile to tile, and the per-tile prologue tiles' barriers.

use super::*;

impl Writer<'_> {
    /// The producer's copies of a persistent loop's prologue tiles, once the
    /// consumers have released the last tile's (a fresh empty barrier's
    /// parity-1 wait returns at once); under `cond` if given.
    pub(super) fn persistent_prologue(
        &mut self,
        prologue: &[TileCopy],
        cond: Option<&str>,
    ) -> Result<(), Diagnostic> {
        if let Some(c) = cond {
            self.line(&format!("if ({c}) {{"));
            self.depth += 1;
        }
        let bytes: i64 = prologue
            .iter()
            .map(|c| self.f.buf(c.dst).const_bytes())
            .sum();
        self.line(
            "tl::tma::wait(tl_wpro + 1, tl_wpar ^ 1u);  // the consumers released the last tile's",
        );
        self.line(&format!("tl::tma::arrive_expect_tx(tl_wpro, {bytes});"));
        for c in prologue {
            self.tma_load(c, &self.name(c.dst), "tl_wpro")?;
        }
        self.line("tl_wpar ^= 1u;");
        if cond.is_some() {
            self.depth -= 1;
            self.line("}");
        }
        Ok(())
    }

    /// The consumers' pipe state(s) of pipeline `k`: declared here, or, in a
    /// persistent loop, references to the state that outlives its tiles.
    pub(super) fn ws_state(&mut self, k: usize, pipe: &str, with_prev: bool) {
        let persistent = self.ws.as_ref().is_some_and(|p| p.outer.is_some());
        match (persistent, with_prev) {
            (false, false) => self.line(&format!("{pipe}::State tl_st{k};")),
            (false, true) => self.line(&format!("{pipe}::State tl_st{k}, tl_prev{k};")),
            (true, with_prev) => {
                self.line(&format!("{pipe}::State& tl_st{k} = tl_wst;"));
                if with_prev {
                    self.line(&format!("{pipe}::State& tl_prev{k} = tl_wprev;"));
                }
            }
        }
    }

    /// The serial loop around a persistent warp-specialized pipeline
    /// (`WsPlan::outer`): the pipe is set up once; the producer warpgroup
    /// runs its own copy of the loop with only the scalar bindings and shared
    /// tiles declared before the pipeline and the pipeline's copies, so it fills the next tile's
    /// stages while the consumers still run this tile's epilogue; the
    /// consumers run the loop as written, their pipe states carried from
    /// tile to tile (`ws_state`).
    pub(super) fn persistent_ws(
        &mut self,
        var: VarId,
        start: &Expr,
        extent: &Expr,
        body: &Stmt,
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let (inner, pipe_offset, pipe) = match &self.ws {
            Some(p) => (p.var, p.pipe_offset, p.pipe_type()),
            None => {
                return Err(err(
                    "internal error: a persistent pipeline without its plan",
                ))
            }
        };
        let items = body.items();
        let Some(at) = items
            .iter()
            .position(|x| matches!(x, Stmt::For { var: v, .. } if *v == inner))
        else {
            return Err(err(
                "internal error: a persistent loop without its pipeline",
            ));
        };
        let Stmt::For {
            start: i_start,
            extent: i_extent,
            body: i_body,
            ..
        } = items[at]
        else {
            return Err(err(
                "internal error: a persistent loop without its pipeline",
            ));
        };
        let producers = f.schedule.pipelines[&inner].tiles.len();
        let i_items = i_body.items();
        // Released late (`WsPlan::release_late`), the prologue's tiles are
        // free only after the last tile's epilogue: the producer first fills
        // the stages the last tile's loop freed, so this tile's keys and
        // values load during that epilogue, and the consumers release at the
        // end of the body.
        let (prologue, pro_off, late) = match &self.ws {
            Some(p) => (p.prologue.clone(), p.prologue_bar(), p.release_late),
            None => (Vec::new(), 0, false),
        };
        let (copies, cond) = self.ws_copies(&i_items[..producers.min(i_items.len())], &prologue)?;
        let o = ident(&f.var(var).name);
        let s0 = self.expr(start)?;
        let e = self.expr(extent)?;
        let end = if s0 == "0" { e } else { format!("{s0} + {e}") };
        let header = format!("for (int {o} = {s0}; {o} < {end}; ++{o})");
        self.line("// T.serial around a warp-specialized pipeline: one pipe for every iteration; the producer runs the loop too");
        self.line("{");
        self.depth += 1;
        self.line(&format!(
            "{pipe}* tl_wpipe = reinterpret_cast<{pipe}*>(tl_smem + {pipe_offset});"
        ));
        self.line(&format!("const bool tl_wuse = {cond};"));
        if !prologue.is_empty() {
            // Full, then empty: the producer loads a tile's prologue tiles
            // once the consumers have released the last tile's.
            self.line(&format!(
                "tl::tma::Barrier* tl_wpro = reinterpret_cast<tl::tma::Barrier*>(tl_smem + {pro_off});"
            ));
        }
        let k = self.nest_counter;
        self.nest_counter += 1;
        let bars = (!prologue.is_empty()).then_some(("tl_wpro", 2));
        self.ws_split_roles("tl_wpipe", "tl_wuse", None, bars, |w| {
            w.line(&format!("{pipe}* tl_pipe{k} = tl_wpipe;"));
            w.line(&format!("{pipe}::State tl_st{k};"));
            if !prologue.is_empty() {
                w.line("unsigned tl_wpar = 0;");
            }
            w.line(&format!("{header} {{"));
            w.depth += 1;
            // The scalars and shared tiles the copies name, and the prologue's
            // copies; nothing else of the consumers' prologue.
            for x in &items[..at] {
                match x {
                    Stmt::Let { .. } => w.stmt(x)?,
                    Stmt::Alloc { buf, .. } if f.buf(*buf).scope == Scope::Shared => w.stmt(x)?,
                    _ => {}
                }
            }
            if !prologue.is_empty() && !late {
                w.persistent_prologue(&prologue, None)?;
            }
            w.line(&format!("const int tl_n{k} = {};", w.expr(i_extent)?));
            let name = ident(&f.var(inner).name);
            let i_s0 = w.expr(i_start)?;
            let after = if late { &prologue[..] } else { &[] };
            w.ws_produce(k, &name, &i_s0, &copies, after)?;
            w.depth -= 1;
            w.line("}");
            Ok(())
        })?;
        self.line(&format!("{pipe}::State tl_wst, tl_wprev;"));
        if !prologue.is_empty() {
            self.line("unsigned tl_wpar = 0;");
        }
        self.ws_split = true;
        self.block(&header, &mut |w| {
            w.stmt(body)?;
            if late {
                // The last reader of the bytes the prologue's tiles share
                // is done (its generic-proxy accesses ordered before the
                // next tile's bulk copies into them).
                w.line("if (tl_wuse) {");
                w.depth += 1;
                w.line("tl::wg::fence_proxy_async();");
                w.release_prologue();
                w.depth -= 1;
                w.line("}");
            }
            Ok(())
        })?;
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// Each consumer warp's arrival on the persistent loop's prologue-empty
    /// barrier (the producer then loads the next tile's prologue tiles), and
    /// the flip of the consumers' prologue parity.
    pub(super) fn release_prologue(&mut self) {
        self.line("__syncwarp();");
        self.line("if ((threadIdx.x & 31) == 0) tl::tma::arrive(tl_wpro + 1);");
        self.line("tl_wpar ^= 1u;");
    }
}
