//! Who owns a staging directory. Its name carries the pid of the process that made it and
//! a tag of the machine boot and pid namespace it ran in (`<name>-<pid>-<tag>-<random>`),
//! so that one left by a killed build can be removed as soon as that process is gone,
//! not an hour later.
//!
//! A pid is only looked up when the tag is this process's own: a cache shared between
//! machines or containers holds pids that mean nothing here (those, and every name
//! without a tag, wait for the age rule). Pids are reused; a process that has the pid
//! now but started after the directory was last modified is not its owner (an owner
//! starts before it creates its directory, and a dead one touches it no more).

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use super::files::{read_regular, MAX_TEXT};
use super::sha256_hex;

/// The tag when the boot or the pid namespace cannot be told (no `/proc`): never matches
/// a real one, so pids are never looked up.
const UNKNOWN: &str = "x";

/// How much later than the directory's last change a process must have started to be
/// taken for another one with the same pid (the boot time is known to the second).
const REUSE_MARGIN: Duration = Duration::from_secs(5);

/// A fresh name owned by this process: `<prefix>-<pid>-<tag>-<random>`.
pub(super) fn owned_name(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}-{}",
        std::process::id(),
        host_tag(),
        random_suffix()
    )
}

/// Whether the owner of the staging entry named `name` (last modified at `modified`) is
/// known to be gone; `false` when it may be alive or cannot be told.
pub(super) fn owner_gone(name: &str, modified: Option<SystemTime>) -> bool {
    let Some((pid, tag)) = parse(name) else {
        return false;
    };
    if tag == UNKNOWN || tag != host_tag() || pid == std::process::id() {
        return false;
    }
    match process_start(pid) {
        Ok(None) => true,
        Ok(Some(start)) => modified.is_some_and(|m| start > m + REUSE_MARGIN),
        Err(_) => false,
    }
}

/// The pid and tag of an owned name.
fn parse(name: &str) -> Option<(u32, &str)> {
    let mut fields = name.rsplitn(4, '-');
    let _random = fields.next()?;
    let tag = fields.next()?;
    let pid = fields.next()?.parse().ok()?;
    fields.next()?;
    Some((pid, tag))
}

/// Eight hex digits of the boot id and the pid namespace.
pub(super) fn host_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let boot = read_regular("/proc/sys/kernel/random/boot_id".as_ref(), MAX_TEXT);
        let pidns = std::fs::read_link("/proc/self/ns/pid");
        match (boot, pidns) {
            (Ok(boot), Ok(ns)) => {
                let text = format!("{} {}", String::from_utf8_lossy(&boot).trim(), ns.display());
                sha256_hex(text.as_bytes())[..8].to_string()
            }
            _ => UNKNOWN.to_string(),
        }
    })
}

/// When process `pid` started: `None` when there is no such process (or only its
/// zombie), an error when it cannot be told.
fn process_start(pid: u32) -> io::Result<Option<SystemTime>> {
    let stat = match read_regular(format!("/proc/{pid}/stat").as_ref(), MAX_TEXT) {
        Ok(s) => String::from_utf8_lossy(&s).into_owned(),
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses; the fields after
    // its last `)` are state (3rd field) .. starttime (22nd, clock ticks after boot).
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "unreadable /proc stat");
    let rest = stat.rsplit_once(')').ok_or_else(bad)?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    if matches!(fields.first(), Some(&"Z") | Some(&"X")) {
        return Ok(None);
    }
    let ticks: u64 = fields
        .get(19)
        .and_then(|t| t.parse().ok())
        .ok_or_else(bad)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0).ok_or_else(bad)?;
    let boot = boot_time()?;
    Ok(Some(boot + Duration::from_millis(ticks * 1000 / hz)))
}

/// The wall-clock time of the boot (`btime` of `/proc/stat`).
fn boot_time() -> io::Result<SystemTime> {
    let stat = read_regular("/proc/stat".as_ref(), MAX_TEXT)?;
    String::from_utf8_lossy(&stat)
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
        .map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no btime in /proc/stat"))
}

pub(super) fn random_suffix() -> String {
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
