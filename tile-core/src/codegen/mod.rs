//! Code generators. Both have the same shape: a `Writer` walking the lowered
//! IR, `generate(&PrimFunc, &Options) -> Result<Source, Diagnostic>`.

pub mod c;
mod cfamily;
pub mod cuda;

pub use crate::ir::flatten;

/// Names that would collide with C/C++/CUDA keywords, builtins or our helpers.
const RESERVED: &[&str] = &[
    "auto",
    "bool",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "half",
    "class",
    "template",
    "typename",
    "namespace",
    "new",
    "delete",
    "this",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "min",
    "max",
    "exp",
    "log",
    "sqrt",
    "abs",
    "grid",
    "bufs",
    "dims",
    "begin",
    "end",
    "private",
    "public",
    "operator",
    "virtual",
    "asm",
    "true",
    "false",
    "try",
    "catch",
    "throw",
];

/// The identifier generated code uses for an IR name.
pub fn ident(name: &str) -> String {
    if RESERVED.contains(&name) || name.starts_with("tl_") || name.starts_with("__") {
        format!("{name}_")
    } else {
        name.to_string()
    }
}

/// Float literal text (without suffix) that C and CUDA parse back exactly.
pub fn float_lit(v: f64) -> String {
    let s = format!("{v:?}");
    if s.contains('.') || s.contains('e') || s.contains("inf") || s.contains("NaN") {
        s
    } else {
        format!("{s}.0")
    }
}
