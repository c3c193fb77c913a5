//! The seed kernels: every `#[tile::kernel]` function of the repository's
//! examples, conformance kernels, UI cases and golden kernels, as text.

use std::path::Path;

/// The folders seeds come from, relative to the repository root.
pub const SEED_DIRS: &[&str] = &[
    "examples",
    "tests/kernels",
    "tests/ui",
    "tile-core/tests/golden",
];

/// Every kernel function in the `.rs` files of `dirs` under `root`, each
/// from its `#[tile::kernel` attribute to its closing brace.
pub fn seeds(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for d in SEED_DIRS {
        let Ok(entries) = std::fs::read_dir(root.join(d)) else {
            continue;
        };
        let mut files: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        files.sort();
        for f in files {
            if let Ok(text) = std::fs::read_to_string(&f) {
                out.extend(kernels_in(&text));
            }
        }
    }
    out
}

/// The kernel functions of one source file.
pub fn kernels_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("#[tile::kernel") {
        let start = from + at;
        let Some(open) = text[start..].find('{').map(|o| start + o) else {
            break;
        };
        match matching_brace(text, open) {
            Some(end) => {
                out.push(text[start..=end].to_string());
                from = end + 1;
            }
            None => break,
        }
    }
    out
}

/// The index of the `}` closing the `{` at `open` (braces in strings,
/// characters and comments are skipped).
fn matching_brace(text: &str, open: usize) -> Option<usize> {
    let b = text.as_bytes();
    let (mut depth, mut i) = (0usize, open);
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_each_kernel() {
        let text = "use x;\n#[tile::kernel(a = 1)]\nfn k(x: T) { if a { \"}\" } }\n// }\n#[tile::kernel]\nfn j() {}\n";
        let k = super::kernels_in(text);
        assert_eq!(k.len(), 2);
        assert!(k[0].ends_with("\"}\" } }"));
        assert!(k[1].ends_with("fn j() {}"));
    }
}
