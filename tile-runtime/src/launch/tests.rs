//! End-to-end tests of the launch path on the CPU backend, with hand-written C that
//! follows the ABI in `spec`.

use std::sync::atomic::Ordering;

use super::support::{add_with, assert_result, case, temp_root, vecadd_params, Case};
use super::*;
use crate::dtype::DType;
use crate::find::entry_key;
use crate::loaded::Origin;
use crate::spec::{CpuKernel, CudaKernel, DimSpec, GridExpr, ParamSpec};
use crate::tensor::Tensor;
use crate::testing::{assert_allclose, random_vec};

const BLOCK: usize = 256;

/// vecadd over blocks of 256 elements with a bounds check for the last block.
const VECADD_C: &str = r#"#include <stdint.h>

void tile_test_vecadd(void *const *bufs, const int64_t *dims, const int64_t *grid,
                      int64_t begin, int64_t end) {
    const float *a = (const float *)bufs[0];
    const float *b = (const float *)bufs[1];
    float *c = (float *)bufs[2];
    const int64_t n = dims[0];
    for (int64_t l = begin; l < end; ++l) {
        const int64_t bx = l % grid[0];
        for (int64_t i = 0; i < 256; ++i) {
            const int64_t idx = bx * 256 + i;
            if (idx < n) {
                c[idx] = a[idx] + b[idx];
            }
        }
    }
}
"#;

static N_DIM: GridExpr = GridExpr::Dim(0);
static BLOCK_N: GridExpr = GridExpr::Const(BLOCK as i64);
static BLOCKS: GridExpr = GridExpr::CeilDiv(&N_DIM, &BLOCK_N);
static ONE: GridExpr = GridExpr::Const(1);
static ZERO: GridExpr = GridExpr::Const(0);
static BAD_DIV: GridExpr = GridExpr::Div(&N_DIM, &ZERO);

static PARAMS: [ParamSpec; 3] = vecadd_params(16);

const fn vecadd_spec(
    key: &'static str,
    source: &'static str,
    aot: Option<CpuEntry>,
    grid_x: &'static GridExpr,
) -> KernelSpec {
    KernelSpec {
        name: "vecadd",
        params: &PARAMS,
        scalars: &[],
        dims: &["N"],
        grid: [grid_x, &ONE, &ONE],
        threads: 256,
        ir: "vecadd(a: f32[N], b: f32[N], c: mut f32[N])",
        cpu: CpuKernel {
            key,
            symbol: "tile_test_vecadd",
            source,
            aot,
        },
        cuda: CudaKernel {
            key,
            entry: "tile_test_vecadd",
            source: "",
            cubins: &[],
            shared_bytes: 0,
        },
        cuda_sm90a: None,
    }
}

pub(super) static VECADD: KernelSpec = vecadd_spec(
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    VECADD_C,
    None,
    &BLOCKS,
);

fn run(cfg: &Config, spec: &'static KernelSpec, slot: &KernelSlot, k: &mut Case) -> Result<()> {
    run_on(cfg, spec, slot, None, k)
}

fn run_on(
    cfg: &Config,
    spec: &'static KernelSpec,
    slot: &KernelSlot,
    stream: Option<&Stream>,
    k: &mut Case,
) -> Result<()> {
    add_with(cfg, spec, slot, stream, &k.a, &k.b, &mut k.c)
}

#[test]
fn c_jit_end_to_end_with_disk_cache() -> Result<()> {
    let root = temp_root("e2e");
    let cfg = Config::for_test(root.clone());
    let n = 1000; // not a multiple of the block
    assert_ne!(n % BLOCK, 0);

    // Cold: compiled and published.
    let slot = KernelSlot::new();
    let mut k = case(n, 1, Device::Cpu)?;
    run(&cfg, &VECADD, &slot, &mut k)?;
    assert_result(&k)?;
    let entry = match slot.origin(Device::Cpu) {
        Some(Origin::Compiled(dir)) => dir.clone(),
        other => panic!("expected a fresh compile, got {other:?}"),
    };
    assert!(entry.starts_with(&root));
    let key = entry_key(Target::Cpu, VECADD.cpu.key, None);
    assert!(entry.ends_with(format!("kernels/{key}")));
    for f in ["kernel.c", "kernel.so", "params.json", "manifest.json"] {
        assert!(entry.join(f).is_file(), "{f} missing");
    }
    assert_eq!(
        std::fs::read_to_string(entry.join("kernel.c"))
            .ok()
            .as_deref(),
        Some(VECADD_C)
    );

    // Warm: the slot answers, nothing is looked up again.
    let mut k = case(n, 2, Device::Cpu)?;
    run(&cfg, &VECADD, &slot, &mut k)?;
    assert_result(&k)?;
    assert_eq!(slot.finds.load(Ordering::Relaxed), 1);

    // A fresh slot (a new process, in effect) loads from disk without compiling.
    let slot2 = KernelSlot::new();
    let mut k = case(n, 3, Device::Cpu)?;
    run(&cfg, &VECADD, &slot2, &mut k)?;
    assert_result(&k)?;
    assert_eq!(
        slot2.origin(Device::Cpu),
        Some(&Origin::DiskCache(entry.clone()))
    );

    // A damaged library (same size, one byte flipped) is caught by the manifest, removed
    // and rebuilt. Replaced by rename, as the loaded copy must not change under us.
    let so = entry.join("kernel.so");
    let mut bytes = std::fs::read(&so).map_err(|e| Error::cache(&so, e))?;
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    let tmp = root.join("damaged.so");
    std::fs::write(&tmp, &bytes).map_err(|e| Error::cache(&tmp, e))?;
    std::fs::rename(&tmp, &so).map_err(|e| Error::cache(&so, e))?;
    let slot3 = KernelSlot::new();
    let mut k = case(n, 4, Device::Cpu)?;
    run(&cfg, &VECADD, &slot3, &mut k)?;
    assert_result(&k)?;
    assert_eq!(
        slot3.origin(Device::Cpu),
        Some(&Origin::Compiled(entry.clone()))
    );
    let rebuilt = std::fs::read(&so).map_err(|e| Error::cache(&so, e))?;
    assert_ne!(rebuilt, bytes);

    // Nothing is left in staging.
    let staging = entry
        .parent()
        .and_then(|p| p.parent())
        .map(|ns| ns.join(".staging"));
    let leftover = staging
        .and_then(|s| std::fs::read_dir(s).ok())
        .map_or(0, |d| d.count());
    assert_eq!(leftover, 0);
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}

#[test]
fn disabled_cache_builds_in_a_temporary_folder() -> Result<()> {
    let root = temp_root("nocache");
    let mut cfg = Config::for_test(root.clone());
    cfg.disable_cache = true;
    let slot = KernelSlot::new();
    let mut k = case(777, 5, Device::Cpu)?;
    run(&cfg, &VECADD, &slot, &mut k)?;
    assert_result(&k)?;
    match slot.origin(Device::Cpu) {
        Some(Origin::Compiled(dir)) => {
            assert!(!dir.starts_with(&root));
            assert!(
                !dir.exists(),
                "the temporary build folder is removed after loading"
            );
        }
        other => panic!("expected a compile, got {other:?}"),
    }
    assert!(!root.join(env!("CARGO_PKG_VERSION")).exists());
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}

unsafe extern "C" fn rust_vecadd(
    bufs: *const *mut c_void,
    dims: *const i64,
    grid: *const i64,
    begin: i64,
    end: i64,
) {
    // SAFETY: called through the checked launch path with the vecadd ABI.
    unsafe {
        let (a, b, c) = (
            *bufs as *const f32,
            *bufs.add(1) as *const f32,
            *bufs.add(2) as *mut f32,
        );
        let n = *dims;
        for l in begin..end {
            let bx = l % *grid;
            for i in 0..BLOCK as i64 {
                let idx = bx * BLOCK as i64 + i;
                if idx < n {
                    *c.add(idx as usize) = *a.add(idx as usize) + *b.add(idx as usize);
                }
            }
        }
    }
}

static VECADD_AOT: KernelSpec = vecadd_spec(
    "aaaa456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    VECADD_C,
    Some(rust_vecadd),
    &BLOCKS,
);

#[test]
fn aot_entry_is_used_unless_disabled() -> Result<()> {
    let root = temp_root("aot");
    let mut cfg = Config::for_test(root.clone());
    let slot = KernelSlot::new();
    let mut k = case(513, 6, Device::Cpu)?;
    run(&cfg, &VECADD_AOT, &slot, &mut k)?;
    assert_result(&k)?;
    assert_eq!(slot.origin(Device::Cpu), Some(&Origin::Aot));
    assert!(!root
        .join(env!("CARGO_PKG_VERSION"))
        .join("kernels")
        .exists());

    cfg.no_aot = true;
    cfg.diagnostics = true; // exercises the phase lines (shown with --nocapture)
    let slot = KernelSlot::new();
    let mut k = case(513, 7, Device::Cpu)?;
    run(&cfg, &VECADD_AOT, &slot, &mut k)?;
    assert_result(&k)?;
    assert!(matches!(
        slot.origin(Device::Cpu),
        Some(Origin::Compiled(_))
    ));
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}

#[test]
fn empty_grid_launches_nothing() -> Result<()> {
    let cfg = Config::for_test(temp_root("empty"));
    let slot = KernelSlot::new();
    let mut k = case(0, 8, Device::Cpu)?;
    run(&cfg, &VECADD, &slot, &mut k)?;
    assert_eq!(slot.origin(Device::Cpu), None);
    assert_eq!(slot.finds.load(Ordering::Relaxed), 0);
    let _ = std::fs::remove_dir_all(&cfg.cache_root);
    Ok(())
}

#[test]
fn grid_errors() -> Result<()> {
    static DIV0: KernelSpec = vecadd_spec(
        "bbbb456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        VECADD_C,
        None,
        &BAD_DIV,
    );
    let cfg = Config::for_test(temp_root("grid"));
    let slot = KernelSlot::new();
    let mut k = case(10, 9, Device::Cpu)?;
    let err = run(&cfg, &DIV0, &slot, &mut k).err();
    assert!(matches!(err, Some(Error::Grid { axis: 0, .. })), "{err:?}");
    let msg = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        msg.starts_with("kernel vecadd: grid x: cannot evaluate"),
        "{msg}"
    );
    assert_eq!(slot.finds.load(Ordering::Relaxed), 0);
    Ok(())
}

#[test]
fn failed_check_writes_nothing() -> Result<()> {
    let cfg = Config::for_test(temp_root("check"));
    let slot = KernelSlot::new();
    let mut k = case(300, 10, Device::Cpu)?;
    k.b = Tensor::zeros(&[299], Device::Cpu)?;
    let err = run(&cfg, &VECADD, &slot, &mut k)
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("kernel vecadd input b shape mismatch: dim 0 expected 300 (N bound by a), got 299")
    );
    assert!(k.c.to_vec()?.iter().all(|&x| x == 0.0));
    assert_eq!(slot.origin(Device::Cpu), None);
    Ok(())
}

#[test]
fn compile_error_keeps_the_source() -> Result<()> {
    static BROKEN: KernelSpec = vecadd_spec(
        "cccc456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "this is not C;\n",
        None,
        &BLOCKS,
    );
    let root = temp_root("broken");
    let cfg = Config::for_test(root.clone());
    let slot = KernelSlot::new();
    let mut k = case(10, 11, Device::Cpu)?;
    match run(&cfg, &BROKEN, &slot, &mut k) {
        Err(Error::Cc {
            source, command, ..
        }) => {
            assert!(source.is_file(), "source kept at {}", source.display());
            assert!(command.contains(" -o "));
        }
        other => panic!("expected a C compiler error, got {other:?}"),
    }
    assert!(!root
        .join(env!("CARGO_PKG_VERSION"))
        .join(format!(
            "{}-{}",
            std::env::consts::OS,
            std::env::consts::ARCH
        ))
        .join("kernels")
        .join(entry_key(Target::Cpu, BROKEN.cpu.key, None))
        .exists());
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}

#[test]
fn aliased_input_and_output_do_not_deadlock() -> Result<()> {
    // c = c + b, with `a` a view of c's storage: one exclusive lock covers both.
    let cfg = Config::for_test(temp_root("alias"));
    let slot = KernelSlot::new();
    let n = 600;
    let init = random_vec::<f32>(n, 12, -1.0, 1.0);
    let bv = random_vec::<f32>(n, 13, -1.0, 1.0);
    let mut c = Tensor::from_slice(&init, &[n], Device::Cpu)?;
    let a = c.slice(0, 0..n)?;
    let b = Tensor::from_slice(&bv, &[n], Device::Cpu)?;
    let mut no_aot = cfg.clone();
    no_aot.no_aot = false;
    launch_with(
        &no_aot,
        &VECADD_AOT,
        &slot,
        Some(&Stream::Cpu),
        &[ArgRef::input(&a), ArgRef::input(&b), ArgRef::output(&mut c)],
    )?;
    let expected: Vec<f64> = init
        .iter()
        .zip(&bv)
        .map(|(x, y)| f64::from(x + y))
        .collect();
    if let Err(e) = assert_allclose(&c.to_vec()?, &expected, 0.0, 0.0) {
        panic!("{e}");
    }
    Ok(())
}

#[test]
fn public_launch_and_sources() {
    assert_eq!(kernel_source(&VECADD, Target::Cpu), VECADD_C);
    assert_eq!(kernel_source(&VECADD, Target::Cuda), "");
    assert_eq!(Target::of(Device::Cuda(1)), Target::Cuda);
    assert_eq!(Target::Cpu.to_string(), "cpu");
    // The generated launcher's shape: a static slot and `launch`.
    static SLOT: KernelSlot = KernelSlot::new();
    let a = Tensor::<f32>::zeros(&[4], Device::Cpu).unwrap();
    let b = Tensor::<f32>::zeros(&[4], Device::Cpu).unwrap();
    let err = launch(
        &VECADD,
        &SLOT,
        None,
        &[ArgRef::input(&a), ArgRef::input(&b)],
    )
    .err();
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some("kernel vecadd: num_args should be 3, got 2")
    );
}

#[test]
fn wrong_arguments_return_their_error_and_write_nothing() -> Result<()> {
    let cfg = Config::for_test(temp_root("wrong"));
    let slot = KernelSlot::new();
    let n = 64;
    let a = Tensor::from_vec(random_vec::<f32>(n, 20, -1.0, 1.0), &[n], Device::Cpu)?;
    let b = Tensor::from_vec(random_vec::<f32>(n, 21, -1.0, 1.0), &[n], Device::Cpu)?;
    let poison = vec![f32::NAN; n];
    let mut c = Tensor::from_slice(&poison, &[n], Device::Cpu)?;
    let untouched =
        |c: &Tensor<f32>| -> Result<bool> { Ok(c.to_vec()?.iter().all(|x| x.is_nan())) };
    let a16 = Tensor::<half::f16>::zeros(&[n], Device::Cpu)?;
    let a2 = Tensor::<f32>::zeros(&[n, 1], Device::Cpu)?;
    let short = Tensor::<f32>::zeros(&[n - 1], Device::Cpu)?;
    let wide = Tensor::<f32>::zeros(&[2 * n], Device::Cpu)?;
    let shifted_base = Tensor::<f32>::zeros(&[n + 1], Device::Cpu)?;
    let shifted = shifted_base.slice(0, 1..n + 1)?;

    let cases: Vec<(&str, Vec<ArgRef<'_>>)> = vec![
        ("count", vec![ArgRef::input(&a), ArgRef::input(&b)]),
        (
            "dtype",
            vec![ArgRef::input(&a16), ArgRef::input(&b), ArgRef::input(&c)],
        ),
        (
            "ndim",
            vec![ArgRef::input(&a2), ArgRef::input(&b), ArgRef::input(&c)],
        ),
        (
            "shape",
            vec![ArgRef::input(&a), ArgRef::input(&short), ArgRef::input(&c)],
        ),
        (
            "misaligned",
            vec![
                ArgRef::input(&shifted),
                ArgRef::input(&b),
                ArgRef::input(&c),
            ],
        ),
        ("device", {
            let mut other = ArgRef::input(&b);
            other.device = Device::Cuda(0);
            vec![ArgRef::input(&a), other, ArgRef::input(&c)]
        }),
    ];
    for (what, mut args) in cases {
        // The output is the one argument written: mark it so.
        if let Some(last) = args.get_mut(2) {
            last.output = true;
        }
        let err = launch_with(&cfg, &VECADD, &slot, None, &args).err();
        let ok = matches!(
            (what, &err),
            (
                "count",
                Some(Error::NumArgs {
                    expected: 3,
                    got: 2,
                    ..
                }),
            ) | ("dtype", Some(Error::DtypeMismatch { buffer: "a", .. }))
                | ("ndim", Some(Error::NdimMismatch { buffer: "a", .. }))
                | ("shape", Some(Error::ShapeMismatch { buffer: "b", .. }))
                | (
                    "misaligned",
                    Some(Error::Misaligned {
                        buffer: "a",
                        align: 16,
                        ..
                    }),
                )
                | ("device", Some(Error::DeviceMismatch { buffer: "b", .. }))
        );
        assert!(ok, "{what}: {err:?}");
        assert!(untouched(&c)?, "{what}: the output was written");
    }
    // Strides: every other element of `wide` as `a`.
    let mut every_other = ArgRef::input(&wide);
    let (half_shape, stride2) = ([n], [2isize]);
    every_other.shape = &half_shape;
    every_other.strides = &stride2;
    let err = launch_with(
        &cfg,
        &VECADD,
        &slot,
        None,
        &[every_other, ArgRef::input(&b), ArgRef::output(&mut c)],
    )
    .err();
    assert!(
        matches!(
            err,
            Some(Error::StrideMismatch {
                buffer: "a",
                dim: 0,
                expected: 1,
                got: 2,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(untouched(&c)?);
    // Nothing was looked up, compiled or loaded for any of them.
    assert_eq!(slot.finds.load(Ordering::Relaxed), 0);
    assert!(!cfg.cache_root.join(env!("CARGO_PKG_VERSION")).exists());
    Ok(())
}

#[test]
fn cpu_graph_records_then_replays() -> Result<()> {
    static SLOT: KernelSlot = KernelSlot::new();
    let cfg = Config::for_test(temp_root("graph"));
    let n = 700;
    let mut k = case(n, 30, Device::Cpu)?;
    let mut d = Tensor::<f32>::zeros(&[n], Device::Cpu)?;
    let g = crate::graph::Graph::capture(&Stream::Cpu, |s| {
        run_on(&cfg, &VECADD_AOT, &SLOT, Some(s), &mut k)?;
        // No stream: the default (CPU) stream is the capture's.
        add_with(&cfg, &VECADD_AOT, &SLOT, None, &k.c, &k.c, &mut d)
    })?;
    assert_eq!((g.launches(), g.buffers()), (2, 4));
    assert!(
        k.c.to_vec()?.iter().all(|&x| x == 0.0),
        "capture ran a launch"
    );
    let expected = k.expected.clone();
    let (c_view, d_view) = (k.c.clone(), d.clone());
    drop(k);
    drop(d);
    g.replay()?;
    if let Err(e) = assert_allclose(&c_view.to_vec()?, &expected, 0.0, 0.0) {
        panic!("{e}");
    }
    let twice: Vec<f64> = expected.iter().map(|x| 2.0 * x).collect();
    if let Err(e) = assert_allclose(&d_view.to_vec()?, &twice, 0.0, 0.0) {
        panic!("{e}");
    }
    // Replays again (idempotent here).
    g.replay_on(&Stream::Cpu)?;
    assert_eq!(d_view.to_vec()?.len(), n);
    // The closure's error ends the capture; launches afterwards run normally.
    let mut bad = case(10, 31, Device::Cpu)?;
    bad.b = Tensor::zeros(&[9], Device::Cpu)?;
    let err = crate::graph::Graph::capture(&Stream::Cpu, |s| {
        run_on(&cfg, &VECADD_AOT, &SLOT, Some(s), &mut bad)
    })
    .err();
    assert!(matches!(err, Some(Error::ShapeMismatch { .. })), "{err:?}");
    let mut k = case(50, 32, Device::Cpu)?;
    run_on(&cfg, &VECADD_AOT, &SLOT, None, &mut k)?;
    assert_result(&k)?;
    Ok(())
}

#[test]
fn many_buffers_and_dims_take_the_heap_path() -> Result<()> {
    // 17 inputs and one output, each with its own dynamic dim: more than the inline
    // capacity of both buffers and dims.
    const INPUTS: usize = 17;
    let mut c = String::from(
        "#include <stdint.h>\nvoid tile_test_sum17(void *const *bufs, const int64_t *dims, \
         const int64_t *grid, int64_t begin, int64_t end) {\n  (void)grid;\n  \
         for (int64_t l = begin; l < end; ++l) {\n    float *out = (float *)bufs[17];\n    \
         for (int64_t i = 0; i < dims[17]; ++i) {\n      float acc = 0;\n",
    );
    for j in 0..INPUTS {
        c.push_str(&format!(
            "      acc += ((const float *)bufs[{j}])[i < dims[{j}] ? i : 0];\n"
        ));
    }
    c.push_str("      out[i] = acc;\n    }\n  }\n}\n");
    let names: Vec<&'static str> = (0..=INPUTS)
        .map(|j| &*Box::leak(format!("D{j}").into_boxed_str()))
        .collect();
    let params: Vec<ParamSpec> = (0..=INPUTS)
        .map(|j| ParamSpec {
            name: Box::leak(format!("x{j}").into_boxed_str()),
            dtype: DType::F32,
            shape: Box::leak(Box::new([DimSpec::Dyn(j as u32)])),
            output: j == INPUTS,
            align: 4,
        })
        .collect();
    let spec: &'static KernelSpec = Box::leak(Box::new(KernelSpec {
        name: "sum17",
        params: Box::leak(params.into_boxed_slice()),
        scalars: &[],
        dims: Box::leak(names.into_boxed_slice()),
        grid: [&ONE, &ONE, &ONE],
        threads: 1,
        ir: "sum17",
        cpu: CpuKernel {
            key: "ffff456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            symbol: "tile_test_sum17",
            source: Box::leak(c.into_boxed_str()),
            aot: None,
        },
        cuda: CudaKernel {
            key: "ffff",
            entry: "none",
            source: "",
            cubins: &[],
            shared_bytes: 0,
        },
        cuda_sm90a: None,
    }));
    let cfg = Config::for_test(temp_root("many"));
    let slot = KernelSlot::new();
    let n = 33;
    let inputs: Vec<Tensor<f32>> = (0..INPUTS)
        .map(|j| {
            Tensor::from_vec(
                random_vec::<f32>(n, 50 + j as u64, -1.0, 1.0),
                &[n],
                Device::Cpu,
            )
        })
        .collect::<Result<_>>()?;
    let mut out = Tensor::<f32>::zeros(&[n], Device::Cpu)?;
    let mut args: Vec<ArgRef<'_>> = inputs.iter().map(ArgRef::input).collect();
    args.push(ArgRef::output(&mut out));
    launch_with(&cfg, spec, &slot, None, &args)?;
    let host: Vec<Vec<f32>> = inputs.iter().map(|t| t.to_vec()).collect::<Result<_>>()?;
    let want: Vec<f64> = (0..n)
        .map(|i| f64::from(host.iter().fold(0.0f32, |acc, v| acc + v[i])))
        .collect();
    if let Err(e) = assert_allclose(&out.to_vec()?, &want, 0.0, 0.0) {
        panic!("{e}");
    }
    // Checks still name the right buffer past the inline capacity.
    let short = Tensor::<f32>::zeros(&[n + 1], Device::Cpu)?;
    let mut args: Vec<ArgRef<'_>> = inputs.iter().map(ArgRef::input).collect();
    args[16] = ArgRef::input(&short);
    args.push(ArgRef::output(&mut out));
    assert!(
        launch_with(&cfg, spec, &slot, None, &args).is_ok(),
        "own dims"
    );
    let _ = std::fs::remove_dir_all(&cfg.cache_root);
    Ok(())
}

#[test]
fn a_kernel_without_cpu_code_refuses_a_cpu_launch() -> Result<()> {
    static CUDA_ONLY: KernelSpec = vecadd_spec(
        "9999456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "",
        None,
        &BLOCKS,
    );
    let cfg = Config::for_test(temp_root("cudaonly"));
    let slot = KernelSlot::new();
    let mut k = case(100, 40, Device::Cpu)?;
    let err = run(&cfg, &CUDA_ONLY, &slot, &mut k).err();
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some("kernel vecadd has no cpu code (it is compiled for another target only)")
    );
    assert!(k.c.to_vec()?.iter().all(|&x| x == 0.0));
    assert!(!cfg.cache_root.join(env!("CARGO_PKG_VERSION")).exists());
    Ok(())
}
