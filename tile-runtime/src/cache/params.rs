//! `params.json` of a kernel entry: the launcher's view of the kernel it holds
//! (parameters, dims, grid, target, key and entry point).
//!
//! A launch requires the file to be exactly what [`params_json`] writes for its own
//! spec, so an entry never serves another kernel; `tile cache show` reads the kernel's
//! name, target and arch back with [`Summary`].

use serde::{Deserialize, Serialize};

use super::manifest::{to_text, FORMAT};
use crate::host::grid_text;
use crate::spec::{DimSpec, KernelSpec};
use tile_abi::Target;

#[derive(Serialize)]
struct Params<'a> {
    format: u32,
    kernel: &'a str,
    target: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arch: Option<&'a str>,
    key: &'a str,
    entry: &'a str,
    threads: u32,
    shared_bytes: u32,
    dims: &'a [&'a str],
    grid: Vec<String>,
    params: Vec<Param<'a>>,
}

#[derive(Serialize)]
struct Param<'a> {
    name: &'a str,
    dtype: &'a str,
    shape: Vec<Dim<'a>>,
    output: bool,
    align: u32,
}

/// A static dim as its extent, a dynamic one by name.
#[derive(Serialize)]
#[serde(untagged)]
enum Dim<'a> {
    Static(i64),
    Dyn(&'a str),
}

/// `params.json` of a kernel entry: the launcher's view of the kernel. A reader requires
/// it to be exactly this, so an entry never serves another kernel.
pub fn params_json(spec: &KernelSpec, target: Target, arch: Option<&str>) -> String {
    let cuda = spec.cuda_for(arch.unwrap_or(""));
    let (key, entry) = match target {
        Target::Cpu => (spec.cpu.key, spec.cpu.symbol),
        Target::Cuda => (cuda.key, cuda.entry),
    };
    let dim_name = |n: u32| spec.dims.get(n as usize).copied().unwrap_or("?");
    let params = spec
        .params
        .iter()
        .map(|p| Param {
            name: p.name,
            dtype: p.dtype.name(),
            shape: p
                .shape
                .iter()
                .map(|d| match *d {
                    DimSpec::Static(v) => Dim::Static(v),
                    DimSpec::Dyn(n) => Dim::Dyn(dim_name(n)),
                })
                .collect(),
            output: p.output,
            align: p.align,
        })
        .collect();
    to_text(&Params {
        format: FORMAT,
        kernel: spec.name,
        target: target.name(),
        arch,
        key,
        entry,
        threads: spec.threads,
        shared_bytes: cuda.shared_bytes,
        dims: spec.dims,
        grid: spec.grid.iter().map(|g| grid_text(g, spec.dims)).collect(),
        params,
    })
}

/// What inspection reads back from a `params.json` (any format, fields optional).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Summary {
    #[serde(default)]
    pub kernel: Option<String>,
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub arch: Option<String>,
}

impl Summary {
    /// The summary of `text`; empty when it is not a JSON object.
    pub fn of(text: &str) -> Summary {
        serde_json::from_str(text).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_reads_what_params_json_writes() {
        let text = "{\"kernel\": \"k\", \"target\": \"cuda\", \"arch\": \"sm_90a\", \"x\": [1]}";
        let s = Summary::of(text);
        assert_eq!(s.kernel.as_deref(), Some("k"));
        assert_eq!(s.target.as_deref(), Some("cuda"));
        assert_eq!(s.arch.as_deref(), Some("sm_90a"));
        assert!(Summary::of("not json").kernel.is_none());
        // Strings are escaped, not pasted.
        let escaped = to_text(&Dim::Dyn("a\"b"));
        assert_eq!(escaped, "\"a\\\"b\"\n");
    }
}
