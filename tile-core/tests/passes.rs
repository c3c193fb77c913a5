//! Per-pass file tests. Each `tests/passes/<pass>/<case>.ir` holds:
//!
//! ```text
//! # pass: <pass>  target: <c|cuda>
//! # what the case shows (any number of `#` lines)
//! <the input script>
//! # ---- expected ----
//! <the script the pass makes of it>
//! ```
//!
//! The input must read back to itself and verify at the stage before the
//! pass; the pass runs alone (`passes::run_one`) and its printed output must
//! equal the expected script. On a mismatch the test prints a line diff;
//! `TILE_BLESS=1` rewrites the expected scripts (review the diff).

mod common;

use std::path::Path;
use tile_core::ir::read::read;
use tile_core::passes::{run_one, target_name, PassId, PASSES};
use tile_core::verify::{verify_at, Stage};
use tile_core::Target;

const SEPARATOR: &str = "# ---- expected ----\n";

/// A case file split into its parts.
struct Case {
    pass: String,
    target: Target,
    /// The header and comment lines.
    preamble: String,
    input: String,
    expected: Option<String>,
}

fn parse_case(text: &str) -> Result<Case, String> {
    let first = text.lines().next().unwrap_or_default();
    let mut words = first.split_whitespace();
    let (Some("#"), Some("pass:"), Some(pass), Some("target:"), Some(t), None) = (
        words.next(),
        words.next(),
        words.next(),
        words.next(),
        words.next(),
        words.next(),
    ) else {
        return Err(format!(
            "the first line is `# pass: <name>  target: <c|cuda>`, not `{first}`"
        ));
    };
    let target = match t {
        "c" => Target::C,
        "cuda" => Target::Cuda,
        _ => return Err(format!("unknown target `{t}`")),
    };
    let start = text
        .find("# tile.prim_func")
        .ok_or("no input script (`# tile.prim_func ..`)")?;
    let (input, expected) = match text[start..].split_once(SEPARATOR) {
        Some((i, e)) => (i, Some(e.to_string())),
        None => (&text[start..], None),
    };
    Ok(Case {
        pass: pass.to_string(),
        target,
        preamble: text[..start].to_string(),
        input: input.to_string(),
        expected: expected.filter(|e| !e.trim().is_empty()),
    })
}

/// The stage a pass's input is at: after the pass before it for `target`.
fn stage_before(pass: PassId, target: Target) -> Stage {
    PASSES
        .iter()
        .rev()
        .find(|p| p.id < pass && p.targets.contains(&target))
        .map_or(Stage::Frontend, |p| Stage::After(p.id, target))
}

/// The pass's output for the case's input, or what is wrong with the case.
fn run_case(c: &Case) -> Result<String, String> {
    let f = read(&c.input).map_err(|e| format!("input: {e}"))?;
    if f.script() != c.input {
        return Err(format!(
            "the input does not print back as written:\n{}",
            diff(&c.input, &f.script())
        ));
    }
    let id = PASSES
        .iter()
        .find(|p| p.name == c.pass)
        .map(|p| p.id)
        .ok_or(format!("no pass `{}`", c.pass))?;
    verify_at(&f, stage_before(id, c.target)).map_err(|d| format!("input: {d}"))?;
    let out = run_one(&c.pass, f, c.target).map_err(|d| d.message)?;
    Ok(out.script())
}

/// A line diff of `expected` against `actual` (`-` expected only, `+`
/// actual only), with two lines of context around each change.
fn diff(expected: &str, actual: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut rows = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            rows.push((' ', a[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            rows.push(('-', a[i]));
            i += 1;
        } else {
            rows.push(('+', b[j]));
            j += 1;
        }
    }
    let near = |k: usize| {
        rows[k.saturating_sub(2)..(k + 3).min(rows.len())]
            .iter()
            .any(|r| r.0 != ' ')
    };
    let mut out = String::new();
    let mut gap = false;
    for (k, (mark, line)) in rows.iter().enumerate() {
        if near(k) {
            out.push_str(&format!("{mark} {line}\n"));
            gap = false;
        } else if !gap {
            out.push_str("  ...\n");
            gap = true;
        }
    }
    out
}

fn check_file(path: &Path, bless: bool) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let case = parse_case(&text)?;
    let dir = path.parent().and_then(Path::file_name);
    if dir.and_then(|d| d.to_str()) != Some(case.pass.as_str()) {
        return Err(format!("a `{}` case outside its pass's folder", case.pass));
    }
    let actual = run_case(&case)?;
    if bless {
        let text = format!("{}{}{SEPARATOR}{actual}", case.preamble, case.input);
        return std::fs::write(path, text).map_err(|e| e.to_string());
    }
    match case.expected {
        None => Err("no expected output (write it with TILE_BLESS=1)".into()),
        Some(e) if e == actual => Ok(()),
        Some(e) => Err(format!(
            "the output differs (- expected, + actual; TILE_BLESS=1 rewrites it):\n{}",
            diff(&e, &actual)
        )),
    }
}

#[test]
fn pass_cases() {
    let bless = std::env::var("TILE_BLESS").is_ok_and(|v| v == "1");
    let root = common::root().join("tests/passes");
    let mut failures = Vec::new();
    let mut count = std::collections::BTreeMap::new();
    for p in &PASSES {
        let dir = root.join(p.name);
        let files = if dir.is_dir() {
            common::files_in(&dir, "ir")
        } else {
            Vec::new()
        };
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            if let Ok(c) = parse_case(&text) {
                *count.entry((p.name, target_name(c.target))).or_insert(0) += 1;
            }
            if let Err(e) = check_file(&f, bless) {
                failures.push(format!("{}: {e}", f.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Every pass has cases for every target it runs for.
    for p in &PASSES {
        for &t in p.targets {
            let n = count.get(&(p.name, target_name(t))).copied().unwrap_or(0);
            assert!(n >= 1, "no `{}` case for {}", p.name, target_name(t));
        }
        let all: usize = p
            .targets
            .iter()
            .map(|&t| count.get(&(p.name, target_name(t))).copied().unwrap_or(0))
            .sum();
        assert!(all >= 3, "`{}` has {all} cases; it needs 3 or more", p.name);
    }
}

#[test]
fn the_diff_shows_changed_lines_with_context() {
    let a = "1\n2\n3\n4\n5\n6\n7\n8\n";
    let b = "1\n2\n3\n4\nfive\n6\n7\n8\n";
    assert_eq!(
        diff(a, b),
        "  ...\n  3\n  4\n- 5\n+ five\n  6\n  7\n  ...\n"
    );
}
