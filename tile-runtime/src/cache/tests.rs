//! Tests of the disk levels: publication, lookup, damage, races, inspection.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::disk::Entry;
use super::inspect::read_entries;
use super::manifest::{parse, render, ManifestFile};
use super::owner::random_suffix;
use super::staging::remove_stale_staging;
use super::*;
use crate::error::{Error, Result};

pub(super) fn temp_root(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tile-test-{tag}-{}-{}",
        std::process::id(),
        random_suffix()
    ));
    let _ = fs::create_dir_all(&dir);
    dir
}

fn publish(s: Staging, cache: &DiskCache, rel: &str) -> Result<PathBuf> {
    s.publish(cache, rel).map_err(|b| b.1)
}

fn hit(l: Lookup) -> Option<Entry> {
    match l {
        Lookup::Hit(e) => Some(e),
        _ => None,
    }
}

#[test]
fn publish_lookup_and_corruption() -> Result<()> {
    let root = temp_root("cache");
    let cache = DiskCache::open(&root)?;
    assert!(matches!(
        cache.lookup("kernels/abc", &["a.txt"], &[])?,
        Lookup::Miss
    ));
    let mut s = cache.stage("abc")?;
    s.write("a.txt", b"hello")?;
    fs::write(s.path("b.bin"), b"\x00\x01").map_err(|e| Error::cache("b", e))?;
    s.add("b.bin")?;
    let staged = s.dir().to_path_buf();
    let dir = publish(s, &cache, "kernels/abc")?;
    assert!(!staged.exists());
    assert!(dir.ends_with("kernels/abc"));
    assert!(dir.starts_with(root.join(env!("CARGO_PKG_VERSION"))));
    let manifest = fs::read_to_string(dir.join(MANIFEST)).map_err(|e| Error::cache("m", e))?;
    let (key, files) = parse(&manifest)
        .map(|m| (m.key, m.files))
        .unwrap_or_default();
    assert_eq!(key, "abc");
    assert_eq!(files.len(), 2);
    assert_eq!(files[0].name, "a.txt");
    assert_eq!(files[0].size, 5);
    assert_eq!(files[0].sha256, sha256_hex(b"hello"));
    let mut entry = hit(cache.lookup("kernels/abc", &["a.txt", "b.bin"], &[])?)
        .expect("a sound entry is a hit");
    assert_eq!(entry.dir, dir);
    assert_eq!(entry.take("a.txt").as_deref(), Some(&b"hello"[..]));
    // Expected contents that differ: not this kernel's entry, removed.
    assert!(matches!(
        cache.lookup("kernels/abc", &["a.txt"], &[("a.txt", b"other")])?,
        Lookup::Damaged(..)
    ));
    assert!(!dir.exists());

    // A required file missing from the manifest means the entry is unusable.
    let mut s = cache.stage("abc")?;
    s.write("a.txt", b"hello")?;
    let dir = publish(s, &cache, "kernels/abc")?;
    assert!(matches!(
        cache.lookup("kernels/abc", &["c.txt"], &[])?,
        Lookup::Damaged(..)
    ));
    assert!(!dir.exists());

    // Same size, different bytes: caught by the hash, entry removed.
    let mut s = cache.stage("abc")?;
    s.write("a.txt", b"hello")?;
    let dir = publish(s, &cache, "kernels/abc")?;
    fs::write(dir.join("a.txt"), b"jello").map_err(|e| Error::cache("a", e))?;
    match cache.lookup("kernels/abc", &["a.txt"], &[])? {
        Lookup::Damaged(why, true) => assert_eq!(why, "a.txt does not match its sha256"),
        other => panic!("expected damage, got {other:?}"),
    }
    assert!(!dir.exists());
    // The removed entry went through staging and is gone from there too.
    assert_eq!(read_entries(&cache.ns.join(STAGING)).len(), 0);
    let _ = fs::remove_dir_all(&root);
    Ok(())
}

#[test]
fn manifest_must_be_canonical_and_name_its_key() -> Result<()> {
    let root = temp_root("canon");
    let cache = DiskCache::open(&root)?;
    let make = |c: &DiskCache| -> Result<PathBuf> {
        let mut s = c.stage("k1")?;
        s.write("a.txt", b"hello")?;
        publish(s, c, "kernels/k1")
    };
    let dir = make(&cache)?;
    let good = fs::read_to_string(dir.join(MANIFEST)).map_err(|e| Error::cache("m", e))?;
    // Any edit of the manifest, even one that keeps it parseable, is damage.
    for bad in [
        good.replace("\"format\": 2", "\"format\": 3"),
        good.replace("  \"files\"", " \"files\""),
        good.replace("\"key\": \"k1\"", "\"key\": \"k2\""),
        good[..good.len() / 2].to_string(),
        String::new(),
    ] {
        let dir = make(&cache)?;
        fs::write(dir.join(MANIFEST), &bad).map_err(|e| Error::cache("m", e))?;
        assert!(
            matches!(cache.lookup("kernels/k1", &[], &[])?, Lookup::Damaged(..)),
            "{bad:?}"
        );
    }
    // An entry copied under another key is refused.
    let dir = make(&cache)?;
    let other = cache.entry_dir("kernels/k9");
    fs::rename(&dir, &other).map_err(|e| Error::cache(&other, e))?;
    match cache.lookup("kernels/k9", &[], &[])? {
        Lookup::Damaged(why, true) => assert_eq!(why, "manifest.json names key k1, not k9"),
        other => panic!("expected damage, got {other:?}"),
    }
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
    let a = publish(first, &cache, "kernels/k")?;
    let b = publish(second, &cache, "kernels/k")?;
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
    let staging = kept.parent().map(Path::to_path_buf).unwrap_or_default();
    assert_eq!(remove_stale_staging(&staging, Duration::from_secs(3600)), 0);
    assert!(kept.exists(), "fresh staging must survive");
    assert_eq!(remove_stale_staging(&staging, Duration::ZERO), 1);
    assert!(!kept.exists());
    let _ = fs::remove_dir_all(&root);
    Ok(())
}

#[test]
fn inspection_and_clear() -> Result<()> {
    let root = temp_root("inspect");
    let cache = DiskCache::open(&root)?;
    let mut s = cache.stage("k")?;
    s.write(
        PARAMS,
        b"{\n  \"kernel\": \"vecadd\",\n  \"target\": \"cpu\"\n}\n",
    )?;
    s.write("kernel.c", b"int x;")?;
    publish(s, &cache, "kernels/k")?;
    let mut s = cache.stage("b")?;
    s.write("kernel.cubin", b"\x7fELF")?;
    let b = publish(s, &cache, "cuda-binaries/b")?;
    fs::write(b.join("kernel.cubin"), b"\x7fELF!").map_err(|e| Error::cache("b", e))?;
    let _left = cache.stage("killed")?.keep();
    // Something else under the root is not ours.
    fs::write(root.join("notes.txt"), b"keep me").map_err(|e| Error::cache("n", e))?;

    let dir = CacheDir::at(&root);
    assert_eq!(dir.namespace(), cache.ns);
    let entries = dir.entries();
    let kinds: Vec<EntryKind> = entries.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [EntryKind::Kernel, EntryKind::CudaBinary, EntryKind::Staging]
    );
    assert_eq!(entries[0].kernel.as_deref(), Some("vecadd"));
    assert_eq!(entries[0].target.as_deref(), Some("cpu"));
    assert!(entries[0].damage.is_none());
    assert_eq!(
        entries[1].damage.as_deref(),
        Some("kernel.cubin has 5 bytes, the manifest says 4")
    );
    assert_eq!(entries[0].namespace, namespace_name());
    let size = dir.size();
    assert!(size > 0);
    let cleared = dir.clear()?;
    assert_eq!(cleared.entries, 3);
    assert_eq!(cleared.bytes, size);
    assert!(dir.entries().is_empty());
    assert!(!root.join(env!("CARGO_PKG_VERSION")).exists());
    assert!(root.join("notes.txt").exists());
    let _ = fs::remove_dir_all(&root);
    Ok(())
}

#[test]
fn manifest_parsing_rejects_garbage() {
    assert!(parse("").is_none());
    assert!(parse("{\n}\n").is_none());
    assert!(parse("{\"name\": \"a\"}").is_none());
    let files = vec![ManifestFile {
        name: "a".into(),
        size: 1,
        sha256: "00".into(),
    }];
    let text = render("k", files.clone());
    let m = parse(&text).expect("a rendered manifest parses");
    assert_eq!((m.key.as_str(), m.files), ("k", files));
    // Parseable but not canonical (compact), or with an unknown field: refused.
    let compact = serde_json::to_string(&serde_json::from_str::<serde_json::Value>(&text).ok());
    assert!(parse(&compact.unwrap_or_default()).is_none());
    assert!(parse(&text.replace("\"key\"", "\"extra\": 1,\n  \"key\"")).is_none());
    assert_ne!(key_of(&["ab", "c"]), key_of(&["a", "bc"]));
}

#[test]
fn enable_and_disable_override_the_environment() {
    // (The process-wide switch itself is left alone: other tests run concurrently.)
    assert!(resolve(0, false));
    assert!(!resolve(0, true));
    assert!(resolve(1, true));
    assert!(!resolve(2, false));
}
