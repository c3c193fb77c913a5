//! Statements: lets, stores, loops, ifs, allocations and tile ops.

use super::*;

impl Writer<'_> {
    pub(super) fn stmt(&mut self, s: &Stmt) -> Result<(), Diagnostic> {
        if self.lane.is_none() {
            if let Some(n) = collect_nest(s) {
                return self.nest(n);
            }
        }
        if let Some(r) = self.common_stmt(s) {
            return r;
        }
        let f = self.f;
        match s {
            Stmt::Store {
                buf, idx, value, ..
            } => {
                let v = self.expr(value)?;
                if let Some((b, i, name)) = self.lane.as_ref().and_then(|l| l.vstore.clone()) {
                    if b == *buf && &i == idx {
                        self.line(&format!("{name} = {v};"));
                        return Ok(());
                    }
                }
                let target = self.access(*buf, idx)?;
                match &self.row_owner {
                    // Every thread of a row runs its iteration; one stores.
                    Some(c) if f.buf(*buf).scope != Scope::Fragment => {
                        self.line(&format!("if ({c}) {target} = {v};"))
                    }
                    _ => self.line(&format!("{target} = {v};")),
                }
            }
            Stmt::For {
                var,
                start,
                extent,
                kind,
                body,
                loc,
            } => {
                if *kind == ForKind::Parallel {
                    return Err(Diagnostic::at(*loc, format!(
                        "kernel `{}`: a `T::parallel` loop over a dynamic extent or inside another parallel \
                         loop cannot be mapped to threads",
                        f.name
                    )));
                }
                if self.ws.as_ref().is_some_and(|p| p.outer == Some(*var)) {
                    return self.persistent_ws(*var, start, extent, body);
                }
                if let Some(p) = f.schedule.pipelines.get(var) {
                    let (stages, producers) = (p.stages, p.tiles.len());
                    return self.pipeline(*var, start, extent, body, stages, producers);
                }
                let n = ident(&f.var(*var).name);
                let s0 = self.expr(start)?;
                let e = self.expr(extent)?;
                let end = if s0 == "0" { e } else { format!("{s0} + {e}") };
                if *kind == ForKind::Unrolled {
                    self.line("#pragma unroll");
                }
                self.loop_body(&format!("for (int {n} = {s0}; {n} < {end}; ++{n})"), body)?;
            }
            Stmt::Alloc { buf, .. } => {
                let b = f.buf(*buf);
                let n = b.const_elems();
                let t = ty(b.dtype)?;
                match b.scope {
                    Scope::Shared => {
                        // A view into the block's one shared byte array
                        // (`merge_shared` chose the offset).
                        let n = n * self.multibuf.get(buf).copied().unwrap_or(1);
                        let Some(&(off, bytes)) = f.smem.slots.get(buf) else {
                            return Err(err(format!(
                                "internal error: shared buffer `{}` has no place in shared memory",
                                b.name
                            )));
                        };
                        if bytes < n * b.dtype.bytes() {
                            return Err(err(format!(
                                "internal error: shared buffer `{}` needs {} bytes, {bytes} reserved",
                                b.name,
                                n * b.dtype.bytes()
                            )));
                        }
                        let shared_with: Vec<String> = f
                            .smem
                            .slots
                            .keys()
                            .filter(|&&o| o != *buf && f.smem.overlaps(o, *buf))
                            .map(|&o| self.name(o))
                            .collect();
                        // A view that shares bytes must not promise the
                        // compiler it is the only way to them.
                        let (restrict, note) = if shared_with.is_empty() {
                            ("__restrict__ ", String::new())
                        } else {
                            ("", format!(", bytes reused by {}", shared_with.join(", ")))
                        };
                        self.line(&format!(
                            "{t}* {restrict}{} = reinterpret_cast<{t}*>(tl_smem + {off});  // {n} elements{note}",
                            self.name(*buf)
                        ));
                    }
                    Scope::Fragment if b.layout.is_some_and(Layout::is_rows) => {
                        let regs = b.layout.map_or(0, |l| l.registers(n, f.launch.threads));
                        self.line(&format!(
                            "{t} {}[{regs}];  // per-row values: {n} rows, {regs} per thread (the rows of its accumulator registers)",
                            self.name(*buf)
                        ));
                    }
                    Scope::Fragment if b.layout.is_some_and(Layout::is_accumulator) => {
                        let regs = n / f.launch.threads;
                        let order = match b.layout {
                            Some(Layout::Wgmma { .. }) => "wgmma",
                            _ => "mma.sync",
                        };
                        self.line(&format!(
                            "{t} {}[{regs}];  // gemm accumulator: {n} elements in {order} order",
                            self.name(*buf)
                        ));
                    }
                    Scope::Fragment => {
                        let v = f.schedule.fragments.get(buf).copied().unwrap_or(1);
                        let per = f.launch.threads * v;
                        let regs = (n + per - 1) / per * v;
                        self.line(&format!(
                            "{t} {}[{regs}];  // fragment: {n} elements, {v} per chunk",
                            self.name(*buf)
                        ));
                    }
                    _ => self.line(&format!("{t} {}[{n}];", self.name(*buf))),
                }
            }
            Stmt::Barrier => self.barrier(),
            Stmt::AtomicAdd {
                buf,
                idx,
                value,
                loc,
            } => {
                let b = f.buf(*buf);
                let target = self.access(*buf, idx)?;
                let v = self.expr(value)?;
                let call = match b.dtype {
                    DType::F16
                    | DType::BF16
                    | DType::F32
                    | DType::F64
                    | DType::I32
                    | DType::U32
                    | DType::U64 => {
                        format!("atomicAdd(&{target}, {v});")
                    }
                    DType::I64 => format!(
                        "atomicAdd((unsigned long long*)&{target}, (unsigned long long)({v}));"
                    ),
                    t => {
                        return Err(Diagnostic::at(
                            *loc,
                            format!(
                                "kernel `{}`: atomic add on {t} is not supported on CUDA",
                                f.name
                            ),
                        ))
                    }
                };
                match &self.row_owner {
                    Some(c) => self.line(&format!("if ({c}) {call}")),
                    None => self.line(&call),
                }
            }
            Stmt::Print { label, value, .. } => {
                let v = self.expr(value)?;
                let (fmt, arg) = if value.dtype().is_float() {
                    ("%g", format!("(double)((float)({v}))"))
                } else {
                    ("%lld", format!("(long long)({v})"))
                };
                let label = crate::codegen::cfamily::printf_text(label);
                self.line(&format!(
                    "if (threadIdx.x == 0) printf(\"tile.print block(%d, %d, %d): {label} = {fmt}\\n\", (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, {arg});"
                ));
            }
            Stmt::Reduce(r) => self.reduce(r)?,
            Stmt::Gemm(g) => self.gemm(g)?,
            // A tile copy outside a pipeline: complete before the barrier that
            // `insert_barriers` places ahead of the tile's readers.
            Stmt::Copy { .. } => {
                let c = TileCopy::of(s).ok_or_else(|| {
                    err("internal error: a copy that is not a tile copy reached the CUDA backend")
                })?;
                // Before a warp-specialized pipeline's split the block also
                // has the producer warpgroup, which the copy's thread map
                // does not cover: the consumers copy alone.
                let guard = self.ws.is_some() && !self.ws_split;
                // A copy of the pipeline's prologue is issued by the producer
                // (the consumers copy it themselves in the pipeline's fallback).
                let prologue = self
                    .ws
                    .as_ref()
                    .is_some_and(|p| p.prologue.iter().any(|x| x.dst == c.dst));
                if prologue {
                    self.line(&format!(
                        "// T.copy into {}: the producer's bulk tensor copy ahead of the pipeline's first stage (its prologue)",
                        self.name(c.dst)
                    ));
                    return Ok(());
                }
                if guard {
                    self.line(&format!("if (threadIdx.x < {}) {{", self.f.launch.threads));
                    self.depth += 1;
                }
                self.copy_tile(&c, super::pipeline::COPY_CHECK, None)?;
                self.line("tl::cp_async_commit();");
                self.line("tl::cp_async_wait<0>();");
                if guard {
                    self.depth -= 1;
                    self.line("}");
                }
            }
            Stmt::AtomicAddTile { .. } | Stmt::Fill { .. } => {
                return Err(err(
                    "internal error: tile op reached the CUDA backend unlowered",
                ))
            }
            // Sequences, scalars and `if`: `common_stmt`.
            Stmt::Seq(_)
            | Stmt::Let { .. }
            | Stmt::Local { .. }
            | Stmt::Assign { .. }
            | Stmt::If { .. } => {}
        }
        Ok(())
    }
}
