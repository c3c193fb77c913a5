//! The kernel cache across processes: concurrent publication, damaged entries, a
//! process killed mid-publish, stale staging, diagnostics and `tile cache`.
//!
//! Each test starts copies of this test binary as child processes (running only
//! `child_main`, which does nothing in an ordinary run) against a private
//! `TILE_CACHE_DIR`, with `TILE_NO_AOT=1` so they take the JIT path and the
//! disk cache. Children use `Device::default()`: the CPU here, the GPU where
//! one is usable (then the CUDA entries and the device binary cache are
//! exercised too).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use tile::cache::{CacheDir, EntryKind};

mod cache_child;
use cache_child::*;

/// The body of a child process; a no-op in an ordinary test run.
#[test]
fn child_main() {
    cache_child::child_main();
}

#[test]
fn sixteen_processes_publish_one_entry() {
    let root = temp_root("sixteen");
    let go = root.join("go");
    let children: Vec<Child> = (0..16)
        .map(|_| {
            child("launch", &root)
                .env(GO, &go)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a child")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&go, b"go").expect("start signal");
    let runs: Vec<Run> = children
        .into_iter()
        .map(|c| finish(c.wait_with_output().expect("wait for a child")))
        .collect();
    for r in &runs {
        assert!(r.ok, "--- stdout\n{}\n--- stderr\n{}", r.stdout, r.stderr);
    }
    assert!(
        runs.iter().any(|r| r.origin.starts_with("compiled")),
        "someone compiled"
    );
    assert_one_sound_entry(&root);
    assert!(
        entries(&root, EntryKind::Staging).is_empty(),
        "losers discard their staging"
    );
    // A 17th process finds the entry.
    let r = must_run(&mut child("launch", &root));
    assert!(r.origin.starts_with("disk"), "{}", r.origin);
    let _ = std::fs::remove_dir_all(&root);
}

fn damage(path: &Path, truncate: bool) {
    let mut bytes = std::fs::read(path).expect("read an entry file");
    if truncate {
        bytes.truncate(bytes.len() / 2);
    } else {
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
    }
    std::fs::write(path, &bytes).expect("damage an entry file");
}

fn files_of(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list an entry")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files
}

#[test]
fn every_damaged_file_is_detected_and_rebuilt() {
    let root = temp_root("damage");
    must_run(&mut child("launch", &root));
    assert_one_sound_entry(&root);
    let mut targets: Vec<(EntryKind, String)> = Vec::new();
    for kind in [EntryKind::Kernel, EntryKind::CudaBinary] {
        for e in entries(&root, kind) {
            for f in files_of(&e.path) {
                let name = f
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                targets.push((kind, name));
            }
        }
    }
    assert!(targets.len() >= 4, "{targets:?}");
    for (kind, name) in &targets {
        for truncate in [true, false] {
            let entry = &entries(&root, *kind)[0];
            damage(&entry.path.join(name), truncate);
            assert!(
                CacheDir::at(&root)
                    .entries()
                    .iter()
                    .any(|e| e.damage.is_some()),
                "{name} damage not detected by the manifest"
            );
            if *kind == EntryKind::CudaBinary {
                // The device binary cache is read only when the kernel entry misses.
                for k in entries(&root, EntryKind::Kernel) {
                    std::fs::remove_dir_all(&k.path).expect("remove the kernel entry");
                }
            }
            let r = must_run(child("launch", &root).env("TILE_JIT_DIAGNOSTICS", "1"));
            let how = if truncate { "truncated" } else { "flipped" };
            assert!(
                r.stderr.contains("result=damaged"),
                "{name} {how}: not reported\n{}",
                r.stderr
            );
            assert!(
                r.origin.starts_with("compiled") || r.origin.starts_with("binary"),
                "{name} {how}: loaded from {}",
                r.origin
            );
            assert_one_sound_entry(&root);
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A child stopped at publish step `step` (its `nth` occurrence), alive until dropped
/// (then killed and reaped); `None` if it finished without reaching the step.
struct Paused(Child);

impl Drop for Paused {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn pause_at(root: &Path, step: &str, nth: usize) -> Option<Paused> {
    let mut c = Paused(
        child(&format!("pause:{step}:{nth}"), root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a child"),
    );
    let stdout = c.0.stdout.take().expect("child stdout");
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if line.contains("CHILD PAUSED") {
            return Some(c);
        }
    }
    None
}

/// Starts a child that stops at publish step `step` (its `nth` occurrence) and kills it
/// there; `false` if the child finished without reaching the step.
fn kill_at(root: &Path, step: &str, nth: usize) -> bool {
    pause_at(root, step, nth).is_some()
}

fn staging_paths(root: &Path) -> Vec<PathBuf> {
    entries(root, EntryKind::Staging)
        .into_iter()
        .map(|e| e.path)
        .collect()
}

#[test]
fn a_process_killed_mid_publish_leaves_no_entry_that_loads() {
    let mut steps = vec![
        ("file", 1),
        ("file", 2),
        ("file", 3),
        ("manifest", 1),
        ("rename", 1),
    ];
    if on_cuda() {
        // Level 3 is published first; then the kernel entry.
        steps.extend([("file", 4), ("manifest", 2), ("rename", 2)]);
    }
    for (step, nth) in steps {
        let root = temp_root("killed");
        assert!(kill_at(&root, step, nth), "never reached {step} #{nth}");
        assert!(
            entries(&root, EntryKind::Kernel).is_empty(),
            "killed at {step} #{nth}: a kernel entry is visible"
        );
        for e in CacheDir::at(&root).entries() {
            assert!(e.damage.is_none(), "killed at {step} #{nth}: {e:?}");
        }
        assert!(
            !entries(&root, EntryKind::Staging).is_empty(),
            "the killed build's staging is left behind"
        );
        // The next process removes the leftover (its owner is gone), then builds and
        // publishes normally.
        let r = must_run(&mut child("launch", &root));
        assert!(!r.origin.starts_with("disk"), "{}", r.origin);
        assert_one_sound_entry(&root);
        assert!(
            entries(&root, EntryKind::Staging).is_empty(),
            "killed at {step} #{nth}: the leftover staging stays"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}

#[test]
fn staging_of_killed_builds_is_removed_by_the_next_process() {
    let root = temp_root("killed-many");
    // Each child removes what the one killed before it left: five kills leave one.
    for i in 0..5 {
        assert!(kill_at(&root, "file", 1), "child {i} never wrote a file");
    }
    let left = staging_paths(&root);
    assert_eq!(left.len(), 1, "{left:?}");
    // A build in progress: a live child stopped at its first file (it removed the
    // leftover when it opened the cache).
    let live = pause_at(&root, "file", 1).expect("a child stopped at its first file");
    assert!(!left[0].exists(), "a killed build's staging stays");
    let in_progress = staging_paths(&root);
    assert_eq!(in_progress.len(), 1, "{in_progress:?}");
    must_run(&mut child("launch", &root));
    assert!(in_progress[0].exists(), "a live build's staging is removed");
    drop(live);
    must_run(&mut child("launch", &root));
    assert!(
        staging_paths(&root).is_empty(),
        "{:?}",
        staging_paths(&root)
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn staging_that_cannot_be_judged_by_pid_is_removed_after_an_hour() {
    let root = temp_root("stale");
    let staging = root.join(tile::cache::namespace_name()).join(".staging");
    std::fs::create_dir_all(&staging).expect("a staging folder");
    // Another machine's (or container's) builds, by their tag, and an untagged name.
    let fresh = staging.join("k-1-0badc0de-0");
    let old = [staging.join("k-2-0badc0de-0"), staging.join("k-3-0")];
    let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
    for dir in old.iter().chain([&fresh]) {
        std::fs::create_dir(dir).expect("a staging directory");
    }
    for dir in &old {
        std::fs::File::open(dir)
            .and_then(|f| f.set_modified(two_hours_ago))
            .expect("backdate a leftover");
    }
    must_run(&mut child("launch", &root));
    for dir in &old {
        assert!(
            !dir.exists(),
            "a staging directory older than an hour is removed"
        );
    }
    assert!(fresh.exists(), "a fresh one (a build in progress) is kept");
    let _ = std::fs::remove_dir_all(&root);
}

fn phases(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("tile phase start: "))
        .map(str::to_string)
        .collect()
}

fn assert_phase_lines(stderr: &str, phase: &str) {
    assert!(
        stderr
            .lines()
            .any(|l| l == format!("tile phase start: {phase}")),
        "no start line for {phase}:\n{stderr}"
    );
    let done = format!("tile phase done: {phase} elapsed=");
    let line = stderr
        .lines()
        .find(|l| l.starts_with(&done))
        .unwrap_or_else(|| panic!("no done line for {phase}:\n{stderr}"));
    let ms = line[done.len()..]
        .split("ms")
        .next()
        .and_then(|v| v.parse::<f64>().ok());
    assert!(ms.is_some_and(|v| v >= 0.0), "bad elapsed in {line:?}");
}

#[test]
fn diagnostics_list_the_phases() {
    let root = temp_root("diag");
    // Cold: nothing on disk.
    let r = must_run(child("launch", &root).env("TILE_JIT_DIAGNOSTICS", "1"));
    for p in [
        "check",
        "disk-cache",
        "compile",
        "publish",
        "load",
        "launch",
    ] {
        assert_phase_lines(&r.stderr, p);
    }
    assert!(r.stderr.contains("tile phase done: disk-cache"));
    assert!(r.stderr.contains("result=miss"), "{}", r.stderr);
    let order = phases(&r.stderr);
    let pos = |p: &str| order.iter().position(|x| x == p);
    assert!(pos("check") < pos("disk-cache") && pos("disk-cache") < pos("compile"));
    assert!(pos("compile") < pos("load") && pos("load") < pos("launch"));
    // The second, warm launch in the same process prints nothing.
    assert_eq!(order.iter().filter(|p| *p == "launch").count(), 1);

    // Warm disk: a hit, then load and launch; no compile.
    let r = must_run(child("launch", &root).env("TILE_JIT_DIAGNOSTICS", "1"));
    assert!(r.stderr.contains("result=hit"), "{}", r.stderr);
    for p in ["check", "disk-cache", "load", "launch"] {
        assert_phase_lines(&r.stderr, p);
    }
    assert!(!phases(&r.stderr).iter().any(|p| p == "compile"));

    // Cache disabled: compiled in a temporary folder, nothing read or written.
    let other = temp_root("diag-off");
    let r = must_run(
        child("launch", &other)
            .env("TILE_JIT_DIAGNOSTICS", "1")
            .env("TILE_DISABLE_CACHE", "1"),
    );
    assert!(r.stderr.contains("disk cache disabled"), "{}", r.stderr);
    assert!(!phases(&r.stderr).iter().any(|p| p == "disk-cache"));
    assert_phase_lines(&r.stderr, "compile");
    assert!(CacheDir::at(&other).entries().is_empty());

    // With the ahead-of-time artifact allowed, it is what loads (when the build made one).
    let r = must_run(
        child("launch", &root)
            .env("TILE_JIT_DIAGNOSTICS", "1")
            .env_remove("TILE_NO_AOT"),
    );
    assert_phase_lines(&r.stderr, "aot");
    if r.stderr.contains("result=linked") || r.stderr.contains("result=embedded") {
        assert_eq!(r.origin, "aot");
    }
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn tile_cache_shows_and_clears() {
    let root = temp_root("cli");
    must_run(&mut child("launch", &root));
    let tile = tile_bin();
    let show = Command::new(&tile)
        .args(["cache", "show", "--dir"])
        .arg(&root)
        .output()
        .expect("run tile cache show");
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(show.status.success(), "{text}");
    assert!(text.contains("cache_probe"), "{text}");
    assert!(text.contains("[ok]"), "{text}");
    assert!(text.contains(&tile::cache::namespace_name()), "{text}");
    let clear = Command::new(&tile)
        .args(["cache", "clear", "--dir"])
        .arg(&root)
        .output()
        .expect("run tile cache clear");
    let text = String::from_utf8_lossy(&clear.stdout);
    assert!(clear.status.success(), "{text}");
    assert!(text.starts_with("removed "), "{text}");
    assert!(CacheDir::at(&root).entries().is_empty());
    let _ = std::fs::remove_dir_all(&root);
}
