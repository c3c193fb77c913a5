//! Expressions of the script. Every binary op is parenthesized and every
//! dtype follows from the leaves (literals say theirs when not `int32`).

use super::lex::{dtype_named, Cursor, Tok};
use super::{Reader, Res};
use crate::ir::*;

fn binop(p: &str) -> Option<BinOp> {
    // `T.min(a, b)` and `T.max(a, b)` are calls, not infix operators.
    BinOp::ALL
        .into_iter()
        .filter(|op| !matches!(op, BinOp::Min | BinOp::Max))
        .find(|op| op.symbol() == p)
}

/// The dtype of `op(a, _)` as `Expr::bin` gives it.
fn bin_dtype(op: BinOp, a: &Expr) -> DType {
    if op.is_cmp() || op.is_logic() {
        DType::Bool
    } else {
        a.dtype()
    }
}

impl Reader {
    /// Comma-separated expressions, up to (not taking) `close`.
    pub(super) fn exprs(&self, c: &mut Cursor, close: &str) -> Res<Vec<Expr>> {
        let mut v = Vec::new();
        if c.at_punct(close) {
            return Ok(v);
        }
        loop {
            v.push(self.expr(c)?);
            if !c.eat_punct(",") {
                return Ok(v);
            }
        }
    }

    /// One expression: every binary op is parenthesized, so there is no
    /// precedence to resolve.
    pub(super) fn expr(&self, c: &mut Cursor) -> Res<Expr> {
        match c.peek() {
            Some(Tok::Punct("(")) => {
                c.i += 1;
                let a = self.expr(c)?;
                let op = match c.peek() {
                    Some(Tok::Punct(p)) => binop(p),
                    _ => None,
                };
                let Some(op) = op else {
                    return c.expected("a binary operator");
                };
                c.i += 1;
                let b = self.expr(c)?;
                c.punct(")")?;
                let t = bin_dtype(op, &a);
                Ok(Expr::Bin(op, Box::new(a), Box::new(b), t))
            }
            // `-5` is a literal (the frontend folds negation into literals).
            _ if c.at_int() => Ok(Expr::Int(c.int()?, DType::I32)),
            Some(Tok::Punct("-")) => {
                c.i += 1;
                let a = self.expr(c)?;
                let t = a.dtype();
                Ok(Expr::Neg(Box::new(a), t))
            }
            Some(Tok::Ident(s)) => match s.as_str() {
                "not" => {
                    c.i += 1;
                    Ok(Expr::Not(Box::new(self.expr(c)?)))
                }
                "True" | "False" => {
                    c.i += 1;
                    Ok(Expr::Bool(s == "True"))
                }
                "T" if c.peek_at(1) == Some(&Tok::Punct(".")) => self.t_expr(c),
                _ => self.name_expr(c),
            },
            _ => c.expected("an expression"),
        }
    }

    /// A variable, or a load `buf[i, ..]`.
    pub(super) fn name_expr(&self, c: &mut Cursor) -> Res<Expr> {
        if c.peek_at(1) == Some(&Tok::Punct("[")) {
            let b = self.buf(c)?;
            c.punct("[")?;
            let idx = self.exprs(c, "]")?;
            c.punct("]")?;
            return Ok(Expr::Load(b, idx, self.f.buf(b).dtype));
        }
        let name = c.ident()?;
        c.i -= 1;
        let v = self.var_named(c, &name)?;
        c.i += 1;
        Ok(Expr::Var(v, self.f.var(v).dtype))
    }

    /// `T.<dtype>(literal)`, `T.min(a, b)`, `T.Cast("t", x)`, `T.bitcast("t", x)`, `T.exp(x)`, ..
    pub(super) fn t_expr(&self, c: &mut Cursor) -> Res<Expr> {
        let name = c.t_name()?;
        c.punct("(")?;
        let e = if let Some(t) = dtype_named(&name) {
            if c.at_int() {
                Expr::Int(c.int()?, t)
            } else {
                Expr::Float(self.float(c)?, t)
            }
        } else {
            match name.as_str() {
                "min" | "max" => {
                    let a = self.expr(c)?;
                    c.punct(",")?;
                    let b = self.expr(c)?;
                    let op = if name == "min" {
                        BinOp::Min
                    } else {
                        BinOp::Max
                    };
                    let t = a.dtype();
                    Expr::Bin(op, Box::new(a), Box::new(b), t)
                }
                // `T.Cast("t", x)` converts; `T.bitcast("t", x)` reads the bits.
                "Cast" | "bitcast" => {
                    let s = c.string()?;
                    let Some(t) = dtype_named(&s) else {
                        c.i -= 1;
                        return c.err(format!("unknown dtype {s:?}"));
                    };
                    c.punct(",")?;
                    let x = self.expr(c)?;
                    if name == "Cast" {
                        Expr::Cast(t, Box::new(x))
                    } else {
                        Expr::Call(Intrin::Bitcast, vec![x], t)
                    }
                }
                "if_then_else" => {
                    let cond = self.expr(c)?;
                    c.punct(",")?;
                    let a = self.expr(c)?;
                    c.punct(",")?;
                    let b = self.expr(c)?;
                    let t = a.dtype();
                    Expr::Select(Box::new(cond), Box::new(a), Box::new(b), t)
                }
                "get_thread_binding" => {
                    if c.int()? != 0 {
                        c.i -= 1;
                        return c.err("only thread dim 0 exists");
                    }
                    Expr::Thread
                }
                n => {
                    let Some(i) = Intrin::from_name(n) else {
                        c.i -= 2;
                        return c.err(format!("unknown function `T.{n}`"));
                    };
                    let args = self.exprs(c, ")")?;
                    let Some(t) = args.first().map(Expr::dtype) else {
                        return c.expected("an argument");
                    };
                    let t = match i {
                        Intrin::Pack2 => t.pair().unwrap_or(t),
                        Intrin::Low | Intrin::High => t.lane(),
                        _ => t,
                    };
                    Expr::Call(i, args, t)
                }
            }
        };
        c.punct(")")?;
        Ok(e)
    }
}
