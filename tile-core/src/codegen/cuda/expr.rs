//! Expressions and buffer accesses.

use super::*;

impl Writer<'_> {
    /// `buf[offset]`, or the fragment register of the current lane.
    pub(super) fn access(&self, b: BufId, idx: &[Expr]) -> Result<String, Diagnostic> {
        let buf = self.f.buf(b);
        if buf.scope == Scope::Fragment {
            let rows = buf.layout.is_some_and(Layout::is_rows);
            return match &self.lane {
                Some(Lane { row: Some(r), .. }) if rows => Ok(format!("{}[{r}]", self.name(b))),
                // Per-thread rows: the leading dims pick a run of registers.
                Some(Lane {
                    thread_rows: Some((dims, per)),
                    slot,
                    ..
                }) if idx.len() > *dims
                    && buf.shape[..idx.len() - dims].iter().any(|d| d.as_int() != Some(1)) =>
                {
                    let lead = idx.len() - dims;
                    let row = self.expr(&flatten(&buf.shape[..lead], &idx[..lead]))?;
                    Ok(format!("{}[({row}) * {per} + {slot}]", self.name(b)))
                }
                Some(l) => Ok(format!("{}[{}]", self.name(b), l.slot)),
                None => Err(err(format!(
                    "kernel `{}`: fragment `{}` is distributed over threads and can only be accessed inside \
                     a `T::parallel` over its shape (or through `T::copy`)",
                    self.f.name, buf.name
                ))),
            };
        }
        Ok(format!("{}[{}]", self.name(b), self.offset(b, idx, None)?))
    }

    /// The element offset of `buf[idx]` in memory: row-major, or the swizzled
    /// order of a tensor-core operand tile.
    pub(super) fn offset(
        &self,
        b: BufId,
        idx: &[Expr],
        subst: Option<(VarId, &str)>,
    ) -> Result<String, Diagnostic> {
        let buf = self.f.buf(b);
        let lib = match buf.layout {
            Some(Layout::Swizzled) => Some("tl"),
            Some(Layout::WgmmaOperand) => Some("tl::wg"),
            _ => None,
        };
        let off = if let Some(lib) = lib {
            let shape = buf.const_shape().unwrap_or_default();
            let (r, c) = (
                self.expr_with(&idx[0], subst)?,
                self.expr_with(&idx[1], subst)?,
            );
            // fp8 operand tiles: the layout of 1-byte elements.
            let eb = if buf.dtype.bytes() == 1 && lib == "tl::wg" {
                ", 1"
            } else {
                ""
            };
            format!(
                "{lib}::smem_offset<{}, {}{eb}>({r}, {c})",
                shape[0], shape[1]
            )
        } else {
            self.expr_with(&flatten(&buf.shape, idx), subst)?
        };
        Ok(match self.stage.get(&b) {
            Some(st) => format!("{st} * {} + {off}", buf.const_elems()),
            None => off,
        })
    }

    /// `tl::and_or(a, b, c)` for `(a & b) | c` ([`and_or`]). Out of line: the
    /// printer recurses once per level of an expression, and its frame must
    /// stay small for the deepest expression the frontend takes.
    #[inline(never)]
    fn and_or_call(
        &self,
        (a, b, c): (&Expr, &Expr, &Expr),
        subst: Option<(VarId, &str)>,
    ) -> Result<String, Diagnostic> {
        Ok(format!(
            "tl::and_or({}, {}, {})",
            self.expr_with(a, subst)?,
            self.expr_with(b, subst)?,
            self.expr_with(c, subst)?
        ))
    }

    pub(super) fn expr(&self, e: &Expr) -> Result<String, Diagnostic> {
        self.expr_with(e, None)
    }

    /// The calls on packed pairs: `pack2`, `low`, `high` (CUDA's
    /// `__halves2half2`, `__low2half`, ..) and the paired `fma` (`__hfma2`:
    /// half by half, rounded once). Out of line, like [`Self::and_or_call`].
    #[inline(never)]
    fn pair_call(&self, e: &Expr, subst: Option<(VarId, &str)>) -> Result<String, Diagnostic> {
        let Expr::Call(i, args, _) = e else {
            return Err(err("a packed-pair call expected".to_string()));
        };
        let bf = matches!(args[0].dtype(), DType::BF16x2 | DType::BF16);
        let name = match (i, bf) {
            (Intrin::Pack2, false) => "__halves2half2",
            (Intrin::Pack2, true) => "__halves2bfloat162",
            (Intrin::Low, false) => "__low2half",
            (Intrin::Low, true) => "__low2bfloat16",
            (Intrin::High, false) => "__high2half",
            (Intrin::High, true) => "__high2bfloat16",
            _ => "__hfma2",
        };
        let xs = args
            .iter()
            .map(|a| self.expr_with(a, subst))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(format!("{name}({})", xs.join(", ")))
    }

    /// Emits `e`; `subst` renames one variable (used for chunk base addresses).
    pub(super) fn expr_with(
        &self,
        e: &Expr,
        subst: Option<(VarId, &str)>,
    ) -> Result<String, Diagnostic> {
        let f = self.f;
        let r = |x: &Expr| self.expr_with(x, subst);
        Ok(match e {
            Expr::Int(v, t) => crate::codegen::cfamily::int_lit(*v, *t),
            Expr::Float(v, t) => float_const(*v, *t),
            Expr::Bool(b) => (if *b { "true" } else { "false" }).to_string(),
            Expr::Thread => "(int)threadIdx.x".to_string(),
            Expr::Var(v, _) => match subst {
                Some((x, s)) if x == *v => s.to_string(),
                _ => ident(&f.var(*v).name),
            },
            Expr::Load(b, idx, _) => {
                if let Some(l) = &self.lane {
                    if let Some((_, _, n)) = l.vloads.iter().find(|(x, y, _)| x == b && y == idx) {
                        return Ok(n.clone());
                    }
                }
                if subst.is_some() {
                    format!("{}[{}]", self.name(*b), self.offset(*b, idx, subst)?)
                } else {
                    self.access(*b, idx)?
                }
            }
            Expr::Bin(op, a, b, _) => {
                if let Some(parts) = and_or(e) {
                    return self.and_or_call(parts, subst);
                }
                let (x, y) = (r(a)?, r(b)?);
                let t = a.dtype();
                match op {
                    BinOp::Min | BinOp::Max => {
                        let mx = *op == BinOp::Max;
                        let name = match t {
                            DType::F32 => {
                                if mx {
                                    "fmaxf"
                                } else {
                                    "fminf"
                                }
                            }
                            DType::F64 => {
                                if mx {
                                    "fmax"
                                } else {
                                    "fmin"
                                }
                            }
                            DType::F16 | DType::BF16 => {
                                if mx {
                                    "__hmax"
                                } else {
                                    "__hmin"
                                }
                            }
                            DType::F16x2 | DType::BF16x2 => {
                                if mx {
                                    "__hmax2"
                                } else {
                                    "__hmin2"
                                }
                            }
                            _ => {
                                if mx {
                                    "max"
                                } else {
                                    "min"
                                }
                            }
                        };
                        format!("{name}({x}, {y})")
                    }
                    op => format!("({x} {} {y})", op.symbol()),
                }
            }
            Expr::Not(a) => format!("(!{})", r(a)?),
            Expr::Neg(a, _) => format!("(-{})", r(a)?),
            Expr::Cast(t, a) => {
                let x = r(a)?;
                let from = a.dtype();
                let lowp = |d: DType| {
                    matches!(d, DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2)
                };
                if t.is_packed() {
                    // The value in both halves (the frontend casts it to the
                    // half's dtype first).
                    format!("{}({x})", splat_fn(*t))
                } else if t.is_int() && from.is_float() {
                    float_to_int(&x, from, *t)?
                } else if t.is_f8() && from == DType::F64 {
                    // f8's constructor from double rounds once.
                    format!("(({})({x}))", ty(*t)?)
                } else if lowp(*t) || lowp(from) {
                    format!("(({})((float)({x})))", ty(*t)?)
                } else {
                    format!("(({})({x}))", ty(*t)?)
                }
            }
            Expr::Select(c, a, b, _) => format!("({} ? {} : {})", r(c)?, r(a)?, r(b)?),
            Expr::Call(Intrin::Bitcast, args, t) => {
                format!("tl::bitcast<{}>({})", ty(*t)?, r(&args[0])?)
            }
            Expr::Call(Intrin::Pack2 | Intrin::Low | Intrin::High, ..) => {
                return self.pair_call(e, subst)
            }
            Expr::Call(Intrin::Fma, _, t) if t.is_packed() => return self.pair_call(e, subst),
            Expr::Call(i, args, t) => {
                // f16/bf16 compute in float (the math library's precision).
                let d = *t == DType::F64;
                let xs = args
                    .iter()
                    .map(|a| {
                        let x = r(a)?;
                        Ok(match t {
                            DType::F64 | DType::F32 => x,
                            _ => format!("(float)({x})"),
                        })
                    })
                    .collect::<Result<Vec<_>, Diagnostic>>()?;
                let x = &xs[0];
                let rsqrt = format!("rsqrt{}({x})", if d { "" } else { "f" });
                let v = match i {
                    // exp2f without its subnormal fix-up (`tl/math.cuh`).
                    Intrin::Exp2 if !d => format!("tl::exp2_ftz({x})"),
                    _ => math_call(*i, &xs, d, &rsqrt),
                };
                match t {
                    DType::F16 | DType::BF16 => format!("(({})({v}))", ty(*t)?),
                    _ => v,
                }
            }
        })
    }
}

/// CUDA's function that puts a half in both halves of pair type `t`.
fn splat_fn(t: DType) -> &'static str {
    if t == DType::F16x2 {
        "__half2half2"
    } else {
        "__bfloat162bfloat162"
    }
}

/// A float converted to integer type `t` as Rust's `as` (the IR's cast):
/// truncated toward zero, saturated, NaN to 0. The `_rz` conversions do that
/// for 32 and 64 bits (`cvt.rzi` clamps to the destination and maps NaN to
/// 0); narrower types clamp the 32-bit result.
fn float_to_int(x: &str, from: DType, t: DType) -> Result<String, Diagnostic> {
    let (src, x) = if from == DType::F64 {
        ("double", x.to_string())
    } else {
        ("float", format!("(float)({x})"))
    };
    let conv = |to: &str| format!("__{src}2{to}_rz({x})");
    Ok(match t {
        DType::I32 => conv("int"),
        DType::U32 => conv("uint"),
        DType::I64 => conv("ll"),
        DType::U64 => conv("ull"),
        DType::I8 | DType::I16 => {
            let (lo, hi) = if t == DType::I8 {
                (-128, 127)
            } else {
                (-32768, 32767)
            };
            format!("(({})max({lo}, min({hi}, {})))", ty(t)?, conv("int"))
        }
        _ => {
            let hi = if t == DType::U8 { 255 } else { 65535 };
            format!("(({})min({hi}u, {}))", ty(t)?, conv("uint"))
        }
    })
}

/// `(a & b) | c` (either order) on 32-bit integers: one `lop3` instruction
/// (`tl::and_or`). Left to itself ptxas emits an AND and an OR when `b` and
/// `c` are both constants, since an instruction takes one immediate; the
/// nibble unpacking of quantized weights is made of these.
pub(super) fn and_or(e: &Expr) -> Option<(&Expr, &Expr, &Expr)> {
    let Expr::Bin(BinOp::BitOr, l, r, t) = e else {
        return None;
    };
    if !matches!(t, DType::U32 | DType::I32) {
        return None;
    }
    match (&**l, &**r) {
        (Expr::Bin(BinOp::BitAnd, a, b, _), c) | (c, Expr::Bin(BinOp::BitAnd, a, b, _)) => {
            Some((a, b, c))
        }
        _ => None,
    }
}
