//! What the cache tests share: the probe kernel, the child process (`child_main`, which
//! each test binary runs as a `#[test]` of its own) and the parent's helpers.
//!
//! A child is this test binary again, running only `child_main` against a private
//! `TILE_CACHE_DIR`, with `TILE_NO_AOT=1` so that it takes the JIT path and the disk
//! cache. Its mode (`TILE_RUNTIME_TEST_CHILD`) says what to do before launching:
//! - `launch`: nothing;
//! - `pause:<step>:<n>`: stop at the n-th publication step `step` and wait to be killed;
//! - `fill:<file>`: fill the (small, freshly mounted) file system of the cache root, then
//!   free just the room for the device source when `file` is `binary` (none when it is
//!   `source`), so that writing that file fails with ENOSPC;
//! - `enospc:<file>` / `erofs`: the same faults injected through the cache's fault hook,
//!   for machines where a file system cannot be mounted.
//!
//! After launching, a child prints `CHILD OK origin=<where the kernel came from>` and
//! `CHILD CACHE <what the cache holds>` as it sees it (inside its own mounts).

#![allow(dead_code)] // Each test binary uses part of this.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
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

pub const CHILD: &str = "TILE_RUNTIME_TEST_CHILD";
pub const GO: &str = "TILE_RUNTIME_TEST_GO";

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

pub fn child_launch() -> Result<String, Error> {
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
pub fn child_main() {
    let Ok(mode) = std::env::var(CHILD) else {
        return;
    };
    if let Some(spec) = mode.strip_prefix("pause:") {
        let (step, nth) = spec.rsplit_once(':').unwrap_or((spec, "1"));
        let _ = PAUSE.set((step.to_string(), nth.parse().unwrap_or(1)));
        tile::cache::set_publish_hook(Some(pause_hook));
    }
    if let Err(e) = faults::prepare(&mode) {
        println!("\nCHILD FAILED to prepare {mode}: {e}");
        std::process::exit(1);
    }
    if let Ok(go) = std::env::var(GO) {
        // Start together: wait until the parent creates the file.
        while !Path::new(&go).exists() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    match child_launch() {
        Ok(origin) => {
            println!("\nCHILD OK origin={origin}");
            println!("CHILD CACHE {}", describe_cache());
        }
        Err(e) => {
            println!("\nCHILD FAILED {e}");
            std::process::exit(1);
        }
    }
}

// ---------------------------------------------------------------------------
// The parent side
// ---------------------------------------------------------------------------

pub fn temp_root(tag: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("tile-rt-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a temporary cache root");
    dir
}

pub fn child(mode: &str, root: &Path) -> Command {
    child_under(None, mode, root)
}

/// The arguments that make this test binary run `child_main` only.
const CHILD_ARGS: [&str; 4] = ["child_main", "--exact", "--nocapture", "--test-threads=1"];

/// [`child`], started by `sh -c script` inside a private mount namespace when `script`
/// is given (the script's `"$@"` is the child's command line).
pub fn child_under(script: Option<&str>, mode: &str, root: &Path) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut c = match script {
        None => Command::new(&exe),
        Some(script) => {
            let mut c = Command::new("unshare");
            c.args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                "sh",
            ])
            .arg(&exe);
            c
        }
    };
    c.args(CHILD_ARGS)
        .env(CHILD, mode)
        .env("TILE_CACHE_DIR", root)
        .env("TILE_NO_AOT", "1")
        .env_remove("TILE_DISABLE_CACHE")
        .env_remove("TILE_JIT_DIAGNOSTICS")
        .env_remove(GO)
        .stdin(Stdio::null());
    c
}

pub struct Run {
    pub ok: bool,
    pub origin: String,
    /// The child's `CHILD CACHE` line (what it saw in the cache after launching).
    pub cache: String,
    pub stdout: String,
    pub stderr: String,
}

pub fn finish(out: Output) -> Run {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let origin = stdout
        .lines()
        .find_map(|l| l.split_once("CHILD OK origin=").map(|(_, o)| o))
        .unwrap_or("")
        .to_string();
    let cache = stdout
        .lines()
        .find_map(|l| l.strip_prefix("CHILD CACHE "))
        .unwrap_or("")
        .to_string();
    Run {
        ok: out.status.success() && stdout.contains("CHILD OK"),
        origin,
        cache,
        stdout,
        stderr,
    }
}

pub fn run(cmd: &mut Command) -> Run {
    finish(cmd.output().expect("start a child"))
}

pub fn must_run(cmd: &mut Command) -> Run {
    let r = run(cmd);
    assert!(
        r.ok,
        "child failed\n--- stdout\n{}\n--- stderr\n{}",
        r.stdout, r.stderr
    );
    r
}

pub fn entries(root: &Path, kind: EntryKind) -> Vec<CacheEntry> {
    CacheDir::at(root)
        .entries()
        .into_iter()
        .filter(|e| e.kind == kind)
        .collect()
}

/// Every published entry matches its manifest, and there is exactly one kernel entry.
pub fn assert_one_sound_entry(root: &Path) {
    let all = CacheDir::at(root).entries();
    for e in &all {
        assert!(e.damage.is_none(), "damaged entry {e:?}");
    }
    let kernels = entries(root, EntryKind::Kernel);
    assert_eq!(kernels.len(), 1, "{all:#?}");
    assert!(entries(root, EntryKind::CudaBinary).len() <= 1, "{all:#?}");
}

pub fn on_cuda() -> bool {
    Device::from_env().is_ok_and(|d| d.is_cuda())
}

/// The `tile` binary: `TILE_BIN` when set (test binaries copied to another machine),
/// else the one cargo built beside this test.
pub fn tile_bin() -> std::path::PathBuf {
    std::env::var_os("TILE_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_tile")))
}

/// Kinds and damage of the cache's entries, one word each (`kernel:ok staging:ok ..`).
fn describe_cache() -> String {
    let root = std::env::var_os("TILE_CACHE_DIR").unwrap_or_default();
    let words: Vec<String> = CacheDir::at(root)
        .entries()
        .iter()
        .map(|e| {
            let state = if e.damage.is_some() { "damaged" } else { "ok" };
            format!("{}:{state}", e.kind)
        })
        .collect();
    words.join(" ")
}

/// Faults of the child: a full file system made for real, or faults injected.
mod faults {
    use super::*;
    use std::io;

    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    static FAIL: OnceLock<(Option<&'static str>, io::ErrorKind)> = OnceLock::new();

    /// The names of the device source and binary on this machine's device.
    fn file_names() -> (&'static str, &'static str) {
        if on_cuda() {
            ("kernel.cu", "kernel.cubin")
        } else {
            ("kernel.c", "kernel.so")
        }
    }

    pub fn prepare(mode: &str) -> io::Result<()> {
        let root = PathBuf::from(std::env::var_os("TILE_CACHE_DIR").unwrap_or_default());
        let (source, binary) = file_names();
        let pick = |which: &str| if which == "binary" { binary } else { source };
        if let Some(which) = mode.strip_prefix("fill:") {
            let free = if which == "binary" {
                source_bytes().div_ceil(4096)
            } else {
                0
            };
            return fill(&root, free);
        }
        let fail = if let Some(which) = mode.strip_prefix("enospc:") {
            (Some(pick(which)), io::ErrorKind::StorageFull)
        } else if mode == "erofs" {
            (None, io::ErrorKind::ReadOnlyFilesystem)
        } else {
            return Ok(());
        };
        let _ = ROOT.set(root);
        let _ = FAIL.set(fail);
        tile::cache::set_fault_hook(Some(hook));
        Ok(())
    }

    /// Fails writing file `name` (`Some`) or every change (`None`) under the cache root.
    fn hook(op: &str, path: &Path) -> Option<io::Error> {
        let (root, (file, kind)) = (ROOT.get()?, FAIL.get()?);
        if !path.starts_with(root) {
            return None;
        }
        let hit = match file {
            Some(name) => {
                matches!(op, "write" | "add") && path.file_name()? == std::ffi::OsStr::new(name)
            }
            None => true,
        };
        hit.then(|| io::Error::new(*kind, format!("{kind} (injected)")))
    }

    fn source_bytes() -> usize {
        let target = if on_cuda() { Target::Cuda } else { Target::Cpu };
        cache_probe::source(target).len()
    }

    /// Fills the file system of `root` with 4 KiB files (one page of tmpfs each) until
    /// it is full, then frees `free` of them.
    fn fill(root: &Path, free: usize) -> io::Result<()> {
        std::fs::create_dir_all(root.join(tile::cache::namespace_name()).join(".staging"))?;
        let mut written = Vec::new();
        loop {
            let path = root.join(format!("fill-{}", written.len()));
            let page = std::fs::File::create(&path).and_then(|mut f| f.write_all(&[0; 4096]));
            match page {
                Ok(()) => written.push(path),
                Err(e) if e.kind() == io::ErrorKind::StorageFull => {
                    std::fs::remove_file(&path)?;
                    break;
                }
                Err(e) => return Err(e),
            }
            if written.len() > 1 << 16 {
                return Err(io::Error::other("the file system does not fill up"));
            }
        }
        for path in written.iter().take(free) {
            std::fs::remove_file(path)?;
        }
        Ok(())
    }
}
