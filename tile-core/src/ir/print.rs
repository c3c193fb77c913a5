//! Deterministic script text of a `PrimFunc`, in the spirit of TVMScript.
//! The cache key hashes this text: it names every type, shape, scope, loop
//! kind and constant, and nothing that does not change generated code.
//!
//! `read.rs` reads the text back (`print(read(text)) == text` at every
//! stage). State that passes add is printed only once it is set (layouts,
//! the shared pool's offsets and size, barriers), so the frontend's text,
//! and with it every key, does not depend on what later passes print.

use super::*;
use std::fmt::Write;

pub fn script(f: &PrimFunc) -> String {
    let mut p = Printer {
        f,
        out: String::new(),
    };
    p.func();
    p.out
}

/// One statement's script text (with its nested statements), unindented.
pub fn stmt_text(f: &PrimFunc, s: &Stmt) -> String {
    let mut p = Printer {
        f,
        out: String::new(),
    };
    p.stmt(s, 0);
    p.out
}

struct Printer<'a> {
    f: &'a PrimFunc,
    out: String,
}

impl Printer<'_> {
    fn line(&mut self, depth: usize, s: &str) {
        for _ in 0..depth {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn func(&mut self) {
        let f = self.f;
        let mut consts: Vec<String> = f.consts.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if f.cuda_only {
            consts.push("target=\"cuda\"".to_string());
        }
        // Only a specialized function (set by `compile`) names its arch: the
        // frontend's script, which the keys hash, never does.
        let arch = match f.arch {
            CudaArch::Any => String::new(),
            a => format!(" arch=\"{}\"", a.name()),
        };
        self.line(
            0,
            &format!("# tile.prim_func consts({}){arch}", consts.join(", ")),
        );
        let params: Vec<String> = f
            .params
            .iter()
            .map(|&b| {
                let buf = f.buf(b);
                let kind = if buf.mutable { "TensorMut" } else { "Tensor" };
                format!(
                    "{}: {kind}({}, {})",
                    buf.name,
                    self.shape(&buf.shape),
                    buf.dtype
                )
            })
            .collect();
        self.line(0, &format!("def {}({}):", f.name, params.join(", ")));
        for &d in &f.dims {
            let v = f.var(d);
            self.line(
                1,
                &format!("{} = T.dynamic(\"{}\", {})", v.name, v.name, v.dtype),
            );
        }
        for &s in &f.scalars {
            let v = f.var(s);
            self.line(
                1,
                &format!("{} = T.scalar(\"{}\", {})", v.name, v.name, v.dtype),
            );
        }
        let grid: Vec<String> = f.launch.grid.iter().map(|e| self.expr(e)).collect();
        let bvars: Vec<String> = f
            .launch
            .block_vars
            .iter()
            .map(|&v| f.var(v).name.clone())
            .collect();
        // Set on CUDA by `merge_shared`: the size of the block's shared
        // memory array (absent before, so the frontend's text is unchanged).
        let pool = if f.smem == SharedPool::default() {
            String::new()
        } else {
            format!(", smem_bytes={}", f.smem.bytes)
        };
        let cluster = match (f.launch.cluster, f.launch.cluster_y) {
            (1, 1) => String::new(),
            (x, 1) => format!(", cluster={x}"),
            (x, y) => format!(", cluster={x}, cluster_y={y}"),
        };
        let split = if f.launch.split_k == 1 {
            String::new()
        } else {
            format!(", split_k={}", f.launch.split_k)
        };
        self.line(
            1,
            &format!(
                "with T.Kernel({}, threads={}{cluster}{split}{pool}) as ({}):",
                grid.join(", "),
                f.launch.threads,
                bvars.join(", ")
            ),
        );
        self.stmt(&f.body, 2);
    }

    /// `, key=(a, b)` naming the buffers; nothing when there are none.
    fn buf_list(&self, key: &str, bufs: &[BufId]) -> String {
        if bufs.is_empty() {
            return String::new();
        }
        let names: Vec<&str> = bufs.iter().map(|&b| self.f.buf(b).name.as_str()).collect();
        format!(", {key}=({})", names.join(", "))
    }

    /// `, split_k=(2, acc)` (the blocks and the accumulators they sum) or
    /// `, split_why=".."`; nothing when the kernel does not ask to split.
    fn split(&self, p: &Pipeline) -> String {
        let mut t = String::new();
        if let Some(s) = &p.split {
            let accs: Vec<&str> = s
                .accs
                .iter()
                .map(|&b| self.f.buf(b).name.as_str())
                .collect();
            t.push_str(&format!(", split_k=({}, {})", s.blocks, accs.join(", ")));
        }
        if let Some(w) = &p.split_why {
            t.push_str(&format!(", split_why={w:?}"));
        }
        t
    }

    /// `vector=8` or `vector=2, vector_if=(8, N, K)` (8 wide when N and K are
    /// multiples of 8).
    fn nest_plan(&self, n: &NestPlan) -> String {
        let mut t = format!("vector={}", n.vector);
        if let Some(dims) = &n.pair_store_if {
            let names: Vec<&str> = dims.iter().map(|&d| self.f.var(d).name.as_str()).collect();
            t.push_str(&format!(", pair_store_if=({})", names.join(", ")));
        }
        if !n.vectorized.is_empty() {
            t.push_str(&format!(", vectorized=[{}]", self.accesses(&n.vectorized)));
        }
        if let Some((w, dims)) = &n.wide {
            let mut parts = vec![w.to_string()];
            parts.extend(dims.iter().map(|&d| self.f.var(d).name.clone()));
            t.push_str(&format!(", vector_if=({})", parts.join(", ")));
            if !n.wide_vectorized.is_empty() {
                let acc = self.accesses(&n.wide_vectorized);
                t.push_str(&format!(", vectorized_if=[{acc}]"));
            }
        }
        if let Some((w, dims)) = &n.mid {
            let mut parts = vec![w.to_string()];
            parts.extend(dims.iter().map(|&d| self.f.var(d).name.clone()));
            t.push_str(&format!(", words_if=({})", parts.join(", ")));
            if !n.mid_vectorized.is_empty() {
                let acc = self.accesses(&n.mid_vectorized);
                t.push_str(&format!(", vectorized_words=[{acc}]"));
            }
        }
        if n.batch > 1 {
            t.push_str(&format!(", batch={}", n.batch));
        }
        t
    }

    /// `a[i, j], c[i]`.
    fn accesses(&self, list: &[(BufId, Vec<Expr>)]) -> String {
        let items: Vec<String> = list
            .iter()
            .map(|(b, idx)| format!("{}[{}]", self.f.buf(*b).name, self.list(idx)))
            .collect();
        items.join(", ")
    }

    fn shape(&self, s: &[Expr]) -> String {
        let dims: Vec<String> = s.iter().map(|e| self.expr(e)).collect();
        if dims.len() == 1 {
            format!("({},)", dims[0])
        } else {
            format!("({})", dims.join(", "))
        }
    }

    fn region(&self, r: &Region) -> String {
        let o: Vec<String> = r.origin.iter().map(|e| self.expr(e)).collect();
        let x: Vec<String> = r.extent.iter().map(|e| self.expr(e)).collect();
        format!(
            "{}[{}; {}]",
            self.f.buf(r.buf).name,
            o.join(", "),
            x.join(", ")
        )
    }

    fn stmt(&mut self, s: &Stmt, d: usize) {
        let f = self.f;
        match s {
            Stmt::Seq(v) => {
                if v.is_empty() {
                    self.line(d, "pass");
                }
                v.iter().for_each(|s| self.stmt(s, d));
            }
            Stmt::Let { var, value } => {
                let v = f.var(*var);
                let t = format!("{}: {} = {}", v.name, v.dtype, self.expr(value));
                self.line(d, &t);
            }
            Stmt::Local { var, init } => {
                let v = f.var(*var);
                let t = format!(
                    "{} = T.alloc_var({}, init={})",
                    v.name,
                    v.dtype,
                    self.expr(init)
                );
                self.line(d, &t);
            }
            Stmt::Assign { var, value } => {
                let t = format!("{} = {}", f.var(*var).name, self.expr(value));
                self.line(d, &t);
            }
            Stmt::Store {
                buf, idx, value, ..
            }
            | Stmt::AtomicAdd {
                buf, idx, value, ..
            } => {
                let (target, value) = (
                    format!("{}[{}]", f.buf(*buf).name, self.list(idx)),
                    self.expr(value),
                );
                let t = match s {
                    Stmt::Store { .. } => format!("{target} = {value}"),
                    _ => format!("T.atomic_add({target}, {value})"),
                };
                self.line(d, &t);
            }
            Stmt::For {
                var,
                start,
                extent,
                kind,
                body,
                ..
            } => {
                let k = match kind {
                    ForKind::Serial => "T.serial".to_string(),
                    ForKind::Parallel => match f.schedule.nests.get(var) {
                        None => "T.Parallel".to_string(),
                        Some(n) => format!("T.Parallel[{}]", self.nest_plan(n)),
                    },
                    ForKind::Unrolled => "T.unroll".to_string(),
                    ForKind::Pipelined { stages } => match f.schedule.pipelines.get(var) {
                        None => format!("T.Pipelined[num_stages={stages}]"),
                        Some(p) => {
                            format!(
                                "T.Pipelined[num_stages={stages}{}{}{}{}{}{}{}{}{}{}]",
                                self.buf_list("producers", &p.tiles),
                                match (p.warp_specialized, p.persistent) {
                                    (true, true) => ", warp_specialized=true, persistent=true",
                                    (true, false) => ", warp_specialized=true",
                                    _ => "",
                                },
                                self.buf_list("prologue", &p.prologue),
                                match &p.ws_why {
                                    Some(w) => format!(", ws_why={w:?}"),
                                    None => String::new(),
                                },
                                self.buf_list("multicast", &p.multicast),
                                self.buf_list("multicast_y", &p.multicast_y),
                                match &p.multicast_why {
                                    Some(w) => format!(", multicast_why={w:?}"),
                                    None => String::new(),
                                },
                                match p.rotate {
                                    Some(r) => format!(
                                        ", rotate=(first={}, late={}, wait={}{})",
                                        r.first,
                                        r.late,
                                        r.wait,
                                        if r.pingpong { ", pingpong=true" } else { "" }
                                    ),
                                    None => String::new(),
                                },
                                self.buf_list("deferred", &p.deferred_tiles),
                                self.split(p)
                            )
                        }
                    },
                };
                let t = format!(
                    "for {} in {k}({}, {}):",
                    f.var(*var).name,
                    self.expr(start),
                    self.expr(extent)
                );
                self.line(d, &t);
                self.stmt(body, d + 1);
            }
            Stmt::If {
                cond, then, els, ..
            } => {
                let t = format!("if {}:", self.expr(cond));
                self.line(d, &t);
                self.stmt(then, d + 1);
                if let Some(e) = els {
                    self.line(d, "else:");
                    self.stmt(e, d + 1);
                }
            }
            Stmt::Alloc { buf, .. } => {
                let b = f.buf(*buf);
                let layout = match b.layout {
                    None => String::new(),
                    Some(Layout::Swizzled) => ", layout=\"swizzled\"".to_string(),
                    Some(Layout::Mma { wm, wn }) => format!(", layout=\"mma({wm}x{wn})\""),
                    Some(Layout::WgmmaOperand) => ", layout=\"wgmma_operand\"".to_string(),
                    Some(Layout::Wgmma { wgs }) => format!(", layout=\"wgmma({wgs})\""),
                    Some(Layout::MmaRows { wm, wn }) => {
                        format!(", layout=\"mma_rows({wm}x{wn})\"")
                    }
                    Some(Layout::WgmmaRows { wgs }) => format!(", layout=\"wgmma_rows({wgs})\""),
                };
                // Set on CUDA by `merge_shared`: the byte range in shared memory.
                let place = match f.smem.slots.get(buf) {
                    Some((off, bytes)) => format!(", smem=[{off}, {})", off + bytes),
                    None => String::new(),
                };
                // Set on CUDA by `vectorize`: elements per chunk of a fragment.
                let chunk = match f.schedule.fragments.get(buf) {
                    Some(v) => format!(", chunk={v}"),
                    None => String::new(),
                };
                let t = format!(
                    "{} = T.alloc_buffer({}, {}, scope=\"{}\"{layout}{place}{chunk})",
                    b.name,
                    self.shape(&b.shape),
                    b.dtype,
                    b.scope.name()
                );
                self.line(d, &t);
            }
            Stmt::Copy {
                src,
                dst,
                inst,
                prefer,
                pad,
                ..
            } => {
                let mut prefer = match prefer {
                    CopyPref::Auto => String::new(),
                    p => format!(", prefer=\"{}\"", p.name()),
                };
                if let Some(p) = pad {
                    prefer += &format!(", pad={}", self.expr(p));
                }
                // Set on CUDA by `lower_tile_ops`.
                let inst = match inst {
                    CopyInst::Loops => String::new(),
                    CopyInst::CpAsyncTile { vector_if: None } => {
                        ", inst=\"cp_async_tile\", vector=false".to_string()
                    }
                    CopyInst::CpAsyncTile { vector_if: Some(d) } if d.is_empty() => {
                        ", inst=\"cp_async_tile\"".to_string()
                    }
                    CopyInst::CpAsyncTile { vector_if: Some(d) } => {
                        let names: Vec<&str> = d.iter().map(|&v| f.var(v).name.as_str()).collect();
                        format!(", inst=\"cp_async_tile\", vector_if=({})", names.join(", "))
                    }
                    CopyInst::Tma { vector_if } => {
                        let names: Vec<&str> =
                            vector_if.iter().map(|&v| f.var(v).name.as_str()).collect();
                        format!(", inst=\"tma\", vector_if=({})", names.join(", "))
                    }
                };
                let t = format!(
                    "T.copy({}, {}{prefer}{inst})",
                    self.region(src),
                    self.region(dst)
                );
                self.line(d, &t);
            }
            Stmt::AtomicAddTile { src, dst, .. } => {
                let t = format!("T.atomic_add({}, {})", self.region(dst), self.region(src));
                self.line(d, &t);
            }
            Stmt::Fill { dst, value, .. } => {
                let t = format!("T.fill({}, {})", self.region(dst), self.expr(value));
                self.line(d, &t);
            }
            Stmt::Gemm(g) => {
                // Set on CUDA by `plan_mma`.
                let inst = match g.inst {
                    GemmInst::Loops => String::new(),
                    GemmInst::MmaSync { wm, wn } => format!(", inst=\"mma_sync({wm}x{wn})\""),
                    GemmInst::Wgmma { wgs } => format!(", inst=\"wgmma({wgs})\""),
                };
                let inst = match &g.why {
                    Some(w) => format!("{inst}, why={w:?}"),
                    None => inst,
                };
                let t = format!(
                    "T.gemm({}, {}, {}, transpose_A={}, transpose_B={}, clear_accum={}{inst})",
                    f.buf(g.a).name,
                    f.buf(g.b).name,
                    f.buf(g.c).name,
                    g.trans_a,
                    g.trans_b,
                    g.clear
                );
                self.line(d, &t);
            }
            Stmt::Reduce(r) => {
                let t = format!(
                    "T.reduce_{}({}, {}, dim={}, clear={})",
                    r.op.name(),
                    f.buf(r.src).name,
                    f.buf(r.dst).name,
                    r.dim,
                    r.clear
                );
                self.line(d, &t);
            }
            Stmt::Print { label, value, .. } => {
                let t = format!("T.print({}, msg={label:?})", self.expr(value));
                self.line(d, &t);
            }
            Stmt::Barrier => self.line(d, "T.sync_threads()"),
        }
    }

    fn list(&self, v: &[Expr]) -> String {
        v.iter()
            .map(|e| self.expr(e))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn expr(&self, e: &Expr) -> String {
        let f = self.f;
        match e {
            Expr::Int(v, DType::I32) => format!("{v}"),
            Expr::Int(v, t) => format!("T.{}({v})", t.name()),
            Expr::Float(v, t) => format!("T.{}({v:?})", t.name()),
            Expr::Bool(b) => (if *b { "True" } else { "False" }).to_string(),
            Expr::Var(v, _) => f.var(*v).name.clone(),
            Expr::Load(b, idx, _) => format!("{}[{}]", f.buf(*b).name, self.list(idx)),
            Expr::Bin(op, a, b, _) => match op {
                BinOp::Min | BinOp::Max => {
                    format!("T.{}({}, {})", op.symbol(), self.expr(a), self.expr(b))
                }
                _ => format!("({} {} {})", self.expr(a), op.symbol(), self.expr(b)),
            },
            Expr::Not(a) => format!("not {}", self.expr(a)),
            Expr::Neg(a, _) => format!("-{}", self.expr(a)),
            Expr::Cast(t, a) => format!("T.Cast(\"{}\", {})", t.name(), self.expr(a)),
            Expr::Select(c, a, b, _) => {
                format!(
                    "T.if_then_else({}, {}, {})",
                    self.expr(c),
                    self.expr(a),
                    self.expr(b)
                )
            }
            Expr::Thread => "T.get_thread_binding(0)".to_string(),
            Expr::Call(Intrin::Bitcast, args, t) => {
                format!("T.bitcast(\"{}\", {})", t.name(), self.list(args))
            }
            Expr::Call(i, args, _) => {
                let mut s = String::new();
                let _ = write!(s, "T.{}({})", i.name(), self.list(args));
                s
            }
        }
    }
}
