//! The variant-syntax focus (`--focus variants`): seeds that list values in
//! their attribute, and mutations of the attribute itself (its lists, its
//! filter and its `default(..)`), where the body mutations of `mutate` rarely
//! reach. Every seed without a variant list gets one (an integer parameter
//! `name = v` becomes `name = [v, w]`), so the focus covers every kernel.

use crate::mutate::Rng;

/// The attribute's arguments: the byte range of the text between
/// `#[tile::kernel(` and its closing `)]`.
fn attr_range(s: &str) -> Option<(usize, usize)> {
    let head = "#[tile::kernel(";
    let start = s.find(head)? + head.len();
    let b = s.as_bytes();
    let mut depth = 1usize;
    for (i, &c) in b.iter().enumerate().skip(start) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some((start, i));
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether the attribute lists literal values (`block_m = [64, 128]`).
pub fn has_variant_list(s: &str) -> bool {
    let Some((a, b)) = attr_range(s) else {
        return false;
    };
    let attr = &s[a..b];
    attr.match_indices('[').any(|(i, _)| {
        let rest = attr[i + 1..].trim_start();
        rest.starts_with(|c: char| c.is_ascii_digit() || c == '-')
            || rest.starts_with("true")
            || rest.starts_with("false")
    })
}

/// The `(name, value)` integer parameters of the attribute (`threads = 128`).
fn int_params(attr: &str) -> Vec<(String, i64)> {
    attr.split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            let (k, v) = (k.trim(), v.trim());
            let ok = !k.is_empty() && k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_');
            Some((k.to_string(), v.parse::<i64>().ok()?)).filter(|_| ok)
        })
        .collect()
}

/// The parameter names the attribute gives (listed or not).
fn param_names(attr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut piece = String::new();
    for c in attr.chars().chain(std::iter::once(',')) {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                if let Some((k, _)) = piece.split_once('=') {
                    let k = k.trim();
                    if !k.is_empty() && k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                        out.push(k.to_string());
                    }
                }
                piece.clear();
                continue;
            }
            _ => {}
        }
        piece.push(c);
    }
    out
}

/// A seed with a variant list: itself if it has one, else with one or two
/// integer parameters listed (`v` and `2v`, or `v / 2`), and sometimes a
/// filter or a default over them.
pub fn with_variants(rng: &mut Rng, s: &str) -> String {
    if has_variant_list(s) {
        return s.to_string();
    }
    let Some((a, b)) = attr_range(s) else {
        return s.to_string();
    };
    let attr = &s[a..b];
    let ints = int_params(attr);
    if ints.is_empty() {
        return s.to_string();
    }
    let mut new = attr.to_string();
    let mut listed = Vec::new();
    for _ in 0..1 + rng.below(2) {
        let (k, v) = rng.pick(&ints).clone();
        if listed.iter().any(|(n, _)| *n == k) {
            continue;
        }
        let w = if v > 1 && rng.below(2) == 0 {
            v / 2
        } else {
            v * 2
        };
        let from = format!("{k} = {v}");
        if new.contains(&from) {
            new = new.replacen(&from, &format!("{k} = [{v}, {w}]"), 1);
            listed.push((k, w));
        }
    }
    if let Some((k, w)) = listed.first() {
        match rng.below(3) {
            0 => new.push_str(&format!(", filter = {k} <= {w}")),
            1 => new.push_str(&format!(", default({k} = {w})")),
            _ => {}
        }
    }
    format!("{}{new}{}", &s[..a], &s[b..])
}

/// Tokens that break or bend a filter or a list.
const TOKENS: &[&str] = &[
    "for", "<", ">", "<=", ",", ",,", "=", "==", "+", "-", "*", "/", "%", "!", "&&", "||", "as",
    "|x|", "if", "match", "..", ";", "::", "true", "false", "1.5", "0", "-1", "r#match", "'a",
    "\"cuda\"", "filter", "default", "f16", "x", "()", "[]", "[1]", "(1)",
];

/// Filters: conditions over the attribute's names, some of them malformed.
fn filter_expr(rng: &mut Rng, names: &[String], depth: usize) -> String {
    let leaf = |rng: &mut Rng| -> String {
        match rng.below(6) {
            0 => [
                "0",
                "1",
                "2",
                "64",
                "128",
                "-3",
                "9223372036854775807",
                "1.5",
                "true",
            ][rng.below(9)]
            .to_string(),
            1 => "nope".to_string(),
            _ if names.is_empty() => "1".to_string(),
            _ => rng.pick(names).clone(),
        }
    };
    if depth == 0 || rng.below(3) == 0 {
        return leaf(rng);
    }
    let ops = [
        "+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||",
    ];
    let (l, r) = (
        filter_expr(rng, names, depth - 1),
        filter_expr(rng, names, depth - 1),
    );
    match rng.below(8) {
        0 => format!("!({l})"),
        1 => format!("({l} {} {r})", rng.pick(&ops)),
        2 => format!("-{l}"),
        _ => format!("{l} {} {r}", rng.pick(&ops)),
    }
}

/// One mutation of the attribute of `s`.
pub fn mutate_attr(rng: &mut Rng, s: &str) -> String {
    let Some((a, b)) = attr_range(s) else {
        return s.to_string();
    };
    let attr = &s[a..b];
    let names = param_names(attr);
    // Token boundaries (word runs and single punctuation).
    let mut bounds: Vec<(usize, usize)> = Vec::new();
    let bytes = attr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' {
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'.')
            {
                i += 1;
            }
        } else {
            i += 1;
        }
        bounds.push((start, i));
    }
    if bounds.is_empty() {
        return s.to_string();
    }
    let new = match rng.below(8) {
        // Insert a token.
        0 => {
            let (at, _) = *rng.pick(&bounds);
            format!("{} {} {}", &attr[..at], rng.pick(TOKENS), &attr[at..])
        }
        // Delete a token (brackets stay: the file must still tokenize).
        1 => {
            let (x, y) = *rng.pick(&bounds);
            match &attr[x..y] {
                "[" | "]" | "(" | ")" => attr.to_string(),
                _ => format!("{}{}", &attr[..x], &attr[y..]),
            }
        }
        // Replace a token.
        2 => {
            let (x, y) = *rng.pick(&bounds);
            match &attr[x..y] {
                "[" | "]" | "(" | ")" => attr.to_string(),
                _ => format!("{}{}{}", &attr[..x], rng.pick(TOKENS), &attr[y..]),
            }
        }
        // A new or replacing filter (malformed now and then).
        3 | 4 => {
            let mut f = filter_expr(rng, &names, 3);
            if rng.below(4) == 0 {
                let cut = rng.below(f.len() + 1);
                f = f[..cut].replace(['(', ')'], " ");
            }
            let base = match attr.find("filter") {
                Some(p) if rng.below(8) != 0 => attr[..p].trim_end().trim_end_matches(','),
                _ => attr,
            };
            format!("{base}, filter = {f}")
        }
        // A default: listed values, others, unknown names, malformed.
        5 | 6 => {
            let mut parts = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let n = match rng.below(6) {
                    0 => "nope".to_string(),
                    _ if names.is_empty() => "x".to_string(),
                    _ => rng.pick(&names).clone(),
                };
                let v = match rng.below(8) {
                    0 => "".to_string(),
                    1 => "x".to_string(),
                    2 => "2 * 64".to_string(),
                    3 => "1.5".to_string(),
                    _ => {
                        ["1", "2", "16", "32", "64", "128", "256", "true"][rng.below(8)].to_string()
                    }
                };
                parts.push(match rng.below(10) {
                    0 => n,
                    _ => format!("{n} = {v}"),
                });
            }
            let sep = if rng.below(10) == 0 { " " } else { ", " };
            // Usually in place of the default there is (a second one now and then).
            let base = match attr.find("default") {
                Some(p) if rng.below(8) != 0 => attr[..p].trim_end().trim_end_matches(','),
                _ => attr,
            };
            format!("{base}, default({})", parts.join(sep))
        }
        // A list changed: a value repeated, emptied, or of another kind.
        _ => match attr.find('[') {
            Some(p) => {
                let end = attr[p..].find(']').map_or(attr.len(), |e| p + e);
                let inner = &attr[p + 1..end];
                let first = inner.split(',').next().unwrap_or("").trim();
                let v = match rng.below(5) {
                    0 => String::new(),
                    1 => format!("{first}, {first}"),
                    2 => format!("{inner}, true"),
                    3 => format!("{inner}, 0.5"),
                    _ => format!("{inner}, -{first}"),
                };
                let after = &attr[(end + 1).min(attr.len())..];
                format!("{}[{v}]{after}", &attr[..p])
            }
            None => attr.to_string(),
        },
    };
    format!("{}{new}{}", &s[..a], &s[b..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_get_a_list_and_mutants_stay_kernels() {
        let s = "#[tile::kernel(block_n = 256, threads = 128)]\nfn k() {}";
        assert!(!has_variant_list(s));
        let mut rng = Rng(3);
        let v = with_variants(&mut rng, s);
        assert!(has_variant_list(&v), "{v}");
        for _ in 0..200 {
            let m = mutate_attr(&mut rng, &v);
            assert!(
                m.starts_with("#[tile::kernel(") && m.ends_with(")]\nfn k() {}"),
                "{m}"
            );
        }
        let names = param_names("a = [1, 2], b = 3, filter = a < b, default(a = 1)");
        assert_eq!(names, ["a", "b", "filter"]);
    }
}
