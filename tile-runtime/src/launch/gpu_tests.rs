//! Launch-path tests that need a CUDA device. Each test returns early (and says so on
//! stderr) on a machine without one, so `cargo test` stays green everywhere.

use std::path::Path;
use std::sync::atomic::Ordering;

use super::support::{add_with, assert_result, case, temp_root, vecadd_params, Case};
use super::*;
use crate::find::entry_key;
use crate::graph::Graph;
use crate::loaded::Origin;
use crate::nvrtc;
use crate::spec::{CpuKernel, CudaKernel, GridExpr, ParamSpec};
use crate::tensor::Tensor;
use crate::testing::assert_allclose;

const VECADD_CU: &str = r#"#include <cuda_fp16.h>
#include <cuda_bf16.h>

extern "C" __global__ void tile_test_vecadd_cu(const float *__restrict__ a,
                                               const float *__restrict__ b,
                                               float *__restrict__ c, int n) {
    int i = blockIdx.x * 256 + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
"#;

static N_DIM: GridExpr = GridExpr::Dim(0);
static BLOCK_N: GridExpr = GridExpr::Const(256);
static BLOCKS: GridExpr = GridExpr::CeilDiv(&N_DIM, &BLOCK_N);
static ONE: GridExpr = GridExpr::Const(1);
static PARAMS: [ParamSpec; 3] = vecadd_params(4);

const fn spec(key: &'static str, cubins: &'static [(&'static str, &'static [u8])]) -> KernelSpec {
    KernelSpec {
        name: "vecadd",
        params: &PARAMS,
        scalars: &[],
        dims: &["N"],
        grid: [&BLOCKS, &ONE, &ONE],
        threads: 256,
        ir: "",
        cpu: CpuKernel {
            key,
            symbol: "none",
            source: "",
            aot: None,
        },
        cuda: CudaKernel {
            key,
            entry: "tile_test_vecadd_cu",
            source: VECADD_CU,
            cubins,
            shared_bytes: 0,
        },
        cuda_sm90a: None,
    }
}

pub(super) static VECADD_JIT: KernelSpec = spec(
    "dddd456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    &[],
);

fn gpu() -> Option<Device> {
    match Device::cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// Launches as a generated launcher does ([`launch`]): the warm path where it applies,
/// else the general path, here with the test's config.
fn launch_as_generated(
    cfg: &Config,
    spec: &'static KernelSpec,
    slot: &KernelSlot,
    stream: Option<&Stream>,
    args: &[ArgRef<'_>],
) -> Result<()> {
    match super::warm::try_cuda(spec, slot, stream, args, &[]) {
        Some(done) => done,
        None => launch_with(cfg, spec, slot, stream, args),
    }
}

/// `c = a + b` for case `k`, launched as a generated launcher does.
fn run(
    cfg: &Config,
    spec: &'static KernelSpec,
    slot: &KernelSlot,
    stream: Option<&Stream>,
    k: &mut Case,
) -> Result<()> {
    let args = [
        ArgRef::input(&k.a),
        ArgRef::input(&k.b),
        ArgRef::output(&mut k.c),
    ];
    launch_as_generated(cfg, spec, slot, stream, &args)
}

#[test]
fn gpu_tensors_round_trip() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let data: Vec<i32> = (0..12).collect();
    let t = Tensor::from_slice(&data, &[3, 4], dev)?;
    assert_eq!(t.device(), dev);
    assert_eq!(t.data_ptr() % 256, 0);
    assert_eq!(t.to_vec()?, data);
    assert_eq!(
        t.transpose(0, 1).to_vec()?,
        vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    );
    assert_eq!(t.slice(1, 1..3)?.to_vec()?, vec![1, 2, 5, 6, 9, 10]);
    let mut row = t.slice(0, 1..2)?;
    row.copy_from_slice(&[40, 50, 60, 70])?;
    assert_eq!(t.to_vec()?[4..8], [40, 50, 60, 70]);
    assert!(t.transpose(0, 1).copy_from_slice(&data).is_err());
    let host = t.to_device(Device::Cpu)?;
    assert_eq!(host.device(), Device::Cpu);
    assert_eq!(host.to_vec()?, t.to_vec()?);
    assert_eq!(Tensor::<f32>::zeros(&[5], dev)?.to_vec()?, vec![0.0; 5]);
    assert_eq!(
        Tensor::full(&[3], half::f16::from_f32(1.5), dev)?.to_vec()?,
        vec![half::f16::from_f32(1.5); 3]
    );
    assert_eq!(Tensor::<bool>::empty(&[7], dev)?.to_vec()?, vec![false; 7]);
    assert!(Tensor::<f32>::zeros(&[0], dev)?.to_vec()?.is_empty());
    assert_eq!(Device::from_setting(None)?, dev);
    assert_eq!(Device::parse("cuda")?, Device::Cuda(0));
    let count = Device::cuda_device_count();
    assert!(matches!(
        Device::cuda(count),
        Err(Error::NoSuchDevice { .. })
    ));
    Ok(())
}

#[test]
fn gpu_nvrtc_jit_with_disk_cache() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let root = temp_root("nvrtc");
    let cfg = Config::for_test(root.clone());
    let n = 100_003;

    let slot = KernelSlot::new();
    let mut k = case(n, 1, dev)?;
    let t = Instant::now();
    run(&cfg, &VECADD_JIT, &slot, None, &mut k)?;
    let cold = t.elapsed();
    assert_result(&k)?;
    let entry = match slot.origin(dev) {
        Some(Origin::Compiled(dir)) => dir.clone(),
        other => panic!("expected an NVRTC compile, got {other:?}"),
    };
    let arch = cuda::nvrtc_arch(cuda::device(0)?.cc);
    let key = entry_key(Target::Cuda, VECADD_JIT.cuda.key, Some(&arch));
    assert!(entry.ends_with(format!("kernels/{key}")));
    for f in ["kernel.cu", "kernel.cubin", "params.json", "manifest.json"] {
        assert!(entry.join(f).is_file(), "{f} missing");
    }
    let params = std::fs::read_to_string(entry.join("params.json")).unwrap_or_default();
    assert!(
        params.contains(&format!("\"arch\": \"{arch}\"")),
        "{params}"
    );

    // Warm launches: host cost per launch.
    let mut k = case(n, 2, dev)?;
    run(&cfg, &VECADD_JIT, &slot, None, &mut k)?;
    dev.synchronize()?;
    let reps = 2000;
    let t = Instant::now();
    for _ in 0..reps {
        run(&cfg, &VECADD_JIT, &slot, None, &mut k)?;
    }
    let per_launch = t.elapsed() / reps;
    dev.synchronize()?;
    assert_result(&k)?;
    assert_eq!(slot.finds.load(Ordering::Relaxed), 1);
    // The same launch through a bare cuLaunchKernel, for the overhead ratio.
    let func = &slot.cuda_loaded(0).map(|l| l.func.clone()).unwrap();
    let stream = &cuda::device(0)?.stream;
    let (mut pa, mut pb, mut pc, mut pn) = (
        k.a.data_ptr() as u64,
        k.b.data_ptr() as u64,
        k.c.data_ptr() as u64,
        n as i32,
    );
    let mut params: [*mut c_void; 4] = [
        (&mut pa as *mut u64).cast(),
        (&mut pb as *mut u64).cast(),
        (&mut pc as *mut u64).cast(),
        (&mut pn as *mut i32).cast(),
    ];
    let blocks = n.div_ceil(256) as u32;
    let t = Instant::now();
    for _ in 0..reps {
        // SAFETY: the vecadd ABI with live buffers of `n` floats; nothing else uses them.
        unsafe { cuda::launch(func, stream, [blocks, 1, 1], 256, 0, &mut params)? };
    }
    let raw = t.elapsed() / reps;
    dev.synchronize()?;
    eprintln!(
        "nvrtc cold launch {cold:?}; warm host cost per launch {per_launch:?} (bare cuLaunchKernel {raw:?})"
    );

    // Fresh slot: from disk, no NVRTC.
    let slot2 = KernelSlot::new();
    let mut k = case(n, 3, dev)?;
    let t = Instant::now();
    run(&cfg, &VECADD_JIT, &slot2, None, &mut k)?;
    eprintln!("disk-cache cold launch {:?}", t.elapsed());
    assert_result(&k)?;
    assert_eq!(slot2.origin(dev), Some(&Origin::DiskCache(entry.clone())));

    // Damaged cubin: the entry is removed and rebuilt around the device binary cache's
    // cubin (same source, arch and options: no NVRTC).
    let cubin = entry.join("kernel.cubin");
    let mut bytes = std::fs::read(&cubin).map_err(|e| Error::cache(&cubin, e))?;
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&cubin, &bytes).map_err(|e| Error::cache(&cubin, e))?;
    let slot3 = KernelSlot::new();
    let mut k = case(n, 4, dev)?;
    run(&cfg, &VECADD_JIT, &slot3, None, &mut k)?;
    assert_result(&k)?;
    match slot3.origin(dev) {
        Some(Origin::BinaryCache(dir)) => {
            assert!(dir.parent().is_some_and(|p| p.ends_with("cuda-binaries")))
        }
        other => panic!("expected the device binary cache, got {other:?}"),
    }
    assert_ne!(std::fs::read(&cubin).ok(), Some(bytes));

    // Cache disabled: NVRTC into a temporary folder, removed after loading.
    let mut nocache = cfg.clone();
    nocache.disable_cache = true;
    nocache.diagnostics = true;
    let slot4 = KernelSlot::new();
    let mut k = case(n, 5, dev)?;
    run(&nocache, &VECADD_JIT, &slot4, None, &mut k)?;
    assert_result(&k)?;
    match slot4.origin(dev) {
        Some(Origin::Compiled(dir)) => assert!(!dir.starts_with(&root) && !dir.exists()),
        other => panic!("expected a compile, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}

#[test]
fn gpu_embedded_cubin_is_preferred() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let state = cuda::device(0)?;
    let arch = cuda::nvrtc_arch(state.cc);
    let includes = nvrtc::include_dirs(nvrtc::include_candidates(|v| std::env::var(v).ok()))?;
    let cubin = nvrtc::compile(
        "vecadd",
        VECADD_CU,
        Path::new("kernel.cu"),
        &arch,
        &includes,
    )?;
    let arch: &'static str = Box::leak(arch.into_boxed_str());
    let cubin: &'static [u8] = Box::leak(cubin.into_boxed_slice());
    let cubins: &'static [(&'static str, &'static [u8])] = Box::leak(Box::new([(arch, cubin)]));
    let spec: &'static KernelSpec = Box::leak(Box::new(spec(
        "eeee456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        cubins,
    )));
    let root = temp_root("aot");
    let cfg = Config::for_test(root.clone());
    let slot = KernelSlot::new();
    let mut k = case(4097, 5, dev)?;
    run(&cfg, spec, &slot, None, &mut k)?;
    assert_result(&k)?;
    assert_eq!(slot.origin(dev), Some(&Origin::Aot));
    let ns = root.join(crate::cache::namespace_name());
    assert!(!ns.join("cuda-binaries").exists());
    assert!(!ns.join("kernels").exists());
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}

#[test]
fn gpu_streams_and_device_checks() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let cfg = Config::for_test(temp_root("streams"));
    let slot = KernelSlot::new();
    let n = 1 << 20;
    let stream = dev.new_stream()?;
    assert_eq!(stream.device(), dev);
    // Write on a side stream, read back on the default stream without an explicit sync:
    // the storages' stream ordering must place the copy after the kernel.
    for seed in 0..4 {
        let mut k = case(n, 10 + seed, dev)?;
        run(&cfg, &VECADD_JIT, &slot, Some(&stream), &mut k)?;
        assert_result(&k)?;
    }
    stream.synchronize()?;

    // Tensors on the GPU, stream on the CPU (and the reverse).
    let mut k = case(16, 20, dev)?;
    let err = run(&cfg, &VECADD_JIT, &slot, Some(&Stream::Cpu), &mut k).err();
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some(
            "kernel vecadd stream device mismatch, expected cuda:0 (the tensors' device), got cpu"
        )
    );
    let mut host = case(16, 21, Device::Cpu)?;
    let err = run(&cfg, &VECADD_JIT, &slot, Some(&stream), &mut host).err();
    assert!(
        matches!(err, Some(Error::StreamDeviceMismatch { .. })),
        "{err:?}"
    );

    // Mixed devices among the buffers.
    k.b = Tensor::from_vec(vec![0.0; 16], &[16], Device::Cpu)?;
    let err = run(&cfg, &VECADD_JIT, &slot, None, &mut k).err();
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some("kernel vecadd input b device mismatch, expected cuda:0, got cpu")
    );
    Ok(())
}

#[test]
fn gpu_nvrtc_error_reports_log_and_command() -> Result<()> {
    let Some(_dev) = gpu() else { return Ok(()) };
    let includes = nvrtc::include_dirs(nvrtc::include_candidates(|v| std::env::var(v).ok()))?;
    let err = nvrtc::compile(
        "broken",
        "extern \"C\" __global__ void k(int *p) { p[0] = undefined_name; }",
        Path::new("/tmp/broken.cu"),
        "sm_90a",
        &includes,
    );
    match err {
        Err(e @ Error::Nvrtc { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("undefined_name"), "{msg}");
            assert!(msg.contains("--gpu-architecture=sm_90a"), "{msg}");
            assert!(msg.contains("nvcc -cubin -arch=sm_90a"), "{msg}");
        }
        other => panic!("expected an NVRTC error, got {other:?}"),
    }
    Ok(())
}

#[test]
fn gpu_streams_order_dependent_launches() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let cfg = Config::for_test(temp_root("order"));
    let slot = KernelSlot::new();
    let n = 1 << 22;
    let (s1, s2) = (dev.new_stream()?, dev.new_stream()?);
    // c = a + b on s1, then d = c + c on s2, then e = d + a on the default stream: each
    // reads what the previous wrote on another stream, with no synchronisation between.
    for seed in 0..3 {
        let mut k = case(n, 30 + seed, dev)?;
        run(&cfg, &VECADD_JIT, &slot, Some(&s1), &mut k)?;
        let mut d = Tensor::<f32>::empty(&[n], dev)?;
        add_with(&cfg, &VECADD_JIT, &slot, Some(&s2), &k.c, &k.c, &mut d)?;
        let mut e = Tensor::<f32>::empty(&[n], dev)?;
        add_with(&cfg, &VECADD_JIT, &slot, None, &d, &k.a, &mut e)?;
        let a = k.a.to_vec()?;
        let want: Vec<f64> = k
            .expected
            .iter()
            .zip(&a)
            .map(|(c, a)| f64::from((*c as f32 + *c as f32) + a))
            .collect();
        if let Err(m) = assert_allclose(&e.to_vec()?, &want, 0.0, 0.0) {
            panic!("{m}");
        }
        // Dropping d right after its last use on the default stream: freed after it.
        drop(d);
    }
    Ok(())
}

#[test]
fn gpu_graph_capture_and_replay() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let cfg = Config::for_test(temp_root("graph"));
    static SLOT: KernelSlot = KernelSlot::new();
    let n = 100_003;
    let stream = dev.new_stream()?;
    let mut k = case(n, 40, dev)?;
    // Warm: the kernel is found before the capture.
    run(&cfg, &VECADD_JIT, &SLOT, Some(&stream), &mut k)?;
    let mut d = Tensor::<f32>::zeros(&[n], dev)?;
    let g = Graph::capture(&stream, |s| {
        run(&cfg, &VECADD_JIT, &SLOT, Some(s), &mut k)?;
        // No stream: the capture stream, from the capturing thread.
        add_with(&cfg, &VECADD_JIT, &SLOT, None, &k.c, &k.c, &mut d)
    })?;
    assert_eq!(g.launches(), 2);
    assert_eq!(g.buffers(), 4);
    assert_eq!(g.device(), dev);
    // Nothing ran while capturing.
    assert!(d.to_vec()?.iter().all(|&x| x == 0.0));
    let expected = k.expected.clone();
    let out = d.clone();
    // The graph keeps every buffer alive.
    drop(k);
    drop(d);
    g.replay()?;
    let twice: Vec<f64> = expected.iter().map(|c| 2.0 * (*c as f32) as f64).collect();
    if let Err(m) = assert_allclose(&out.to_vec()?, &twice, 0.0, 0.0) {
        panic!("{m}");
    }
    // Replays on another stream are ordered after the earlier ones.
    g.replay_on(&dev.default_stream()?)?;
    if let Err(m) = assert_allclose(&out.to_vec()?, &twice, 0.0, 0.0) {
        panic!("{m}");
    }
    assert!(matches!(
        g.replay_on(&Stream::Cpu),
        Err(Error::GraphDevice { .. })
    ));
    // A failed launch inside the closure ends the capture and returns the error.
    let a = Tensor::<f32>::zeros(&[8], dev)?;
    let mut c = Tensor::<f32>::zeros(&[9], dev)?;
    let err = Graph::capture(&stream, |s| {
        launch_with(
            &cfg,
            &VECADD_JIT,
            &SLOT,
            Some(s),
            &[ArgRef::input(&a), ArgRef::input(&a), ArgRef::output(&mut c)],
        )
    })
    .err();
    assert!(matches!(err, Some(Error::ShapeMismatch { .. })), "{err:?}");
    // The stream is usable afterwards.
    let mut k = case(1000, 41, dev)?;
    run(&cfg, &VECADD_JIT, &SLOT, Some(&stream), &mut k)?;
    assert_result(&k)?;
    Ok(())
}

#[test]
fn gpu_warm_path_taken_only_where_it_applies() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let cfg = Config::for_test(temp_root("warm"));
    let slot = KernelSlot::new();
    let n = 1000;
    let mut k = case(n, 50, dev)?;
    let try_warm = |k: &mut Case, slot: &KernelSlot, stream: Option<&Stream>| {
        let args = [
            ArgRef::input(&k.a),
            ArgRef::input(&k.b),
            ArgRef::output(&mut k.c),
        ];
        super::warm::try_cuda(&VECADD_JIT, slot, stream, &args, &[])
    };
    // Cold slot: declined; the general path finds the kernel.
    assert!(try_warm(&mut k, &slot, None).is_none());
    run(&cfg, &VECADD_JIT, &slot, None, &mut k)?;
    assert_result(&k)?;
    // Warm: taken, on the default stream and on an explicit one.
    let mut k = case(n, 51, dev)?;
    assert!(matches!(try_warm(&mut k, &slot, None), Some(Ok(()))));
    assert_result(&k)?;
    let stream = dev.new_stream()?;
    let mut k = case(n, 52, dev)?;
    assert!(matches!(
        try_warm(&mut k, &slot, Some(&stream)),
        Some(Ok(()))
    ));
    stream.synchronize()?;
    assert_result(&k)?;
    // A wrong argument, an empty grid, a CPU stream: declined untouched, and the
    // general path reports the error (or skips the empty launch) as before.
    let mut short = case(n, 53, dev)?;
    short.c = Tensor::zeros(&[n - 1], dev)?;
    assert!(try_warm(&mut short, &slot, None).is_none());
    assert!(matches!(
        run(&cfg, &VECADD_JIT, &slot, None, &mut short),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(short.c.to_vec()?.iter().all(|&x| x == 0.0));
    let mut empty = case(0, 54, dev)?;
    assert!(try_warm(&mut empty, &slot, None).is_none());
    run(&cfg, &VECADD_JIT, &slot, None, &mut empty)?;
    assert!(try_warm(&mut k, &slot, Some(&Stream::Cpu)).is_none());
    // One storage as input and output: the try-locks conflict, so the general path
    // runs it (one exclusive lock), in place.
    let a = crate::testing::random_tensor::<f32>(&[n], 55, dev)?;
    let b = crate::testing::random_tensor::<f32>(&[n], 56, dev)?;
    let want: Vec<f64> = a
        .to_vec()?
        .iter()
        .zip(b.to_vec()?)
        .map(|(x, y)| f64::from(x + y))
        .collect();
    let mut alias = a.clone();
    let args = [
        ArgRef::input(&a),
        ArgRef::input(&b),
        ArgRef::output(&mut alias),
    ];
    assert!(super::warm::try_cuda(&VECADD_JIT, &slot, None, &args, &[]).is_none());
    launch_with(&cfg, &VECADD_JIT, &slot, None, &args)?;
    if let Err(m) = assert_allclose(&a.to_vec()?, &want, 0.0, 0.0) {
        panic!("{m}");
    }
    // Inside a capture: declined, so the general path records the launch.
    let mut k = case(n, 57, dev)?;
    let g = Graph::capture(&stream, |s| {
        assert!(try_warm(&mut k, &slot, Some(s)).is_none());
        run(&cfg, &VECADD_JIT, &slot, Some(s), &mut k)
    })?;
    assert_eq!(g.launches(), 1);
    g.replay()?;
    stream.synchronize()?;
    assert_result(&k)
}

/// Threads on their own streams launching into one shared storage: the warm path's
/// try-locks fail under contention and the general path's blocking locks take over;
/// every write and read of the shared buffer is ordered across the streams.
#[test]
fn gpu_threads_share_a_buffer_across_streams() -> Result<()> {
    let Some(dev) = gpu() else { return Ok(()) };
    let cfg = Config::for_test(temp_root("threads"));
    let slot = KernelSlot::new();
    let n = 1 << 16;
    let a = crate::testing::random_tensor::<f32>(&[n], 60, dev)?;
    let b = crate::testing::random_tensor::<f32>(&[n], 61, dev)?;
    let shared = Tensor::<f32>::zeros(&[n], dev)?;
    let (av, bv) = (a.to_vec()?, b.to_vec()?);
    let want: Vec<f64> = av
        .iter()
        .zip(&bv)
        .map(|(x, y)| f64::from((x + y) + x))
        .collect();
    // Warm the slot first.
    let mut warm = shared.clone();
    add_with(&cfg, &VECADD_JIT, &slot, None, &a, &b, &mut warm)?;
    let outs: Vec<Result<Tensor<f32>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (a, b, cfg, slot) = (&a, &b, &cfg, &slot);
                let mut mine = shared.clone();
                scope.spawn(move || -> Result<Tensor<f32>> {
                    let stream = dev.new_stream()?;
                    let mut out = Tensor::<f32>::zeros(&[n], dev)?;
                    for _ in 0..50 {
                        // shared = a + b, then out = shared + a, both on this stream.
                        let args = [
                            ArgRef::input(a),
                            ArgRef::input(b),
                            ArgRef::output(&mut mine),
                        ];
                        launch_as_generated(cfg, &VECADD_JIT, slot, Some(&stream), &args)?;
                        let args = [
                            ArgRef::input(&mine),
                            ArgRef::input(a),
                            ArgRef::output(&mut out),
                        ];
                        launch_as_generated(cfg, &VECADD_JIT, slot, Some(&stream), &args)?;
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread panicked"))
            .collect()
    });
    for out in outs {
        if let Err(m) = assert_allclose(&out?.to_vec()?, &want, 0.0, 0.0) {
            panic!("{m}");
        }
    }
    Ok(())
}
