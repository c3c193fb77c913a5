//! Code generators. Both have the same shape: a `Writer` walking the lowered
//! IR, `generate(&PrimFunc, &Options) -> Result<Source, Diagnostic>`.

pub mod c;
mod cfamily;
pub mod cuda;

pub use crate::ir::flatten;

/// Names that would collide with C/C++/CUDA keywords, types, macros and
/// functions the generated code uses, or with our helpers.
const RESERVED: &[&str] = &[
    // C and C++ keywords.
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char8_t",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "concept",
    "const",
    "consteval",
    "constexpr",
    "constinit",
    "const_cast",
    "continue",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "requires",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
    // Types, macros and functions the generated code names.
    "half",
    "int8_t",
    "uint8_t",
    "int16_t",
    "uint16_t",
    "int32_t",
    "uint32_t",
    "int64_t",
    "uint64_t",
    "size_t",
    "INFINITY",
    "NAN",
    "INT8_MIN",
    "INT8_MAX",
    "INT16_MIN",
    "INT16_MAX",
    "INT32_MIN",
    "INT32_MAX",
    "INT64_MIN",
    "INT64_MAX",
    "UINT8_MAX",
    "UINT16_MAX",
    "UINT32_MAX",
    "UINT64_MAX",
    "printf",
    "memcpy",
    "min",
    "max",
    "exp",
    "expf",
    "exp2",
    "exp2f",
    "log",
    "logf",
    "log2",
    "log2f",
    "sqrt",
    "sqrtf",
    "rsqrt",
    "rsqrtf",
    "abs",
    "fabs",
    "fabsf",
    "tanh",
    "tanhf",
    "fmin",
    "fminf",
    "fmax",
    "fmaxf",
    // The math the language's intrinsics call (`cfamily::math_call`).
    "erf",
    "erff",
    "sin",
    "sinf",
    "cos",
    "cosf",
    "floor",
    "floorf",
    "ceil",
    "ceilf",
    "round",
    "roundf",
    "trunc",
    "truncf",
    "log1p",
    "log1pf",
    "expm1",
    "expm1f",
    "pow",
    "powf",
    "fma",
    "fmaf",
    "atomicAdd",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "tl",
    "std",
    // The C entry's parameters.
    "grid",
    "bufs",
    "dims",
    "begin",
    "end",
];

/// The identifier generated code uses for an IR name (an ASCII identifier;
/// the frontend refuses others). A name that is reserved, or that could be
/// mistaken for one of the generated code's own (`tl_..`, `__..`, `_X..`),
/// gets a `_` appended. So does any name that already ends with `_`: the
/// escaped names are then exactly the names ending with `_`, which keeps the
/// mapping one-to-one (`int` is `int_`, `int_` is `int__`). The generated
/// code's own names start with `tl_` and never end with `_`.
pub fn ident(name: &str) -> String {
    let reserved_prefix = name.starts_with("tl_")
        || name.starts_with("__")
        || (name.starts_with('_') && name[1..].starts_with(|c: char| c.is_ascii_uppercase()));
    if RESERVED.contains(&name) || reserved_prefix || name.ends_with('_') {
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
