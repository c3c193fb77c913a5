//! Integer interval analysis over index expressions, used to prove accesses
//! in bounds (so no guard is emitted) and by codegen's affine analysis.

use crate::ir::*;
use std::collections::HashMap;

/// Known inclusive ranges of variables, plus let-bound values for inlining.
#[derive(Clone, Default)]
pub struct Env {
    pub ranges: HashMap<VarId, (i64, i64)>,
    pub lets: HashMap<VarId, Expr>,
}

impl Env {
    pub fn range(&self, e: &Expr) -> Option<(i64, i64)> {
        match e {
            Expr::Int(v, _) => Some((*v, *v)),
            Expr::Var(v, _) => self
                .ranges
                .get(v)
                .copied()
                .or_else(|| self.lets.get(v).and_then(|x| self.range(x))),
            Expr::Cast(t, a) if t.is_int() => self.range(a),
            Expr::Bin(op, a, b, t) if t.is_int() => {
                let (al, ah) = self.range(a)?;
                let (bl, bh) = self.range(b)?;
                match op {
                    BinOp::Add => Some((al.checked_add(bl)?, ah.checked_add(bh)?)),
                    BinOp::Sub => Some((al.checked_sub(bh)?, ah.checked_sub(bl)?)),
                    BinOp::Mul => {
                        let c = [
                            al.checked_mul(bl)?,
                            al.checked_mul(bh)?,
                            ah.checked_mul(bl)?,
                            ah.checked_mul(bh)?,
                        ];
                        Some((*c.iter().min()?, *c.iter().max()?))
                    }
                    BinOp::Div if bl > 0 && al >= 0 => Some((al / bh, ah / bl)),
                    BinOp::Rem if bl > 0 && al >= 0 => Some((0, (bh - 1).min(ah))),
                    BinOp::Min => Some((al.min(bl), ah.min(bh))),
                    BinOp::Max => Some((al.max(bl), ah.max(bh))),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}
