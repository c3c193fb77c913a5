//! `manifest.json`: the size and sha256 of every file of an entry, written last when it
//! is published and checked on every read.
//!
//! A manifest is accepted only if it is byte for byte what [`render`] writes for what
//! it says (so a flipped or truncated manifest is caught too, even where it still
//! parses), at this [`FORMAT`].

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::files::{kind_of, read_regular, unreadable, MAX_FILE, MAX_TEXT};
use super::{sha256_hex, MANIFEST};
use crate::error::{Error, Result};

/// Version of the manifest (and `params.json`) layout. A different one is damage.
pub(super) const FORMAT: u32 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Manifest {
    pub format: u32,
    /// The entry's key (its directory name).
    pub key: String,
    pub files: Vec<ManifestFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ManifestFile {
    pub name: String,
    pub size: u64,
    pub sha256: String,
}

/// The canonical text of a JSON document: pretty-printed, one trailing newline.
pub(super) fn to_text<T: Serialize>(value: &T) -> String {
    // Serializing plain structs of strings and integers cannot fail.
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// The canonical manifest text; [`verify`] accepts nothing else.
pub(super) fn render(key: &str, files: Vec<ManifestFile>) -> String {
    to_text(&Manifest {
        format: FORMAT,
        key: key.to_string(),
        files,
    })
}

/// The manifest of the files `names` of `dir`, for entry `key`.
pub(super) fn manifest_for(dir: &Path, key: &str, names: &[String]) -> Result<String> {
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let path = dir.join(name);
        let bytes = read_regular(&path, MAX_FILE).map_err(|e| Error::cache(&path, e))?;
        files.push(ManifestFile {
            name: name.clone(),
            size: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
        });
    }
    Ok(render(key, files))
}

/// Reads a manifest: `None` unless `text` is exactly what [`render`] writes for it, at
/// this format, with at least one file.
pub(super) fn parse(text: &str) -> Option<Manifest> {
    let m: Manifest = serde_json::from_str(text).ok()?;
    let canonical = m.format == FORMAT && !m.files.is_empty() && to_text(&m) == text;
    canonical.then_some(m)
}

/// Whether `name` may be listed in a manifest: a plain file name of the entry.
fn is_plain_file_name(name: &str) -> bool {
    !(name.is_empty()
        || name.contains('/')
        || name.contains('\\')
        || name.starts_with('.')
        || name == MANIFEST)
}

/// Checks `dir` against its manifest (see the module invariants of [`crate::cache`]);
/// the files' bytes on success, the reason on failure. Every file must be a regular file
/// (a FIFO, a device or a symlink is damage, and is never opened for reading in a way
/// that could block), and no read goes past the size the manifest allows.
pub(super) fn verify(
    dir: &Path,
    key: &str,
    required: &[&str],
) -> std::result::Result<Vec<(String, Vec<u8>)>, String> {
    let bytes =
        read_regular(&dir.join(MANIFEST), MAX_TEXT).map_err(|e| unreadable(MANIFEST, &e))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{MANIFEST} is not UTF-8"))?;
    let manifest = parse(&text).ok_or_else(|| format!("{MANIFEST} is malformed"))?;
    if manifest.key != key {
        return Err(format!("{MANIFEST} names key {}, not {key}", manifest.key));
    }
    let files = manifest.files;
    if let Some(r) = required
        .iter()
        .find(|r| **r != MANIFEST && !files.iter().any(|f| f.name == **r))
    {
        return Err(format!("{MANIFEST} does not list {r}"));
    }
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        if !is_plain_file_name(&f.name) {
            return Err(format!("{MANIFEST} lists a bad file name {:?}", f.name));
        }
        let path = dir.join(&f.name);
        let meta = std::fs::symlink_metadata(&path).map_err(|e| unreadable(&f.name, &e))?;
        if !meta.file_type().is_file() {
            return Err(format!("{} is {}", f.name, kind_of(&meta)));
        }
        let wrong_size = |len: u64| {
            let (name, size) = (&f.name, f.size);
            format!("{name} has {len} bytes, the manifest says {size}")
        };
        if meta.len() != f.size {
            return Err(wrong_size(meta.len()));
        }
        let bytes = read_regular(&path, f.size).map_err(|e| unreadable(&f.name, &e))?;
        if bytes.len() as u64 != f.size {
            return Err(wrong_size(bytes.len() as u64));
        }
        if sha256_hex(&bytes) != f.sha256 {
            return Err(format!("{} does not match its sha256", f.name));
        }
        out.push((f.name, bytes));
    }
    Ok(out)
}
