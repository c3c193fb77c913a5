//! The C JIT: generated C → shared library → entry point.
//!
//! Invariants:
//! - The compiler is `$CC` (which may carry leading arguments) or `cc`, run with
//!   portable flags only (no `-march=native`: the disk cache may be shared between
//!   machines of one `<os>-<arch>`).
//! - The library is built inside a staging directory that the caller publishes; a
//!   failure leaves that directory in place so the error's source path stays readable.
//! - A loaded `Library` is never unloaded while its entry point can be called: the
//!   caller stores both together for the process lifetime.

use std::path::Path;
use std::process::Command;

use libloading::Library;

use crate::cache::Staging;
use crate::error::{Error, Result};
use crate::spec::CpuEntry;

pub(crate) const SOURCE_FILE: &str = "kernel.c";
pub(crate) const LIBRARY_FILE: &str = "kernel.so";

pub(crate) const FLAGS: &[&str] = &[
    "-O3",
    "-std=c11",
    "-shared",
    "-fPIC",
    "-fno-strict-aliasing",
];

/// Quotes an argument for a POSIX shell when it needs it.
pub(crate) fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// Compiles `kernel.c` (already written into `staging`) to `kernel.so` beside it.
pub(crate) fn compile(cc: Option<&str>, kernel: &'static str, staging: &mut Staging) -> Result<()> {
    let source = staging.path(SOURCE_FILE);
    let library = staging.path(LIBRARY_FILE);
    let mut words = cc.unwrap_or("cc").split_whitespace();
    let program = words.next().unwrap_or("cc").to_string();
    let mut args: Vec<String> = words.map(str::to_string).collect();
    args.extend(FLAGS.iter().map(|s| s.to_string()));
    args.push("-o".into());
    args.push(library.to_string_lossy().into_owned());
    args.push(source.to_string_lossy().into_owned());
    args.push("-lm".into());
    let command = std::iter::once(&program)
        .chain(&args)
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    let fail = |stderr: String| Error::Cc {
        kernel,
        command: command.clone(),
        stderr,
        source: source.clone(),
    };
    let output = Command::new(&program)
        .args(&args)
        .current_dir(staging.dir())
        .output()
        .map_err(|e| {
            fail(format!(
                "cannot run `{program}`: {e} (set CC to a C compiler)"
            ))
        })?;
    if !output.status.success() {
        let mut stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !stdout.trim().is_empty() {
            stderr.push_str(&stdout);
        }
        if stderr.trim().is_empty() {
            stderr = format!("{program} exited with {}", output.status);
        }
        return Err(fail(stderr));
    }
    staging.add(LIBRARY_FILE)
}

/// Loads the shared library at `path` and looks up `symbol`.
pub(crate) fn load(kernel: &'static str, path: &Path, symbol: &str) -> Result<(Library, CpuEntry)> {
    let load_err = |message: String| Error::Load {
        kernel,
        path: path.to_path_buf(),
        message,
    };
    // SAFETY: the library is generated C with no initialisers of its own; loading it runs
    // only the C runtime's trivial setup.
    let lib = unsafe { Library::new(path) }.map_err(|e| load_err(e.to_string()))?;
    // SAFETY: the generated code defines `symbol` with exactly the `CpuEntry` signature
    // (see the ABI in `spec`); the pointer is only called while `lib` is alive, which the
    // caller guarantees by storing them together.
    let entry = unsafe {
        lib.get::<CpuEntry>(symbol.as_bytes())
            .map(|s| *s)
            .map_err(|e| load_err(format!("symbol {symbol}: {e}")))?
    };
    Ok((lib, entry))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("-O3"), "-O3");
        assert_eq!(shell_quote("/a b/c.c"), "'/a b/c.c'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn compile_error_carries_command_and_stderr() -> Result<()> {
        let mut staging = Staging::temp()?;
        staging.write(SOURCE_FILE, b"int broken( {\n")?;
        let err = compile(None, "bad", &mut staging);
        match err {
            Err(Error::Cc {
                command,
                stderr,
                source,
                ..
            }) => {
                assert!(command.contains("-O3 -std=c11 -shared -fPIC -fno-strict-aliasing"));
                assert!(command.ends_with("kernel.c -lm"), "{command}");
                assert!(!stderr.trim().is_empty());
                assert!(source.ends_with(SOURCE_FILE));
            }
            other => panic!("expected a compiler error, got {other:?}"),
        }
        let err = compile(Some("/nonexistent/tile-cc"), "bad", &mut staging);
        match err {
            Err(e @ Error::Cc { .. }) => assert!(e.to_string().contains("cannot run")),
            other => panic!("expected a compiler error, got {other:?}"),
        }
        Ok(())
    }
}
