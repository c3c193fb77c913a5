//! Compile-fail suite: each file under `tests/ui/` is a kernel with one kind of
//! mistake (one file shows several mistakes reported together). The expected
//! compiler output sits beside it as a `.stderr` file; regenerate with
//! `TRYBUILD=overwrite cargo test --test ui` and review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
