//! CUDA JIT through NVRTC: generated CUDA C++ → cubin (SASS) for one architecture.
//!
//! Invariants:
//! - The output is a cubin for the device's exact architecture (`sm_90a` on 9.0), never
//!   PTX, so what is cached is what runs.
//! - The generated source includes `<cuda_fp16.h>` and `<cuda_bf16.h>`, which NVRTC does
//!   not find by itself: the toolkit include folder is passed explicitly, and a missing
//!   toolkit is an error naming every folder searched.
//! - Loading libnvrtc never panics (probe first, then `catch_unwind` around each call,
//!   since cudarc panics on a missing library or symbol); with `cuda-dynamic-linking` it
//!   is linked instead.
//! - Fast-math is not enabled: generated code must match the CPU backend's results.

use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use cudarc::nvrtc::{result, sys};

use crate::cc::shell_quote;
use crate::error::{Error, Result};

/// Candidate include folders, in search order: `$CUDA_HOME`, `$CUDA_PATH`, `$CUDA_ROOT`
/// (each `/include`), the standard install prefix, then the CUDA wheels of a few Python
/// site-packages folders.
pub(crate) fn include_candidates(var: impl Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for name in ["CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"] {
        if let Some(v) = var(name).filter(|v| !v.is_empty()) {
            out.push(PathBuf::from(v).join("include"));
        }
    }
    out.push(PathBuf::from("/usr/local/cuda/include"));
    let mut site_roots: Vec<PathBuf> = Vec::new();
    let mut lib_dirs: Vec<PathBuf> = Vec::new();
    if let Some(venv) = var("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        lib_dirs.push(PathBuf::from(venv).join("lib"));
    }
    if let Some(home) = var("HOME").filter(|v| !v.is_empty()) {
        lib_dirs.push(PathBuf::from(home).join(".local/lib"));
    }
    lib_dirs.push(PathBuf::from("/usr/local/lib"));
    lib_dirs.push(PathBuf::from("/usr/lib"));
    for lib in lib_dirs {
        let Ok(entries) = std::fs::read_dir(&lib) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pythons.sort();
        for py in pythons {
            site_roots.push(py.join("site-packages"));
            site_roots.push(py.join("dist-packages"));
        }
    }
    for site in site_roots {
        for sub in ["nvidia/cu13/include", "nvidia/cuda_runtime/include"] {
            let dir = site.join(sub);
            if dir.is_dir() {
                out.push(dir);
            }
        }
    }
    out.dedup();
    out
}

/// The existing folders among `candidates`, or an error if none holds `cuda_fp16.h`.
pub(crate) fn include_dirs(candidates: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    if !candidates.iter().any(|d| d.join("cuda_fp16.h").is_file()) {
        return Err(Error::CudaHeaders {
            searched: candidates,
        });
    }
    Ok(candidates.into_iter().filter(|d| d.is_dir()).collect())
}

/// NVRTC options for `arch` with `includes`.
pub(crate) fn options(arch: &str, includes: &[PathBuf]) -> Vec<String> {
    let mut opts = vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".to_string(),
        "-default-device".to_string(),
    ];
    opts.extend(includes.iter().map(|d| format!("-I{}", d.display())));
    opts
}

/// An `nvcc` command line that compiles the same source the same way.
fn reproduce(arch: &str, includes: &[PathBuf], source: &Path) -> String {
    let mut words = vec![
        "nvcc".to_string(),
        "-cubin".into(),
        format!("-arch={arch}"),
        "-std=c++17".into(),
    ];
    words.extend(includes.iter().map(|d| format!("-I{}", d.display())));
    words.push("-o".into());
    words.push("kernel.cubin".into());
    words.push(source.to_string_lossy().into_owned());
    words
        .iter()
        .map(|w| shell_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether libnvrtc can be loaded.
#[cfg(not(feature = "cuda-dynamic-linking"))]
fn library_present() -> bool {
    // SAFETY: probing loads and unloads libnvrtc, which has no unusual initialisers.
    unsafe { sys::is_culib_present() }
}

/// Linked (`cuda-dynamic-linking`): the process would not have started without it.
#[cfg(feature = "cuda-dynamic-linking")]
fn library_present() -> bool {
    true
}

fn unavailable(what: &str) -> Error {
    Error::NvrtcUnavailable {
        reason: format!("{what} (is libnvrtc from CUDA 13 on the library search path?)"),
    }
}

/// The NVRTC version `(major, minor)`; part of the device binary cache key.
pub(crate) fn version() -> Result<(i32, i32)> {
    if !library_present() {
        return Err(unavailable("the NVRTC library could not be loaded"));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out pointers; cudarc panics (caught) if the symbol is missing.
    let r = catch_unwind(AssertUnwindSafe(|| unsafe {
        sys::nvrtcVersion(&mut major, &mut minor)
    }));
    match r {
        Ok(sys::nvrtcResult::NVRTC_SUCCESS) => Ok((major, minor)),
        Ok(e) => Err(unavailable(&format!("nvrtcVersion failed: {e:?}"))),
        Err(_) => Err(unavailable("libnvrtc lacks nvrtcVersion")),
    }
}

/// Compiles `source` (already written to `source_path`, which errors point at) to a
/// cubin for `arch`.
pub(crate) fn compile(
    kernel: &'static str,
    source: &str,
    source_path: &Path,
    arch: &str,
    includes: &[PathBuf],
) -> Result<Vec<u8>> {
    if !library_present() {
        return Err(unavailable("the NVRTC library could not be loaded"));
    }
    let opts = options(arch, includes);
    let src = CString::new(source).map_err(|_| Error::Spec {
        kernel,
        message: "the CUDA source contains a NUL byte".into(),
    })?;
    let name = c"kernel.cu";
    let prog = match catch_unwind(|| result::create_program(&src, Some(name))) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Err(unavailable(&format!("nvrtcCreateProgram failed: {e:?}"))),
        Err(_) => return Err(unavailable("libnvrtc lacks nvrtcCreateProgram")),
    };
    let out = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: `prog` was created above and is destroyed only after this closure.
        let compiled = unsafe { result::compile_program(prog, &opts) };
        // SAFETY: as above.
        let log = unsafe { result::get_program_log(prog) }
            .map(|raw| c_chars_to_string(&raw))
            .unwrap_or_default();
        match compiled {
            Err(e) => Err(Error::Nvrtc {
                kernel,
                log: if log.trim().is_empty() {
                    format!("{e:?}")
                } else {
                    log
                },
                options: opts.clone(),
                source: source_path.to_path_buf(),
                reproduce: reproduce(arch, includes, source_path),
            }),
            // SAFETY: `prog` compiled successfully and is still alive.
            Ok(()) => unsafe { get_cubin(prog) }
                .map_err(|e| unavailable(&format!("nvrtcGetCUBIN failed: {e:?}"))),
        }
    }));
    // SAFETY: `prog` is alive and not used after this.
    let _ = catch_unwind(|| unsafe { result::destroy_program(prog) });
    match out {
        Ok(r) => r,
        Err(_) => Err(unavailable("libnvrtc lacks a required entry point")),
    }
}

/// # Safety
///
/// `prog` must be a live, successfully compiled program for a real (`sm_*`) architecture.
unsafe fn get_cubin(prog: sys::nvrtcProgram) -> std::result::Result<Vec<u8>, result::NvrtcError> {
    let mut size = 0usize;
    // SAFETY: `prog` is live (caller); `size` is a valid out pointer.
    unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }.result()?;
    let mut buf = vec![0u8; size];
    // SAFETY: `buf` has the size NVRTC reported for this program's cubin.
    unsafe { sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast::<c_char>()) }.result()?;
    Ok(buf)
}

fn c_chars_to_string(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_follow_the_environment() {
        let c = include_candidates(|k| match k {
            "CUDA_HOME" => Some("/opt/cuda-x".into()),
            "CUDA_PATH" => Some(String::new()),
            _ => None,
        });
        assert_eq!(c[0], PathBuf::from("/opt/cuda-x/include"));
        assert_eq!(c[1], PathBuf::from("/usr/local/cuda/include"));
    }

    #[test]
    fn missing_headers_name_every_folder() {
        let searched = vec![
            PathBuf::from("/nonexistent/a/include"),
            PathBuf::from("/nonexistent/b/include"),
        ];
        let err = include_dirs(searched)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.starts_with("cuda_fp16.h not found"), "{err}");
        assert!(err.contains("/nonexistent/a/include") && err.contains("/nonexistent/b/include"));
    }

    #[test]
    fn options_and_reproduce() {
        let inc = [PathBuf::from("/usr/local/cuda/include")];
        assert_eq!(
            options("sm_90a", &inc),
            [
                "--gpu-architecture=sm_90a",
                "-std=c++17",
                "-default-device",
                "-I/usr/local/cuda/include"
            ]
        );
        let r = reproduce("sm_80", &inc, Path::new("/tmp/x/kernel.cu"));
        assert_eq!(
            r,
            "nvcc -cubin -arch=sm_80 -std=c++17 -I/usr/local/cuda/include -o kernel.cubin /tmp/x/kernel.cu"
        );
    }

    #[test]
    fn compile_without_nvrtc_is_an_error_not_a_panic() {
        if library_present() {
            return;
        }
        let r = compile(
            "k",
            "extern \"C\" __global__ void k() {}",
            Path::new("k.cu"),
            "sm_90a",
            &[],
        );
        assert!(matches!(r, Err(Error::NvrtcUnavailable { .. })));
    }
}
