//! Reductions of on-chip tiles: cooperative block reductions and the
//! register path for fragments.

use super::*;

impl Writer<'_> {
    /// A reduction. Per-thread (local) tiles reduce serially; shared tiles
    /// with the whole block: `G` consecutive threads per output element each
    /// combine a strided share of the reduced dim, then combine across the
    /// group with warp shuffles (and through shared memory when a group
    /// spans several warps). Every thread runs the same passes, so the
    /// shuffles and barriers are never divergent.
    pub(super) fn reduce(&mut self, r: &Reduce) -> Result<(), Diagnostic> {
        let f = self.f;
        let (src, dst) = (f.buf(r.src), f.buf(r.dst));
        let ss = src.const_shape().unwrap_or_default();
        let (l, p) = if ss.len() == 1 {
            (ss[0], 1)
        } else {
            (ss[r.dim], ss[1 - r.dim])
        };
        let t = dst.dtype;
        let acc_t = ty(t)?;
        let k = self.nest_counter;
        self.nest_counter += 1;
        let (sn, dn) = (self.name(r.src), self.name(r.dst));
        let combine = |a: &str, b: &str| -> String {
            match (r.op, t) {
                (ReduceOp::Sum | ReduceOp::AbsSum, _) => format!("{a} + {b}"),
                (ReduceOp::Max, DType::F32) => format!("fmaxf({a}, {b})"),
                (ReduceOp::Min, DType::F32) => format!("fminf({a}, {b})"),
                (ReduceOp::Max, DType::F64) => format!("fmax({a}, {b})"),
                (ReduceOp::Min, DType::F64) => format!("fmin({a}, {b})"),
                (ReduceOp::Max, DType::F16 | DType::BF16) => format!("__hmax({a}, {b})"),
                (ReduceOp::Min, DType::F16 | DType::BF16) => format!("__hmin({a}, {b})"),
                (ReduceOp::Max, _) => format!("max({a}, {b})"),
                (ReduceOp::Min, _) => format!("min({a}, {b})"),
            }
        };
        let elem = |s: &str| -> String {
            let x = format!(
                "(({acc_t})({}))",
                if matches!(src.dtype, DType::F16 | DType::BF16) && t != src.dtype {
                    format!("(float)({s})")
                } else {
                    s.to_string()
                }
            );
            match (r.op, t.is_float()) {
                (ReduceOp::AbsSum, true) => format!("(({acc_t})fabsf((float){x}))"),
                (ReduceOp::AbsSum, false) => format!("abs({x})"),
                _ => x,
            }
        };
        let init = self.expr(&r.op.identity(t))?;
        let src_at = |pp: &str, ll: &str| -> String {
            if ss.len() == 1 {
                format!("{sn}[{ll}]")
            } else if r.dim == 1 {
                format!("{sn}[{pp} * {l} + {ll}]")
            } else {
                format!("{sn}[{ll} * {p} + {pp}]")
            }
        };
        let store = |w: &mut Writer, pp: &str, acc: &str| {
            let v = if r.clear {
                acc.to_string()
            } else {
                combine(&format!("{dn}[{pp}]"), acc)
            };
            w.line(&format!("{dn}[{pp}] = {v};"));
        };
        self.line(&format!(
            "// T.reduce_{}: {p} outputs of {l} elements",
            r.op.name()
        ));
        if src.layout.is_some_and(Layout::is_accumulator) {
            return self.reduce_acc(r, acc_t, &init, &combine, &elem);
        }
        if src.scope == Scope::Local || dst.scope == Scope::Local {
            // Per-thread data: every thread reduces its own copy.
            self.line(&format!(
                "for (int tl_p{k} = 0; tl_p{k} < {p}; ++tl_p{k}) {{"
            ));
            self.depth += 1;
            self.line(&format!("{acc_t} tl_acc{k} = {init};"));
            let x = elem(&src_at(&format!("tl_p{k}"), &format!("tl_l{k}")));
            self.line(&format!(
                "for (int tl_l{k} = 0; tl_l{k} < {l}; ++tl_l{k}) tl_acc{k} = {};",
                combine(&format!("tl_acc{k}"), &x)
            ));
            store(self, &format!("tl_p{k}"), &format!("tl_acc{k}"));
            self.depth -= 1;
            self.line("}");
            return Ok(());
        }
        let threads = f.launch.threads;
        let mask = if threads >= 32 {
            "0xffffffffu".to_string()
        } else {
            format!("{:#x}u", (1u64 << threads) - 1)
        };
        if src.scope == Scope::Fragment {
            return self.reduce_registers(r, l, p, acc_t, &init, &mask, &combine, &elem, &store);
        }
        let pow2_floor = |x: i64| {
            if x <= 1 {
                1
            } else {
                1i64 << (63 - x.leading_zeros())
            }
        };
        let mut g = if p >= threads {
            1
        } else {
            pow2_floor(threads / p)
        };
        g = g
            .min(pow2_floor(l).max(1) * 2)
            .max(1)
            .min(pow2_floor(threads));
        if g > 32 && threads % 32 != 0 {
            g = 32.min(pow2_floor(threads));
        }
        // Along contiguous rows of 32 words or more, the lanes of a warp spread
        // over 32 / g rows read the same banks (rows of a multiple of 32 words
        // start on the same bank): 16-way conflicts for a 64-wide f32 tile with
        // g = 2. A whole warp per row reads consecutive words instead.
        if ss.len() == 2 && r.dim == 1 && l >= 32 && g < 32 && threads % 32 == 0 {
            g = 32;
        }
        let rows = threads / g;
        let passes = (p + rows - 1) / rows;
        self.line("{");
        self.depth += 1;
        self.line(&format!("const int tl_g{k} = (int)threadIdx.x % {g};"));
        self.line(&format!("const int tl_q{k} = (int)threadIdx.x / {g};"));
        if g > 32 {
            self.scratch_bytes += (threads / 32) * t.bytes();
            self.line(&format!("__shared__ {acc_t} tl_red{k}[{}];", threads / 32));
        }
        self.line("#pragma unroll 1");
        self.line(&format!(
            "for (int tl_pass{k} = 0; tl_pass{k} < {passes}; ++tl_pass{k}) {{"
        ));
        self.depth += 1;
        self.line(&format!(
            "const int tl_p{k} = tl_q{k} < {rows} ? tl_pass{k} * {rows} + tl_q{k} : {p};"
        ));
        self.line(&format!("{acc_t} tl_acc{k} = {init};"));
        let x = elem(&src_at(&format!("tl_p{k}"), &format!("tl_l{k}")));
        self.line(&format!("if (tl_p{k} < {p}) {{"));
        self.line(&format!(
            "  for (int tl_l{k} = tl_g{k}; tl_l{k} < {l}; tl_l{k} += {g}) tl_acc{k} = {};",
            combine(&format!("tl_acc{k}"), &x)
        ));
        self.line("}");
        let warp_span = g.min(32);
        if warp_span > 1 {
            self.line("#pragma unroll");
            self.line(&format!(
                "for (int tl_o = {}; tl_o > 0; tl_o >>= 1) tl_acc{k} = {};",
                warp_span / 2,
                combine(
                    &format!("tl_acc{k}"),
                    &format!("__shfl_xor_sync({mask}, tl_acc{k}, tl_o)")
                )
            ));
        }
        if g > 32 {
            let wpg = g / 32;
            self.line(&format!(
                "if ((int)threadIdx.x % 32 == 0) tl_red{k}[(int)threadIdx.x / 32] = tl_acc{k};"
            ));
            self.line("__syncthreads();");
            self.line(&format!("if (tl_g{k} == 0) {{"));
            self.line(&format!(
                "  for (int tl_w = 1; tl_w < {wpg}; ++tl_w) tl_acc{k} = {};",
                combine(
                    &format!("tl_acc{k}"),
                    &format!("tl_red{k}[(int)threadIdx.x / 32 + tl_w]")
                )
            ));
            self.line("}");
            self.line("__syncthreads();");
        }
        self.line(&format!("if (tl_g{k} == 0 && tl_p{k} < {p}) {{"));
        self.depth += 1;
        store(self, &format!("tl_p{k}"), &format!("tl_acc{k}"));
        self.depth -= 1;
        self.line("}");
        self.depth -= 1;
        self.line("}");
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// Combines `acc` over groups of `g` consecutive threads (a power of
    /// two); afterwards the first thread of each group holds the result.
    /// Every thread must call it (shuffles and barriers are block-wide).
    pub(super) fn group_combine(
        &mut self,
        acc: &str,
        g: i64,
        acc_t: &str,
        mask: &str,
        combine: &dyn Fn(&str, &str) -> String,
    ) {
        let k = self.nest_counter;
        self.nest_counter += 1;
        let threads = self.f.launch.threads;
        if g > 1 {
            self.line("#pragma unroll");
            self.line(&format!(
                "for (int tl_o = {}; tl_o > 0; tl_o >>= 1) {acc} = {};",
                g.min(32) / 2,
                combine(acc, &format!("__shfl_xor_sync({mask}, {acc}, tl_o)"))
            ));
        }
        if g > 32 {
            let wpg = g / 32;
            self.scratch_bytes += threads / 32 * 8;
            self.line(&format!("__shared__ {acc_t} tl_red{k}[{}];", threads / 32));
            self.line(&format!(
                "if ((int)threadIdx.x % 32 == 0) tl_red{k}[(int)threadIdx.x / 32] = {acc};"
            ));
            self.line("__syncthreads();");
            self.line(&format!("if ((int)threadIdx.x % {g} == 0) {{"));
            self.line(&format!(
                "  for (int tl_w = 1; tl_w < {wpg}; ++tl_w) {acc} = {};",
                combine(acc, &format!("tl_red{k}[(int)threadIdx.x / 32 + tl_w]"))
            ));
            self.line("}");
            self.line("__syncthreads();");
        }
    }

    /// A last-dim reduction of a register fragment (see `register_reducible`).
    /// The fragment's element `e` is in register `(e / (V * T)) * V + e % V`
    /// of thread `(e / V) % T`, so a row of `L` elements is `L / V` chunks:
    /// either a whole number of passes over all threads (each thread first
    /// combines its registers of the row; with several rows, all rows go
    /// through one shared scratch and one barrier), or a group of `L / V`
    /// consecutive threads within one pass.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reduce_registers(
        &mut self,
        r: &Reduce,
        l: i64,
        p: i64,
        acc_t: &str,
        init: &str,
        mask: &str,
        combine: &dyn Fn(&str, &str) -> String,
        elem: &dyn Fn(&str) -> String,
        store: &dyn Fn(&mut Writer, &str, &str),
    ) -> Result<(), Diagnostic> {
        let threads = self.f.launch.threads;
        let v = self.f.schedule.fragments.get(&r.src).copied().unwrap_or(1);
        let sn = self.name(r.src);
        let chunks = l / v;
        let k = self.nest_counter;
        self.nest_counter += 1;
        let acc = format!("tl_acc{k}");
        self.line("{");
        self.depth += 1;
        let warps = threads / 32;
        let bytes = self.f.buf(r.dst).dtype.bytes();
        if chunks % threads == 0 {
            // Several rows, each over the whole block: every warp reduces all
            // its rows into a shared scratch, then one barrier for all of them
            // (a block-wide combine per row costs two barriers a row).
            let batched = p > 1 && threads % 32 == 0 && warps > 1 && p * warps * bytes <= 8192;
            let per_row = chunks / threads;
            if batched {
                self.scratch_bytes += p * warps * bytes;
                self.line(&format!("__shared__ {acc_t} tl_red{k}[{}];", p * warps));
            }
            self.line("#pragma unroll");
            self.line(&format!(
                "for (int tl_p{k} = 0; tl_p{k} < {p}; ++tl_p{k}) {{"
            ));
            self.depth += 1;
            self.line(&format!("{acc_t} {acc} = {init};"));
            self.line("#pragma unroll");
            self.line(&format!(
                "for (int tl_r = 0; tl_r < {}; ++tl_r) {{",
                per_row * v
            ));
            let x = elem(&format!("{sn}[tl_p{k} * {} + tl_r]", per_row * v));
            self.line(&format!("  {acc} = {};", combine(&acc, &x)));
            self.line("}");
            if batched {
                self.line("#pragma unroll");
                self.line(&format!(
                    "for (int tl_o = 16; tl_o > 0; tl_o >>= 1) {acc} = {};",
                    combine(&acc, &format!("__shfl_xor_sync({mask}, {acc}, tl_o)"))
                ));
                self.line(&format!(
                    "if ((int)threadIdx.x % 32 == 0) tl_red{k}[tl_p{k} * {warps} + (int)threadIdx.x / 32] = {acc};"
                ));
            } else {
                self.group_combine(&acc, threads, acc_t, mask, combine);
                self.line("if (threadIdx.x == 0) {");
                self.depth += 1;
                store(self, &format!("tl_p{k}"), &acc);
                self.depth -= 1;
                self.line("}");
            }
            self.depth -= 1;
            self.line("}");
            if batched {
                self.line("__syncthreads();");
                self.line(&format!(
                    "for (int tl_p{k} = (int)threadIdx.x; tl_p{k} < {p}; tl_p{k} += {threads}) {{"
                ));
                self.depth += 1;
                self.line(&format!("{acc_t} {acc} = tl_red{k}[tl_p{k} * {warps}];"));
                self.line(&format!(
                    "for (int tl_w = 1; tl_w < {warps}; ++tl_w) {acc} = {};",
                    combine(&acc, &format!("tl_red{k}[tl_p{k} * {warps} + tl_w]"))
                ));
                store(self, &format!("tl_p{k}"), &acc);
                self.depth -= 1;
                self.line("}");
                // The scratch is read before a later reduction writes it again.
                self.line("__syncthreads();");
            }
        } else {
            // threads % chunks == 0: `chunks` threads per row in each pass.
            let g = chunks;
            let per = threads * v;
            let iters = (p * l + per - 1) / per;
            self.line("#pragma unroll");
            self.line(&format!(
                "for (int tl_it{k} = 0; tl_it{k} < {iters}; ++tl_it{k}) {{"
            ));
            self.depth += 1;
            self.line(&format!(
                "const int tl_p{k} = (tl_it{k} * {threads} + (int)threadIdx.x) / {g};"
            ));
            self.line(&format!("{acc_t} {acc} = {init};"));
            self.line("#pragma unroll");
            self.line(&format!("for (int tl_v = 0; tl_v < {v}; ++tl_v) {{"));
            let x = elem(&format!("{sn}[tl_it{k} * {v} + tl_v]"));
            self.line(&format!("  {acc} = {};", combine(&acc, &x)));
            self.line("}");
            self.group_combine(&acc, g, acc_t, mask, combine);
            self.line(&format!(
                "if ((int)threadIdx.x % {g} == 0 && tl_p{k} < {p}) {{"
            ));
            self.depth += 1;
            store(self, &format!("tl_p{k}"), &acc);
            self.depth -= 1;
            self.line("}");
            self.depth -= 1;
            self.line("}");
        }
        self.depth -= 1;
        self.line("}");
        Ok(())
    }
}
