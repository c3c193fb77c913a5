//! Runtime settings taken from the environment.
//!
//! Invariant: this is the only place that reads the `TILE_*` launch settings, and it
//! reads them once per process (the first launch), so the launch fast path never touches
//! the environment. Everything below the launcher takes a `&Config`, which lets tests
//! pass their own cache folder instead of mutating process-wide variables.
//! (`TILE_DEVICE` is read by [`Device::from_env`](crate::Device::from_env), which is not
//! on the launch path.)

use std::path::PathBuf;
use std::sync::OnceLock;

#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// `TILE_CACHE_DIR`, else `$HOME/.cache/tile`.
    pub cache_root: PathBuf,
    /// `TILE_DISABLE_CACHE=1`: compile into a fresh temporary folder, never publish.
    pub disable_cache: bool,
    /// `TILE_NO_AOT=1`: ignore artifacts linked or embedded at build time.
    pub no_aot: bool,
    /// `TILE_JIT_DIAGNOSTICS=1`: one stderr line per phase.
    pub diagnostics: bool,
    /// `TILE_NUM_THREADS`: CPU worker threads (default: available parallelism).
    pub num_threads: Option<usize>,
    /// `CC`: the C compiler command (may carry leading arguments, e.g. `ccache cc`).
    pub cc: Option<String>,
    /// `TILE_AUTOTUNE=1`: a launch of a kernel with variants and no choice for its
    /// shapes tunes them (otherwise only `kernel::tune()` does).
    pub autotune: bool,
    /// `TILE_AUTOTUNE_BUCKET=pow2`: tuned choices are shared by the shapes whose dims
    /// round up to the same powers of two (default: exact dims).
    pub autotune_pow2: bool,
}

impl Config {
    /// The process-wide settings, read from the environment on first use.
    pub fn get() -> &'static Config {
        static CONFIG: OnceLock<Config> = OnceLock::new();
        CONFIG.get_or_init(|| Config::from_lookup(|k| std::env::var(k).ok()))
    }

    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Config {
        let cache_root = match var("TILE_CACHE_DIR").filter(|s| !s.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => match var("HOME").filter(|s| !s.is_empty()) {
                Some(home) => PathBuf::from(home).join(".cache").join("tile"),
                None => std::env::temp_dir().join("tile-cache"),
            },
        };
        Config {
            cache_root,
            disable_cache: flag(var("TILE_DISABLE_CACHE")),
            no_aot: flag(var("TILE_NO_AOT")),
            diagnostics: flag(var("TILE_JIT_DIAGNOSTICS")),
            num_threads: var("TILE_NUM_THREADS")
                .and_then(|s| s.trim().parse::<usize>().ok())
                .filter(|&n| n > 0),
            cc: var("CC").filter(|s| !s.trim().is_empty()),
            autotune: flag(var("TILE_AUTOTUNE")),
            autotune_pow2: var("TILE_AUTOTUNE_BUCKET").is_some_and(|v| v.trim() == "pow2"),
        }
    }

    /// Settings for tests: a private cache root, everything else default.
    #[cfg(test)]
    pub fn for_test(cache_root: PathBuf) -> Config {
        Config {
            cache_root,
            disable_cache: false,
            no_aot: false,
            diagnostics: false,
            num_threads: None,
            cc: None,
            autotune: false,
            autotune_pow2: false,
        }
    }
}

pub(crate) fn flag(value: Option<String>) -> bool {
    matches!(
        value.as_deref().map(str::trim),
        Some("1" | "true" | "TRUE" | "True" | "yes" | "on" | "ON")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_settings() {
        let c = Config::from_lookup(|k| match k {
            "TILE_CACHE_DIR" => Some("/x/cache".into()),
            "TILE_DISABLE_CACHE" => Some("1".into()),
            "TILE_NUM_THREADS" => Some("3".into()),
            _ => None,
        });
        assert_eq!(c.cache_root, PathBuf::from("/x/cache"));
        assert!(c.disable_cache && !c.no_aot && !c.diagnostics);
        assert_eq!(c.num_threads, Some(3));
        let c = Config::from_lookup(|k| (k == "HOME").then(|| "/home/u".to_string()));
        assert_eq!(c.cache_root, PathBuf::from("/home/u/.cache/tile"));
        assert!(!flag(Some("0".into())));
    }
}
