//! Tensor-core GEMM tiles: `tl::gemm_ss` (`mma.sync`) and `tl::wg::gemm_ss`
//! (Hopper's `wgmma`) calls, and nests over an accumulator in its
//! instruction's register layout.

use super::*;

impl Writer<'_> {
    /// A `T::parallel` over a gemm accumulator's shape: each thread visits
    /// its own registers; `tl::acc_coord` (`tl::wg::acc_coord` for `wgmma`)
    /// says which element each one is.
    pub(super) fn mma_nest(
        &mut self,
        n: Nest<'_>,
        acc: BufId,
        layout: Layout,
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let shape = f.buf(acc).const_shape().unwrap_or_default();
        let (m, nn) = (shape[0], shape[1]);
        let row_slot = row_slot_fn(layout, m, nn);
        let coord = match layout {
            Layout::Wgmma { wgs } => format!("tl::wg::acc_coord<{m}, {nn}, {wgs}>"),
            Layout::Mma { wm, wn } => format!("tl::acc_coord<{m}, {nn}, {wm}, {wn}>"),
            _ => {
                return Err(err(
                    "internal error: a nest over a fragment with no accumulator layout",
                ))
            }
        };
        let regs = m * nn / f.launch.threads;
        let k = self.nest_counter;
        self.nest_counter += 1;
        // Registers 2q and 2q+1 hold (i, j) and (i, j + 1): a store of the
        // pair to memory contiguous in j is one 2-element vector store when
        // the row length keeps it aligned and both elements are in bounds.
        let pair = self.accumulator_pair_store(&n);
        self.line(&format!(
            "// T.Parallel{:?} over the gemm accumulator layout",
            n.extents
        ));
        self.line("#pragma unroll");
        let step = if pair.is_some() { 2 } else { 1 };
        self.line(&format!(
            "for (int tl_s{k} = 0; tl_s{k} < {regs}; tl_s{k} += {step}) {{"
        ));
        self.depth += 1;
        self.line(&format!("int tl_i{k}, tl_j{k};"));
        self.line(&format!("{coord}(tl_s{k}, tl_i{k}, tl_j{k});"));
        let lead = n.vars.len().saturating_sub(2);
        // Declares the nest's variables for lane `lane` (0 or 1) of the pair.
        let declare = |w: &mut Writer, lane: i64| {
            for (d, v) in n.vars.iter().enumerate() {
                let val = match d.checked_sub(lead) {
                    None => "0".to_string(),
                    Some(0) => format!("tl_i{k}"),
                    Some(_) if lane == 0 => format!("tl_j{k}"),
                    Some(_) => format!("tl_j{k} + {lane}"),
                };
                w.line(&format!("const int {} = {val};", ident(&f.var(*v).name)));
            }
        };
        let scoped =
            |w: &mut Writer, lane: i64, body: &dyn Fn(&mut Writer) -> Result<(), Diagnostic>| {
                w.line("{");
                w.depth += 1;
                declare(w, lane);
                w.lane = Some(Lane {
                    slot: format!("tl_s{k} + {lane}"),
                    vloads: Vec::new(),
                    vstore: None,
                    row: Some(format!("{row_slot}(tl_s{k} + {lane})")),
                    thread_rows: None,
                });
                let r = body(w);
                w.lane = None;
                w.depth -= 1;
                w.line("}");
                r
            };
        let r = match pair {
            None => scoped(self, 0, &|w| w.stmt(n.body)),
            Some((cond, store, dims)) => (|| {
                let (buf, idx, value, atomic) = match store {
                    Stmt::Store {
                        buf, idx, value, ..
                    } => (buf, idx, value, false),
                    Stmt::AtomicAdd {
                        buf, idx, value, ..
                    } => (buf, idx, value, true),
                    _ => unreachable!("vectorize pairs stores and atomic adds only"),
                };
                let t = ty(f.buf(buf).dtype)?;
                let mut ok: Vec<String> = dims
                    .iter()
                    .map(|d| format!("{} % 2 == 0", ident(&f.var(*d).name)))
                    .collect();
                self.line(&format!("bool tl_ok{k} = true;"));
                if let Some(c) = &cond {
                    scoped(self, 1, &|w| {
                        let c = w.expr(c)?;
                        w.line(&format!("tl_ok{k} = {c};"));
                        Ok(())
                    })?;
                }
                ok.push(format!("tl_ok{k}"));
                self.line(&format!("if ({}) {{", ok.join(" && ")));
                self.depth += 1;
                self.line(&format!("tl::vec<{t}, 2> tl_pair{k};"));
                for lane in 0..2 {
                    scoped(self, lane, &|w| {
                        let v = w.expr(&value)?;
                        w.line(&format!("tl_pair{k}.x[{lane}] = {v};"));
                        Ok(())
                    })?;
                }
                scoped(self, 0, &|w| {
                    let target = w.access(buf, &idx)?;
                    if atomic {
                        w.line(&format!(
                            "tl::atomic_add2(&{target}, tl_pair{k}.x[0], tl_pair{k}.x[1]);"
                        ));
                    } else {
                        w.line(&format!("*(tl::vec<{t}, 2>*)(&{target}) = tl_pair{k};"));
                    }
                    w.note_align(buf, 2);
                    Ok(())
                })?;
                self.depth -= 1;
                self.line("} else {");
                self.depth += 1;
                for lane in 0..2 {
                    scoped(self, lane, &|w| w.stmt(n.body))?;
                }
                self.depth -= 1;
                self.line("}");
                Ok(())
            })(),
        };
        r?;
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// The guard and store of a nest over an accumulator that `vectorize`
    /// chose to store in register pairs, and the dims to test.
    pub(super) fn accumulator_pair_store(
        &self,
        n: &Nest<'_>,
    ) -> Option<(Option<Expr>, Stmt, BTreeSet<VarId>)> {
        let dims = self
            .f
            .schedule
            .nests
            .get(&n.vars[0])?
            .pair_store_if
            .clone()?;
        let (cond, store) = n.guarded_store()?;
        Some((cond, store, dims.into_iter().collect()))
    }

    /// The tensor-core shape of `g`: the library namespace of its
    /// instruction (`tl` or `tl::wg`), the template arguments its `GemmPipe`
    /// takes (operand type, `M, N, K`, the warps `WM, WN` or the warpgroups
    /// `WGS`, the transpositions), and `K`.
    pub(super) fn gemm_shape(&self, g: &Gemm) -> Result<(&'static str, String, i64), Diagnostic> {
        let f = self.f;
        let (a, c) = (f.buf(g.a), f.buf(g.c));
        let (lib, warps) =
            match g.inst {
                GemmInst::MmaSync { wm, wn } => ("tl", format!("{wm}, {wn}")),
                GemmInst::Wgmma { wgs } => ("tl::wg", wgs.to_string()),
                GemmInst::Loops => return Err(err(
                    "internal error: a gemm reached the CUDA backend without a tensor-core plan",
                )),
            };
        let sa = a.const_shape().unwrap_or_default();
        let sc = c.const_shape().unwrap_or_default();
        let k = if g.trans_a { sa[0] } else { sa[1] };
        let args = format!(
            "{}, {}, {}, {k}, {warps}, {}, {}",
            ty(a.dtype)?,
            sc[0],
            sc[1],
            g.trans_a,
            g.trans_b
        );
        Ok((lib, args, k))
    }

    /// The library namespace and template arguments of a gemm whose A operand
    /// is a converted accumulator in registers (`gemm_rs`, `RsAsync`):
    /// operand type, `M, N, K`, the warps along M (`mma.sync`) or the
    /// warpgroups (`wgmma`), `TRANS_B`.
    pub(super) fn gemm_rs_shape(&self, g: &Gemm) -> Result<(&'static str, String), Diagnostic> {
        let f = self.f;
        let (lib, warps) = match g.inst {
            GemmInst::MmaSync { wm, .. } => ("tl", wm),
            GemmInst::Wgmma { wgs } => ("tl::wg", wgs),
            GemmInst::Loops => {
                return Err(err(
                    "internal error: an A operand in registers off tensor cores",
                ))
            }
        };
        let (a, c) = (f.buf(g.a), f.buf(g.c));
        let (sa, sc) = (
            a.const_shape().unwrap_or_default(),
            c.const_shape().unwrap_or_default(),
        );
        let args = format!(
            "{}, {}, {}, {}, {warps}, {}",
            ty(a.dtype)?,
            sc[0],
            sc[1],
            sa[1],
            g.trans_b
        );
        Ok((lib, args))
    }

    /// `C += A · B` on tensor cores (`tl::gemm_ss` or `tl::wg::gemm_ss`;
    /// `tl::gemm_rs` or `tl::wg::gemm_rs` when A is a converted accumulator
    /// in registers).
    pub(super) fn gemm(&mut self, g: &Gemm) -> Result<(), Diagnostic> {
        let f = self.f;
        if f.buf(g.a).scope == Scope::Fragment {
            // `tl::gemm_rs` (mma.sync: the warps along M) or `tl::wg::gemm_rs`
            // (wgmma: the warpgroups); the same arguments otherwise.
            let (lib, args) = self.gemm_rs_shape(g)?;
            self.line(&format!(
                "{lib}::gemm_rs<{args}>({}, {}, {});",
                self.name(g.a),
                self.tile_base(g.b),
                self.name(g.c)
            ));
            return Ok(());
        }
        let (lib, args, _) = self.gemm_shape(g)?;
        let args = args.replacen(", ", ", float, ", 1);
        self.line(&format!(
            "{lib}::gemm_ss<{args}>({}, {}, {});",
            self.tile_base(g.a),
            self.tile_base(g.b),
            self.name(g.c)
        ));
        Ok(())
    }
}

/// The function that maps a register slot of an accumulator in `layout`
/// (`m` x `n`) to the register of its row in per-row fragments.
pub(super) fn row_slot_fn(layout: Layout, m: i64, n: i64) -> String {
    match layout {
        Layout::Wgmma { wgs } => format!("tl::wg_row_slot<{m}, {n}, {wgs}>"),
        Layout::Mma { wm, wn } => format!("tl::mma_row_slot<{m}, {n}, {wm}, {wn}>"),
        _ => String::new(),
    }
}
