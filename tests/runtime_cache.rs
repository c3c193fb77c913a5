//! The kernel cache across processes: concurrent publication, damaged entries, a
//! process killed mid-publish, stale staging, diagnostics and `tile cache`.
//!
//! Each test starts copies of this test binary as child processes (running only
//! `child_main`, which does nothing in an ordinary run) against a private
//! `TILE_CACHE_DIR`, with `TILE_NO_AOT=1` so they take the JIT path and the
//! disk cache. Children use `Device::default()`: the CPU here, the GPU where
//! one is usable (then the CUDA entries and the device binary cache are
//! exercised too).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use tile::cache::{CacheDir, CacheEntry, EntryKind};
use tile::prelude::*;
use tile::Origin;

#[tile::kernel(block_n = 256, threads = 128)]
pub fn cache_probe(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + b[bx * block_n + i];
        }
    });
}

const CHILD: &str = "TILE_RUNTIME_TEST_CHILD";
const GO: &str = "TILE_RUNTIME_TEST_GO";

// ---------------------------------------------------------------------------
// The child
// ---------------------------------------------------------------------------

static PAUSE: std::sync::OnceLock<(String, usize)> = std::sync::OnceLock::new();
static SEEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Publish hook of a child asked to stop at a step: announces it, then waits to be
/// killed.
fn pause_hook(step: &str) {
    let Some((want, nth)) = PAUSE.get() else {
        return;
    };
    if step.starts_with(want.as_str())
        && SEEN.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == *nth
    {
        println!("\nCHILD PAUSED {step}");
        let _ = std::io::stdout().flush();
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

fn child_launch() -> Result<String, Error> {
    let dev = Device::from_env()?;
    let n = 1000;
    let a = tile::testing::random_tensor::<f32>(&[n], 1, dev)?;
    let b = tile::testing::random_tensor::<f32>(&[n], 2, dev)?;
    let (av, bv) = (a.to_vec()?, b.to_vec()?);
    let want: Vec<f64> = av.iter().zip(&bv).map(|(x, y)| f64::from(x + y)).collect();
    for _ in 0..2 {
        let mut c = Tensor::<f32>::zeros(&[n], dev)?;
        cache_probe(&a, &b, &mut c)?;
        if let Err(e) = tile::testing::assert_allclose(&c.to_vec()?, &want, 0.0, 0.0) {
            return Err(Error::Profile {
                kernel: "cache_probe",
                message: e,
            });
        }
    }
    let origin = match cache_probe::profiler().device(dev).origin() {
        Some(Origin::Aot) => "aot".to_string(),
        Some(Origin::DiskCache(p)) => format!("disk {}", p.display()),
        Some(Origin::BinaryCache(p)) => format!("binary {}", p.display()),
        Some(Origin::Compiled(p)) => format!("compiled {}", p.display()),
        None => "none".to_string(),
    };
    Ok(origin)
}

/// The body of a child process; a no-op in an ordinary test run.
#[test]
fn child_main() {
    let Ok(mode) = std::env::var(CHILD) else {
        return;
    };
    if let Some(spec) = mode.strip_prefix("pause:") {
        let (step, nth) = spec.rsplit_once(':').unwrap_or((spec, "1"));
        let _ = PAUSE.set((step.to_string(), nth.parse().unwrap_or(1)));
        tile::cache::set_publish_hook(Some(pause_hook));
    }
    if let Ok(go) = std::env::var(GO) {
        // Start together: wait until the parent creates the file.
        while !Path::new(&go).exists() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    match child_launch() {
        Ok(origin) => println!("\nCHILD OK origin={origin}"),
        Err(e) => {
            println!("\nCHILD FAILED {e}");
            std::process::exit(1);
        }
    }
}

// ---------------------------------------------------------------------------
// The parent side
// ---------------------------------------------------------------------------

fn temp_root(tag: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("tile-rt-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a temporary cache root");
    dir
}

fn child(mode: &str, root: &Path) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut c = Command::new(exe);
    c.args(["child_main", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .env("TILE_CACHE_DIR", root)
        .env("TILE_NO_AOT", "1")
        .env_remove("TILE_DISABLE_CACHE")
        .env_remove("TILE_JIT_DIAGNOSTICS")
        .env_remove(GO)
        .stdin(Stdio::null());
    c
}

struct Run {
    ok: bool,
    origin: String,
    stdout: String,
    stderr: String,
}

fn finish(out: Output) -> Run {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let origin = stdout
        .lines()
        .find_map(|l| l.split_once("CHILD OK origin=").map(|(_, o)| o))
        .unwrap_or("")
        .to_string();
    Run {
        ok: out.status.success() && stdout.contains("CHILD OK"),
        origin,
        stdout,
        stderr,
    }
}

fn run(cmd: &mut Command) -> Run {
    finish(cmd.output().expect("start a child"))
}

fn must_run(cmd: &mut Command) -> Run {
    let r = run(cmd);
    assert!(
        r.ok,
        "child failed\n--- stdout\n{}\n--- stderr\n{}",
        r.stdout, r.stderr
    );
    r
}

fn entries(root: &Path, kind: EntryKind) -> Vec<CacheEntry> {
    CacheDir::at(root)
        .entries()
        .into_iter()
        .filter(|e| e.kind == kind)
        .collect()
}

/// Every published entry matches its manifest, and there is exactly one kernel entry.
fn assert_one_sound_entry(root: &Path) {
    let all = CacheDir::at(root).entries();
    for e in &all {
        assert!(e.damage.is_none(), "damaged entry {e:?}");
    }
    let kernels = entries(root, EntryKind::Kernel);
    assert_eq!(kernels.len(), 1, "{all:#?}");
    assert!(entries(root, EntryKind::CudaBinary).len() <= 1, "{all:#?}");
}

fn on_cuda() -> bool {
    Device::from_env().is_ok_and(|d| d.is_cuda())
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

/// Starts a child that stops at publish step `step` (its `nth` occurrence) and kills it
/// there; `false` if the child finished without reaching the step.
fn kill_at(root: &Path, step: &str, nth: usize) -> bool {
    let mut c = child(&format!("pause:{step}:{nth}"), root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start a child");
    let stdout = c.stdout.take().expect("child stdout");
    let mut paused = false;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if line.contains("CHILD PAUSED") {
            paused = true;
            break;
        }
    }
    let _ = c.kill();
    let _ = c.wait();
    paused
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
        // The next process builds and publishes normally; the fresh leftover stays.
        let r = must_run(&mut child("launch", &root));
        assert!(!r.origin.starts_with("disk"), "{}", r.origin);
        assert_one_sound_entry(&root);
        let _ = std::fs::remove_dir_all(&root);
    }
}

#[test]
fn stale_staging_is_removed_at_start_up() {
    let root = temp_root("stale");
    assert!(kill_at(&root, "manifest", 1), "never reached the manifest");
    // The killed build's staging (on CUDA also the device binary's).
    let left: Vec<PathBuf> = entries(&root, EntryKind::Staging)
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert!(!left.is_empty());
    let fresh = root
        .join(tile::cache::namespace_name())
        .join(".staging")
        .join("fresh-build-0-0");
    std::fs::create_dir(&fresh).expect("a fresh staging directory");
    let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
    for old in &left {
        std::fs::File::open(old)
            .and_then(|f| f.set_modified(two_hours_ago))
            .expect("backdate a leftover");
    }
    must_run(&mut child("launch", &root));
    for old in &left {
        assert!(
            !old.exists(),
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

/// The `tile` binary: `TILE_BIN` when set (test binaries copied to another machine),
/// else the one cargo built beside this test.
fn tile_bin() -> std::path::PathBuf {
    std::env::var_os("TILE_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_tile")))
}
