//! Building an entry: a private staging directory, its files written and fsynced, then
//! the manifest, then one `rename` that publishes it.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::disk::DiskCache;
use super::files::remove_any;
use super::hooks::{fault, publish_step};
use super::manifest::{manifest_for, verify};
use super::owner::{owned_name, owner_gone};
use super::MANIFEST;
use crate::error::{Error, Result};

/// A directory that files are built into before publication (or, with the cache
/// disabled, a throw-away build folder). Removed on drop unless published or kept.
#[derive(Debug)]
pub(crate) struct Staging {
    dir: PathBuf,
    files: Vec<String>,
    remove_on_drop: bool,
}

impl Staging {
    pub(super) fn new(dir: PathBuf) -> Staging {
        Staging {
            dir,
            files: Vec::new(),
            remove_on_drop: true,
        }
    }

    /// A fresh build folder under the system temporary directory, never published.
    pub fn temp() -> Result<Staging> {
        let dir = std::env::temp_dir().join(owned_name("tile-build"));
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
        publish_step(&format!("file {name}"));
        Ok(())
    }

    /// Records (and fsyncs) file `name`, produced in the directory by a tool.
    pub fn add(&mut self, name: &str) -> Result<()> {
        let path = self.path(name);
        fault("add", &path)
            .and_then(|()| fs::File::open(&path))
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::cache(&path, e))?;
        self.files.push(name.to_string());
        publish_step(&format!("file {name}"));
        Ok(())
    }

    /// Leaves the directory on disk (so an error can point at the source in it).
    pub fn keep(mut self) -> PathBuf {
        self.remove_on_drop = false;
        std::mem::take(&mut self.dir)
    }

    /// Writes the manifest and renames the directory to entry `rel` of `cache`. When
    /// another process published `rel` first, its entry is used and ours discarded.
    /// On failure the staging directory is handed back, intact, with the error (boxed:
    /// the pair is large and the error path is rare).
    pub fn publish(
        mut self,
        cache: &DiskCache,
        rel: &str,
    ) -> std::result::Result<PathBuf, Box<(Staging, Error)>> {
        let target = cache.entry_dir(rel);
        let key = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let manifest = match manifest_for(&self.dir, &key, &self.files) {
            Ok(m) => m,
            Err(e) => return Err(Box::new((self, e))),
        };
        if let Err(e) = write_synced(&self.path(MANIFEST), manifest.as_bytes()) {
            return Err(Box::new((self, e)));
        }
        publish_step("manifest");
        sync_dir(&self.dir);
        let parent = target.parent().unwrap_or(&cache.ns).to_path_buf();
        if let Err(e) = fault("mkdir", &parent).and_then(|()| fs::create_dir_all(&parent)) {
            return Err(Box::new((self, Error::cache(&parent, e))));
        }
        publish_step("rename");
        for _ in 0..3 {
            match fault("rename", &target).and_then(|()| fs::rename(&self.dir, &target)) {
                Ok(()) => {
                    self.remove_on_drop = false;
                    sync_dir(&parent);
                    return Ok(target);
                }
                Err(_) if fs::symlink_metadata(&target).is_ok() => {
                    // Lost the race (or a leftover entry): use the winner if it is sound,
                    // dropping (removing) our copy.
                    if verify(&target, &key, &self.file_names()).is_ok() {
                        return Ok(target);
                    }
                    cache.discard(&target);
                }
                Err(e) => return Err(Box::new((self, Error::cache(&target, e)))),
            }
        }
        let err = Error::cache(
            &target,
            io::Error::other("could not publish the cache entry"),
        );
        Err(Box::new((self, err)))
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
    let write = || {
        fault("write", path)?;
        let mut f = fs::File::create(path)?;
        f.write_all(bytes)?;
        f.sync_all()
    };
    write().map_err(|e| Error::cache(path, e))
}

/// Best-effort fsync of a directory (makes the rename durable on POSIX file systems).
fn sync_dir(dir: &Path) {
    if let Ok(f) = fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

/// Removes the entries of `staging` left by processes that are gone (see
/// [`owner`](super::owner)) or not modified for `age` (crashed builds, trash). Best
/// effort; returns how many were removed.
pub(crate) fn remove_stale_staging(staging: &Path, age: Duration) -> usize {
    let Ok(entries) = fs::read_dir(staging) else {
        return 0;
    };
    let now = SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let modified = entry.metadata().and_then(|m| m.modified()).ok();
        let old = modified
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|d| d > age);
        let name = entry.file_name();
        if old || owner_gone(&name.to_string_lossy(), modified) {
            removed += usize::from(remove_any(&entry.path()).is_ok());
        }
    }
    removed
}
