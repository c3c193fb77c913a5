//! Statements of the script: one a line, blocks by indentation.

use super::lex::{Cursor, Tok};
use super::{Reader, Res};
use crate::ir::*;

fn reduce_op(name: &str) -> Option<ReduceOp> {
    use ReduceOp::*;
    [Sum, Max, Min, AbsSum]
        .into_iter()
        .find(|op| op.name() == name)
}

fn scope_named(name: &str) -> Option<Scope> {
    use Scope::*;
    [Global, Shared, Fragment, Local]
        .into_iter()
        .find(|s| s.name() == name)
}

/// `mma_sync(WMxWN)` or `wgmma(WGS)`.
fn gemm_inst_named(s: &str) -> Option<GemmInst> {
    if let Some(w) = s.strip_prefix("wgmma(").and_then(|r| r.strip_suffix(')')) {
        return Some(GemmInst::Wgmma {
            wgs: w.parse().ok()?,
        });
    }
    let (wm, wn) = s
        .strip_prefix("mma_sync(")?
        .strip_suffix(')')?
        .split_once('x')?;
    Some(GemmInst::MmaSync {
        wm: wm.parse().ok()?,
        wn: wn.parse().ok()?,
    })
}

/// Moves the cursor to the next `close` at bracket depth 0 (not past it).
fn skip_until(c: &mut Cursor, close: &str) -> Res<()> {
    let mut depth = 0;
    loop {
        match c.peek() {
            Some(Tok::Punct(p)) if depth == 0 && *p == close => return Ok(()),
            Some(Tok::Punct("(" | "[")) => depth += 1,
            Some(Tok::Punct(")" | "]")) => depth -= 1,
            None => return c.expected(&format!("`{close}`")),
            _ => {}
        }
        c.i += 1;
    }
}

fn layout_named(s: &str) -> Option<Layout> {
    match s {
        "swizzled" => return Some(Layout::Swizzled),
        "wgmma_operand" => return Some(Layout::WgmmaOperand),
        _ => {}
    }
    if let Some(w) = s
        .strip_prefix("wgmma_rows(")
        .and_then(|r| r.strip_suffix(')'))
    {
        return Some(Layout::WgmmaRows {
            wgs: w.parse().ok()?,
        });
    }
    if let Some(r) = s
        .strip_prefix("mma_rows(")
        .and_then(|r| r.strip_suffix(')'))
    {
        let (wm, wn) = r.split_once('x')?;
        return Some(Layout::MmaRows {
            wm: wm.parse().ok()?,
            wn: wn.parse().ok()?,
        });
    }
    if let Some(w) = s.strip_prefix("wgmma(").and_then(|r| r.strip_suffix(')')) {
        return Some(Layout::Wgmma {
            wgs: w.parse().ok()?,
        });
    }
    let (wm, wn) = s.strip_prefix("mma(")?.strip_suffix(')')?.split_once('x')?;
    Some(Layout::Mma {
        wm: wm.parse().ok()?,
        wn: wn.parse().ok()?,
    })
}

impl Reader {
    /// The statements at `depth`, up to the first line indented less.
    pub(super) fn block(&mut self, depth: usize) -> Res<Vec<Stmt>> {
        match self.line() {
            Some(l) if l.indent == depth * 4 => {}
            // Too deep: `take_line` says by how much.
            Some(l) if l.indent > depth * 4 => return self.take_line(depth).map(|_| Vec::new()),
            _ => return self.err_here("expected an indented block"),
        }
        let mut out = Vec::new();
        while let Some(l) = self.line() {
            if l.indent < depth * 4 {
                break;
            }
            out.push(self.stmt(depth)?);
        }
        Ok(out)
    }

    /// A nested block: one statement stands alone, several make a `Seq`.
    pub(super) fn body(&mut self, depth: usize) -> Res<Box<Stmt>> {
        let mut v = self.block(depth)?;
        Ok(Box::new(if v.len() == 1 {
            v.pop().unwrap_or(Stmt::Seq(Vec::new()))
        } else {
            Stmt::Seq(v)
        }))
    }

    pub(super) fn stmt(&mut self, depth: usize) -> Res<Stmt> {
        let l = self.take_line(depth)?;
        let mut c = Cursor::new(&l);
        let s = match (c.peek(), c.peek_at(1)) {
            (Some(Tok::Ident(k)), None) if k == "pass" => {
                c.i += 1;
                Stmt::Seq(Vec::new())
            }
            (Some(Tok::Ident(k)), _) if k == "for" => return self.for_stmt(&mut c, depth),
            (Some(Tok::Ident(k)), _) if k == "if" => return self.if_stmt(&mut c, depth),
            (Some(Tok::Ident(k)), Some(Tok::Punct("."))) if k == "T" => self.tile_op(&mut c)?,
            (Some(Tok::Ident(_)), Some(Tok::Punct(":"))) => {
                let name = c.ident()?;
                c.punct(":")?;
                let t = c.dtype()?;
                c.punct("=")?;
                let value = self.expr(&mut c)?;
                let var = self.new_var(&c, &name, t)?;
                Stmt::Let { var, value }
            }
            (Some(Tok::Ident(_)), Some(Tok::Punct("="))) => self.binding(&mut c)?,
            (Some(Tok::Ident(_)), Some(Tok::Punct("["))) => {
                let buf = self.buf(&mut c)?;
                c.punct("[")?;
                let idx = self.exprs(&mut c, "]")?;
                c.punct("]")?;
                c.punct("=")?;
                let value = self.expr(&mut c)?;
                Stmt::Store {
                    buf,
                    idx,
                    value,
                    loc: Loc::NONE,
                }
            }
            _ => return c.expected("a statement"),
        };
        c.end()?;
        Ok(s)
    }

    /// `x = T.alloc_var(..)`, `x = T.alloc_buffer(..)` or `x = value`.
    pub(super) fn binding(&mut self, c: &mut Cursor) -> Res<Stmt> {
        let name = c.ident()?;
        c.punct("=")?;
        let alloc = match (c.peek(), c.peek_at(1), c.peek_at(2)) {
            (Some(Tok::Ident(t)), Some(Tok::Punct(".")), Some(Tok::Ident(f))) if t == "T" => {
                Some(f.as_str()).filter(|f| matches!(*f, "alloc_var" | "alloc_buffer"))
            }
            _ => None,
        };
        match alloc {
            Some("alloc_var") => {
                c.i += 3;
                c.punct("(")?;
                let t = c.dtype()?;
                c.punct(",")?;
                c.kwarg("init")?;
                let init = self.expr(c)?;
                c.punct(")")?;
                let var = self.new_var(c, &name, t)?;
                Ok(Stmt::Local { var, init })
            }
            Some(_) => {
                c.i += 3;
                self.alloc(c, name)
            }
            None => {
                c.i -= 2;
                let var = self.var_named(c, &name)?;
                c.i += 2;
                let value = self.expr(c)?;
                Ok(Stmt::Assign { var, value })
            }
        }
    }

    /// `(shape, dtype, scope=".."[, layout=".."][, smem=[lo, hi)])`
    pub(super) fn alloc(&mut self, c: &mut Cursor, name: String) -> Res<Stmt> {
        c.punct("(")?;
        let shape = self.shape(c)?;
        c.punct(",")?;
        let dtype = c.dtype()?;
        c.punct(",")?;
        c.kwarg("scope")?;
        let s = c.string()?;
        let Some(scope) = scope_named(&s) else {
            c.i -= 1;
            return c.err(format!("unknown scope {s:?}"));
        };
        let mut layout = None;
        let mut slot = None;
        let mut chunk = None;
        while c.eat_punct(",") {
            if c.eat_ident("chunk") {
                c.punct("=")?;
                chunk = Some(c.int()?);
            } else if c.eat_ident("layout") {
                c.punct("=")?;
                let s = c.string()?;
                layout = layout_named(&s);
                if layout.is_none() {
                    c.i -= 1;
                    return c.err(format!(
                        "unknown layout {s:?} (\"swizzled\" or \"mma(WMxWN)\")"
                    ));
                }
            } else {
                c.kwarg("smem")?;
                c.punct("[")?;
                let lo = c.int()?;
                c.punct(",")?;
                let hi = c.int()?;
                c.punct(")")?;
                slot = Some((lo, hi - lo));
            }
        }
        c.punct(")")?;
        let buf = self.new_buf(
            c,
            Buffer {
                name,
                dtype,
                shape,
                scope,
                mutable: true,
                layout,
            },
        )?;
        if let Some(slot) = slot {
            self.f.smem.slots.insert(buf, slot);
        }
        if let Some(v) = chunk {
            self.f.schedule.fragments.insert(buf, v);
        }
        Ok(Stmt::Alloc {
            buf,
            loc: Loc::NONE,
        })
    }

    /// `for v in T.kind(start, extent):` and its body.
    pub(super) fn for_stmt(&mut self, c: &mut Cursor, depth: usize) -> Res<Stmt> {
        c.keyword("for")?;
        let name = c.ident()?;
        c.keyword("in")?;
        // A nest's plan names variables its body declares: read it after.
        let mut nest_plan_at = None;
        let mut producers = None;
        let kind = match c.t_name()?.as_str() {
            "serial" => ForKind::Serial,
            "Parallel" => {
                if c.eat_punct("[") {
                    nest_plan_at = Some(c.i);
                    skip_until(c, "]")?;
                    c.punct("]")?;
                }
                ForKind::Parallel
            }
            "unroll" => ForKind::Unrolled,
            "Pipelined" => {
                c.punct("[")?;
                c.kwarg("num_stages")?;
                let stages = c.int()?;
                if c.eat_punct(",") {
                    c.kwarg("producers")?;
                    let tiles = self.buf_list(c)?;
                    let (mut warp_specialized, mut persistent) = (false, false);
                    let (mut rotate, mut deferred_tiles) = (None, Vec::new());
                    let (mut multicast, mut multicast_why) = (Vec::new(), None);
                    let mut multicast_y = Vec::new();
                    let mut ws_why = None;
                    let (mut split, mut split_why) = (None, None);
                    let mut prologue = Vec::new();
                    // The plan's optional fields, in the printer's order.
                    while c.eat_punct(",") {
                        if c.at_ident("warp_specialized") && !warp_specialized {
                            c.kwarg("warp_specialized")?;
                            c.keyword("true")?;
                            warp_specialized = true;
                        } else if c.at_ident("persistent") && warp_specialized && !persistent {
                            c.kwarg("persistent")?;
                            c.keyword("true")?;
                            persistent = true;
                        } else if c.at_ident("prologue") && warp_specialized && prologue.is_empty()
                        {
                            c.kwarg("prologue")?;
                            prologue = self.buf_list(c)?;
                        } else if c.at_ident("ws_why") && !warp_specialized && ws_why.is_none() {
                            c.kwarg("ws_why")?;
                            ws_why = Some(c.string()?);
                        } else if c.at_ident("multicast") && multicast.is_empty() {
                            c.kwarg("multicast")?;
                            multicast = self.buf_list(c)?;
                        } else if c.at_ident("multicast_y") && multicast_y.is_empty() {
                            c.kwarg("multicast_y")?;
                            multicast_y = self.buf_list(c)?;
                        } else if c.at_ident("multicast_why") && multicast_why.is_none() {
                            c.kwarg("multicast_why")?;
                            multicast_why = Some(c.string()?);
                        } else if c.at_ident("rotate") && rotate.is_none() {
                            c.kwarg("rotate")?;
                            c.punct("(")?;
                            let field = |c: &mut Cursor, name: &str, last: bool| {
                                c.kwarg(name)?;
                                let v = c.int()?;
                                if !last {
                                    c.punct(",")?;
                                }
                                usize::try_from(v).or_else(|_| c.err("expected a count"))
                            };
                            let first = field(c, "first", false)?;
                            let late = field(c, "late", false)?;
                            let wait = field(c, "wait", true)?;
                            let mut pingpong = false;
                            if c.eat_punct(",") {
                                c.kwarg("pingpong")?;
                                c.keyword("true")?;
                                pingpong = true;
                            }
                            c.punct(")")?;
                            rotate = Some(Rotation {
                                first,
                                late,
                                wait,
                                pingpong,
                            });
                        } else if c.at_ident("deferred")
                            && rotate.is_some()
                            && deferred_tiles.is_empty()
                        {
                            c.kwarg("deferred")?;
                            deferred_tiles = self.buf_list(c)?;
                        } else if c.at_ident("split_k") && split.is_none() {
                            c.kwarg("split_k")?;
                            c.punct("(")?;
                            let blocks = c.int()?;
                            let mut accs = Vec::new();
                            while c.eat_punct(",") {
                                accs.push(self.buf(c)?);
                            }
                            c.punct(")")?;
                            split = Some(Split { blocks, accs });
                        } else if c.at_ident("split_why") && split_why.is_none() {
                            c.kwarg("split_why")?;
                            split_why = Some(c.string()?);
                        } else {
                            return c.expected(
                                "`warp_specialized`, `persistent`, `prologue`, `ws_why`, `multicast`, `multicast_y`, `multicast_why`, `rotate`, `deferred`, `split_k` or `split_why`",
                            );
                        }
                    }
                    producers = Some(Pipeline {
                        stages,
                        tiles,
                        warp_specialized,
                        persistent,
                        rotate,
                        deferred_tiles,
                        multicast,
                        multicast_y,
                        multicast_why,
                        ws_why,
                        split,
                        split_why,
                        prologue,
                    });
                }
                c.punct("]")?;
                ForKind::Pipelined { stages }
            }
            _ => {
                c.i -= 1;
                return c.expected("`serial`, `Parallel`, `unroll` or `Pipelined`");
            }
        };
        c.punct("(")?;
        let start = self.expr(c)?;
        c.punct(",")?;
        let extent = self.expr(c)?;
        c.punct(")")?;
        c.punct(":")?;
        c.end()?;
        let var = self.new_var(c, &name, DType::I32)?;
        let body = self.body(depth + 1)?;
        if let Some(p) = producers {
            self.f.schedule.pipelines.insert(var, p);
        }
        if let Some(at) = nest_plan_at {
            let end = c.i;
            c.i = at;
            let plan = self.nest_plan(c)?;
            c.i = end;
            self.f.schedule.nests.insert(var, plan);
        }
        Ok(Stmt::For {
            var,
            start,
            extent,
            kind,
            body,
            loc: Loc::NONE,
        })
    }

    /// `vector=V[, pair_store_if=(d..)][, vectorized=[a[..], ..]]
    /// [, vector_if=(W, d..)[, vectorized_if=[..]]][, words_if=(W, d..)
    /// [, vectorized_words=[..]]][, batch=B]`, up to the `]`.
    fn nest_plan(&self, c: &mut Cursor) -> Res<NestPlan> {
        c.kwarg("vector")?;
        let mut plan = NestPlan {
            vector: c.int()?,
            wide: None,
            vectorized: Vec::new(),
            wide_vectorized: Vec::new(),
            mid: None,
            mid_vectorized: Vec::new(),
            pair_store_if: None,
            batch: 1,
        };
        while c.eat_punct(",") {
            let key = c.ident()?;
            c.punct("=")?;
            match key.as_str() {
                "pair_store_if" => plan.pair_store_if = Some(self.var_list(c)?),
                "vectorized" => plan.vectorized = self.access_list(c)?,
                "vectorized_if" => plan.wide_vectorized = self.access_list(c)?,
                "batch" => plan.batch = c.int()?,
                "vector_if" => plan.wide = Some(self.width_test(c)?),
                "words_if" => plan.mid = Some(self.width_test(c)?),
                "vectorized_words" => plan.mid_vectorized = self.access_list(c)?,
                _ => {
                    c.i -= 2;
                    return c
                        .expected("`pair_store_if`, `vectorized`, `vector_if`, `vectorized_if`, `words_if`, `vectorized_words` or `batch`");
                }
            }
        }
        Ok(plan)
    }

    /// `(W, d, ..)`: a width and the dynamic dims tested for it.
    fn width_test(&self, c: &mut Cursor) -> Res<(i64, Vec<VarId>)> {
        c.punct("(")?;
        let w = c.int()?;
        let mut dims = Vec::new();
        while c.eat_punct(",") {
            let name = c.ident()?;
            dims.push(self.var_named(c, &name)?);
        }
        c.punct(")")?;
        Ok((w, dims))
    }

    /// `(a, b, ..)` of variable names (possibly empty).
    fn var_list(&self, c: &mut Cursor) -> Res<Vec<VarId>> {
        c.punct("(")?;
        let mut v = Vec::new();
        while !c.at_punct(")") {
            let name = c.ident()?;
            v.push(self.var_named(c, &name)?);
            if !c.eat_punct(",") {
                break;
            }
        }
        c.punct(")")?;
        Ok(v)
    }

    /// `(a, b, ..)` of one or more buffer names.
    fn buf_list(&self, c: &mut Cursor) -> Res<Vec<BufId>> {
        c.punct("(")?;
        let mut v = vec![self.buf(c)?];
        while c.eat_punct(",") {
            v.push(self.buf(c)?);
        }
        c.punct(")")?;
        Ok(v)
    }

    /// `[a[i, j], c[i]]`.
    fn access_list(&self, c: &mut Cursor) -> Res<Vec<(BufId, Vec<Expr>)>> {
        c.punct("[")?;
        let mut v = Vec::new();
        loop {
            let b = self.buf(c)?;
            c.punct("[")?;
            let idx = self.exprs(c, "]")?;
            c.punct("]")?;
            v.push((b, idx));
            if !c.eat_punct(",") {
                break;
            }
        }
        c.punct("]")?;
        Ok(v)
    }

    /// `if cond:` and its body, then an `else:` and its body if present.
    pub(super) fn if_stmt(&mut self, c: &mut Cursor, depth: usize) -> Res<Stmt> {
        c.keyword("if")?;
        let cond = self.expr(c)?;
        c.punct(":")?;
        c.end()?;
        let then = self.body(depth + 1)?;
        let is_else = self.line().is_some_and(|l| {
            l.indent == depth * 4
                && matches!(l.tokens.first().map(|t| &t.tok), Some(Tok::Ident(e)) if e == "else")
        });
        let els = if is_else {
            let l = self.take_line(depth)?;
            let mut c = Cursor::new(&l);
            c.keyword("else")?;
            c.punct(":")?;
            c.end()?;
            Some(self.body(depth + 1)?)
        } else {
            None
        };
        Ok(Stmt::If {
            cond,
            then,
            els,
            loc: Loc::NONE,
        })
    }

    /// `T.copy(..)`, `T.fill(..)`, `T.gemm(..)`, .. (the line after `T.`).
    pub(super) fn tile_op(&mut self, c: &mut Cursor) -> Res<Stmt> {
        let op = c.t_name()?;
        c.punct("(")?;
        let s = match op.as_str() {
            "copy" => {
                let src = self.region(c)?;
                c.punct(",")?;
                let dst = self.region(c)?;
                let mut inst = CopyInst::Loops;
                let mut prefer = CopyPref::Auto;
                let mut more = c.eat_punct(",");
                if more && c.eat_ident("prefer") {
                    c.punct("=")?;
                    let name = c.string()?;
                    let Some(p) = CopyPref::from_name(&name) else {
                        c.i -= 1;
                        return c.err(format!("unknown copy preference {name:?}"));
                    };
                    prefer = p;
                    more = c.eat_punct(",");
                }
                let mut pad = None;
                if more && c.eat_ident("pad") {
                    c.punct("=")?;
                    pad = Some(self.expr(c)?);
                    more = c.eat_punct(",");
                }
                if more {
                    c.kwarg("inst")?;
                    let name = c.string()?;
                    if name == "tma" {
                        c.punct(",")?;
                        c.kwarg("vector_if")?;
                        inst = CopyInst::Tma {
                            vector_if: self.var_list(c)?,
                        };
                    } else if name == "cp_async_tile" {
                        let mut vector_if = Some(Vec::new());
                        if c.eat_punct(",") {
                            if c.eat_ident("vector") {
                                c.punct("=")?;
                                c.keyword("false")?;
                                vector_if = None;
                            } else {
                                c.kwarg("vector_if")?;
                                vector_if = Some(self.var_list(c)?);
                            }
                        }
                        inst = CopyInst::CpAsyncTile { vector_if };
                    } else {
                        c.i -= 1;
                        return c.err(format!("unknown copy instruction {name:?}"));
                    }
                }
                Stmt::Copy {
                    src,
                    dst,
                    inst,
                    prefer,
                    pad,
                    loc: Loc::NONE,
                }
            }
            "atomic_add" => {
                let buf = self.buf(c)?;
                c.punct("[")?;
                let idx = self.exprs(c, ";")?;
                if c.eat_punct(";") {
                    let dst = Region {
                        buf,
                        origin: idx,
                        extent: self.exprs(c, "]")?,
                    };
                    c.punct("]")?;
                    c.punct(",")?;
                    let src = self.region(c)?;
                    Stmt::AtomicAddTile {
                        src,
                        dst,
                        loc: Loc::NONE,
                    }
                } else {
                    c.punct("]")?;
                    c.punct(",")?;
                    let value = self.expr(c)?;
                    Stmt::AtomicAdd {
                        buf,
                        idx,
                        value,
                        loc: Loc::NONE,
                    }
                }
            }
            "fill" => {
                let dst = self.region(c)?;
                c.punct(",")?;
                Stmt::Fill {
                    dst,
                    value: self.expr(c)?,
                    loc: Loc::NONE,
                }
            }
            "gemm" => {
                let a = self.buf(c)?;
                c.punct(",")?;
                let b = self.buf(c)?;
                c.punct(",")?;
                let cb = self.buf(c)?;
                let mut flags = [false; 3];
                for (flag, name) in
                    flags
                        .iter_mut()
                        .zip(["transpose_A", "transpose_B", "clear_accum"])
                {
                    c.punct(",")?;
                    c.kwarg(name)?;
                    *flag = c.boolean()?;
                }
                let (mut inst, mut why) = (GemmInst::Loops, None);
                while c.eat_punct(",") {
                    if why.is_none() && c.eat_ident("why") {
                        c.punct("=")?;
                        why = Some(c.string()?);
                        continue;
                    }
                    c.kwarg("inst")?;
                    let name = c.string()?;
                    let Some(i) = gemm_inst_named(&name) else {
                        c.i -= 1;
                        return c.err(format!("unknown gemm instruction {name:?}"));
                    };
                    inst = i;
                }
                Stmt::Gemm(Gemm {
                    loc: Loc::NONE,
                    inst,
                    a,
                    b,
                    c: cb,
                    trans_a: flags[0],
                    trans_b: flags[1],
                    clear: flags[2],
                    why,
                })
            }
            "print" => {
                let value = self.expr(c)?;
                c.punct(",")?;
                c.kwarg("msg")?;
                Stmt::Print {
                    label: c.string()?,
                    value,
                    loc: Loc::NONE,
                }
            }
            "sync_threads" => Stmt::Barrier,
            r => {
                let Some(op) = r.strip_prefix("reduce_").and_then(reduce_op) else {
                    c.i -= 2;
                    return c.expected("a tile op (`copy`, `fill`, `gemm`, `reduce_sum`, ..)");
                };
                let src = self.buf(c)?;
                c.punct(",")?;
                let dst = self.buf(c)?;
                c.punct(",")?;
                c.kwarg("dim")?;
                let dim = c.int()?;
                let Ok(dim) = usize::try_from(dim) else {
                    c.i -= 1;
                    return c.err("a negative dim");
                };
                c.punct(",")?;
                c.kwarg("clear")?;
                let clear = c.boolean()?;
                Stmt::Reduce(Reduce {
                    loc: Loc::NONE,
                    src,
                    dst,
                    dim,
                    op,
                    clear,
                })
            }
        };
        c.punct(")")?;
        Ok(s)
    }

    /// `buf[origin..; extent..]`
    pub(super) fn region(&self, c: &mut Cursor) -> Res<Region> {
        let buf = self.buf(c)?;
        c.punct("[")?;
        let origin = self.exprs(c, ";")?;
        c.punct(";")?;
        let extent = self.exprs(c, "]")?;
        c.punct("]")?;
        Ok(Region {
            buf,
            origin,
            extent,
        })
    }

    /// `(d,)` or `(d0, d1, ..)`
    pub(super) fn shape(&self, c: &mut Cursor) -> Res<Vec<Expr>> {
        c.punct("(")?;
        let mut v = vec![self.expr(c)?];
        c.punct(",")?;
        if !c.at_punct(")") {
            v.extend(self.exprs(c, ")")?);
        }
        c.punct(")")?;
        Ok(v)
    }
}
