//! Reads the script that `print.rs` writes back into a `PrimFunc`, so that
//! IR can be written by hand or taken from a dump (`TILE_DUMP_IR`, `tile
//! inspect --emit passes`) and fed to one pass (`passes::run_one`).
//!
//! `print(read(text)) == text` for every text the printer writes, at every
//! stage of the pipeline. Handles are numbered in the order the text
//! declares them (dims, block indices, then the body), which is the
//! frontend's order; after passes the numbering may differ from the original
//! function's, never the names. Names are unique in a function, so a name
//! resolves to one variable or buffer.
//!
//! What the text does not show, the reader takes as the frontend makes it:
//! loop and block variables are `int32`, allocated buffers are writable,
//! a binary op has its left operand's dtype (bool for comparisons), and a
//! block of one statement is that statement (several make a `Seq`).

mod expr;
mod lex;
mod stmt;

use super::*;
use lex::{skip_group, Cursor, Line, Tok};
use std::collections::HashMap;

/// A syntax or name error, at a 1-based line and column of the text.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl ReadError {
    fn new(line: usize, col: usize, message: impl Into<String>) -> ReadError {
        ReadError {
            line,
            col,
            message: message.into(),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.col, self.message
        )
    }
}

impl std::error::Error for ReadError {}

/// Parses the script of one function.
pub fn read(text: &str) -> Result<PrimFunc, ReadError> {
    let lines = lex::lex(text)?;
    let mut r = Reader {
        lines,
        pos: 0,
        f: PrimFunc::empty(String::new(), 0),
        names: HashMap::new(),
    };
    r.func()?;
    Ok(r.f)
}

#[derive(Debug, Clone, Copy)]
enum Sym {
    Var(VarId),
    Buf(BufId),
}

struct Reader {
    lines: Vec<Line>,
    /// The next line to read.
    pos: usize,
    f: PrimFunc,
    names: HashMap<String, Sym>,
}

type Res<T> = Result<T, ReadError>;

impl Reader {
    fn line(&self) -> Option<&Line> {
        self.lines.get(self.pos)
    }

    /// An error at the start of the current line (or past the last one).
    fn err_here<T>(&self, msg: impl Into<String>) -> Res<T> {
        let (line, col) = match self.line() {
            Some(l) => (l.number, l.indent + 1),
            None => (self.lines.last().map_or(1, |l| l.number + 1), 1),
        };
        Err(ReadError::new(line, col, msg))
    }

    /// The next line, which must sit at `depth` (4 spaces each).
    fn take_line(&mut self, depth: usize) -> Res<Line> {
        let Some(l) = self.line() else {
            return self.err_here("unexpected end of the script");
        };
        if l.indent != depth * 4 {
            return self.err_here(format!(
                "expected indentation of {} spaces, found {}",
                depth * 4,
                l.indent
            ));
        }
        let l = l.clone();
        self.pos += 1;
        Ok(l)
    }

    fn declare(&mut self, c: &Cursor, name: &str, sym: Sym) -> Res<()> {
        if self.names.insert(name.to_string(), sym).is_some() {
            return c.err(format!(
                "`{name}` is declared twice (names are unique in a function)"
            ));
        }
        Ok(())
    }

    fn new_var(&mut self, c: &Cursor, name: &str, dtype: DType) -> Res<VarId> {
        let id = VarId(self.f.vars.len() as u32);
        self.declare(c, name, Sym::Var(id))?;
        self.f.vars.push(Var {
            name: name.to_string(),
            dtype,
        });
        Ok(id)
    }

    fn new_buf(&mut self, c: &Cursor, b: Buffer) -> Res<BufId> {
        let id = BufId(self.f.buffers.len() as u32);
        self.declare(c, &b.name.clone(), Sym::Buf(id))?;
        self.f.buffers.push(b);
        Ok(id)
    }

    fn var_named(&self, c: &Cursor, name: &str) -> Res<VarId> {
        match self.names.get(name) {
            Some(Sym::Var(v)) => Ok(*v),
            Some(Sym::Buf(_)) => c.err(format!("`{name}` is a buffer, not a variable")),
            None => c.err(format!("unknown name `{name}`")),
        }
    }

    /// A buffer name at the cursor.
    fn buf(&self, c: &mut Cursor) -> Res<BufId> {
        let name = c.ident()?;
        match self.names.get(&name) {
            Some(Sym::Buf(b)) => Ok(*b),
            Some(Sym::Var(_)) => {
                c.i -= 1;
                c.err(format!("`{name}` is a variable, not a buffer"))
            }
            None => {
                c.i -= 1;
                c.err(format!("unknown buffer `{name}`"))
            }
        }
    }

    // ---- the function ----

    fn func(&mut self) -> Res<()> {
        let header = self.take_line(0)?;
        self.header(&header)?;
        let def = self.take_line(0)?;
        let mut c = Cursor::new(&def);
        c.keyword("def")?;
        self.f.name = c.ident()?;
        c.punct("(")?;
        // Shapes name the dims declared on the next lines: read them after.
        let mut params = Vec::new();
        while !c.at_punct(")") {
            if !params.is_empty() {
                c.punct(",")?;
            }
            let name = c.ident()?;
            c.punct(":")?;
            let mutable = match c.ident()?.as_str() {
                "Tensor" => false,
                "TensorMut" => true,
                _ => {
                    c.i -= 1;
                    return c.expected("`Tensor` or `TensorMut`");
                }
            };
            c.punct("(")?;
            let shape_at = c.i;
            c.punct("(")?;
            skip_group(&mut c)?;
            c.punct(",")?;
            let dtype = c.dtype()?;
            c.punct(")")?;
            params.push((name, mutable, shape_at, dtype));
        }
        c.punct(")")?;
        c.punct(":")?;
        c.end()?;
        while self.line().is_some_and(|l| {
            l.indent == 4
                && matches!(l.tokens.get(2).map(|t| &t.tok), Some(Tok::Ident(t)) if t == "T")
        }) {
            self.dim()?;
        }
        for (name, mutable, shape_at, dtype) in params {
            let mut c = Cursor::new(&def);
            c.i = shape_at;
            let shape = self.shape(&mut c)?;
            let b = self.new_buf(
                &c,
                Buffer {
                    name,
                    dtype,
                    shape,
                    scope: Scope::Global,
                    mutable,
                    layout: None,
                },
            )?;
            self.f.params.push(b);
        }
        self.kernel()?;
        let body = self.block(2)?;
        self.f.body = match <[Stmt; 1]>::try_from(body) {
            Ok([Stmt::Seq(v)]) if v.is_empty() => Stmt::Seq(v),
            Ok([s]) => Stmt::Seq(vec![s]),
            Err(v) => Stmt::Seq(v),
        };
        if self.line().is_some() {
            return self.err_here("unexpected text after the kernel body");
        }
        Ok(())
    }

    /// `# tile.prim_func consts(k=v, ..[, target="cuda"])[ arch="sm_90a"]`
    fn header(&mut self, l: &Line) -> Res<()> {
        let mut c = Cursor::new(l);
        if !matches!(c.peek(), Some(Tok::Hash)) {
            return c.expected("the header `# tile.prim_func consts(..)`");
        }
        c.i += 1;
        c.keyword("tile")?;
        c.punct(".")?;
        c.keyword("prim_func")?;
        c.keyword("consts")?;
        c.punct("(")?;
        while !c.at_punct(")") {
            if !self.f.consts.is_empty() || self.f.cuda_only {
                c.punct(",")?;
            }
            let name = c.ident()?;
            c.punct("=")?;
            if name == "target" && matches!(c.peek(), Some(Tok::Str(_))) {
                if c.string()? != "cuda" {
                    c.i -= 1;
                    return c.err("the only target is \"cuda\"");
                }
                self.f.cuda_only = true;
                continue;
            }
            let v = if c.at_ident("true") || c.at_ident("false") {
                ConstVal::Bool(c.boolean()?)
            } else if c.at_int() {
                ConstVal::Int(c.int()?)
            } else {
                ConstVal::Float(self.float(&mut c)?)
            };
            self.f.consts.push((name, v));
        }
        c.punct(")")?;
        if c.eat_ident("arch") {
            c.punct("=")?;
            let a = c.string()?;
            if a != CudaArch::Sm90a.name() {
                c.i -= 1;
                return c.err(format!("unknown arch {a:?} (the one is \"sm_90a\")"));
            }
            self.f.arch = CudaArch::Sm90a;
        }
        c.end()
    }

    /// A float as `{:?}` writes it: `-`? then digits, `inf` or `NaN`.
    fn float(&self, c: &mut Cursor) -> Res<f64> {
        let neg = c.eat_punct("-");
        let v = match c.peek() {
            Some(Tok::Float(s)) | Some(Tok::Int(s)) => s.parse::<f64>().ok(),
            Some(Tok::Ident(s)) if s == "inf" => Some(f64::INFINITY),
            Some(Tok::Ident(s)) if s == "NaN" => Some(f64::NAN),
            _ => None,
        };
        let Some(v) = v else {
            return c.expected("a number");
        };
        c.i += 1;
        Ok(if neg { -v } else { v })
    }

    /// `M = T.dynamic("M", int32)` or `temp = T.scalar("temp", float32)`
    /// (dims first, as printed).
    fn dim(&mut self) -> Res<()> {
        let l = self.take_line(1)?;
        let mut c = Cursor::new(&l);
        let name = c.ident()?;
        c.punct("=")?;
        let scalar = match c.t_name()?.as_str() {
            "dynamic" if self.f.scalars.is_empty() => false,
            "scalar" => true,
            _ => {
                c.i -= 1;
                return c.expected("`dynamic` or `scalar` (dims first)");
            }
        };
        c.punct("(")?;
        if c.string()? != name {
            c.i -= 1;
            return c.err(format!(
                "a dynamic dim or scalar is named as its variable, `{name}`"
            ));
        }
        c.punct(",")?;
        let t = c.dtype()?;
        c.punct(")")?;
        c.end()?;
        let v = self.new_var(&c, &name, t)?;
        if scalar {
            self.f.scalars.push(v);
        } else {
            self.f.dims.push(v);
        }
        Ok(())
    }

    /// `with T.Kernel(grid.., threads=N[, cluster=C][, cluster_y=Y][, split_k=S][, smem_bytes=B]) as (bx, ..):`
    fn kernel(&mut self) -> Res<()> {
        let l = self.take_line(1)?;
        let mut c = Cursor::new(&l);
        c.keyword("with")?;
        if c.t_name()? != "Kernel" {
            c.i -= 1;
            return c.expected("`Kernel`");
        }
        c.punct("(")?;
        loop {
            if c.at_ident("threads") && c.peek_at(1) == Some(&Tok::Punct("=")) {
                break;
            }
            self.f.launch.grid.push(self.expr(&mut c)?);
            c.punct(",")?;
        }
        c.kwarg("threads")?;
        self.f.launch.threads = c.int()?;
        let comma = c.eat_punct(",");
        if comma && c.at_ident("cluster") {
            c.kwarg("cluster")?;
            self.f.launch.cluster = c.int()?;
            c.eat_punct(",");
        }
        if comma && c.at_ident("cluster_y") {
            c.kwarg("cluster_y")?;
            self.f.launch.cluster_y = c.int()?;
            c.eat_punct(",");
        }
        if comma && c.at_ident("split_k") {
            c.kwarg("split_k")?;
            self.f.launch.split_k = c.int()?;
            c.eat_punct(",");
        }
        if c.at_ident("smem_bytes") {
            c.kwarg("smem_bytes")?;
            self.f.smem.bytes = c.int()?;
        }
        c.punct(")")?;
        c.keyword("as")?;
        c.punct("(")?;
        loop {
            let name = c.ident()?;
            let v = self.new_var(&c, &name, DType::I32)?;
            self.f.launch.block_vars.push(v);
            if !c.eat_punct(",") {
                break;
            }
        }
        c.punct(")")?;
        c.punct(":")?;
        c.end()
    }
}

#[cfg(test)]
mod tests {
    use super::read;

    /// Every statement and expression form the printer writes, including
    /// the state passes add (layouts, the shared pool, barriers).
    const ALL_FORMS: &str = r#"# tile.prim_func consts(n=4, eps=1e-5, flag=true, neg=-3, target="cuda")
def all_forms(a: Tensor((M, 4), float16), o: TensorMut((M,), float32)):
    M = T.dynamic("M", int32)
    with T.Kernel((((M + 4) - 1) / 4), 2, threads=64, smem_bytes=1024) as (bx, b):
        s = T.alloc_buffer((64, 16), float16, scope="shared", layout="swizzled", smem=[0, 2048))
        acc = T.alloc_buffer((64, 16), float32, scope="local.fragment", layout="mma(2x1)")
        r = T.alloc_buffer((4,), float32, scope="shared", smem=[2048, 2064))
        t = T.alloc_buffer((2, 2), int64, scope="local")
        x: int64 = T.int64(-9223372036854775808)
        y = T.alloc_var(float32, init=T.float32(-inf))
        y = T.if_then_else(not (bx < M), -T.Cast("float32", x), T.exp2(T.float32(NaN)))
        y = T.max(T.min(y, T.float32(1e-10)), -y)
        T.sync_threads()
        for i in T.Pipelined[num_stages=3](0, (M - -1)):
            if ((i >= 0) && (i != T.get_thread_binding(0))):
                pass
            else:
                if False:
                    o[i] = T.float32(0.5)
            for j in T.Parallel(0, 4):
                for k in T.unroll(1, 2):
                    T.atomic_add(o[j], T.Cast("float32", a[i, j]))
        T.copy(a[(bx * 4), 0; 4, 4], s[0, 0; 4, 4])
        T.fill(r[0; 4], T.float32(0.0))
        T.atomic_add(o[0; 4], r[0; 4])
        T.gemm(s, s, acc, transpose_A=false, transpose_B=true, clear_accum=true)
        T.reduce_abssum(acc, r, dim=1, clear=false)
        T.print(t[1, 0], msg="t \"quoted\"\n\u{301}")
        for w in T.serial(0, 2):
            pass
"#;

    #[test]
    fn every_form_reads_back() {
        let f = read(ALL_FORMS).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.script(), ALL_FORMS);
        assert!(f.cuda_only);
        assert_eq!(f.smem.bytes, 1024);
        assert_eq!(f.smem.slots.len(), 2);
    }

    /// The pipeline plans `plan_pipelines` prints (warp specialization, the
    /// tiles a cluster shares, why it shares none, a split loop, why it is
    /// not split) read back as printed.
    #[test]
    fn pipeline_plans_read_back() {
        for case in [
            include_str!("../../tests/passes/plan_pipelines/hopper_cluster4_multicast.ir"),
            include_str!("../../tests/passes/plan_pipelines/hopper_cluster4_panel_6.ir"),
            include_str!("../../tests/passes/plan_pipelines/hopper_split_k.ir"),
            include_str!("../../tests/passes/plan_pipelines/hopper_split_k_bias.ir"),
        ] {
            let (_, planned) = case
                .split_once("# ---- expected ----\n")
                .expect("an expected part");
            assert!(planned.contains("multicast") || planned.contains("split_"));
            let f = read(planned).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(f.script(), planned);
        }
    }

    /// The error for `text` as `line, column: message`.
    fn error(text: &str) -> String {
        let e = read(text).expect_err("an error");
        format!("{}:{}: {}", e.line, e.col, e.message)
    }

    const HEAD: &str = "# tile.prim_func consts()\ndef k(a: TensorMut((8,), float32)):\n    with T.Kernel(1, threads=32) as (bx):\n";

    #[test]
    fn errors_name_line_and_column() {
        let e = read(&format!("{HEAD}        a[0] = $\n")).expect_err("error");
        assert_eq!((e.line, e.col), (4, 16));
        assert_eq!(e.to_string(), "line 4, column 16: unexpected character `$`");
        assert_eq!(
            error(&format!("{HEAD}        a[i] = T.float32(1.0)\n")),
            "4:11: unknown name `i`"
        );
        assert_eq!(
            error(&format!(
                "{HEAD}        a[0] = T.float32(1.0)\n          pass\n"
            )),
            "5:11: expected indentation of 8 spaces, found 10"
        );
        assert_eq!(
            error(&format!(
                "{HEAD}        for i in T.serial(0, 8):\n        a[0] = T.float32(1.0)\n"
            )),
            "5:9: expected an indented block"
        );
        assert_eq!(
            error(&format!(
                "{HEAD}        a[0] = (T.float32(1.0) ** T.float32(2.0))\n"
            )),
            "4:33: expected an expression, found `*`"
        );
        assert_eq!(
            error(&format!("{HEAD}        T.print(a[0], msg=\"open)\n")),
            "4:27: unterminated string"
        );
        assert_eq!(
            error(&format!(
                "{HEAD}        x: int32 = 1\n        x: int32 = 2\n"
            )),
            "5:21: `x` is declared twice (names are unique in a function)"
        );
        assert_eq!(
            error(&format!("{HEAD}        T.frobnicate(a)\n")),
            "4:11: expected a tile op (`copy`, `fill`, `gemm`, `reduce_sum`, ..), found `frobnicate`"
        );
        assert_eq!(
            error(&format!("{HEAD}        a[0] = T.float32(1.0) extra\n")),
            "4:31: expected the end of the line, found `extra`"
        );
        assert_eq!(
            error("def k():\n"),
            "1:1: expected the header `# tile.prim_func consts(..)`, found `def`"
        );
        assert_eq!(error(HEAD), "4:1: expected an indented block");
        assert_eq!(
            error(&format!("{HEAD}        a[0] = a\n")),
            "4:16: `a` is a buffer, not a variable"
        );
    }
}
