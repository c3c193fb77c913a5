//! The disk cache of compiled kernels.
//!
//! Layout: `<root>/<tile version>/<os>-<arch>/` holds `kernels/<key>/` (C kernels:
//! `kernel.c`, `kernel.so`), `cuda-binaries/<key>-<arch>/` (`kernel.cu`,
//! `kernel.cubin`), each with a `manifest.json` listing every file's size and sha256,
//! and `.staging/` for entries being built.
//!
//! Invariants:
//! - An entry directory is immutable once visible: it is built in a private staging
//!   directory (`.staging/<key>-<pid>-<random>`), every file is fsynced, the manifest is
//!   written last, and one `rename` publishes it. A process that loses the race discards
//!   its staging directory and uses the winner.
//! - Nothing is loaded from an entry whose files do not match its manifest; such an entry
//!   is removed (and the caller rebuilds it).
//! - Staging directories older than an hour (left by crashed builds) are removed the
//!   first time a process opens the namespace.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

const MANIFEST: &str = "manifest.json";
const STAGING: &str = ".staging";
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// One namespace of the disk cache.
#[derive(Debug, Clone)]
pub(crate) struct DiskCache {
    ns: PathBuf,
}

impl DiskCache {
    /// Opens (creating) the namespace of this runtime version and platform under `root`.
    pub fn open(root: &Path) -> Result<DiskCache> {
        let ns = root.join(env!("CARGO_PKG_VERSION")).join(format!(
            "{}-{}",
            std::env::consts::OS,
            std::env::consts::ARCH
        ));
        fs::create_dir_all(ns.join(STAGING)).map_err(|e| Error::cache(&ns, e))?;
        static CLEANED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
        let first = {
            let mut cleaned = CLEANED.lock().unwrap_or_else(|e| e.into_inner());
            cleaned.get_or_insert_with(HashSet::new).insert(ns.clone())
        };
        if first {
            remove_stale_staging(&ns.join(STAGING), STALE_AFTER);
        }
        Ok(DiskCache { ns })
    }

    /// The directory of entry `rel` (e.g. `kernels/<key>`), whether or not it exists.
    pub fn entry_dir(&self, rel: &str) -> PathBuf {
        self.ns.join(rel)
    }

    /// The entry `rel` if it exists and matches its manifest (which must list every file
    /// in `required`). A damaged entry is removed and reported as absent.
    pub fn lookup(&self, rel: &str, required: &[&str]) -> Result<Option<PathBuf>> {
        let dir = self.entry_dir(rel);
        if !dir.is_dir() {
            return Ok(None);
        }
        if verify(&dir, required) {
            return Ok(Some(dir));
        }
        remove_entry(&dir)?;
        Ok(None)
    }

    /// A new private staging directory for entry `name`.
    pub fn stage(&self, name: &str) -> Result<Staging> {
        let dir = self.ns.join(STAGING).join(format!(
            "{name}-{}-{}",
            std::process::id(),
            random_suffix()
        ));
        fs::create_dir(&dir).map_err(|e| Error::cache(&dir, e))?;
        Ok(Staging::new(dir))
    }
}

/// A directory that files are built into before publication (or, with the cache
/// disabled, a throw-away build folder). Removed on drop unless published or kept.
#[derive(Debug)]
pub(crate) struct Staging {
    dir: PathBuf,
    files: Vec<String>,
    remove_on_drop: bool,
}

impl Staging {
    fn new(dir: PathBuf) -> Staging {
        Staging {
            dir,
            files: Vec::new(),
            remove_on_drop: true,
        }
    }

    /// A fresh build folder under the system temporary directory, never published.
    pub fn temp() -> Result<Staging> {
        let dir = std::env::temp_dir().join(format!(
            "tile-build-{}-{}",
            std::process::id(),
            random_suffix()
        ));
        fs::create_dir_all(&dir).map_err(|e| Error::cache(&dir, e))?;
        Ok(Staging::new(dir))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes and fsyncs file `name`.
    pub fn write(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(name);
        write_synced(&path, bytes)?;
        self.files.push(name.to_string());
        Ok(())
    }

    /// Records (and fsyncs) file `name`, produced in the directory by a tool.
    pub fn add(&mut self, name: &str) -> Result<()> {
        let path = self.path(name);
        fs::File::open(&path)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::cache(&path, e))?;
        self.files.push(name.to_string());
        Ok(())
    }

    /// Leaves the directory on disk (so an error can point at the source in it).
    pub fn keep(mut self) -> PathBuf {
        self.remove_on_drop = false;
        std::mem::take(&mut self.dir)
    }

    /// Writes the manifest and renames the directory to entry `rel` of `cache`. When
    /// another process published `rel` first, its entry is used and ours discarded.
    pub fn publish(mut self, cache: &DiskCache, rel: &str) -> Result<PathBuf> {
        let manifest = manifest_json(&self.dir, &self.files)?;
        write_synced(&self.path(MANIFEST), manifest.as_bytes())?;
        sync_dir(&self.dir);
        let target = cache.entry_dir(rel);
        let parent = target.parent().unwrap_or(&cache.ns).to_path_buf();
        fs::create_dir_all(&parent).map_err(|e| Error::cache(&parent, e))?;
        for _ in 0..2 {
            match fs::rename(&self.dir, &target) {
                Ok(()) => {
                    self.remove_on_drop = false;
                    sync_dir(&parent);
                    return Ok(target);
                }
                Err(_) if target.exists() => {
                    // Lost the race (or a leftover entry): use the winner if it is sound.
                    if verify(&target, &self.file_names()) {
                        return Ok(target);
                    }
                    remove_entry(&target)?;
                }
                Err(e) => return Err(Error::cache(&target, e)),
            }
        }
        Err(Error::cache(
            &target,
            io::Error::other("could not publish the cache entry"),
        ))
    }

    fn file_names(&self) -> Vec<&str> {
        self.files.iter().map(String::as_str).collect()
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if self.remove_on_drop && !self.dir.as_os_str().is_empty() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = fs::File::create(path).map_err(|e| Error::cache(path, e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| Error::cache(path, e))
}

/// Best-effort fsync of a directory (makes the rename durable on POSIX file systems).
fn sync_dir(dir: &Path) {
    if let Ok(f) = fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

fn remove_entry(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::cache(dir, e)),
    }
}

fn remove_stale_staging(staging: &Path, age: Duration) {
    let Ok(entries) = fs::read_dir(staging) else {
        return;
    };
    let now = SystemTime::now();
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|d| d > age);
        if stale {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(t) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("{:016x}", h.finish())
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push(char::from(b"0123456789abcdef"[(b >> 4) as usize]));
        s.push(char::from(b"0123456789abcdef"[(b & 15) as usize]));
    }
    s
}

/// A key is used as a directory name: hex digits (and `_`, `-`) only.
pub(crate) fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 128
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[derive(Debug, PartialEq, Eq)]
struct ManifestFile {
    name: String,
    size: u64,
    sha256: String,
}

fn manifest_json(dir: &Path, files: &[String]) -> Result<String> {
    let mut out = String::from("{\n  \"format\": 1,\n  \"files\": [\n");
    for (i, name) in files.iter().enumerate() {
        let path = dir.join(name);
        let bytes = fs::read(&path).map_err(|e| Error::cache(&path, e))?;
        let sep = if i + 1 == files.len() { "" } else { "," };
        out.push_str(&format!(
            "    {{\"name\": \"{name}\", \"size\": {}, \"sha256\": \"{}\"}}{sep}\n",
            bytes.len(),
            sha256_hex(&bytes)
        ));
    }
    out.push_str("  ]\n}\n");
    Ok(out)
}

/// Reads the file entries of a manifest written by [`manifest_json`]; `None` if it is
/// malformed.
fn parse_manifest(text: &str) -> Option<Vec<ManifestFile>> {
    fn string_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
        let start = line.find(&format!("\"{key}\": \""))? + key.len() + 5;
        let rest = &line[start..];
        Some(&rest[..rest.find('"')?])
    }
    fn number_field(line: &str, key: &str) -> Option<u64> {
        let start = line.find(&format!("\"{key}\": "))? + key.len() + 4;
        let digits: String = line[start..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
    if !text.trim_start().starts_with('{') || !text.trim_end().ends_with('}') {
        return None;
    }
    let mut files = Vec::new();
    for line in text.lines().filter(|l| l.contains("\"name\"")) {
        files.push(ManifestFile {
            name: string_field(line, "name")?.to_string(),
            size: number_field(line, "size")?,
            sha256: string_field(line, "sha256")?.to_string(),
        });
    }
    (!files.is_empty()).then_some(files)
}

/// Whether every file of `dir`'s manifest has its recorded size and hash, and the
/// manifest lists every `required` file.
fn verify(dir: &Path, required: &[&str]) -> bool {
    let Ok(text) = fs::read_to_string(dir.join(MANIFEST)) else {
        return false;
    };
    let Some(files) = parse_manifest(&text) else {
        return false;
    };
    if !required
        .iter()
        .all(|r| *r == MANIFEST || files.iter().any(|f| f.name == *r))
    {
        return false;
    }
    files.iter().all(|f| {
        if f.name.contains('/') || f.name.contains('\\') || f.name.starts_with('.') {
            return false;
        }
        let path = dir.join(&f.name);
        match fs::metadata(&path) {
            Ok(m) if m.len() == f.size => {}
            _ => return false,
        }
        fs::read(&path).is_ok_and(|bytes| sha256_hex(&bytes) == f.sha256)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn temp_root(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "tile-test-{tag}-{}-{}",
            std::process::id(),
            random_suffix()
        ));
        let _ = fs::create_dir_all(&dir);
        dir
    }

    #[test]
    fn publish_lookup_and_corruption() -> Result<()> {
        let root = temp_root("cache");
        let cache = DiskCache::open(&root)?;
        assert!(cache.lookup("kernels/abc", &["a.txt"])?.is_none());
        let mut s = cache.stage("abc")?;
        s.write("a.txt", b"hello")?;
        fs::write(s.path("b.bin"), b"\x00\x01").map_err(|e| Error::cache("b", e))?;
        s.add("b.bin")?;
        let staged = s.dir().to_path_buf();
        let dir = s.publish(&cache, "kernels/abc")?;
        assert!(!staged.exists());
        assert!(dir.ends_with("kernels/abc"));
        assert!(dir.starts_with(root.join(env!("CARGO_PKG_VERSION"))));
        let manifest = fs::read_to_string(dir.join(MANIFEST)).map_err(|e| Error::cache("m", e))?;
        let files = parse_manifest(&manifest).unwrap_or_default();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].name, "a.txt");
        assert_eq!(files[0].size, 5);
        assert_eq!(files[0].sha256, sha256_hex(b"hello"));
        assert_eq!(
            cache.lookup("kernels/abc", &["a.txt", "b.bin"])?,
            Some(dir.clone())
        );
        // A required file missing from the manifest means the entry is unusable.
        assert!(cache.lookup("kernels/abc", &["c.txt"])?.is_none());
        assert!(!dir.exists());

        // Same size, different bytes: caught by the hash, entry removed.
        let mut s = cache.stage("abc")?;
        s.write("a.txt", b"hello")?;
        let dir = s.publish(&cache, "kernels/abc")?;
        fs::write(dir.join("a.txt"), b"jello").map_err(|e| Error::cache("a", e))?;
        assert!(cache.lookup("kernels/abc", &["a.txt"])?.is_none());
        assert!(!dir.exists());
        let _ = fs::remove_dir_all(&root);
        Ok(())
    }

    #[test]
    fn losing_the_race_uses_the_winner() -> Result<()> {
        let root = temp_root("race");
        let cache = DiskCache::open(&root)?;
        let mut first = cache.stage("k")?;
        first.write("x", b"winner")?;
        let mut second = cache.stage("k")?;
        second.write("x", b"winner")?;
        let loser_dir = second.dir().to_path_buf();
        let a = first.publish(&cache, "kernels/k")?;
        let b = second.publish(&cache, "kernels/k")?;
        assert_eq!(a, b);
        assert!(!loser_dir.exists());
        assert_eq!(fs::read(a.join("x")).ok().as_deref(), Some(&b"winner"[..]));
        let _ = fs::remove_dir_all(&root);
        Ok(())
    }

    #[test]
    fn stale_staging_is_removed() -> Result<()> {
        let root = temp_root("stale");
        let cache = DiskCache::open(&root)?;
        let s = cache.stage("old")?;
        let kept = s.keep();
        assert!(kept.exists());
        remove_stale_staging(
            &kept.parent().map(Path::to_path_buf).unwrap_or_default(),
            Duration::from_secs(3600),
        );
        assert!(kept.exists(), "fresh staging must survive");
        remove_stale_staging(
            &kept.parent().map(Path::to_path_buf).unwrap_or_default(),
            Duration::ZERO,
        );
        assert!(!kept.exists());
        let _ = fs::remove_dir_all(&root);
        Ok(())
    }

    #[test]
    fn manifest_parsing_rejects_garbage() {
        assert!(parse_manifest("").is_none());
        assert!(parse_manifest("{\n}\n").is_none());
        assert!(parse_manifest("{\"name\": \"a\"}").is_none());
        assert!(valid_key("0a1b_c-d"));
        assert!(!valid_key("../etc"));
        assert!(!valid_key(""));
    }
}
