//! Guards global accesses that the compiler cannot prove in bounds.
//!
//! A store to a global buffer is wrapped in `if (idx_d < shape_d && ..)`; a
//! global load whose condition the enclosing store guard does not already
//! cover becomes `cond ? load : 0` (the zero padding TileLang's copies give
//! on ragged edges). Proof: interval analysis with constant loop and grid
//! extents, and the symbolic cases "index is a loop variable running over
//! exactly that dim" and "index is a block index whose grid extent is that
//! dim". An index that interval analysis cannot prove non-negative (one
//! that subtracts, or one read from memory) is checked from below as well.
//!
//! Interior fast path: a `T::parallel` nest whose guards are all monotone in
//! the nest's indices is split into `if (whole tile in bounds) { unguarded
//! nest } else { guarded nest }`. Every full tile then runs the vectorizable
//! form and only the ragged edge pays for the checks (with dynamic shapes,
//! this is what keeps an element-wise kernel at full bandwidth). Nests over
//! plain fragments split too (`vectorize` gives both branches the fragment's
//! one chunk width, and the edge does its accesses lane by lane); nests over
//! an accumulator or a per-row fragment do not (their layouts come from the
//! gemm, and their epilogues have a paired-store form of their own).

use crate::analysis::range::Env;
use crate::diag::Diagnostic;
use crate::ir::*;

/// `e` computed in 64 bits where 32 might overflow: each operation `env`
/// cannot prove fits in `int` gets an operand cast to `int64` (C's usual
/// conversions then compute it, and everything above it, in 64 bits);
/// parts that fit keep their 32-bit form.
fn widen(e: Expr, env: &Env) -> Expr {
    if e.dtype().bytes() > 4 || !e.dtype().is_int() || env.fits_i32(&e) {
        return e;
    }
    let wide = |x: Expr| match x.dtype() {
        DType::I64 | DType::U64 => x,
        _ => Expr::Cast(DType::I64, Box::new(x)),
    };
    match e {
        Expr::Bin(op, a, b, _) if !op.is_cmp() && !op.is_logic() => {
            let (a, b) = (widen(*a, env), widen(*b, env));
            let both = matches!(op, BinOp::Min | BinOp::Max);
            let (a, b) = if both || b.dtype().bytes() <= 4 {
                (wide(a), if both { wide(b) } else { b })
            } else {
                (a, b)
            };
            Expr::Bin(op, Box::new(a), Box::new(b), DType::I64)
        }
        Expr::Neg(a, _) => Expr::Neg(Box::new(wide(widen(*a, env))), DType::I64),
        Expr::Select(c, a, b, _) => Expr::Select(
            c,
            Box::new(wide(widen(*a, env))),
            Box::new(wide(widen(*b, env))),
            DType::I64,
        ),
        Expr::Cast(t, a) => Expr::Cast(t, Box::new(widen(*a, env))),
        e => e,
    }
}

pub fn run(mut f: PrimFunc) -> Result<PrimFunc, Diagnostic> {
    let mut env = Env::at_launch(&f);
    let body = std::mem::replace(&mut f.body, Stmt::Seq(Vec::new()));
    let mut p = Pass {
        f,
        loops: Vec::new(),
        emitted: Vec::new(),
        extra: Default::default(),
        inner_lets: Default::default(),
        in_nest: false,
    };
    let body = p.stmt(body, &mut env);
    let mut f = p.f;
    f.body = body;
    Ok(f)
}

struct Pass {
    f: PrimFunc,
    /// Enclosing loops: (var, start, extent).
    loops: Vec<(VarId, Expr, Expr)>,
    /// Guard conditions emitted in the current nest, with lets inlined.
    emitted: Vec<Expr>,
    /// Same, for load guards (collected through `&self`).
    extra: std::cell::RefCell<Vec<Expr>>,
    in_nest: bool,
    /// Lets bound inside the current nest (since it was entered).
    inner_lets: std::collections::HashMap<VarId, Expr>,
}

/// Whether `e` is non-decreasing in each of `vars` (sums and products by
/// non-negative constants of them; other parts must not mention them).
fn monotone(e: &Expr, vars: &[VarId]) -> bool {
    let mentions = |x: &Expr| vars.iter().any(|v| x.uses_var(*v));
    match e {
        _ if !mentions(e) => true,
        Expr::Var(..) => true,
        Expr::Cast(t, a) if t.is_int() => monotone(a, vars),
        Expr::Bin(BinOp::Add, a, b, _) => monotone(a, vars) && monotone(b, vars),
        Expr::Bin(BinOp::Mul, a, b, _) => match (a.as_int(), b.as_int()) {
            (Some(c), _) => c >= 0 && monotone(b, vars),
            (_, Some(c)) => c >= 0 && monotone(a, vars),
            _ => false,
        },
        _ => false,
    }
}

/// Copies `s` with fresh variables for everything it defines.
fn fresh_copy(f: &mut PrimFunc, s: &Stmt) -> Stmt {
    let mut defs = Vec::new();
    s.visit(&mut |x| match x {
        Stmt::For { var, .. } | Stmt::Let { var, .. } | Stmt::Local { var, .. } => defs.push(*var),
        _ => {}
    });
    let mut map = std::collections::HashMap::new();
    for v in defs {
        let (name, t) = (f.var(v).name.clone(), f.var(v).dtype);
        map.insert(v, f.new_var(&name, t));
    }
    rename(s.clone(), &map)
}

/// `s` with the variables of `m` renamed, where defined and where used.
fn rename(s: Stmt, m: &std::collections::HashMap<VarId, VarId>) -> Stmt {
    let v = |x: VarId| *m.get(&x).unwrap_or(&x);
    s.fold(&mut |s| {
        let s = match s {
            Stmt::Let { var, value } => Stmt::Let { var: v(var), value },
            Stmt::Local { var, init } => Stmt::Local { var: v(var), init },
            Stmt::Assign { var, value } => Stmt::Assign { var: v(var), value },
            Stmt::For {
                var,
                start,
                extent,
                kind,
                body,
                loc,
            } => Stmt::For {
                var: v(var),
                start,
                extent,
                kind,
                body,
                loc,
            },
            s => s,
        };
        s.map_own_exprs(&mut |e| {
            e.map(&mut |y| match y {
                Expr::Var(x, t) => Expr::Var(v(x), t),
                y => y,
            })
        })
    })
}

impl Pass {
    /// The let bindings made inside the current nest: guards hoisted above
    /// it must not mention them, so they are substituted. Lets from outside
    /// stay by name (e.g. swizzled block indices computed once).
    fn nest_lets(&self) -> &std::collections::HashMap<VarId, Expr> {
        &self.inner_lets
    }

    /// Splits a guarded nest into an interior (unguarded) and an edge version.
    fn split_interior(&mut self, orig: Stmt, guarded: Stmt, conds: Vec<Expr>, env: &Env) -> Stmt {
        let Some(Nest {
            vars, extents: ext, ..
        }) = orig.parallel_nest()
        else {
            return guarded;
        };
        let own_layout = |b: BufId| {
            let b = self.f.buf(b);
            b.scope == Scope::Fragment && b.layout.is_some()
        };
        let touches_laid_out = {
            let mut t = false;
            orig.visit_exprs(&mut |x| {
                if let Expr::Load(b, _, _) = x {
                    t |= own_layout(*b);
                }
            });
            orig.visit(&mut |x| {
                if let Stmt::Store { buf, .. } = x {
                    t |= own_layout(*buf);
                }
            });
            t
        };
        if touches_laid_out || vars.is_empty() {
            return guarded;
        }
        // Guards may only be hoisted above the nest if every variable they use
        // is defined outside it (serial loops inside the nest define others).
        let mut inner_defs = Vec::new();
        orig.visit(&mut |x| match x {
            Stmt::For { var, .. } | Stmt::Let { var, .. } | Stmt::Local { var, .. }
                if !vars.contains(var) =>
            {
                inner_defs.push(*var)
            }
            _ => {}
        });
        if conds
            .iter()
            .any(|c| inner_defs.iter().any(|v| c.uses_var(*v)))
        {
            return guarded;
        }
        let mut interior = Vec::new();
        for c in conds {
            let Expr::Bin(BinOp::Lt, lhs, rhs, _) = &c else {
                return guarded;
            };
            if !monotone(lhs, &vars) || vars.iter().any(|v| rhs.uses_var(*v)) {
                return guarded;
            }
            let at_max = (**lhs).clone().map(&mut |x| match x {
                Expr::Var(v, t) => match vars.iter().position(|y| *y == v) {
                    Some(i) => Expr::Int(ext[i] - 1, t),
                    None => Expr::Var(v, t),
                },
                x => x,
            });
            // Never interior (e.g. one ragged block): keep only the guarded form.
            if let (Some((lo, _)), Some(n)) = (env.range(&at_max), rhs.as_int()) {
                if lo >= n {
                    return guarded;
                }
            }
            let c = Expr::lt(at_max, (**rhs).clone());
            if !interior.contains(&c) {
                interior.push(c);
            }
        }
        let Some(cond) = interior.into_iter().reduce(Expr::and) else {
            return guarded;
        };
        let edge = fresh_copy(&mut self.f, &guarded);
        Stmt::If {
            loc: orig.loc(),
            cond,
            then: Box::new(orig),
            els: Some(Box::new(edge)),
        }
    }

    /// Conditions under which `buf[idx]` is in bounds, minus those proven.
    fn conds(&self, buf: BufId, idx: &[Expr], env: &Env) -> Vec<Expr> {
        let b = self.f.buf(buf);
        if b.scope != Scope::Global {
            return Vec::new();
        }
        let mut out = Vec::new();
        for (i, dim) in idx.iter().zip(&b.shape) {
            // An index narrowed to `int` (an `i64` or `u32` value: the
            // frontend computes indices in 32 bits) is checked before it is
            // narrowed, so that 2^32 + 1 is out of bounds, not 1; a value
            // that passes fits in `int`, so the narrowed access is the same.
            let (checked, narrowed) = match i {
                Expr::Cast(t, a)
                    if t.is_int()
                        && a.dtype().is_int()
                        && (a.dtype().bytes() > t.bytes()
                            || (a.dtype().bytes() == t.bytes() && !a.dtype().is_signed_int())) =>
                {
                    (&**a, true)
                }
                i => (i, false),
            };
            let proven = match (env.range(i), dim.as_int()) {
                (Some((_, hi)), Some(n)) => hi < n,
                _ => false,
            } || self.loops.iter().any(|(v, s, e)| {
                matches!(i, Expr::Var(x, _) if x == v) && s.as_int() == Some(0) && e == dim
            }) || self
                .f
                .launch
                .block_vars
                .iter()
                .zip(&self.f.launch.grid)
                .any(|(b, g)| {
                    // A block index runs below its grid extent (e.g. one block per row).
                    matches!(i, Expr::Var(x, _) if x == b) && g == dim
                });
            // An index may be negative where it subtracts (`x[g - 1]` of a
            // stencil) or comes from data (`table[ids[g]]`): then it is
            // checked from below too, or the access would reach the memory
            // before the tensor. Sums and products of block indices, loop
            // variables from 0 and dims are proven non-negative here, so
            // tile-shaped accesses keep their one check.
            if !env.non_negative(checked) {
                let zero = Expr::Int(0, checked.dtype());
                out.push(Expr::bin(BinOp::Ge, widen(checked.clone(), env), zero));
            }
            if !proven || narrowed {
                // The guard itself must not overflow: with dims near
                // 2^31, `bx * 1000 + 999 < N` needs 64 bits.
                out.push(Expr::lt(widen(checked.clone(), env), dim.clone()));
            }
        }
        out
    }

    fn emitted_extra(&self, conds: &[Expr]) {
        let mut v = self.extra.borrow_mut();
        if self.in_nest {
            v.extend(conds.iter().map(|c| c.inline_lets(self.nest_lets())));
        }
    }

    /// Wraps unguarded global loads in `cond ? load : 0` (the loads in an
    /// index first, so that a load's condition tests them guarded). A
    /// select's condition covers the loads of its first branch
    /// (`T::if_then_else(i < n, x[i], ..)` is not checked twice), and
    /// `padded(v, pad)` becomes `cond ? v : pad` on the conditions of the
    /// loads in `v`.
    fn guard_loads(&self, e: Expr, covered: &[Expr], env: &Env) -> Expr {
        match e {
            Expr::Load(b, idx, t) => {
                let idx: Vec<Expr> = idx
                    .into_iter()
                    .map(|i| self.guard_loads(i, covered, env))
                    .collect();
                let conds: Vec<Expr> = self
                    .conds(b, &idx, env)
                    .into_iter()
                    .filter(|c| !covered.contains(c))
                    .collect();
                let load = Expr::Load(b, idx, t);
                let zero = Expr::Int(0, DType::I32).cast(t);
                self.select(conds, load, zero)
            }
            Expr::Select(c, a, b, t) => {
                let c = self.guard_loads(*c, covered, env);
                let mut inner = covered.to_vec();
                conjuncts(&c, &mut inner);
                let a = self.guard_loads(*a, &inner, env);
                let b = self.guard_loads(*b, covered, env);
                Expr::Select(Box::new(c), Box::new(a), Box::new(b), t)
            }
            Expr::Call(Intrin::Padded, args, _) => {
                let [v, pad]: [Expr; 2] = args.try_into().expect("`padded` takes two values");
                let mut conds = Vec::new();
                v.visit(&mut |x| {
                    if let Expr::Load(b, idx, _) = x {
                        for c in self.conds(*b, idx, env) {
                            if !covered.contains(&c) && !conds.contains(&c) {
                                conds.push(c);
                            }
                        }
                    }
                });
                let mut inner = covered.to_vec();
                inner.extend(conds.iter().cloned());
                let v = self.guard_loads(v, &inner, env);
                let pad = self.guard_loads(pad, covered, env);
                self.select(conds, v, pad)
            }
            e => e.map_children(&mut |c| self.guard_loads(c, covered, env)),
        }
    }

    /// `conds ? v : other`, or `v` when there are no conditions; the
    /// conditions count as the nest's guards (for its interior split).
    fn select(&self, conds: Vec<Expr>, v: Expr, other: Expr) -> Expr {
        self.emitted_extra(&conds);
        match conds.into_iter().reduce(Expr::and) {
            None => v,
            Some(c) => {
                let t = v.dtype();
                Expr::Select(Box::new(c), Box::new(v), Box::new(other), t)
            }
        }
    }

    /// The bounds conditions of the global loads `e` reads, also through the
    /// `let`s it names (inner loads first, so that `&&` tests a load's own
    /// index before reading it), into `out` without repeats.
    fn load_conds(&self, e: &Expr, env: &Env, seen: &mut Vec<VarId>, out: &mut Vec<Expr>) {
        e.visit(&mut |x| match x {
            Expr::Load(b, li, _) => {
                for c in self.conds(*b, li, env) {
                    if !out.contains(&c) {
                        out.push(c);
                    }
                }
            }
            // Each let once: chains of lets (swizzled block indices) are DAGs.
            Expr::Var(v, _) if !seen.contains(v) => {
                seen.push(*v);
                if let Some(value) = env.lets.get(v) {
                    self.load_conds(value, env, seen, out);
                }
            }
            _ => {}
        });
    }

    /// A write of `value` to `buf[idx]` (made by `make`), under the guard
    /// that its index is in bounds; loads in it are guarded too.
    fn guarded(
        &mut self,
        buf: BufId,
        idx: Vec<Expr>,
        value: Expr,
        loc: Loc,
        env: &Env,
        make: impl FnOnce(BufId, Vec<Expr>, Expr) -> Stmt,
    ) -> Stmt {
        // A load in the index that is out of bounds reads 0, and the write
        // must not then land on element 0 (`y[idx[g]] = ..` on the ragged
        // iterations `g >= N`): the loads' conditions guard the write too,
        // also where the index names a `let` bound to such a load.
        let mut guard = Vec::new();
        let mut seen = Vec::new();
        for i in &idx {
            self.load_conds(i, env, &mut seen, &mut guard);
        }
        let idx: Vec<Expr> = idx
            .into_iter()
            .map(|i| self.guard_loads(i, &guard, env))
            .collect();
        for c in self.conds(buf, &idx, env) {
            if !guard.contains(&c) {
                guard.push(c);
            }
        }
        if self.in_nest {
            let inner = self.nest_lets();
            let conds: Vec<Expr> = guard.iter().map(|c| c.inline_lets(inner)).collect();
            self.emitted.extend(conds);
        }
        let value = self.guard_loads(value, &guard, env);
        let write = make(buf, idx, value);
        match guard.into_iter().reduce(Expr::and) {
            None => write,
            Some(c) => Stmt::If {
                loc,
                cond: c,
                then: Box::new(write),
                els: None,
            },
        }
    }

    fn stmt(&mut self, s: Stmt, env: &mut Env) -> Stmt {
        match s {
            Stmt::Seq(v) => {
                let saved = env.clone();
                let out = Stmt::Seq(v.into_iter().map(|s| self.stmt(s, env)).collect());
                *env = saved;
                out
            }
            Stmt::Let { var, value } => {
                let value = self.guard_loads(value, &[], env);
                env.lets.insert(var, value.clone());
                if self.in_nest {
                    self.inner_lets.insert(var, value.clone());
                }
                Stmt::Let { var, value }
            }
            Stmt::Local { var, init } => Stmt::Local {
                var,
                init: self.guard_loads(init, &[], env),
            },
            Stmt::Assign { var, value } => Stmt::Assign {
                var,
                value: self.guard_loads(value, &[], env),
            },
            Stmt::Store {
                buf,
                idx,
                value,
                loc,
            } => self.guarded(buf, idx, value, loc, env, |buf, idx, value| Stmt::Store {
                loc,
                buf,
                idx,
                value,
            }),
            // An atomic add writes like a store: the same guard.
            Stmt::AtomicAdd {
                buf,
                idx,
                value,
                loc,
            } => self.guarded(buf, idx, value, loc, env, |buf, idx, value| {
                Stmt::AtomicAdd {
                    loc,
                    buf,
                    idx,
                    value,
                }
            }),
            Stmt::Print { label, value, loc } => Stmt::Print {
                label,
                value: self.guard_loads(value, &[], env),
                loc,
            },
            Stmt::For {
                kind: ForKind::Parallel,
                ..
            } if !self.in_nest => {
                let orig = strip_padded(s.clone());
                self.in_nest = true;
                self.inner_lets.clear();
                self.emitted.clear();
                self.extra.borrow_mut().clear();
                let guarded = self.stmt(s, env);
                self.in_nest = false;
                let mut conds = std::mem::take(&mut self.emitted);
                conds.extend(self.extra.borrow_mut().drain(..));
                if conds.is_empty() {
                    return guarded;
                }
                self.split_interior(orig, guarded, conds, env)
            }
            Stmt::For {
                var,
                start,
                extent,
                kind,
                body,
                loc,
            } => {
                let start = self.guard_loads(start, &[], env);
                let extent = self.guard_loads(extent, &[], env);
                let saved = env.ranges.get(&var).copied();
                match (start.as_int(), extent.as_int()) {
                    (Some(s), Some(e)) if e > 0 => {
                        env.ranges.insert(var, (s, s + e - 1));
                    }
                    _ => {
                        env.ranges.remove(&var);
                    }
                }
                let (s_rt, e_rt) = (env.run_time_range(&start), env.run_time_range(&extent));
                if let (Some((s_lo, s_hi)), Some((_, e_hi))) = (s_rt, e_rt) {
                    if e_hi > 0 {
                        let hi = s_hi.saturating_add(e_hi - 1);
                        env.limits.insert(var, (s_lo, hi));
                    }
                }
                env.bound_loop(var, &start, &extent);
                self.loops.push((var, start.clone(), extent.clone()));
                let body = Box::new(self.stmt(*body, env));
                self.loops.pop();
                env.below.remove(&var);
                match saved {
                    Some(r) => env.ranges.insert(var, r),
                    None => env.ranges.remove(&var),
                };
                Stmt::For {
                    loc,
                    var,
                    start,
                    extent,
                    kind,
                    body,
                }
            }
            Stmt::If {
                cond,
                then,
                els,
                loc,
            } => Stmt::If {
                loc,
                cond: self.guard_loads(cond, &[], env),
                then: Box::new(self.stmt(*then, env)),
                els: els.map(|e| Box::new(self.stmt(*e, env))),
            },
            s => s,
        }
    }
}

/// The `&&`-separated parts of `c`, into `out`.
fn conjuncts(c: &Expr, out: &mut Vec<Expr>) {
    match c {
        Expr::Bin(BinOp::And, a, b, _) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        c => out.push(c.clone()),
    }
}

/// `s` with every `padded(v, pad)` read as `v`: the form of a nest's
/// interior, where every load is in bounds.
fn strip_padded(s: Stmt) -> Stmt {
    fn expr(e: Expr) -> Expr {
        e.map(&mut |x| match x {
            Expr::Call(Intrin::Padded, mut args, _) => args.swap_remove(0),
            x => x,
        })
    }
    fn stmt(s: Stmt) -> Stmt {
        s.map_children(&mut stmt).map_own_exprs(&mut expr)
    }
    stmt(s)
}
