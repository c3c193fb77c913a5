//! Per-row values of a tensor-core accumulator (`Layout::MmaRows`,
//! `Layout::WgmmaRows`): nests over the rows, and row reductions of the
//! accumulator in registers.

use super::mma::row_slot_fn;
use super::*;

/// How rows of an `m`-row accumulator or per-row fragment in `layout` sit
/// in threads: the function from a thread's row register to its row, and
/// the condition that picks one thread per row.
fn row_map(layout: Layout, m: i64) -> Result<(String, String), Diagnostic> {
    Ok(match layout {
        Layout::Mma { wm, .. } | Layout::MmaRows { wm, .. } => (
            format!("tl::mma_row<{m}, {wm}>"),
            format!("tl::mma_row_owner<{wm}>()"),
        ),
        Layout::Wgmma { wgs } | Layout::WgmmaRows { wgs } => (
            format!("tl::wg_row<{m}, {wgs}>"),
            "tl::wg_row_owner()".to_string(),
        ),
        _ => return Err(err("internal error: a row map of a layout without rows")),
    })
}

/// Registers of per-row values each thread holds for an `m`-row
/// accumulator in `layout`.
fn row_regs(layout: Layout, m: i64, threads: i64) -> i64 {
    layout.rows_of().map_or(0, |l| l.registers(m, threads))
}

impl Writer<'_> {
    /// A 1-D `T::parallel` over an accumulator's rows that touches per-row
    /// fragments: each thread runs the rows it holds (every thread of a row
    /// computes the same values; one of them stores to memory).
    pub(super) fn rows_nest(&mut self, n: Nest<'_>, layout: Layout) -> Result<(), Diagnostic> {
        let f = self.f;
        let [m] = n.extents[..] else {
            return Err(err(
                "internal error: a nest over per-row values that is not 1-D",
            ));
        };
        let regs = layout.registers(m, f.launch.threads);
        let (row, owner) = row_map(layout, m)?;
        let k = self.nest_counter;
        self.nest_counter += 1;
        self.line(&format!(
            "// T.Parallel[{m}] over an accumulator's rows: each thread runs the {regs} it holds"
        ));
        self.line("#pragma unroll");
        self.line(&format!(
            "for (int tl_r{k} = 0; tl_r{k} < {regs}; ++tl_r{k}) {{"
        ));
        self.depth += 1;
        self.line(&format!(
            "const int {} = {row}(tl_r{k});",
            ident(&f.var(n.vars[0]).name)
        ));
        self.lane = Some(Lane {
            slot: format!("tl_r{k}"),
            vloads: Vec::new(),
            vstore: None,
            row: Some(format!("tl_r{k}")),
            thread_rows: None,
        });
        self.row_owner = Some(owner);
        let r = self.stmt(n.body);
        self.lane = None;
        self.row_owner = None;
        r?;
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// A reduction of an accumulator along its rows: each thread combines
    /// its registers per row, then the four lanes of a quad (which hold a
    /// row's other columns) by shuffles, then, when `wn` warps split the
    /// columns, the warps through shared memory. The result goes to the
    /// per-row registers of every thread of the row, or from one thread per
    /// row to a shared tile.
    pub(super) fn reduce_acc(
        &mut self,
        r: &Reduce,
        acc_t: &str,
        init: &str,
        combine: &dyn Fn(&str, &str) -> String,
        elem: &dyn Fn(&str) -> String,
    ) -> Result<(), Diagnostic> {
        let f = self.f;
        let threads = f.launch.threads;
        let (src, dst) = (f.buf(r.src), f.buf(r.dst));
        let shape = src.const_shape().unwrap_or_default();
        let (m, n) = (shape[0], shape[1]);
        let layout = src
            .layout
            .ok_or_else(|| err("internal error: an accumulator without a layout"))?;
        let wn = match layout {
            Layout::Mma { wn, .. } => wn,
            _ => 1,
        };
        let rregs = row_regs(layout, m, threads);
        let regs = m * n / threads;
        let slot = row_slot_fn(layout, m, n);
        let (row, owner) = row_map(layout, m)?;
        let (sn, dn) = (self.name(r.src), self.name(r.dst));
        let k = self.nest_counter;
        self.nest_counter += 1;
        let part = format!("tl_part{k}");
        self.line("{");
        self.depth += 1;
        self.line(&format!("{acc_t} {part}[{rregs}];"));
        self.line("#pragma unroll");
        self.line(&format!(
            "for (int tl_r = 0; tl_r < {rregs}; ++tl_r) {part}[tl_r] = {init};"
        ));
        self.line("#pragma unroll");
        self.line(&format!("for (int tl_s = 0; tl_s < {regs}; ++tl_s) {{"));
        self.line(&format!("  const int tl_r = {slot}(tl_s);"));
        let x = elem(&format!("{sn}[tl_s]"));
        self.line(&format!(
            "  {part}[tl_r] = {};",
            combine(&format!("{part}[tl_r]"), &x)
        ));
        self.line("}");
        self.line("#pragma unroll");
        self.line(&format!("for (int tl_r = 0; tl_r < {rregs}; ++tl_r) {{"));
        for o in [1, 2] {
            let p = format!("{part}[tl_r]");
            self.line(&format!(
                "  {p} = {};",
                combine(&p, &format!("__shfl_xor_sync(0xffffffffu, {p}, {o})"))
            ));
        }
        self.line("}");
        if wn > 1 {
            let Layout::Mma { wm, .. } = layout else {
                unreachable!("only mma.sync splits a row over warps")
            };
            self.scratch_bytes += wn * m * dst.dtype.bytes();
            self.line(&format!("__shared__ {acc_t} tl_red{k}[{}];", wn * m));
            self.line(&format!(
                "const int tl_wn{k} = ((int)threadIdx.x >> 5) / {wm};"
            ));
            self.line("if ((threadIdx.x & 3) == 0) {");
            self.line("  #pragma unroll");
            self.line(&format!(
                "  for (int tl_r = 0; tl_r < {rregs}; ++tl_r) tl_red{k}[tl_wn{k} * {m} + {row}(tl_r)] = {part}[tl_r];"
            ));
            self.line("}");
            self.line("__syncthreads();");
            self.line("#pragma unroll");
            self.line(&format!("for (int tl_r = 0; tl_r < {rregs}; ++tl_r) {{"));
            self.line(&format!("  {acc_t} tl_x = tl_red{k}[{row}(tl_r)];"));
            self.line(&format!(
                "  for (int tl_w = 1; tl_w < {wn}; ++tl_w) tl_x = {};",
                combine("tl_x", &format!("tl_red{k}[tl_w * {m} + {row}(tl_r)]"))
            ));
            self.line(&format!("  {part}[tl_r] = tl_x;"));
            self.line("}");
            self.line("__syncthreads();");
        }
        let out = |target: &str| {
            if r.clear {
                format!("{target} = {part}[tl_r];")
            } else {
                format!("{target} = {};", combine(target, &format!("{part}[tl_r]")))
            }
        };
        self.line("#pragma unroll");
        if dst.layout.is_some_and(Layout::is_rows) {
            self.line(&format!(
                "for (int tl_r = 0; tl_r < {rregs}; ++tl_r) {}",
                out(&format!("{dn}[tl_r]"))
            ));
        } else {
            self.line(&format!(
                "for (int tl_r = 0; tl_r < {rregs}; ++tl_r) if ({owner}) {}",
                out(&format!("{dn}[{row}(tl_r)]"))
            ));
        }
        self.depth -= 1;
        self.line("}");
        Ok(())
    }
}
