//! Cache keys. A key is the sha256 of everything that determines a binary:
//! the IR script, the target, the compile options, the tile version and a
//! stamp of this compiler's own sources (always on, so a changed pass can
//! never be answered by an old binary). The device arch is appended by the
//! runtime per device. Spans and comments never reach the script, so editing
//! a comment in a kernel keeps its key.

use sha2::{Digest, Sha256};

/// Hash of tile-core's sources, computed by its build script.
pub const COMPILER_STAMP: &str = include_str!(concat!(env!("OUT_DIR"), "/stamp.txt"));
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub fn derive(script: &str, target: &str, options: &str) -> String {
    derive_with_stamp(script, target, options, COMPILER_STAMP)
}

pub fn derive_with_stamp(script: &str, target: &str, options: &str, stamp: &str) -> String {
    let mut h = Sha256::new();
    for part in ["tile-key-v1", VERSION, stamp, target, options, script] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The fields that went into a key, for `tile inspect --emit key`.
pub fn describe(script: &str, target: &str, options: &str) -> String {
    format!(
        "key      {}\nversion  {VERSION}\nstamp    {COMPILER_STAMP}\ntarget   {target}\noptions  {options}\nscript   sha256:{}\n",
        derive(script, target, options),
        {
            let mut h = Sha256::new();
            h.update(script.as_bytes());
            h.finalize().iter().map(|b| format!("{b:02x}")).collect::<String>()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_and_options_change_the_key() {
        let a = derive_with_stamp("s", "cuda", "-O3", "aaaa");
        assert_ne!(a, derive_with_stamp("s", "cuda", "-O3", "bbbb"));
        assert_ne!(
            a,
            derive_with_stamp("s", "cuda", "-O3 --use_fast_math", "aaaa")
        );
        assert_ne!(a, derive_with_stamp("s", "c", "-O3", "aaaa"));
        assert_eq!(a, derive_with_stamp("s", "cuda", "-O3", "aaaa"));
    }
}
