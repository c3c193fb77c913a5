//! The public API to inspect and clear a cache root (`tile cache show|clear`): every
//! namespace, every entry with its size, kernel and damage.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::files::{kind_of, read_text_or_empty, remove_any};
use super::manifest::verify;
use super::params::Summary;
use super::staging::remove_stale_staging;
use super::{namespace_name, AUTOTUNE, CUDA_BINARIES, KERNELS, PARAMS, STAGING};
use crate::config::Config;
use crate::error::{Error, Result};

/// What kind of directory a [`CacheEntry`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// `kernels/<key>`: one kernel for one target (and CUDA arch).
    Kernel,
    /// `cuda-binaries/<key>`: a cubin by source, arch and options.
    CudaBinary,
    /// `autotune/<key>`: the variant tuned for one kernel, device and shape bucket.
    Tuned,
    /// `.staging/<name>`: a build in progress, or left by a killed process.
    Staging,
}

impl std::fmt::Display for EntryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EntryKind::Kernel => "kernel",
            EntryKind::CudaBinary => "cuda-binary",
            EntryKind::Tuned => "tuned",
            EntryKind::Staging => "staging",
        })
    }
}

/// One directory of the disk cache.
#[derive(Debug, Clone)]
pub struct CacheEntry {
    /// Which namespace folder it is in (kernels, CUDA binaries, tuned choices, staging).
    pub kind: EntryKind,
    /// `<tile version>/<os>-<arch>`.
    pub namespace: String,
    /// The directory name (the sha256 key, or the staging name).
    pub key: String,
    /// The directory's full path.
    pub path: PathBuf,
    /// Total size of its files, in bytes.
    pub bytes: u64,
    /// `None` if the entry matches its manifest, else why not (always `None` for
    /// staging directories, which have no manifest yet).
    pub damage: Option<String>,
    /// Kernel name, from `params.json` (kernel entries).
    pub kernel: Option<String>,
    /// Target (`cpu` or `cuda`), from `params.json` (kernel entries).
    pub target: Option<String>,
    /// CUDA arch (`sm_90a`), from `params.json` (CUDA kernel entries).
    pub arch: Option<String>,
    /// Last modification time of the directory.
    pub modified: Option<SystemTime>,
    /// A tuned choice (`autotune` entries): the device, the shapes and the variant.
    pub choice: Option<String>,
}

/// What [`CacheDir::clear`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cleared {
    /// The number of entries removed.
    pub entries: usize,
    /// Their total size, in bytes.
    pub bytes: u64,
}

/// A disk cache root, for inspection and clearing (`tile cache show|clear`).
#[derive(Debug, Clone)]
pub struct CacheDir {
    root: PathBuf,
}

impl CacheDir {
    /// The root launches use: `TILE_CACHE_DIR`, else `~/.cache/tile`.
    pub fn from_env() -> CacheDir {
        CacheDir {
            root: Config::get().cache_root.clone(),
        }
    }

    /// The cache root at `root`, whatever the environment says.
    pub fn at(root: impl Into<PathBuf>) -> CacheDir {
        CacheDir { root: root.into() }
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The namespace of this runtime (`<root>/<version>/<os>-<arch>`).
    pub fn namespace(&self) -> PathBuf {
        self.root.join(namespace_name())
    }

    /// The namespaces present under the root (any tile version and platform).
    fn namespaces(&self) -> Vec<(String, PathBuf)> {
        let mut out = Vec::new();
        for version in read_dirs(&self.root) {
            for platform in read_dirs(&version) {
                let has_cache = [KERNELS, CUDA_BINARIES, AUTOTUNE, STAGING]
                    .iter()
                    .any(|d| platform.join(d).is_dir());
                if has_cache {
                    let name = format!("{}/{}", file_name(&version), file_name(&platform));
                    out.push((name, platform));
                }
            }
        }
        out.sort();
        out
    }

    /// Every entry of every namespace, each checked against its manifest.
    pub fn entries(&self) -> Vec<CacheEntry> {
        let mut out = Vec::new();
        for (namespace, ns) in self.namespaces() {
            for (kind, sub) in [
                (EntryKind::Kernel, KERNELS),
                (EntryKind::CudaBinary, CUDA_BINARIES),
                (EntryKind::Tuned, AUTOTUNE),
                (EntryKind::Staging, STAGING),
            ] {
                for path in read_entries(&ns.join(sub)) {
                    out.push(describe(kind, &namespace, path));
                }
            }
        }
        out
    }

    /// Total size in bytes of every entry.
    pub fn size(&self) -> u64 {
        self.entries().iter().map(|e| e.bytes).sum()
    }

    /// Removes every entry of every namespace (and then the empty namespace folders);
    /// other files under the root are left alone.
    pub fn clear(&self) -> Result<Cleared> {
        let mut cleared = Cleared::default();
        for e in self.entries() {
            match remove_any(&e.path) {
                Ok(()) => {
                    cleared.entries += 1;
                    cleared.bytes += e.bytes;
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(Error::cache(&e.path, err)),
            }
        }
        for (_, ns) in self.namespaces() {
            for sub in [KERNELS, CUDA_BINARIES, AUTOTUNE, STAGING] {
                let _ = fs::remove_dir(ns.join(sub));
            }
            let _ = fs::remove_dir(&ns);
            if let Some(version) = ns.parent() {
                let _ = fs::remove_dir(version);
            }
        }
        Ok(cleared)
    }

    /// Removes staging directories older than `age` in this runtime's namespace (done
    /// automatically with an hour the first time a process opens the cache).
    pub fn remove_stale_staging(&self, age: Duration) -> usize {
        remove_stale_staging(&self.namespace().join(STAGING), age)
    }
}

/// The directories in `dir`, sorted.
fn read_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out = read_entries(dir);
    out.retain(|p| p.is_dir());
    out
}

/// Everything in `dir` (an entry in the wrong place, a file say, is listed too), sorted.
pub(super) fn read_entries(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn describe(kind: EntryKind, namespace: &str, path: PathBuf) -> CacheEntry {
    let key = file_name(&path);
    let meta = fs::symlink_metadata(&path).ok();
    let is_dir = meta.as_ref().is_some_and(|m| m.file_type().is_dir());
    let bytes = fs::read_dir(&path)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    let bytes = match &meta {
        Some(m) if !is_dir => m.len(),
        _ => bytes,
    };
    let damage = match (kind, &meta) {
        (EntryKind::Staging, _) => None,
        (_, Some(m)) if !is_dir => Some(format!("the entry is {}", kind_of(m))),
        _ => verify(&path, &key, &[]).err(),
    };
    let mut params = Summary::of(&read_text_or_empty(&path.join(PARAMS)));
    let modified = meta.and_then(|m| m.modified().ok());
    let mut choice = None;
    if kind == EntryKind::Tuned {
        if let Some((kernel, text)) = tuned_summary(&path) {
            params.kernel = Some(kernel);
            choice = Some(text);
        }
    }
    CacheEntry {
        kind,
        namespace: namespace.to_string(),
        key,
        bytes,
        damage,
        kernel: params.kernel,
        target: params.target,
        arch: params.arch,
        modified,
        choice,
        path,
    }
}

/// The kernel and `<device> <dtypes> <shapes> -> `<variant>`` of a tuned-choice entry
/// (its `choice.json`, written by `crate::autotune`; read as plain JSON so that the
/// cache does not depend on the tuner).
fn tuned_summary(dir: &Path) -> Option<(String, String)> {
    let bytes = super::read_small(&dir.join(super::CHOICE))?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let r = v.get("report")?;
    let s = |k: &str| r.get(k).and_then(|x| x.as_str()).unwrap_or("?").to_string();
    let shapes = r.get("shapes").map(|x| x.to_string()).unwrap_or_default();
    let shapes = shapes.replace(',', ", ");
    Some((
        s("kernel"),
        format!(
            "{} {} {shapes} -> `{}`",
            s("device"),
            s("dtypes"),
            s("chosen_label")
        ),
    ))
}
