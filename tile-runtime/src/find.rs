//! Finding a kernel for a launcher that has none loaded yet: the lifecycle below the
//! typed launcher.
//!
//! ```text
//! #[tile::kernel]  → IR script, sources and keys, at build time (the macro)
//! launch           → check → slot (in-process) → aot → disk-cache → binary-cache (CUDA)
//!                  → compile (C JIT or NVRTC) → publish → load → launch
//! ```
//!
//! Keys of the disk levels (see [`crate::cache`] for the layout):
//! - `kernels/<entry key>`: sha256 of the kernel's key (which holds the IR script, target,
//!   code generation options, tile version and the stamp of the compiler itself), the
//!   runtime's compile flags and, on CUDA, the arch. A changed compiler, option or arch
//!   changes it; a changed comment in the kernel does not (comments never reach the IR).
//! - `cuda-binaries/<binary key>`: sha256 of the CUDA source, arch, NVRTC options and
//!   NVRTC version: what determines the cubin, whoever generated the source.
//!
//! Invariants:
//! - What is published was built in private staging and is loaded from the published
//!   entry (or, when publication fails, from the staging copy): a launch never fails
//!   because of the cache; it only fails when the kernel cannot be built or loaded. A
//!   cache that cannot be written (read-only, or full: the staging folder, a file or the
//!   compiler's output cannot be written) makes the build run again in a private
//!   temporary folder; a damaged entry that cannot be removed is left and built around;
//!   a level-3 binary that cannot be published is not needed.
//! - A cubin is loaded from the bytes that were verified against the manifest, not
//!   re-read from disk.
//! - With diagnostics on, every phase prints `tile phase start: <name>` and
//!   `tile phase done: <name> elapsed=<ms>ms[ result=<outcome>]` on stderr.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crate::cache::{self, key_of, params_json, DiskCache, Lookup, Staging, PARAMS};
use crate::cc;
use crate::config::Config;
use crate::cuda;
use crate::error::{Error, Result};
use crate::loaded::{CpuLoaded, CudaLoaded, Origin};
use crate::nvrtc;
use crate::spec::KernelSpec;
use tile_abi::Target;

pub(crate) const CUDA_SOURCE: &str = "kernel.cu";
pub(crate) const CUBIN: &str = "kernel.cubin";

/// Runs `f` as diagnostics phase `name` (start/done lines when `on`).
pub(crate) fn phase<R>(on: bool, name: &str, f: impl FnOnce() -> R) -> R {
    phase_with(on, name, f, |_| String::new())
}

/// [`phase`] whose done line ends with `outcome(&result)` when that is not empty.
pub(crate) fn phase_with<R>(
    on: bool,
    name: &str,
    f: impl FnOnce() -> R,
    outcome: impl FnOnce(&R) -> String,
) -> R {
    if !on {
        return f();
    }
    eprintln!("tile phase start: {name}");
    let t = Instant::now();
    let r = f();
    print_done(name, t, &outcome(&r));
    r
}

pub(crate) fn print_done(name: &str, since: Instant, outcome: &str) {
    let sep = if outcome.is_empty() { "" } else { " " };
    eprintln!(
        "tile phase done: {name} elapsed={:.3}ms{sep}{outcome}",
        since.elapsed().as_secs_f64() * 1e3
    );
}

fn lookup_outcome(r: &Result<Lookup>) -> String {
    match r {
        Ok(Lookup::Hit(e)) => format!("result=hit {}", e.dir.display()),
        Ok(Lookup::Miss) => "result=miss".into(),
        Ok(Lookup::Damaged(why, true)) => format!("result=damaged ({why}); removed"),
        Ok(Lookup::Damaged(why, false)) => format!("result=damaged ({why}); cannot be removed"),
        Err(e) => format!("result=error ({e})"),
    }
}

/// The key of a kernel's `kernels/` entry (see the module docs).
pub fn entry_key(target: Target, kernel_key: &str, arch: Option<&str>) -> String {
    match target {
        Target::Cpu => key_of(&["tile-entry-v2", "cpu", kernel_key, &cc::FLAGS.join(" ")]),
        Target::Cuda => key_of(&[
            "tile-entry-v2",
            "cuda",
            kernel_key,
            arch.unwrap_or(""),
            &nvrtc::options(arch.unwrap_or(""), &[]).join(" "),
        ]),
    }
}

/// The key of a `cuda-binaries/` entry (see the module docs).
pub fn binary_key(source: &str, arch: &str, nvrtc_version: (i32, i32)) -> String {
    key_of(&[
        "tile-cuda-binary-v2",
        source,
        arch,
        &nvrtc::options(arch, &[]).join(" "),
        &format!("nvrtc {}.{}", nvrtc_version.0, nvrtc_version.1),
    ])
}

struct Diag<'a> {
    on: bool,
    kernel: &'a str,
}

impl Diag<'_> {
    fn note(&self, args: fmt::Arguments<'_>) {
        if self.on {
            eprintln!("tile kernel {}: {args}", self.kernel);
        }
    }
}

/// The disk cache, unless disabled. A cache that cannot be opened (read-only home, ...)
/// degrades to building in a temporary folder: caching must not make a launch fail.
fn open_cache(cfg: &Config, d: &Diag<'_>) -> Option<DiskCache> {
    if !cache::enabled_with(cfg) {
        d.note(format_args!("disk cache disabled"));
        return None;
    }
    match DiskCache::open(&cfg.cache_root) {
        Ok(c) => Some(c),
        Err(e) => {
            d.note(format_args!(
                "disk cache unavailable, building in a temporary folder: {e}"
            ));
            None
        }
    }
}

/// Builds an entry with `f`: in the cache's staging when there is a cache, else (or when
/// that fails in a way the cache may have caused: a read-only or full file system, say)
/// in a private temporary folder. Returns the folder and the cache to publish it to
/// (`None` for a temporary folder). A failed build keeps its folder so the error's paths
/// stay readable.
fn build<'c>(
    cache: Option<&'c DiskCache>,
    name: &str,
    d: &Diag<'_>,
    mut f: impl FnMut(&mut Staging) -> Result<()>,
) -> Result<(Staging, Option<&'c DiskCache>)> {
    if let Some(c) = cache {
        let failed = match c.stage(name) {
            Ok(mut staging) => match f(&mut staging) {
                Ok(()) => return Ok((staging, Some(c))),
                Err(e) if !may_be_the_cache(&e) => {
                    staging.keep();
                    return Err(e);
                }
                Err(e) => e,
            },
            Err(e) => e,
        };
        d.note(format_args!(
            "cannot build in the cache ({failed}); building in a temporary folder"
        ));
    }
    let mut staging = Staging::temp()?;
    match f(&mut staging) {
        Ok(()) => Ok((staging, None)),
        Err(e) => {
            staging.keep();
            Err(e)
        }
    }
}

/// Whether a failed build may be the cache's fault, and is worth retrying outside it: an
/// I/O error on its files, or the C compiler failing to write its output there (it says
/// so in words only). A build that fails again in a temporary folder is not the cache's.
fn may_be_the_cache(e: &Error) -> bool {
    matches!(e, Error::Cache { .. } | Error::Cc { .. })
}

/// A built entry: published (`temp` is `None`), or a folder removed when this drops
/// (no cache, or publication failed).
struct Built {
    dir: PathBuf,
    _temp: Option<Staging>,
}

fn publish(cache: Option<&DiskCache>, staging: Staging, rel: &str, d: &Diag<'_>) -> Built {
    let Some(c) = cache else {
        return Built {
            dir: staging.dir().to_path_buf(),
            _temp: Some(staging),
        };
    };
    match staging.publish(c, rel) {
        Ok(dir) => Built { dir, _temp: None },
        Err(failed) => {
            let (staging, e) = *failed;
            d.note(format_args!("not published ({e}); using the build folder"));
            Built {
                dir: staging.dir().to_path_buf(),
                _temp: Some(staging),
            }
        }
    }
}

pub(crate) fn find_cpu(spec: &'static KernelSpec, cfg: &Config) -> Result<CpuLoaded> {
    let d = Diag {
        on: cfg.diagnostics,
        kernel: spec.name,
    };
    let on = d.on;
    let k = &spec.cpu;
    if k.source.is_empty() && k.aot.is_none() {
        return Err(Error::NoTargetCode {
            kernel: spec.name,
            target: "cpu",
        });
    }
    let key = entry_key(Target::Cpu, k.key, None);
    let rel = format!("kernels/{key}");
    d.note(format_args!("target=cpu key={} entry={rel}", k.key));
    if !cfg.no_aot {
        let aot = phase_with(
            on,
            "aot",
            || k.aot,
            |a| {
                if a.is_some() {
                    "result=linked"
                } else {
                    "result=none"
                }
                .into()
            },
        );
        if let Some(entry) = aot {
            return Ok(loaded_cpu(&d, entry, None, Origin::Aot));
        }
    }
    let load = |dir: &Path| {
        phase(on, "load", || {
            cc::load(spec.name, &dir.join(cc::LIBRARY_FILE), k.symbol)
        })
    };
    let params = params_json(spec, Target::Cpu, None);
    let cache = open_cache(cfg, &d);
    if let Some(c) = &cache {
        let required = [cc::SOURCE_FILE, cc::LIBRARY_FILE, PARAMS];
        let found = phase_with(
            on,
            "disk-cache",
            || c.lookup(&rel, &required, &[(PARAMS, params.as_bytes())]),
            lookup_outcome,
        )?;
        if let Lookup::Hit(entry) = found {
            match load(&entry.dir) {
                Ok((lib, f)) => {
                    let origin = Origin::DiskCache(entry.dir);
                    return Ok(loaded_cpu(&d, f, Some(lib), origin));
                }
                Err(e) => {
                    d.note(format_args!("{e}; removing the entry and rebuilding"));
                    c.discard(&entry.dir);
                }
            }
        }
    }
    let (staged, publish_to) = phase(on, "compile", || {
        build(cache.as_ref(), &key, &d, |s| {
            s.write(cc::SOURCE_FILE, k.source.as_bytes())?;
            cc::compile(cfg.cc.as_deref(), spec.name, s)?;
            s.write(PARAMS, params.as_bytes())
        })
    })?;
    let built = phase(on, "publish", || publish(publish_to, staged, &rel, &d));
    let (lib, f) = load(&built.dir)?;
    Ok(loaded_cpu(
        &d,
        f,
        Some(lib),
        Origin::Compiled(built.dir.clone()),
    ))
}

fn loaded_cpu(
    d: &Diag<'_>,
    entry: crate::spec::CpuEntry,
    lib: Option<libloading::Library>,
    origin: Origin,
) -> CpuLoaded {
    d.note(format_args!("cpu binary from {origin}"));
    CpuLoaded {
        entry,
        lib: lib.map(Arc::new),
        origin,
    }
}

pub(crate) fn find_cuda(
    spec: &'static KernelSpec,
    dev: &'static cuda::DeviceState,
    cfg: &Config,
) -> Result<CudaLoaded> {
    let d = Diag {
        on: cfg.diagnostics,
        kernel: spec.name,
    };
    let on = d.on;
    let arch = cuda::nvrtc_arch(dev.cc);
    // A Hopper GPU runs the code specialized for it, when there is one.
    let k = spec.cuda_for(&arch);
    if k.source.is_empty() && k.cubins.is_empty() {
        return Err(Error::NoTargetCode {
            kernel: spec.name,
            target: "cuda",
        });
    }
    let key = entry_key(Target::Cuda, k.key, Some(&arch));
    let rel = format!("kernels/{key}");
    d.note(format_args!(
        "target=cuda arch={arch} key={} entry={rel}",
        k.key
    ));
    let load = |image: Vec<u8>, path: &Path, origin: Origin| {
        phase(on, "load", || {
            let func = cuda::load_function(dev, spec.name, image, k.entry, path, k.shared_bytes)?;
            d.note(format_args!("cuda binary ({arch}) from {origin}"));
            Ok::<_, Error>(CudaLoaded::new(spec, k, dev, func, origin))
        })
    };
    if !cfg.no_aot {
        let embedded = phase_with(
            on,
            "aot",
            || {
                cuda::cubin_archs(dev.cc)
                    .iter()
                    .find_map(|want| k.cubins.iter().find(|(a, _)| a == want))
            },
            |e| match e {
                Some((a, _)) => format!("result=embedded {a}"),
                None => "result=none".into(),
            },
        );
        if let Some(&(a, bytes)) = embedded {
            let path = PathBuf::from(format!("<embedded {a} cubin>"));
            return load(bytes.to_vec(), &path, Origin::Aot);
        }
    }
    let params = params_json(spec, Target::Cuda, Some(&arch));
    let cache = open_cache(cfg, &d);
    if let Some(c) = &cache {
        let required = [CUDA_SOURCE, CUBIN, PARAMS];
        let found = phase_with(
            on,
            "disk-cache",
            || c.lookup(&rel, &required, &[(PARAMS, params.as_bytes())]),
            lookup_outcome,
        )?;
        if let Lookup::Hit(mut entry) = found {
            if let Some(cubin) = entry.take(CUBIN) {
                let path = entry.dir.join(CUBIN);
                match load(cubin, &path, Origin::DiskCache(entry.dir.clone())) {
                    Ok(l) => return Ok(l),
                    Err(e) => {
                        d.note(format_args!("{e}; removing the entry and rebuilding"));
                        c.discard(&entry.dir);
                    }
                }
            }
        }
    }

    // Level 3, then NVRTC.
    let version = nvrtc::version()?;
    let bin_key = binary_key(k.source, &arch, version);
    let bin_rel = format!("cuda-binaries/{bin_key}");
    let mut from_binary_cache = None;
    if let Some(c) = &cache {
        let found = phase_with(
            on,
            "binary-cache",
            || c.lookup(&bin_rel, &[CUBIN], &[]),
            lookup_outcome,
        )?;
        if let Lookup::Hit(mut entry) = found {
            from_binary_cache = entry.take(CUBIN).map(|b| (b, entry.dir));
        }
    }
    let origin_dir = from_binary_cache.as_ref().map(|(_, dir)| dir.clone());
    let mut cubin = from_binary_cache.map(|(cubin, _)| cubin);
    let (staged, publish_to) = build(cache.as_ref(), &key, &d, |s| {
        s.write(CUDA_SOURCE, k.source.as_bytes())?;
        let bytes = match &mut cubin {
            Some(bytes) => bytes,
            None => {
                let path = s.path(CUDA_SOURCE);
                cubin.insert(phase(on, "compile", || -> Result<_> {
                    let candidates = nvrtc::include_candidates(|v| std::env::var(v).ok());
                    let includes = nvrtc::include_dirs(candidates)?;
                    nvrtc::compile(spec.name, k.source, &path, &arch, &includes)
                })?)
            }
        };
        s.write(CUBIN, bytes)?;
        s.write(PARAMS, params.as_bytes())
    })?;
    let cubin = cubin.unwrap_or_default();
    if let (Some(c), None) = (&cache, &origin_dir) {
        phase(on, "publish", || publish_binary(c, &bin_key, &cubin, &d));
    }
    let built = phase(on, "publish", || publish(publish_to, staged, &rel, &d));
    let origin = match origin_dir {
        Some(dir) => Origin::BinaryCache(dir),
        None => Origin::Compiled(built.dir.clone()),
    };
    load(cubin, &built.dir.join(CUBIN), origin)
}

/// Publishes a device binary to level 3. Best effort: the kernel entry does not need it.
fn publish_binary(cache: &DiskCache, bin_key: &str, cubin: &[u8], d: &Diag<'_>) {
    let published = cache.stage(bin_key).and_then(|mut bin| {
        bin.write(CUBIN, cubin)?;
        bin.publish(cache, &format!("cuda-binaries/{bin_key}"))
            .map_err(|failed| failed.1)
    });
    if let Err(e) = published {
        d.note(format_args!("device binary not published: {e}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_keys_follow_their_inputs() {
        let a = entry_key(Target::Cuda, "k1", Some("sm_90a"));
        assert_eq!(a.len(), 64);
        assert_eq!(a, entry_key(Target::Cuda, "k1", Some("sm_90a")));
        assert_ne!(a, entry_key(Target::Cuda, "k1", Some("sm_80")));
        assert_ne!(a, entry_key(Target::Cuda, "k2", Some("sm_90a")));
        assert_ne!(
            entry_key(Target::Cpu, "k1", None),
            entry_key(Target::Cuda, "k1", None)
        );
        let b = binary_key("src", "sm_90a", (13, 0));
        assert_ne!(b, binary_key("src2", "sm_90a", (13, 0)));
        assert_ne!(b, binary_key("src", "sm_80", (13, 0)));
        assert_ne!(b, binary_key("src", "sm_90a", (13, 1)));
    }
}
