//! The disk levels of the kernel cache, and the public API to inspect and clear it.
//!
//! The kernel cache has three levels (the first is each launcher's in-process
//! [`KernelSlot`](crate::KernelSlot), no disk access on a hit):
//!
//! ```text
//! <root>/<tile version>/<os>-<arch>/           root: TILE_CACHE_DIR, else ~/.cache/tile
//!   kernels/<sha256>/                          level 2: one kernel for one target (+ arch)
//!     kernel.c | kernel.cu                     device source
//!     kernel.so | kernel.cubin                 binary
//!     params.json                              the launcher's view: params, dims, grid
//!     manifest.json                            size and sha256 of every other file
//!   cuda-binaries/<sha256>/                    level 3: source + arch + options → cubin
//!     kernel.cubin, manifest.json
//!   .staging/                                  private build directories
//! ```
//!
//! Level 3 answers when level 2 misses but the device source is unchanged (a new tile
//! version whose code generator emits the same CUDA, say): NVRTC is skipped.
//!
//! Invariants:
//! - An entry directory is immutable once visible: it is built in a private staging
//!   directory (`.staging/<name>-<pid>-<random>`), every file is fsynced, the manifest is
//!   written last, and one `rename` publishes it. A process that loses the race discards
//!   its staging directory and uses the winner.
//! - Nothing is loaded from an entry that does not match its manifest: the manifest must
//!   be byte-for-byte what this runtime writes for its own contents (so a flipped or
//!   truncated manifest is caught too), name the entry's key, and list every required
//!   file with the size and sha256 found on disk. A damaged entry is first renamed into
//!   `.staging/` (atomic: no reader sees it half-removed), then deleted; the caller
//!   rebuilds it.
//! - Staging directories older than an hour (left by killed builds) are removed the
//!   first time a process opens the namespace.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::config::Config;
use crate::error::{Error, Result};

pub(crate) const MANIFEST: &str = "manifest.json";
pub(crate) const PARAMS: &str = "params.json";
const STAGING: &str = ".staging";
const KERNELS: &str = "kernels";
const CUDA_BINARIES: &str = "cuda-binaries";
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// `0`: follow `TILE_DISABLE_CACHE`; `1`: enabled; `2`: disabled (see [`enable`]).
static OVERRIDE: AtomicU8 = AtomicU8::new(0);

/// Turns the disk cache back on for this process (overrides `TILE_DISABLE_CACHE`).
pub fn enable() {
    OVERRIDE.store(1, Ordering::Relaxed);
}

/// Turns the disk cache off for this process: kernels that are not already loaded are
/// compiled into a temporary folder, and nothing is read from or published to disk.
pub fn disable() {
    OVERRIDE.store(2, Ordering::Relaxed);
}

/// Whether launches use the disk cache ([`enable`]/[`disable`], else `TILE_DISABLE_CACHE`).
pub fn is_enabled() -> bool {
    enabled_with(Config::get())
}

pub(crate) fn enabled_with(cfg: &Config) -> bool {
    resolve(OVERRIDE.load(Ordering::Relaxed), cfg.disable_cache)
}

fn resolve(override_: u8, disable_cache: bool) -> bool {
    match override_ {
        1 => true,
        2 => false,
        _ => !disable_cache,
    }
}

/// `<tile version>/<os>-<arch>`: the namespace this runtime reads and writes.
pub fn namespace_name() -> String {
    format!(
        "{}/{}-{}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

// ---------------------------------------------------------------------------
// Test hooks
// ---------------------------------------------------------------------------

static PUBLISH_HOOK: Mutex<Option<fn(&str)>> = Mutex::new(None);

/// Installs a function called at each step of a publication: `file <name>` after a file
/// is written and fsynced, `manifest` after the manifest, `rename` just before the
/// rename. For crash tests (a hook that never returns lets a test kill the process
/// mid-publish); not part of the stable API.
#[doc(hidden)]
pub fn set_publish_hook(hook: Option<fn(&str)>) {
    *PUBLISH_HOOK.lock().unwrap_or_else(|e| e.into_inner()) = hook;
}

fn publish_step(step: &str) {
    let hook = *PUBLISH_HOOK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(hook) = hook {
        hook(step);
    }
}

// ---------------------------------------------------------------------------
// The namespace used by launches
// ---------------------------------------------------------------------------

/// One namespace of the disk cache.
#[derive(Debug, Clone)]
pub(crate) struct DiskCache {
    ns: PathBuf,
}

/// The result of looking an entry up.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The entry matches its manifest; the contents were read while verifying.
    Hit(Entry),
    Miss,
    /// The entry was damaged (why) and has been removed.
    Damaged(String),
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
    /// the first open in a process removes stale staging directories.
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

    /// Looks entry `rel` up: its manifest must list every file in `required`, and each
    /// `(name, bytes)` of `expect` must be in it with exactly those bytes. A damaged entry
    /// is removed.
    pub fn lookup(&self, rel: &str, required: &[&str], expect: &[(&str, &[u8])]) -> Result<Lookup> {
        let dir = self.entry_dir(rel);
        if !dir.is_dir() {
            return Ok(Lookup::Miss);
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
                        self.discard(&dir);
                        return Ok(Lookup::Damaged(why));
                    }
                }
                Ok(Lookup::Hit(Entry { dir, files }))
            }
            Err(why) => {
                self.discard(&dir);
                Ok(Lookup::Damaged(why))
            }
        }
    }

    /// Removes entry directory `dir`: renamed into staging first (so no reader sees a
    /// half-removed entry, and a concurrent remover finds nothing), then deleted. Best
    /// effort: a later publication replaces whatever is left.
    pub fn discard(&self, dir: &Path) {
        let trash =
            self.ns
                .join(STAGING)
                .join(format!("trash-{}-{}", std::process::id(), random_suffix()));
        match fs::rename(dir, &trash) {
            Ok(()) => {
                let _ = fs::remove_dir_all(&trash);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(_) => {
                let _ = fs::remove_dir_all(dir);
            }
        }
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
        publish_step(&format!("file {name}"));
        Ok(())
    }

    /// Records (and fsyncs) file `name`, produced in the directory by a tool.
    pub fn add(&mut self, name: &str) -> Result<()> {
        let path = self.path(name);
        fs::File::open(&path)
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
        if let Err(e) = fs::create_dir_all(&parent) {
            return Err(Box::new((self, Error::cache(&parent, e))));
        }
        publish_step("rename");
        for _ in 0..3 {
            match fs::rename(&self.dir, &target) {
                Ok(()) => {
                    self.remove_on_drop = false;
                    sync_dir(&parent);
                    return Ok(target);
                }
                Err(_) if target.exists() => {
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

/// Removes entries of `staging` not modified for `age` (crashed builds, trash).
pub(crate) fn remove_stale_staging(staging: &Path, age: Duration) -> usize {
    let Ok(entries) = fs::read_dir(staging) else {
        return 0;
    };
    let now = SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|d| d > age);
        if stale {
            let path = entry.path();
            let gone = if path.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            removed += usize::from(gone.is_ok());
        }
    }
    removed
}

fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    if let Ok(t) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("{:016x}", h.finish())
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(b"0123456789abcdef"[(b >> 4) as usize]));
        s.push(char::from(b"0123456789abcdef"[(b & 15) as usize]));
    }
    s
}

/// sha256 over length-prefixed parts (so no two part lists hash alike).
pub(crate) fn key_of(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    hex(&h.finalize())
}

// ---------------------------------------------------------------------------
// Manifest
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
struct ManifestFile {
    name: String,
    size: u64,
    sha256: String,
}

/// The canonical manifest text; `verify` accepts nothing else.
fn render_manifest(key: &str, files: &[ManifestFile]) -> String {
    let mut out = format!("{{\n  \"format\": 1,\n  \"key\": \"{key}\",\n  \"files\": [\n");
    for (i, f) in files.iter().enumerate() {
        let sep = if i + 1 == files.len() { "" } else { "," };
        out.push_str(&format!(
            "    {{\"name\": \"{}\", \"size\": {}, \"sha256\": \"{}\"}}{sep}\n",
            f.name, f.size, f.sha256
        ));
    }
    out.push_str("  ]\n}\n");
    out
}

fn manifest_for(dir: &Path, key: &str, names: &[String]) -> Result<String> {
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let path = dir.join(name);
        let bytes = fs::read(&path).map_err(|e| Error::cache(&path, e))?;
        files.push(ManifestFile {
            name: name.clone(),
            size: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
        });
    }
    Ok(render_manifest(key, &files))
}

/// Reads a manifest: `(key, files)`, `None` unless `text` is exactly what
/// [`render_manifest`] writes for them.
fn parse_manifest(text: &str) -> Option<(String, Vec<ManifestFile>)> {
    fn string_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
        let tag = format!("\"{key}\": \"");
        let start = line.find(&tag)? + tag.len();
        let rest = &line[start..];
        Some(&rest[..rest.find('"')?])
    }
    fn number_field(line: &str, key: &str) -> Option<u64> {
        let tag = format!("\"{key}\": ");
        let start = line.find(&tag)? + tag.len();
        let digits: String = line[start..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    }
    let key = text
        .lines()
        .find(|l| l.trim_start().starts_with("\"key\""))
        .and_then(|l| string_field(l, "key"))?
        .to_string();
    let mut files = Vec::new();
    for line in text.lines().filter(|l| l.contains("\"name\"")) {
        files.push(ManifestFile {
            name: string_field(line, "name")?.to_string(),
            size: number_field(line, "size")?,
            sha256: string_field(line, "sha256")?.to_string(),
        });
    }
    let canonical = !files.is_empty() && render_manifest(&key, &files) == text;
    canonical.then_some((key, files))
}

/// Checks `dir` against its manifest (see the module invariants); the files' bytes on
/// success, the reason on failure.
fn verify(
    dir: &Path,
    key: &str,
    required: &[&str],
) -> std::result::Result<Vec<(String, Vec<u8>)>, String> {
    let bytes = fs::read(dir.join(MANIFEST)).map_err(|e| format!("{MANIFEST}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{MANIFEST} is not UTF-8"))?;
    let (named, files) = parse_manifest(&text).ok_or_else(|| format!("{MANIFEST} is malformed"))?;
    if named != key {
        return Err(format!("{MANIFEST} names key {named}, not {key}"));
    }
    if let Some(r) = required
        .iter()
        .find(|r| **r != MANIFEST && !files.iter().any(|f| f.name == **r))
    {
        return Err(format!("{MANIFEST} does not list {r}"));
    }
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        if f.name.is_empty()
            || f.name.contains('/')
            || f.name.contains('\\')
            || f.name.starts_with('.')
            || f.name == MANIFEST
        {
            return Err(format!("{MANIFEST} lists a bad file name {:?}", f.name));
        }
        let path = dir.join(&f.name);
        let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", f.name))?;
        if bytes.len() as u64 != f.size {
            return Err(format!(
                "{} has {} bytes, the manifest says {}",
                f.name,
                bytes.len(),
                f.size
            ));
        }
        if sha256_hex(&bytes) != f.sha256 {
            return Err(format!("{} does not match its sha256", f.name));
        }
        out.push((f.name, bytes));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Public inspection API
// ---------------------------------------------------------------------------

/// What kind of directory a [`CacheEntry`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// `kernels/<key>`: one kernel for one target (and CUDA arch).
    Kernel,
    /// `cuda-binaries/<key>`: a cubin by source, arch and options.
    CudaBinary,
    /// `.staging/<name>`: a build in progress, or left by a killed process.
    Staging,
}

impl std::fmt::Display for EntryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EntryKind::Kernel => "kernel",
            EntryKind::CudaBinary => "cuda-binary",
            EntryKind::Staging => "staging",
        })
    }
}

/// One directory of the disk cache.
#[derive(Debug, Clone)]
pub struct CacheEntry {
    pub kind: EntryKind,
    /// `<tile version>/<os>-<arch>`.
    pub namespace: String,
    /// The directory name (the sha256 key, or the staging name).
    pub key: String,
    pub path: PathBuf,
    /// Total size of its files.
    pub bytes: u64,
    /// `None` if the entry matches its manifest, else why not (always `None` for
    /// staging directories, which have no manifest yet).
    pub damage: Option<String>,
    /// Kernel name, target and arch, from `params.json` (kernel entries).
    pub kernel: Option<String>,
    pub target: Option<String>,
    pub arch: Option<String>,
    /// Last modification time of the directory.
    pub modified: Option<SystemTime>,
}

/// What [`CacheDir::clear`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cleared {
    pub entries: usize,
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

    pub fn at(root: impl Into<PathBuf>) -> CacheDir {
        CacheDir { root: root.into() }
    }

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
                let has_cache = [KERNELS, CUDA_BINARIES, STAGING]
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
                (EntryKind::Staging, STAGING),
            ] {
                for path in read_dirs(&ns.join(sub)) {
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
            match fs::remove_dir_all(&e.path) {
                Ok(()) => {
                    cleared.entries += 1;
                    cleared.bytes += e.bytes;
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(Error::cache(&e.path, err)),
            }
        }
        for (_, ns) in self.namespaces() {
            for sub in [KERNELS, CUDA_BINARIES, STAGING] {
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

fn read_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
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
    let bytes = fs::read_dir(&path)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    let damage = match kind {
        EntryKind::Staging => None,
        EntryKind::Kernel | EntryKind::CudaBinary => verify(&path, &key, &[]).err(),
    };
    let params = fs::read_to_string(path.join(PARAMS)).unwrap_or_default();
    let field = |name: &str| json_string_field(&params, name);
    let modified = fs::metadata(&path).and_then(|m| m.modified()).ok();
    CacheEntry {
        kind,
        namespace: namespace.to_string(),
        key,
        bytes,
        damage,
        kernel: field("kernel"),
        target: field("target"),
        arch: field("arch"),
        modified,
        path,
    }
}

/// The string value of the first `"name": "value"` in `text`.
fn json_string_field(text: &str, name: &str) -> Option<String> {
    let tag = format!("\"{name}\": \"");
    let start = text.find(&tag)? + tag.len();
    let rest = &text[start..];
    Some(rest[..rest.find('"')?].to_string())
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
        let (key, files) = parse_manifest(&manifest).unwrap_or_default();
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
            Lookup::Damaged(_)
        ));
        assert!(!dir.exists());

        // A required file missing from the manifest means the entry is unusable.
        let mut s = cache.stage("abc")?;
        s.write("a.txt", b"hello")?;
        let dir = publish(s, &cache, "kernels/abc")?;
        assert!(matches!(
            cache.lookup("kernels/abc", &["c.txt"], &[])?,
            Lookup::Damaged(_)
        ));
        assert!(!dir.exists());

        // Same size, different bytes: caught by the hash, entry removed.
        let mut s = cache.stage("abc")?;
        s.write("a.txt", b"hello")?;
        let dir = publish(s, &cache, "kernels/abc")?;
        fs::write(dir.join("a.txt"), b"jello").map_err(|e| Error::cache("a", e))?;
        match cache.lookup("kernels/abc", &["a.txt"], &[])? {
            Lookup::Damaged(why) => assert_eq!(why, "a.txt does not match its sha256"),
            other => panic!("expected damage, got {other:?}"),
        }
        assert!(!dir.exists());
        // The removed entry went through staging and is gone from there too.
        assert_eq!(read_dirs(&cache.ns.join(STAGING)).len(), 0);
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
            good.replace("\"format\": 1", "\"format\": 2"),
            good.replace("  \"files\"", " \"files\""),
            good.replace("\"key\": \"k1\"", "\"key\": \"k2\""),
            good[..good.len() / 2].to_string(),
            String::new(),
        ] {
            let dir = make(&cache)?;
            fs::write(dir.join(MANIFEST), &bad).map_err(|e| Error::cache("m", e))?;
            assert!(
                matches!(cache.lookup("kernels/k1", &[], &[])?, Lookup::Damaged(_)),
                "{bad:?}"
            );
        }
        // An entry copied under another key is refused.
        let dir = make(&cache)?;
        let other = cache.entry_dir("kernels/k9");
        fs::rename(&dir, &other).map_err(|e| Error::cache(&other, e))?;
        match cache.lookup("kernels/k9", &[], &[])? {
            Lookup::Damaged(why) => assert_eq!(why, "manifest.json names key k1, not k9"),
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
        assert!(parse_manifest("").is_none());
        assert!(parse_manifest("{\n}\n").is_none());
        assert!(parse_manifest("{\"name\": \"a\"}").is_none());
        let files = vec![ManifestFile {
            name: "a".into(),
            size: 1,
            sha256: "00".into(),
        }];
        let text = render_manifest("k", &files);
        assert_eq!(parse_manifest(&text), Some(("k".to_string(), files)));
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
}
