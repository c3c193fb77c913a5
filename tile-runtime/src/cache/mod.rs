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
//!
//! Files: `disk` (a namespace: look up, discard, stage), `staging` (building and
//! publishing an entry), `manifest` (writing and verifying manifests), `params` (the
//! `params.json` of kernel entries), `inspect` (the public inspection API).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::config::Config;

mod disk;
mod inspect;
mod manifest;
mod params;
mod staging;
#[cfg(test)]
mod tests;

pub(crate) use disk::{DiskCache, Lookup};
pub use inspect::{CacheDir, CacheEntry, Cleared, EntryKind};
pub use params::params_json;
pub(crate) use staging::Staging;

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
