//! Tests of what the disk levels find in place of an entry or a file (a plain file, a
//! FIFO, a symlink to a device) and of the owners of staging directories.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use super::inspect::read_entries;
use super::owner::owned_name;
use super::staging::remove_stale_staging;
use super::tests::temp_root;
use super::*;
use crate::error::{Error, Result};

fn io<T>(path: &Path, r: std::io::Result<T>) -> Result<T> {
    r.map_err(|e| Error::cache(path, e))
}

/// A published entry `kernels/<key>` with one file `a.txt`.
fn entry(cache: &DiskCache, key: &str) -> Result<PathBuf> {
    let mut s = cache.stage(key)?;
    s.write("a.txt", b"hello")?;
    s.publish(cache, &format!("kernels/{key}")).map_err(|b| b.1)
}

/// `lookup`, failing the test instead of hanging when it does not return.
fn lookup_in_time(cache: &DiskCache, rel: &str) -> Lookup {
    let (tx, rx) = mpsc::channel();
    let (cache, owned) = (cache.clone(), rel.to_string());
    std::thread::spawn(move || {
        let _ = tx.send(cache.lookup(&owned, &["a.txt"], &[]));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => panic!("lookup failed: {e}"),
        Err(_) => panic!("lookup of {rel} hangs"),
    }
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).expect("a path without NUL");
    // SAFETY: `c` is a valid NUL-terminated path.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
}

#[test]
fn an_entry_that_is_a_plain_file_is_replaced_without_leftovers() -> Result<()> {
    let root = temp_root("plainfile");
    let cache = DiskCache::open(&root)?;
    let path = cache.entry_dir("kernels/k");
    io(&path, fs::create_dir_all(cache.ns.join(KERNELS)))?;
    io(&path, fs::write(&path, b"not a directory"))?;
    // Listed (and cleared) as damage.
    let listed = CacheDir::at(&root).entries();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        listed[0].damage.as_deref(),
        Some("the entry is a regular file")
    );
    match lookup_in_time(&cache, "kernels/k") {
        Lookup::Damaged(why, true) => assert_eq!(why, "the entry is a regular file"),
        other => panic!("expected damage, got {other:?}"),
    }
    assert!(fs::symlink_metadata(&path).is_err());
    // Publishing over one removes it too.
    io(&path, fs::write(&path, b"not a directory"))?;
    let dir = entry(&cache, "k")?;
    assert!(dir.is_dir());
    assert!(matches!(
        lookup_in_time(&cache, "kernels/k"),
        Lookup::Hit(_)
    ));
    assert_eq!(read_entries(&cache.ns.join(STAGING)), Vec::<PathBuf>::new());
    let _ = fs::remove_dir_all(&root);
    Ok(())
}

/// Replaces a file of an entry by something else.
type Replace = fn(&Path) -> Result<()>;

fn fifo_in_place(p: &Path) -> Result<()> {
    io(p, fs::remove_file(p))?;
    mkfifo(p);
    Ok(())
}

fn dev_zero_in_place(p: &Path) -> Result<()> {
    io(p, fs::remove_file(p))?;
    io(p, std::os::unix::fs::symlink("/dev/zero", p))
}

#[test]
fn special_files_are_damage_and_never_block_a_reader() -> Result<()> {
    let root = temp_root("special");
    let cache = DiskCache::open(&root)?;
    let cases: [(&str, Replace, &str); 4] = [
        (MANIFEST, fifo_in_place, "manifest.json is a FIFO"),
        (MANIFEST, dev_zero_in_place, "manifest.json is a symlink"),
        ("a.txt", fifo_in_place, "a.txt is a FIFO"),
        ("a.txt", dev_zero_in_place, "a.txt is a symlink"),
    ];
    for (file, make, want) in cases {
        let dir = entry(&cache, "k")?;
        make(&dir.join(file))?;
        let listed = CacheDir::at(&root).entries();
        assert_eq!(listed[0].damage.as_deref(), Some(want));
        match lookup_in_time(&cache, "kernels/k") {
            Lookup::Damaged(why, true) => assert_eq!(why, want),
            other => panic!("{file}: expected damage, got {other:?}"),
        }
        assert!(!dir.exists());
    }
    // A manifest far larger than any this runtime writes is not read.
    let dir = entry(&cache, "k")?;
    let big = dir.join(MANIFEST);
    io(
        &big,
        fs::File::create(&big).and_then(|f| f.set_len(1 << 40)),
    )?;
    match lookup_in_time(&cache, "kernels/k") {
        Lookup::Damaged(why, true) => {
            assert!(why.starts_with("manifest.json has 1099511627776 bytes"))
        }
        other => panic!("expected damage, got {other:?}"),
    }
    assert_eq!(read_entries(&cache.ns.join(STAGING)), Vec::<PathBuf>::new());
    let _ = fs::remove_dir_all(&root);
    Ok(())
}

/// The pid of a process that has exited (and been reaped).
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("start `true`");
    let pid = child.id();
    let _ = child.wait();
    pid
}

fn backdate(path: &Path, by: Duration) {
    fs::File::open(path)
        .and_then(|f| f.set_modified(SystemTime::now() - by))
        .expect("backdate a staging directory");
}

/// A child process, killed and reaped when stopped or dropped.
struct Sleeper(std::process::Child);

impl Sleeper {
    fn stop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A staging name of process `pid` with this machine's tag.
fn name_of_pid(prefix: &str, pid: u32) -> String {
    let mine = format!("-{}-", std::process::id());
    owned_name(prefix).replacen(&mine, &format!("-{pid}-"), 1)
}

#[test]
fn staging_of_a_process_that_is_gone_is_removed_at_once() -> Result<()> {
    let root = temp_root("owners");
    let cache = DiskCache::open(&root)?;
    let staging = cache.ns.join(STAGING);
    let make = |name: String| -> Result<PathBuf> {
        let dir = staging.join(name);
        io(&dir, fs::create_dir(&dir))?;
        Ok(dir)
    };
    let ours = cache.stage("ours")?.keep();
    let gone = make(name_of_pid("gone", dead_pid()))?;
    let mut sleeper = Sleeper(
        std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("start `sleep`"),
    );
    let alive = make(name_of_pid("alive", sleeper.0.id()))?;
    // The pid is alive, but its process started after the directory last changed: the
    // pid was reused, the owner is gone.
    let reused = make(name_of_pid("reused", sleeper.0.id()))?;
    backdate(&reused, Duration::from_secs(600));
    // Another machine's (or container's) tag: the pid means nothing here.
    let foreign = make(format!("elsewhere-{}-0badc0de-0", dead_pid()))?;
    // A name without a tag.
    let untagged = make(format!("old-{}-0", dead_pid()))?;

    assert_eq!(remove_stale_staging(&staging, Duration::from_secs(3600)), 2);
    assert!(!gone.exists() && !reused.exists());
    assert!(alive.exists(), "a live owner's build stays");
    // Our own entries are never judged by pid (other threads may be building).
    assert!(ours.exists());
    assert!(foreign.exists() && untagged.exists());
    sleeper.stop();
    assert_eq!(remove_stale_staging(&staging, Duration::from_secs(3600)), 1);
    assert!(!alive.exists(), "removed once its owner is gone");
    // The age rule still removes what cannot be judged by pid.
    assert_eq!(remove_stale_staging(&staging, Duration::ZERO), 3);
    assert_eq!(read_entries(&staging), Vec::<PathBuf>::new());
    let _ = fs::remove_dir_all(&root);
    Ok(())
}
