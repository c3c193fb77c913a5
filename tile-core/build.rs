//! Stamps tile-core with a hash of its own sources. The stamp enters every cache
//! key, so a changed pass or code generator can never be answered by a binary
//! that an older compiler produced (pitfall 1 of the source: a stale cache).
use sha2::{Digest, Sha256};
use std::path::Path;

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                visit(&p, files);
            } else {
                files.push(p);
            }
        }
    }
}

fn main() {
    // Read when the script runs, not compiled in with env!(): cargo reuses one
    // build-script binary for every checkout of this package that shares a
    // target directory, and a compiled-in path stamped each checkout with the
    // first one's sources (so their changed code generation kept old keys).
    let root = &std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let mut files = Vec::new();
    visit(&root.join("src"), &mut files);
    files.push(root.join("Cargo.toml"));
    // The kernel ABI (dtype names and sizes, specs) shapes generated code too;
    // hashed under a fixed prefix so the stamp does not depend on where the
    // checkout lives.
    let abi = root.join("../tile-abi/src");
    visit(&abi, &mut files);
    files.sort();
    let mut h = Sha256::new();
    for f in &files {
        let rel = match (f.strip_prefix(root), f.strip_prefix(&abi)) {
            (Ok(r), _) => r.to_path_buf(),
            (_, Ok(r)) => Path::new("tile-abi").join(r),
            _ => f.clone(),
        };
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        if let Ok(bytes) = std::fs::read(f) {
            h.update(&bytes);
        }
        h.update([0]);
    }
    let stamp: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(Path::new(&out).join("stamp.txt"), &stamp[..16]).expect("write stamp");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=../tile-abi/src");
    println!("cargo:rerun-if-changed=Cargo.toml");
}
