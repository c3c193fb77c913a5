//! The consumers of a rotated warp-specialized pipeline (`Pipeline::rotate`,
//! decided and reordered by `plan_pipelines`): iteration `i` issues its
//! first gemm, then the last gemm of iteration `i - 1`, and runs its register
//! work while both are in flight, waiting for the last gemm only where the
//! rotation says.

use super::*;

impl Writer<'_> {
    /// Prints the consumers of pipeline `k` (loop variable `name` from `s0`,
    /// `tl_n{k}` iterations, stage tiles `tiles`) for consumer statements
    /// `cons` split as `rot` says:
    ///
    /// ```text
    /// iteration 0:       wait stage; head; first gemm (synchronous); body
    /// iteration i >= 1:  wait stage; head; [wait for this warpgroup's turn;]
    ///                    issue first gemm (stage i); late; issue last gemm
    ///                    (stage i - 1); [pass the turn;] wait for the first;
    ///                    body up to `wait`; wait for the last; release stage i - 1;
    ///                    rest of body
    /// after the loop:    late; last gemm (synchronous); release the last stage;
    ///                    [take the last turn passed]
    /// ```
    ///
    /// With the deferred gemm's tiles on a barrier pair of their own
    /// (`WsPlan::deferred`), "wait stage" waits for the first gemm's tiles
    /// only, which are released as soon as that gemm completed; the last
    /// gemm waits for its own tiles before it is issued and releases them.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ws_consume_rotated(
        &mut self,
        k: usize,
        name: &str,
        s0: &str,
        pipe: &str,
        tiles: &[BufId],
        cons: &[&Stmt],
        rot: Rotation,
    ) -> Result<(), Diagnostic> {
        let n = cons.len();
        let (first, wait) = (rot.first, rot.wait);
        let (Some(Stmt::Gemm(g1)), Some(Stmt::Gemm(g2))) = (cons.get(first), cons.last()) else {
            return Err(err(
                "internal error: a rotated pipeline without its two gemms",
            ));
        };
        let late_at = n - 1 - rot.late;
        // The rotation's indices count the statements `plan_pipelines`
        // reordered; a barrier added since would shift them (none is: the
        // body is register work and gemms of tiles no one writes in it).
        if !(first < wait && wait <= late_at) || cons.iter().any(|x| matches!(x, Stmt::Barrier)) {
            return Err(err("internal error: a rotation out of order"));
        }
        let (lib, args1, _) = self.gemm_shape(g1)?;
        let (lib2, args2) = self.gemm_rs_shape(g2)?;
        if lib != "tl::wg" || lib2 != "tl::wg" {
            return Err(err("internal error: a rotated pipeline needs wgmma gemms"));
        }
        let mma = format!("tl::wg::MmaAsync<{args1}>");
        let rs = format!("tl::wg::RsAsync<{args2}>");
        let (s, acc, p) = (self.name(g1.c), self.name(g2.c), self.name(g2.a));
        let head = &cons[..first];
        let body = &cons[first + 1..late_at];
        let (before, after) = body.split_at(wait - first - 1);
        let late = &cons[late_at..n - 1];
        let cur = format!("tl_st{k}.stage");
        let prev = format!("tl_prev{k}.stage");
        let on = |w: &mut Self, stage: &str| {
            for &t in tiles {
                w.stage.insert(t, stage.to_string());
            }
        };
        let run = |w: &mut Self, xs: &[&Stmt]| xs.iter().try_for_each(|x| w.stmt(x));
        // The deferred gemm's tiles on the pipe's second pair (`<1>`).
        let split = self.ws.as_ref().is_some_and(|p| !p.deferred.is_empty());
        let second = if split { "<1>" } else { "" };
        // Once the first gemm completed: its tiles' release, when they have
        // their own pair.
        let free_first = |w: &mut Self| {
            if split {
                w.line("__syncwarp();");
                w.line(&format!("tl_pipe{k}->consumer_release(tl_st{k});"));
            }
        };
        // With ping-pong (`Rotation::pingpong`) the consumer warpgroups take
        // turns: `step` is `begin`, `wait`, `pass` or `end` of
        // `tl::tma::pingpong_*`; without it nothing is printed.
        let threads = self.f.launch.threads;
        let turn = |w: &mut Self, step: &str| {
            if rot.pingpong {
                w.line(&format!("tl::tma::pingpong_{step}<{threads}>(tl_wg{k});"));
            }
        };
        // An iteration's start: its loop variable, its stage, the statements
        // before the first gemm and that gemm's issue. The steady iterations
        // wait for their turn before the issue (`turns`); iteration 0 does not.
        let start = |w: &mut Self, at: String, turns: bool| -> Result<(), Diagnostic> {
            w.line(&format!("const int {name} = {at};"));
            w.line(&format!("tl_pipe{k}->consumer_wait(tl_st{k});"));
            on(w, &cur);
            run(w, head)?;
            if turns {
                turn(w, "wait");
            }
            w.line(&format!(
                "{mma}::issue({}, {}, {s});",
                w.tile_base(g1.a),
                w.tile_base(g1.b)
            ));
            Ok(())
        };
        // The previous iteration's deferred statements and last gemm, issued
        // on its stage; then, once it completed, that stage's release.
        let defer = |w: &mut Self| -> Result<(), Diagnostic> {
            run(w, late)?;
            if split {
                w.line(&format!("tl_pipe{k}->consumer_wait<1>(tl_prev{k});"));
            }
            on(w, &prev);
            w.line(&format!(
                "{rs}::issue({p}, {}, {acc}, tl_ra{k});",
                w.tile_base(g2.b)
            ));
            Ok(())
        };
        let retire = |w: &mut Self| {
            w.line(&format!("{rs}::wait<0>({acc}, tl_ra{k});"));
            w.line("__syncwarp();");
            w.line(&format!(
                "tl_pipe{k}->consumer_release{second}(tl_prev{k});"
            ));
        };

        self.ws_state(k, pipe, true);
        self.line(&format!("unsigned tl_ra{k}[{rs}::AREGS];"));
        self.line(&format!("{mma}::begin({s});"));
        if rot.pingpong {
            self.line(&format!("const int tl_wg{k} = threadIdx.x / 128;"));
        }
        turn(self, "begin");
        // Iteration 0: nothing in flight before it.
        self.line(&format!("if (tl_n{k} > 0) {{"));
        self.depth += 1;
        start(self, s0.to_string(), false)?;
        self.line(&format!("{mma}::wait<0>({s});"));
        free_first(self);
        run(self, body)?;
        self.line(&format!("tl_prev{k} = tl_st{k};"));
        self.line(&format!("tl_st{k}.advance();"));
        self.depth -= 1;
        self.line("}");
        // Iterations 1 ..: the first gemm of this one and the last of the
        // previous one in flight together.
        self.line(&format!(
            "for (int tl_i{k} = 1; tl_i{k} < tl_n{k}; ++tl_i{k}) {{"
        ));
        self.depth += 1;
        start(self, format!("{s0} + tl_i{k}"), true)?;
        defer(self)?;
        turn(self, "pass");
        on(self, &cur);
        self.line(&format!("{mma}::wait<1>({s});"));
        free_first(self);
        run(self, before)?;
        retire(self);
        run(self, after)?;
        self.line(&format!("tl_prev{k} = tl_st{k};"));
        self.line(&format!("tl_st{k}.advance();"));
        self.depth -= 1;
        self.line("}");
        // The last iteration's deferred gemm.
        self.line(&format!("if (tl_n{k} > 0) {{"));
        self.depth += 1;
        defer(self)?;
        retire(self);
        self.depth -= 1;
        self.line("}");
        turn(self, "end");
        for t in tiles {
            self.stage.remove(t);
        }
        Ok(())
    }
}
