//! The README's interop section shows code that runs: each of its code blocks (but the
//! shell one) must appear, line for line, in one of the tests or examples that run it.

const SOURCES: &[&str] = &[
    "tests/interop_views.rs",
    "tests/interop_candle.rs",
    "examples/candle_rmsnorm.rs",
    "tile-runtime/src/dlpack/tests.rs",
    "examples/python/tests/test_numpy.py",
];

/// Non-empty lines, trimmed.
fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[test]
fn interop_snippets_are_tested_code() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let start = readme
        .find("## Interop")
        .expect("README has an Interop section");
    let section = &readme[start..];
    let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
    let section = &section[..end];
    let sources: Vec<(&str, Vec<String>)> = SOURCES
        .iter()
        .map(|p| {
            (
                *p,
                lines(&std::fs::read_to_string(format!("{root}/{p}")).unwrap()),
            )
        })
        .collect();
    let mut blocks = 0;
    let mut rest = section;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let lang_end = after.find('\n').unwrap();
        let lang = after[..lang_end].trim();
        let body_end = after.find("```").unwrap();
        let body = &after[lang_end..body_end];
        rest = &after[body_end + 3..];
        if lang.is_empty() {
            continue; // shell commands
        }
        blocks += 1;
        let want = lines(body);
        let found = sources.iter().any(|(_, have)| {
            have.windows(want.len().max(1))
                .any(|w| w == want.as_slice())
        });
        assert!(
            found,
            "README interop block not found in {SOURCES:?}:\n{body}"
        );
    }
    assert!(blocks >= 5, "found {blocks} code blocks");
}
