//! One namespace of the disk cache as launches use it: look an entry up (verified
//! against its manifest), discard a damaged one, stage a new one.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::files::{kind_of, remove_any};
use super::hooks::fault;
use super::manifest::verify;
use super::owner::owned_name;
use super::staging::{remove_stale_staging, Staging};
use super::{namespace_name, STAGING, STALE_AFTER};
use crate::error::{Error, Result};

/// One namespace of the disk cache.
#[derive(Debug, Clone)]
pub(crate) struct DiskCache {
    pub(super) ns: PathBuf,
}

/// The result of looking an entry up.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The entry matches its manifest; the contents were read while verifying.
    Hit(Entry),
    Miss,
    /// The entry was damaged (why), and has been removed (`true`) or could not be (a
    /// read-only cache).
    Damaged(String, bool),
}

/// A verified entry and the bytes of its files (the ones that were verified).
#[derive(Debug)]
pub(crate) struct Entry {
    pub dir: PathBuf,
    files: Vec<(String, Vec<u8>)>,
}

impl Entry {
    /// The verified bytes of file `name`.
    pub fn take(&mut self, name: &str) -> Option<Vec<u8>> {
        let i = self.files.iter().position(|(n, _)| n == name)?;
        Some(self.files.swap_remove(i).1)
    }
}

impl DiskCache {
    /// Opens (creating) the namespace of this runtime version and platform under `root`;
    /// the first open in a process removes the staging directories of builds that are
    /// gone (their process is, or they are older than an hour).
    pub fn open(root: &Path) -> Result<DiskCache> {
        let ns = root.join(namespace_name());
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

    /// Looks entry `rel` up: it must be a directory (not a symlink), its manifest must
    /// list every file in `required`, and each `(name, bytes)` of `expect` must be in it
    /// with exactly those bytes. A damaged entry is removed (best effort: a read-only
    /// cache keeps it, and the caller builds elsewhere).
    pub fn lookup(&self, rel: &str, required: &[&str], expect: &[(&str, &[u8])]) -> Result<Lookup> {
        let dir = self.entry_dir(rel);
        match fs::symlink_metadata(&dir) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(m) => {
                let why = format!("the entry is {}", kind_of(&m));
                return Ok(Lookup::Damaged(why, self.discard(&dir)));
            }
            Err(_) => return Ok(Lookup::Miss),
        }
        let key = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match verify(&dir, &key, required) {
            Ok(files) => {
                for (name, want) in expect {
                    let got = files.iter().find(|(n, _)| n == name).map(|(_, b)| b);
                    if got.map(Vec::as_slice) != Some(*want) {
                        let why = format!("{name} does not describe this kernel");
                        return Ok(Lookup::Damaged(why, self.discard(&dir)));
                    }
                }
                Ok(Lookup::Hit(Entry { dir, files }))
            }
            Err(why) => Ok(Lookup::Damaged(why, self.discard(&dir))),
        }
    }

    /// Removes entry `dir` (a directory, or whatever else was found in its place):
    /// renamed into staging first (so no reader sees a half-removed entry, and a
    /// concurrent remover finds nothing), then deleted. Best effort (a later publication
    /// replaces whatever is left): whether `dir` is gone.
    pub fn discard(&self, dir: &Path) -> bool {
        let trash = self.ns.join(STAGING).join(owned_name("trash"));
        match fault("rename", dir).and_then(|()| fs::rename(dir, &trash)) {
            Ok(()) => {
                let _ = remove_any(&trash);
                true
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => true,
            Err(_) => fault("remove", dir).and_then(|()| remove_any(dir)).is_ok(),
        }
    }

    /// A new private staging directory for entry `name`.
    pub fn stage(&self, name: &str) -> Result<Staging> {
        let dir = self.ns.join(STAGING).join(owned_name(name));
        fault("mkdir", &dir)
            .and_then(|()| fs::create_dir(&dir))
            .map_err(|e| Error::cache(&dir, e))?;
        Ok(Staging::new(dir))
    }
}
