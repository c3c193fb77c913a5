//! What the C and CUDA printers share: both print C-family text with two
//! spaces an indent level, and spell statements and math the same way.

use crate::diag::Diagnostic;
use crate::ir::{DType, Expr, Intrin, PrimFunc, Stmt};

/// A printer of C-family text. The required methods give access to its
/// output and its statement printer; the provided ones print the constructs
/// both languages write alike, so each `{` is paired with its `}` in one place.
pub(super) trait CWriter {
    fn out(&mut self) -> &mut String;
    fn depth(&mut self) -> &mut usize;
    fn stmt(&mut self, s: &Stmt) -> Result<(), Diagnostic>;
    fn expr(&self, e: &Expr) -> Result<String, Diagnostic>;
    /// The type a scalar variable of dtype `t` is declared with.
    fn scalar_type(&self, t: DType) -> Result<&'static str, Diagnostic>;
    fn func(&self) -> &PrimFunc;

    /// Prints the statements both languages write alike (sequences, scalar
    /// lets and assignments, `if`); `None` for any other statement.
    fn common_stmt(&mut self, s: &Stmt) -> Option<Result<(), Diagnostic>> {
        Some(match s {
            Stmt::Seq(v) => self.seq(v),
            Stmt::Let { var, value }
            | Stmt::Local { var, init: value }
            | Stmt::Assign { var, value } => (|| {
                let v = self.func().var(*var).clone();
                let e = self.expr(value)?;
                let t = self.scalar_type(v.dtype)?;
                self.scalar(s, t, &super::ident(&v.name), &e);
                Ok(())
            })(),
            Stmt::If {
                cond, then, els, ..
            } => (|| {
                let c = self.expr(cond)?;
                self.if_else(&c, then, els.as_deref())
            })(),
            _ => return None,
        })
    }

    /// The statements of a sequence, in order.
    fn seq(&mut self, v: &[Stmt]) -> Result<(), Diagnostic> {
        v.iter().try_for_each(|s| self.stmt(s))
    }

    /// One line at the current indent.
    fn line(&mut self, s: &str) {
        let depth = *self.depth();
        let out = self.out();
        for _ in 0..depth {
            out.push_str("  ");
        }
        out.push_str(s);
        out.push('\n');
    }

    /// `head {`, `body` one level deeper, `}`.
    fn block(
        &mut self,
        head: &str,
        body: &mut dyn FnMut(&mut Self) -> Result<(), Diagnostic>,
    ) -> Result<(), Diagnostic> {
        self.line(&format!("{head} {{"));
        *self.depth() += 1;
        body(self)?;
        *self.depth() -= 1;
        self.line("}");
        Ok(())
    }

    /// `if (cond) { then } else { els }`.
    fn if_else(&mut self, cond: &str, then: &Stmt, els: Option<&Stmt>) -> Result<(), Diagnostic> {
        self.line(&format!("if ({cond}) {{"));
        *self.depth() += 1;
        self.stmt(then)?;
        *self.depth() -= 1;
        if let Some(e) = els {
            self.line("} else {");
            *self.depth() += 1;
            self.stmt(e)?;
            *self.depth() -= 1;
        }
        self.line("}");
        Ok(())
    }

    /// A scalar statement: `const T x = e;` (`Let`), `T x = e;` (`Local`),
    /// `x = e;` (`Assign`).
    fn scalar(&mut self, s: &Stmt, ty: &str, name: &str, value: &str) {
        match s {
            Stmt::Let { .. } => self.line(&format!("const {ty} {name} = {value};")),
            Stmt::Local { .. } => self.line(&format!("{ty} {name} = {value};")),
            _ => self.line(&format!("{name} = {value};")),
        }
    }

    /// `head { body }` for a loop header such as `for (..)`.
    fn loop_body(&mut self, head: &str, body: &Stmt) -> Result<(), Diagnostic> {
        self.block(head, &mut |w| w.stmt(body))
    }
}

/// A math intrinsic of `args` in the C library's spelling (CUDA's device
/// library has the same names), in double precision when `double` (else the
/// `f` form); `rsqrt` is how the language writes `1/sqrt` (CUDA has
/// `rsqrtf`, C does not).
pub(super) fn math_call(i: Intrin, args: &[String], double: bool, rsqrt: &str) -> String {
    let sfx = if double { "" } else { "f" };
    let one = if double { "1.0" } else { "1.0f" };
    let x = &args[0];
    let arg = |k: usize| args.get(k).map_or("0", String::as_str);
    match i {
        Intrin::Exp => format!("exp{sfx}({x})"),
        Intrin::Exp2 => format!("exp2{sfx}({x})"),
        Intrin::Log => format!("log{sfx}({x})"),
        Intrin::Log2 => format!("log2{sfx}({x})"),
        Intrin::Sqrt => format!("sqrt{sfx}({x})"),
        Intrin::Rsqrt => rsqrt.to_string(),
        Intrin::Abs => format!("fabs{sfx}({x})"),
        Intrin::Tanh => format!("tanh{sfx}({x})"),
        Intrin::Sigmoid => format!("({one} / ({one} + exp{sfx}(-({x}))))"),
        Intrin::Erf => format!("erf{sfx}({x})"),
        Intrin::Sin => format!("sin{sfx}({x})"),
        Intrin::Cos => format!("cos{sfx}({x})"),
        Intrin::Floor => format!("floor{sfx}({x})"),
        Intrin::Ceil => format!("ceil{sfx}({x})"),
        Intrin::Round => format!("round{sfx}({x})"),
        Intrin::Trunc => format!("trunc{sfx}({x})"),
        Intrin::Log1p => format!("log1p{sfx}({x})"),
        Intrin::Expm1 => format!("expm1{sfx}({x})"),
        Intrin::Pow => format!("pow{sfx}({x}, {})", arg(1)),
        Intrin::Fma => format!("fma{sfx}({x}, {}, {})", arg(1), arg(2)),
        // Not math: each backend prints it before calling this.
        Intrin::Bitcast => unreachable!("bitcast is printed by the backend"),
        Intrin::Pack2 | Intrin::Low | Intrin::High => {
            unreachable!("packed pairs are printed by the backend")
        }
        // `verify` rejects it after `inject_bounds`, which resolves it.
        Intrin::Padded => unreachable!("`padded` reached a backend"),
    }
}

/// An integer constant as C and CUDA C++ parse it back with the value and
/// type the IR gives it (`Expr::Int`): `int`, or the suffixed 64-bit and
/// unsigned forms. The most negative values are written as a difference:
/// `-2147483648` would be the negation of a `long` literal.
pub(super) fn int_lit(v: i64, t: DType) -> String {
    match t {
        DType::I64 if v == i64::MIN => "(-9223372036854775807LL - 1)".to_string(),
        DType::I64 => format!("{v}LL"),
        DType::U64 => format!("{v}ULL"),
        DType::U32 => format!("{v}u"),
        _ if v == i32::MIN as i64 => "(-2147483647 - 1)".to_string(),
        _ => format!("{v}"),
    }
}

/// The body of a C string literal holding `s` in a printf format (`%` is
/// doubled).
/// Quotes, backslashes, `?` (trigraphs) and every byte outside printable
/// ASCII are escaped, the latter as octal (a hex escape would swallow a
/// following hex digit).
pub(super) fn printf_text(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'"' | b'\\' | b'?' => {
                out.push('\\');
                out.push(b as char);
            }
            b'%' => out.push_str("%%"),
            0x20..=0x7e => out.push(b as char),
            b => out.push_str(&format!("\\{b:03o}")),
        }
    }
    out
}

/// Implements `CWriter` for a backend's `Writer` (each has `f`, `out`,
/// `depth`, a `stmt` and an `expr` printer), given how it types scalars.
macro_rules! impl_cwriter {
    ($scalar_type:path) => {
        impl super::cfamily::CWriter for Writer<'_> {
            fn out(&mut self) -> &mut String {
                &mut self.out
            }
            fn depth(&mut self) -> &mut usize {
                &mut self.depth
            }
            fn stmt(&mut self, s: &Stmt) -> Result<(), Diagnostic> {
                Writer::stmt(self, s)
            }
            fn expr(&self, e: &Expr) -> Result<String, Diagnostic> {
                Writer::expr(self, e)
            }
            fn scalar_type(&self, t: DType) -> Result<&'static str, Diagnostic> {
                $scalar_type(t)
            }
            fn func(&self) -> &PrimFunc {
                self.f
            }
        }
    };
}
pub(super) use impl_cwriter;
