//! Builds the kernels of `examples/` and `tests/` ahead of time through the
//! public build API, exactly as a downstream crate's build script would (it
//! prints the one line about a missing nvcc, when CUDA is in use here), and
//! writes the `tile::lang` reference from the compiler's table of builtins.
fn main() {
    write_lang_reference();
    let report = tile_core::build::Builder::new()
        .dir("examples")
        .dir("examples/bench")
        .dir("tests")
        .dir("tests/kernels")
        .compile();
    if let Err(e) = report {
        println!("cargo:warning=tile: ahead-of-time kernel build skipped: {e}");
    }
}

/// `$OUT_DIR/lang.md`: every `T::` builtin, grouped by where it stands, with
/// its usage and doc from the frontend's table (the same words its error
/// messages quote), so the rustdoc of `tile::lang` can never list a builtin
/// the compiler does not know or miss one it does.
fn write_lang_reference() {
    let mut kinds: Vec<&str> = Vec::new();
    for b in tile_core::frontend::builtins() {
        if !kinds.contains(&b.kind) {
            kinds.push(b.kind);
        }
    }
    let mut md = String::new();
    for kind in kinds {
        let mut heading: Vec<char> = kind.chars().collect();
        heading[0] = heading[0].to_ascii_uppercase();
        md.push_str(&format!(
            "\n## {}\n\n| builtin | written | does |\n| --- | --- | --- |\n",
            heading.into_iter().collect::<String>()
        ));
        for b in tile_core::frontend::builtins().filter(|b| b.kind == kind) {
            md.push_str(&format!(
                "| `T::{}` | {} | {} |\n",
                b.name,
                b.usage.replace('|', "\\|"),
                b.doc.replace('|', "\\|")
            ));
        }
    }
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("lang.md"), md).expect("writing lang.md");
}
