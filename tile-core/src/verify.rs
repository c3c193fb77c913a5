//! Structural checks on a `PrimFunc`: every handle is valid, every variable is
//! defined before use, on-chip buffers are allocated before use with constant
//! shapes, stores match their buffer's dtype and rank. Run after the frontend
//! and after every pass in debug builds and tests, so that malformed IR never
//! reaches a backend.

use crate::diag::Diagnostic;
use crate::ir::*;
use proc_macro2::Span;
use std::collections::HashSet;

pub fn verify(f: &PrimFunc) -> Result<(), Diagnostic> {
    let mut v = Verifier {
        f,
        defined: HashSet::new(),
        allocated: HashSet::new(),
    };
    for &d in &f.dims {
        v.defined.insert(d);
    }
    for &b in &f.params {
        if f.buf(b).scope != Scope::Global {
            return v.fail(format!("parameter `{}` is not global", f.buf(b).name));
        }
        v.allocated.insert(b);
    }
    for g in &f.launch.grid {
        v.expr(g)?;
    }
    if f.launch.grid.is_empty()
        || f.launch.grid.len() > 3
        || f.launch.grid.len() != f.launch.block_vars.len()
    {
        return v.fail("the launch has 1 to 3 grid dims, one block variable each".into());
    }
    for &b in &f.launch.block_vars {
        v.defined.insert(b);
    }
    v.stmt(&f.body)
}

struct Verifier<'a> {
    f: &'a PrimFunc,
    defined: HashSet<VarId>,
    allocated: HashSet<BufId>,
}

impl Verifier<'_> {
    fn fail<T>(&self, msg: String) -> Result<T, Diagnostic> {
        Err(Diagnostic::new(
            Span::call_site(),
            format!("internal error: invalid IR in `{}`: {msg}", self.f.name),
        ))
    }

    fn buf(&self, b: BufId) -> Result<&Buffer, Diagnostic> {
        if (b.0 as usize) >= self.f.buffers.len() {
            return self.fail(format!("buffer handle {} out of range", b.0));
        }
        if !self.allocated.contains(&b) {
            return self.fail(format!(
                "buffer `{}` used before allocation",
                self.f.buf(b).name
            ));
        }
        Ok(self.f.buf(b))
    }

    fn expr(&self, e: &Expr) -> Result<(), Diagnostic> {
        let mut err = None;
        e.visit(&mut |x| {
            if err.is_some() {
                return;
            }
            match x {
                Expr::Var(v, t) => {
                    if (v.0 as usize) >= self.f.vars.len() || !self.defined.contains(v) {
                        err = Some(format!("variable #{} used before definition", v.0));
                    } else if self.f.var(*v).dtype != *t {
                        err = Some(format!(
                            "variable `{}` has dtype {} but is used as {t}",
                            self.f.var(*v).name,
                            self.f.var(*v).dtype
                        ));
                    }
                }
                Expr::Load(b, idx, t) => match self.buf(*b) {
                    Ok(buf) => {
                        if buf.shape.len() != idx.len() || buf.dtype != *t {
                            err = Some(format!(
                                "load from `{}` has the wrong rank or dtype",
                                buf.name
                            ));
                        }
                    }
                    Err(d) => err = Some(d.message),
                },
                _ => {}
            }
        });
        match err {
            Some(m) => self.fail(m),
            None => Ok(()),
        }
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), Diagnostic> {
        match s {
            Stmt::Seq(v) => {
                let (d, a) = (self.defined.clone(), self.allocated.clone());
                for s in v {
                    self.stmt(s)?;
                }
                self.defined = d;
                self.allocated = a;
            }
            Stmt::Let { var, value } | Stmt::Local { var, init: value } => {
                self.expr(value)?;
                if self.f.var(*var).dtype != value.dtype() {
                    return self.fail(format!(
                        "`{}` is bound to a value of another dtype",
                        self.f.var(*var).name
                    ));
                }
                self.defined.insert(*var);
            }
            Stmt::Assign { var, value } => {
                self.expr(value)?;
                if !self.defined.contains(var) || self.f.var(*var).dtype != value.dtype() {
                    return self.fail(format!("bad assignment to `{}`", self.f.var(*var).name));
                }
            }
            Stmt::Store {
                buf, idx, value, ..
            } => {
                let b = self.buf(*buf)?;
                if b.shape.len() != idx.len() || b.dtype != value.dtype() {
                    return self.fail(format!("store to `{}` has the wrong rank or dtype", b.name));
                }
                for i in idx {
                    self.expr(i)?;
                }
                self.expr(value)?;
            }
            Stmt::For {
                var,
                start,
                extent,
                body,
                ..
            } => {
                self.expr(start)?;
                self.expr(extent)?;
                let had = self.defined.insert(*var);
                self.stmt(body)?;
                if had {
                    self.defined.remove(var);
                }
            }
            Stmt::If {
                cond, then, els, ..
            } => {
                self.expr(cond)?;
                if cond.dtype() != DType::Bool {
                    return self.fail("if condition is not bool".into());
                }
                self.stmt(then)?;
                if let Some(e) = els {
                    self.stmt(e)?;
                }
            }
            Stmt::Alloc { buf, .. } => {
                let b = self.f.buf(*buf);
                if b.scope == Scope::Global || b.const_shape().is_none() {
                    return self.fail(format!(
                        "allocation `{}` is global or has a dynamic shape",
                        b.name
                    ));
                }
                self.allocated.insert(*buf);
            }
            Stmt::Copy { src, dst, .. } | Stmt::AtomicAddTile { src, dst, .. } => {
                for r in [src, dst] {
                    let b = self.buf(r.buf)?;
                    if r.origin.len() != b.shape.len() || r.extent.len() != b.shape.len() {
                        return self
                            .fail(format!("copy region of `{}` has the wrong rank", b.name));
                    }
                    for e in r.origin.iter().chain(&r.extent) {
                        self.expr(e)?;
                    }
                }
            }
            Stmt::Fill { dst, value, .. } => {
                self.buf(dst.buf)?;
                self.expr(value)?;
            }
            Stmt::Gemm(g) => {
                self.buf(g.a)?;
                self.buf(g.b)?;
                self.buf(g.c)?;
            }
            Stmt::Reduce(r) => {
                let (src, dst) = (self.buf(r.src)?, self.buf(r.dst)?);
                let (ss, ds) = (src.const_shape(), dst.const_shape());
                let ok = match (ss, ds) {
                    (Some(ss), Some(ds)) if r.dim < ss.len() => {
                        let mut want: Vec<i64> = ss.clone();
                        want.remove(r.dim);
                        if want.is_empty() {
                            want.push(1);
                        }
                        want == ds
                    }
                    _ => false,
                };
                if !ok {
                    return self.fail(format!(
                        "reduction from `{}` into `{}` has mismatched shapes",
                        src.name, dst.name
                    ));
                }
            }
            Stmt::AtomicAdd {
                buf, idx, value, ..
            } => {
                let b = self.buf(*buf)?;
                if b.shape.len() != idx.len() || b.dtype != value.dtype() {
                    return self.fail(format!(
                        "atomic add to `{}` has the wrong rank or dtype",
                        b.name
                    ));
                }
                for i in idx {
                    self.expr(i)?;
                }
                self.expr(value)?;
            }
            Stmt::Print { value, .. } => self.expr(value)?,
            Stmt::Barrier => {}
        }
        Ok(())
    }
}
