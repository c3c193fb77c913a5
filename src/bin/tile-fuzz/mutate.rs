//! Mutations of kernel source text. Each picks a place and changes a token
//! or a line: literals to boundary values, names to other names (raw,
//! reserved in C, colliding once escaped), dtypes, operators, whole lines
//! (deleted, repeated, moved, taken from another kernel) and snippets that
//! exercised bugs before (allocations in loops, atomics, labels, casts).

/// splitmix64: small, seedable, no dependency.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "8",
    "16",
    "31",
    "32",
    "33",
    // Multiples of 16 that are not powers of two: tensor-core tile widths.
    "48",
    "64",
    "96",
    "100",
    "127",
    "128",
    "176",
    "255",
    "256",
    "1000",
    "1023",
    "1024",
    "1025",
    "4096",
    "65535",
    "65536",
    "1048576",
    "16777216",
    "16777217",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "1099511627776",
    "9223372036854775807",
    "-2147483648",
    "300u8",
    "70000i16",
    "5u32",
];

/// Sizes that keep a kernel valid more often than the boundary values do.
const SMALL: &[&str] = &["1", "2", "4", "8", "16", "32", "64", "128", "256", "512"];

const FLOATS: &[&str] = &[
    "0.0",
    "-0.0",
    "1.0",
    "1e39",
    "1e-45",
    "65504.0",
    "70000.0",
    "1.0001",
    "3.4e38",
    "1e308",
    "0.1",
    "2147483648.0",
    "1e39f32",
    "1.5f16",
    "-3e9",
];

const NAMES: &[&str] = &[
    "int", "int_", "int__", "r#fn", "r#match", "r#int", "tl_x", "tl_smem", "__x", "_X", "printf",
    "INFINITY", "half", "tl", "std", "main", "k_kernel", "bufs", "dims", "grid", "end", "i32",
    "f16", "T", "N", "M", "bx", "i", "acc", "threads",
];

const DTYPES: &[&str] = &[
    "bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64",
];

const OPS: &[&str] = &[
    " + ", " - ", " * ", " / ", " % ", " < ", " <= ", " == ", " != ", " && ", " || ",
];

/// Snippets; `{a}` and `{b}` stand for names taken from the kernel.
const SNIPPETS: &[&str] = &[
    "let z = T::alloc_shared::<f32>([4]);",
    "let z = T::alloc_fragment::<f32>([64, 64]);",
    "let z = T::alloc_local::<f32>([33554432]);",
    "let z = T::alloc_local::<f16>([8]); z[0] = 1.0; z[7] = z[0];",
    "T::atomic_add({a}[0], 1.0);",
    "T::atomic_add({a}[{b}], 1.0);",
    "T::print({b}, \"a\\nb\\\"c%d??=\");",
    "T::print({a});",
    "for q in T::parallel(64) { {a}[q] = {a}[q]; }",
    "for q in T::parallel([4294967296, 2]) { }",
    "for q in T::serial({b}) { {a}[q] = {a}[q] + 1.0; }",
    "for q in T::unroll(4) { let w = q * {b}; }",
    "for q in T::pipelined(8, 100) { }",
    "let w = ({b} as i16) as f32;",
    "let w = (1.0001 as f16) as f32;",
    "let w = {b} * 2147483647 + 1;",
    "let w = {b} / 0;",
    "let w = -(5u32);",
    "let w = T::if_then_else({b} < 3, 1e39, -1e39);",
    "let w = T::max_value::<f16>() * 2.0;",
    "{a}[2147483648] = {a}[0];",
    "{a}[-1] = {a}[0];",
    "T::copy({a}.at([9223372036854775807]), {a});",
    "T::fill({a}, 0.0);",
    "let mut m = 0; m += {b};",
];

/// One to three mutations of `src`; `other` is another seed to splice from.
pub fn mutate(rng: &mut Rng, src: &str, other: &str) -> String {
    let mut s = src.to_string();
    for _ in 0..1 + rng.below(3) {
        s = match rng.below(10) {
            0 => replace_token(rng, &s, is_int, INTS),
            1 => replace_token(rng, &s, is_int, SMALL),
            2 => replace_token(rng, &s, is_float, FLOATS),
            3 => {
                let names = idents(&s);
                let own: Vec<&str> = names.iter().map(String::as_str).collect();
                let pool = if rng.below(2) == 0 && !own.is_empty() {
                    own
                } else {
                    NAMES.to_vec()
                };
                replace_token(rng, &s, is_ident, &pool)
            }
            4 => replace_token(rng, &s, |t| DTYPES.contains(&t), DTYPES),
            5 => replace_op(rng, &s),
            6 => edit_lines(rng, &s, other),
            _ => insert_snippet(rng, &s),
        };
    }
    s
}

fn is_int(t: &str) -> bool {
    t.bytes().next().is_some_and(|c| c.is_ascii_digit()) && !t.contains('.')
}

fn is_float(t: &str) -> bool {
    t.bytes().next().is_some_and(|c| c.is_ascii_digit()) && t.contains('.')
}

fn is_ident(t: &str) -> bool {
    t.bytes()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
}

/// The tokens of `s` with their byte ranges: runs of word characters (and
/// `.` inside numbers); everything else is skipped.
fn tokens(s: &str) -> Vec<(usize, usize)> {
    let b = s.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if word(b[i]) {
            let start = i;
            let number = b[i].is_ascii_digit();
            while i < b.len() && (word(b[i]) || (number && b[i] == b'.')) {
                i += 1;
            }
            out.push((start, i));
        } else {
            i += 1;
        }
    }
    out
}

fn idents(s: &str) -> Vec<String> {
    let mut v: Vec<String> = tokens(s)
        .into_iter()
        .map(|(a, b)| s[a..b].to_string())
        .filter(|t| is_ident(t) && t.len() > 1 && !DTYPES.contains(&t.as_str()))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Replaces a random token satisfying `which` with a value from `pool`.
fn replace_token(rng: &mut Rng, s: &str, which: impl Fn(&str) -> bool, pool: &[&str]) -> String {
    let ts: Vec<(usize, usize)> = tokens(s)
        .into_iter()
        .filter(|&(a, b)| which(&s[a..b]))
        .collect();
    if ts.is_empty() || pool.is_empty() {
        return s.to_string();
    }
    let (a, b) = *rng.pick(&ts);
    format!("{}{}{}", &s[..a], rng.pick(pool), &s[b..])
}

fn replace_op(rng: &mut Rng, s: &str) -> String {
    let at: Vec<(usize, &str)> = OPS
        .iter()
        .flat_map(|op| s.match_indices(op).collect::<Vec<_>>())
        .collect();
    if at.is_empty() {
        return s.to_string();
    }
    let (i, op) = *rng.pick(&at);
    format!("{}{}{}", &s[..i], rng.pick(OPS), &s[i + op.len()..])
}

/// Whether a line opens and closes the same brackets (moving it keeps the
/// source parseable more often).
fn balanced(l: &str) -> bool {
    let count = |c: char| l.chars().filter(|&x| x == c).count();
    count('{') == count('}') && count('(') == count(')') && count('[') == count(']')
}

/// Deletes, repeats, moves or splices in a (balanced) line of the body.
fn edit_lines(rng: &mut Rng, s: &str, other: &str) -> String {
    let mut lines: Vec<String> = s.lines().map(str::to_string).collect();
    // Keep the attribute, signature and the closing lines.
    let body: Vec<usize> = (2..lines.len().saturating_sub(2))
        .filter(|&i| balanced(&lines[i]) && !lines[i].trim().is_empty())
        .collect();
    if body.is_empty() {
        return s.to_string();
    }
    let i = *rng.pick(&body);
    match rng.below(4) {
        0 => {
            lines.remove(i);
        }
        1 => {
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        2 => {
            let j = *rng.pick(&body);
            lines.swap(i, j);
        }
        _ => {
            let donor: Vec<&str> = other.lines().filter(|l| balanced(l)).collect();
            if donor.len() > 2 {
                lines[i] = rng.pick(&donor[1..donor.len() - 1]).to_string();
            }
        }
    }
    lines.join("\n")
}

/// Inserts a snippet at the start of a random body line.
fn insert_snippet(rng: &mut Rng, s: &str) -> String {
    let names = idents(s);
    let name = |rng: &mut Rng| {
        if names.is_empty() {
            "x".to_string()
        } else {
            rng.pick(&names).clone()
        }
    };
    let snippet = rng
        .pick(SNIPPETS)
        .replace("{a}", &name(rng))
        .replace("{b}", &name(rng));
    let mut lines: Vec<String> = s.lines().map(str::to_string).collect();
    if lines.len() < 4 {
        return s.to_string();
    }
    let i = 3 + rng.below(lines.len() - 4);
    lines.insert(i, snippet);
    lines.join("\n")
}
