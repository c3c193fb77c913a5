//! What the launch tests (CPU and GPU) share: vecadd's parameter table, temporary
//! cache roots, and a vecadd case with its expected result.

use std::path::PathBuf;

use super::launch_with;
use crate::arg::ArgRef;
use crate::config::Config;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::slot::KernelSlot;
use crate::spec::{DimSpec, KernelSpec, ParamSpec};
use crate::stream::Stream;
use crate::tensor::Tensor;
use crate::testing::{assert_allclose, random_vec};

const N: DimSpec = DimSpec::Dyn(0);

const fn f32_param(name: &'static str, output: bool, align: u32) -> ParamSpec {
    ParamSpec {
        name,
        dtype: DType::F32,
        shape: &[N],
        output,
        align,
    }
}

/// vecadd's parameters over f32[N]: `a` and `b` read, `c` written, each with data
/// pointers aligned to `align` bytes.
pub(super) const fn vecadd_params(align: u32) -> [ParamSpec; 3] {
    [
        f32_param("a", false, align),
        f32_param("b", false, align),
        f32_param("c", true, align),
    ]
}

/// A fresh folder for a test's disk cache.
pub(super) fn temp_root(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tile-launch-test-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// The tensors of one vecadd launch (`c = a + b`) and the expected `c`.
pub(super) struct Case {
    pub a: Tensor<f32>,
    pub b: Tensor<f32>,
    pub c: Tensor<f32>,
    pub expected: Vec<f64>,
}

/// Random inputs of `n` elements from `seed` on `dev`; `c` is `Tensor::empty` (zero on
/// the host, uninitialised on a GPU).
pub(super) fn case(n: usize, seed: u64, dev: Device) -> Result<Case> {
    let a = random_vec::<f32>(n, seed, -1.0, 1.0);
    let b = random_vec::<f32>(n, seed + 1, -1.0, 1.0);
    let expected = a.iter().zip(&b).map(|(x, y)| f64::from(x + y)).collect();
    Ok(Case {
        a: Tensor::from_vec(a, &[n], dev)?,
        b: Tensor::from_vec(b, &[n], dev)?,
        c: Tensor::empty(&[n], dev)?,
        expected,
    })
}

/// Panics unless `c` is exactly the expected sum.
pub(super) fn assert_result(k: &Case) -> Result<()> {
    if let Err(e) = assert_allclose(&k.c.to_vec()?, &k.expected, 0.0, 0.0) {
        panic!("{e}");
    }
    Ok(())
}

/// `out = x + y` with vecadd `spec`, through the general path.
pub(super) fn add_with(
    cfg: &Config,
    spec: &'static KernelSpec,
    slot: &KernelSlot,
    stream: Option<&Stream>,
    x: &Tensor<f32>,
    y: &Tensor<f32>,
    out: &mut Tensor<f32>,
) -> Result<()> {
    let args = [ArgRef::input(x), ArgRef::input(y), ArgRef::output(out)];
    launch_with(cfg, spec, slot, stream, &args)
}
