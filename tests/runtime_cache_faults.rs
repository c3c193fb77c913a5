//! A launch never fails because of the disk cache: a read-only cache, a full one, an
//! entry that is a plain file, and files that would block a reader (a FIFO, a symlink to
//! `/dev/zero`). The children are those of `cache_child` (see there).
//!
//! Read-only and full file systems are made for real where this process may mount: each
//! child runs in a private mount namespace (`unshare --mount`) with the cache root
//! bind-mounted read-only, or mounted as a tiny tmpfs that the child fills. Permission
//! bits would not do: the tests run as root, whom they do not stop. Where mounting is
//! not permitted, the same faults are injected through the cache's fault hook (EROFS on
//! every change under the root; ENOSPC writing the device source or binary), and the
//! test says so on stderr. `TILE_TEST_INJECT_FAULTS=1` injects them anyway (to run that
//! path where mounting works).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tile::cache::{namespace_name, CacheDir, EntryKind};

mod cache_child;
use cache_child::*;

/// The faults made here are those of the C build path (a source file and a
/// link inside the cache), so the children run on the CPU on any machine: on a
/// GPU a sound CUDA binary cache would answer first.
fn child(mode: &str, root: &Path) -> Command {
    let mut c = cache_child::child(mode, root);
    c.env("TILE_DEVICE", "cpu");
    c
}

/// [`child`] inside a private mount namespace (see `cache_child::child_under`).
fn child_under(script: Option<&str>, mode: &str, root: &Path) -> Command {
    let mut c = cache_child::child_under(script, mode, root);
    c.env("TILE_DEVICE", "cpu");
    c
}

/// The body of a child process; a no-op in an ordinary test run.
#[test]
fn child_main() {
    cache_child::child_main();
}

/// Makes the cache root read-only for the child.
const READ_ONLY: &str = r#"mount --bind "$TILE_CACHE_DIR" "$TILE_CACHE_DIR" &&
mount -o remount,bind,ro "$TILE_CACHE_DIR" && exec "$@""#;

/// Mounts a 256 KiB tmpfs on the cache root for the child (which fills it).
const TINY: &str = r#"mount -t tmpfs -o size=256k tile-test-full "$TILE_CACHE_DIR" && exec "$@""#;

/// Whether file systems can be mounted in a private mount namespace here.
fn can_mount() -> bool {
    static CAN: OnceLock<bool> = OnceLock::new();
    *CAN.get_or_init(|| {
        let dir = temp_root("probe");
        let forced = std::env::var_os("TILE_TEST_INJECT_FAULTS").is_some();
        let ok = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount -t tmpfs -o size=64k tile-test-probe "$0""#)
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| !forced && s.success());
        let _ = fs::remove_dir_all(&dir);
        if !ok {
            eprintln!("cannot mount here: read-only and full caches are injected faults");
        }
        ok
    })
}

/// Every path under `root` with its size, sorted: what a read-only cache must keep.
fn listing(root: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in fs::read_dir(&dir).expect("list a folder").flatten() {
            let meta = e.metadata().expect("stat a cache file");
            if meta.is_dir() {
                dirs.push(e.path());
            }
            out.push((e.path(), if meta.is_dir() { 0 } else { meta.len() }));
        }
    }
    out.sort();
    out
}

/// The run succeeded with a kernel compiled outside the cache root.
fn assert_built_elsewhere(r: &Run, root: &Path) {
    assert!(
        r.ok,
        "child failed\n--- stdout\n{}\n--- stderr\n{}",
        r.stdout, r.stderr
    );
    let dir = r
        .origin
        .strip_prefix("compiled ")
        .unwrap_or_else(|| panic!("not compiled: {}", r.origin));
    assert!(
        !Path::new(dir).starts_with(root),
        "built in the cache: {dir}"
    );
}

fn read_only_child(root: &Path) -> Command {
    let mut c = if can_mount() {
        child_under(Some(READ_ONLY), "launch", root)
    } else {
        child("erofs", root)
    };
    c.env("TILE_JIT_DIAGNOSTICS", "1");
    c
}

fn kernel_entry(root: &Path) -> PathBuf {
    let kernels = entries(root, EntryKind::Kernel);
    assert_eq!(kernels.len(), 1, "{kernels:?}");
    kernels[0].path.clone()
}

#[test]
fn a_read_only_cache_with_no_entry_builds_in_a_temporary_folder() {
    let root = temp_root("ro-empty");
    let ns = root.join(namespace_name());
    for sub in [".staging", "kernels"] {
        fs::create_dir_all(ns.join(sub)).expect("a namespace folder");
    }
    let before = listing(&root);
    let r = run(&mut read_only_child(&root));
    assert_built_elsewhere(&r, &root);
    assert!(
        r.stderr.contains("building in a temporary folder"),
        "{}",
        r.stderr
    );
    assert_eq!(listing(&root), before, "the read-only cache changed");
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_read_only_cache_with_a_damaged_entry_builds_in_a_temporary_folder() {
    let root = temp_root("ro-damaged");
    must_run(&mut child("launch", &root));
    let params = kernel_entry(&root).join("params.json");
    let mut bytes = fs::read(&params).expect("read params.json");
    bytes[10] ^= 0xff;
    fs::write(&params, &bytes).expect("damage params.json");
    let before = listing(&root);
    for _ in 0..2 {
        let r = run(&mut read_only_child(&root));
        assert_built_elsewhere(&r, &root);
        assert!(r.stderr.contains("cannot be removed"), "{}", r.stderr);
        assert_eq!(listing(&root), before, "the read-only cache changed");
    }
    // A sound entry in a read-only cache is a hit.
    fs::remove_dir_all(root.join(namespace_name())).expect("empty the cache");
    must_run(&mut child("launch", &root));
    let r = must_run(&mut read_only_child(&root));
    assert!(r.origin.starts_with("disk"), "{}", r.origin);
    let _ = fs::remove_dir_all(&root);
}

#[test]
fn a_full_cache_builds_in_a_temporary_folder() {
    // `source`: no room for the device source (kernel.c); `binary`: room for the source
    // only, so the C compiler cannot write kernel.so (on a GPU: kernel.cu, kernel.cubin).
    for file in ["source", "binary"] {
        let root = temp_root(&format!("full-{file}"));
        let mut c = if can_mount() {
            child_under(Some(TINY), &format!("fill:{file}"), &root)
        } else {
            child(&format!("enospc:{file}"), &root)
        };
        let r = run(c.env("TILE_JIT_DIAGNOSTICS", "1"));
        assert_built_elsewhere(&r, &root);
        assert!(
            r.stderr.contains("building in a temporary folder"),
            "{file}: {}",
            r.stderr
        );
        // The failed build's staging is gone and nothing was published.
        assert_eq!(r.cache, "", "{file}: left in the cache");
        let _ = fs::remove_dir_all(&root);
    }
}

#[test]
fn an_entry_that_is_a_plain_file_is_rebuilt_without_leftovers() {
    let root = temp_root("plain-file");
    must_run(&mut child("launch", &root));
    let entry = kernel_entry(&root);
    fs::remove_dir_all(&entry).expect("remove the entry");
    fs::write(&entry, b"not a directory").expect("a file in its place");
    let listed = CacheDir::at(&root).entries();
    assert_eq!(
        listed[0].damage.as_deref(),
        Some("the entry is a regular file")
    );
    let r = must_run(child("launch", &root).env("TILE_JIT_DIAGNOSTICS", "1"));
    assert!(r.stderr.contains("result=damaged"), "{}", r.stderr);
    assert!(r.origin.starts_with("compiled"), "{}", r.origin);
    assert_one_sound_entry(&root);
    assert!(
        entries(&root, EntryKind::Staging).is_empty(),
        "{:?}",
        CacheDir::at(&root).entries()
    );
    let _ = fs::remove_dir_all(&root);
}

/// Runs `cmd` to its end, failing the test if it takes longer than a minute.
fn run_in_time(cmd: &mut Command) -> Run {
    let mut c = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a child");
    let start = Instant::now();
    while c.try_wait().expect("poll a child").is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = c.kill();
            let _ = c.wait();
            panic!("{cmd:?} hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    finish(c.wait_with_output().expect("a child's output"))
}

#[test]
fn a_fifo_or_a_device_in_an_entry_never_blocks() {
    let root = temp_root("special");
    must_run(&mut child("launch", &root));
    // The children run on the CPU (`child`): their entries hold a shared object.
    let binary = "kernel.so";
    for (file, link) in [
        ("manifest.json", false),
        ("manifest.json", true),
        (binary, false),
        (binary, true),
    ] {
        let path = kernel_entry(&root).join(file);
        fs::remove_file(&path).expect("remove an entry file");
        if link {
            std::os::unix::fs::symlink("/dev/zero", &path).expect("a symlink to /dev/zero");
        } else {
            let made = Command::new("mkfifo").arg(&path).status();
            assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        }
        let show = run_in_time(
            Command::new(tile_bin())
                .args(["cache", "show", "--dir"])
                .arg(&root),
        );
        assert!(show.stdout.contains("DAMAGED"), "{}", show.stdout);
        let r = run_in_time(child("launch", &root).env("TILE_JIT_DIAGNOSTICS", "1"));
        assert!(r.ok, "{file}: {}\n{}", r.stdout, r.stderr);
        assert!(r.stderr.contains("result=damaged"), "{file}: {}", r.stderr);
        assert!(r.origin.starts_with("compiled"), "{file}: {}", r.origin);
        assert_one_sound_entry(&root);
    }
    let _ = fs::remove_dir_all(&root);
}
