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
//!   autotune/<sha256>/                         tuned choices (see `crate::autotune`)
//!     choice.json, manifest.json
//!   .staging/                                  private build directories
//! ```
//!
//! Level 3 answers when level 2 misses but the device source is unchanged (a new tile
//! version whose code generator emits the same CUDA, say): NVRTC is skipped.
//!
//! Invariants:
//! - An entry directory is immutable once visible: it is built in a private staging
//!   directory (`.staging/<name>-<pid>-<tag>-<random>`), every file is fsynced, the
//!   manifest is written last, and one `rename` publishes it. A process that loses the
//!   race discards its staging directory and uses the winner.
//! - Nothing is loaded from an entry that does not match its manifest: the manifest must
//!   be byte-for-byte what this runtime writes for its own contents (so a flipped or
//!   truncated manifest is caught too), name the entry's key, and list every required
//!   file with the size and sha256 found on disk. A damaged entry is first renamed into
//!   `.staging/` (atomic: no reader sees it half-removed), then deleted; the caller
//!   rebuilds it. Whatever stands in place of an entry that is not a directory (a plain
//!   file, a symlink) is damage and removed the same way.
//! - Reading an entry never blocks and never reads without bound: only regular files
//!   are opened (not followed through a symlink, and without blocking, so a FIFO or a
//!   device is refused, not read), and no more bytes are read than the manifest allows
//!   (the manifest itself: 1 MiB).
//! - The first time a process opens the namespace it removes the staging directories
//!   whose owner is gone: its pid (of this machine boot and pid namespace, `<tag>`) has
//!   no process, or one that started after the directory last changed (a reused pid).
//!   Those it cannot judge (another machine's, say) are removed once older than an hour.
//! - The cache is an accelerator: a cache that cannot be written (read-only, full) makes
//!   the launch build in a private temporary folder instead (see `find.rs`).
//!
//! Files: `disk` (a namespace: look up, discard, stage), `staging` (building and
//! publishing an entry), `manifest` (writing and verifying manifests), `files` (bounded
//! reads of regular files), `owner` (staging names and their owners), `params` (the
//! `params.json` of kernel entries), `inspect` (the public inspection API), `hooks` (test
//! hooks: publication steps, injected I/O faults).

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::config::Config;

mod disk;
#[cfg(test)]
mod fault_tests;
mod files;
mod hooks;
mod inspect;
mod manifest;
mod owner;
mod params;
mod staging;
#[cfg(test)]
mod tests;

pub(crate) use disk::{DiskCache, Lookup};
pub use hooks::{set_fault_hook, set_publish_hook, FaultHook};
pub use inspect::{CacheDir, CacheEntry, Cleared, EntryKind};
pub use params::params_json;
pub(crate) use staging::Staging;

pub(crate) const MANIFEST: &str = "manifest.json";
pub(crate) const PARAMS: &str = "params.json";
const STAGING: &str = ".staging";
const KERNELS: &str = "kernels";
const CUDA_BINARIES: &str = "cuda-binaries";
pub(crate) const AUTOTUNE: &str = "autotune";
/// The file of a tuned-choice entry (see `crate::autotune`).
pub(crate) const CHOICE: &str = "choice.json";
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// The bytes of a small regular file (at most 1 MiB; not through a symlink, never
/// blocking on a FIFO), or `None`.
pub(crate) fn read_small(path: &std::path::Path) -> Option<Vec<u8>> {
    files::read_regular(path, files::MAX_TEXT).ok()
}

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
// Keys
// ---------------------------------------------------------------------------

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
