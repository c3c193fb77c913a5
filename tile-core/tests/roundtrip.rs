//! The script reader against the printer: `print(read(text)) == text` for
//! every golden script and for the IR after every pass of every golden
//! kernel and example, on both targets; and what is read back behaves as the
//! original: each pass gives the same output from it, codegen the same code.

mod common;

use tile_core::ir::read::read;
use tile_core::ir::PrimFunc;
use tile_core::passes::{run_one, target_name, PASSES};
use tile_core::verify::{verify_at, Stage};

fn reread(text: &str, what: &str) -> PrimFunc {
    let f = read(text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
    assert_eq!(f.script(), text, "{what}: print(read(text)) differs");
    f
}

#[test]
fn golden_scripts_read_back_identically() {
    let mut dirs = vec![common::root().join("tests/golden")];
    dirs.push(dirs[0].join("examples"));
    let files: Vec<_> = dirs
        .iter()
        .flat_map(|d| common::files_in(d, "ir"))
        .collect();
    assert!(files.len() >= 6);
    for p in files {
        let text = std::fs::read_to_string(&p).expect("read");
        let f = reread(&text, &p.display().to_string());
        verify_at(&f, Stage::Frontend).unwrap_or_else(|d| panic!("{}: {d}", p.display()));
    }
}

#[test]
fn every_step_reads_back_and_behaves_the_same() {
    for (path, f) in common::kernels() {
        for target in common::targets(&f) {
            let steps = common::steps(&f, target);
            let mut before: Option<PrimFunc> = None;
            for (name, g) in &steps {
                let what = format!("{} ({}) after {name}", path.display(), target_name(target));
                let text = g.script();
                let back = reread(&text, &what);
                let stage = PASSES
                    .iter()
                    .find(|p| p.name == name)
                    .map_or(Stage::Frontend, |p| Stage::After(p.id, target));
                verify_at(&back, stage).unwrap_or_else(|d| panic!("{what}: {d}"));
                if let Some(prev) = before.take() {
                    let again =
                        run_one(name, prev, target).unwrap_or_else(|d| panic!("{what}: {d}"));
                    assert_eq!(
                        again.script(),
                        text,
                        "{what}: the pass on the read-back input"
                    );
                }
                before = Some(back);
            }
            let last = &steps.last().expect("steps").1;
            let back = before.expect("read back");
            assert_eq!(
                common::generate(&back, target),
                common::generate(last, target),
                "{} ({}): code generated from the read-back IR",
                path.display(),
                target_name(target)
            );
        }
    }
}
