//! Test hooks of the disk cache: a function told of each publication step (crash tests),
//! and one that can fail the cache's file operations (fault tests where the real fault
//! cannot be made: no permission to mount a read-only or full file system). Neither is
//! part of the stable API; both cost one uncontended lock per file operation.

use std::io;
use std::path::Path;
use std::sync::Mutex;

static PUBLISH_HOOK: Mutex<Option<fn(&str)>> = Mutex::new(None);

/// A fault hook: given an operation (`mkdir`, `write`, `add`, `rename`, `remove`) and the
/// path it is about to touch, the error to fail it with, or `None` to let it run.
#[doc(hidden)]
pub type FaultHook = fn(&str, &Path) -> Option<io::Error>;

static FAULT_HOOK: Mutex<Option<FaultHook>> = Mutex::new(None);

/// Installs a function called at each step of a publication: `file <name>` after a file
/// is written and fsynced, `manifest` after the manifest, `rename` just before the
/// rename. For crash tests (a hook that never returns lets a test kill the process
/// mid-publish); not part of the stable API.
#[doc(hidden)]
pub fn set_publish_hook(hook: Option<fn(&str)>) {
    *PUBLISH_HOOK.lock().unwrap_or_else(|e| e.into_inner()) = hook;
}

/// Installs a [`FaultHook`] consulted before each file operation of the disk cache and
/// of build folders (a hook tells them apart by path). For fault tests; not part of the
/// stable API.
#[doc(hidden)]
pub fn set_fault_hook(hook: Option<FaultHook>) {
    *FAULT_HOOK.lock().unwrap_or_else(|e| e.into_inner()) = hook;
}

pub(super) fn publish_step(step: &str) {
    let hook = *PUBLISH_HOOK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(hook) = hook {
        hook(step);
    }
}

/// `Err` when the fault hook fails operation `op` on `path`.
pub(super) fn fault(op: &str, path: &Path) -> io::Result<()> {
    let hook = *FAULT_HOOK.lock().unwrap_or_else(|e| e.into_inner());
    match hook.and_then(|h| h(op, path)) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
