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
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    visit(&root.join("src"), &mut files);
    files.push(root.join("Cargo.toml"));
    files.sort();
    let mut h = Sha256::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap_or(f);
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
    println!("cargo:rerun-if-changed=Cargo.toml");
}
