//! Kernel variants and the autotuner, on the device `Device::from_env` gives (the CPU
//! backend in `cargo test`, where every variant is a C function built ahead of time).
//!
//! In-process tests turn the disk cache off (their choices live in memory only); the
//! disk-cache tests run this binary again as child processes (`child_main`) with a
//! private `TILE_CACHE_DIR` and `TILE_AUTOTUNE=1`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use tile::autotune::Outcome;
use tile::cache::{CacheDir, EntryKind};
use tile::prelude::*;

/// Every variant computes the same thing; the filter drops the blocks that would give
/// a thread fewer than two elements.
#[tile::kernel(block_n = [64, 128, 256], threads = [32, 64], filter = block_n >= 2 * threads && block_n * threads != 256 * 64)]
pub fn tuned_axpy(a: Tensor<f32, (N,)>, b: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] * 2.0 + b[bx * block_n + i];
        }
    });
}

/// The variants with `wrong = true` add one on purpose: tuning must skip them.
#[tile::kernel(wrong = [false, true], block_n = [64, 256], threads = 32)]
pub fn which_variant(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] + T::if_then_else(wrong, 1.0f32, 0.0f32);
        }
    });
}

/// Accumulates into its output: tuning runs it many times, the caller sees one launch.
#[tile::kernel(block_n = [64, 128], threads = [32, 64])]
pub fn accumulate(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = c[bx * block_n + i] + a[bx * block_n + i];
        }
    });
}

/// A dtype list and a variant space together.
#[tile::kernel(dtype = [f32, f64], block_n = [64, 128], threads = 32)]
pub fn generic_scale(a: Tensor<dtype, (N,)>, c: TensorMut<dtype, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            c[bx * block_n + i] = a[bx * block_n + i] * (3 as dtype);
        }
    });
}

/// Variants of a dtype-generic kernel with scalars and an output the launcher allocates.
#[tile::kernel(dtype = [f32, f64], block_n = [64, 128], threads = [32, 64])]
pub fn axpb_tuned(x: Tensor<dtype, (N,)>, alpha: dtype, beta: f32, y: Output<dtype, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            y[bx * block_n + i] = x[bx * block_n + i] * alpha + beta as dtype;
        }
    });
}

/// A marked default naming one parameter: the first combination the filter keeps with
/// `tag = 3` (`tag=3, threads=32` is dropped). Each variant writes its `tag`.
#[tile::kernel(tag = [1, 2, 3, 4], threads = [32, 64], filter = tag != 3 || threads == 64, default(tag = 3))]
pub fn marked_default(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, 64), threads, |bx| {
        for i in T::parallel(64) {
            c[bx * 64 + i] = a[bx * 64 + i] * 0.0 + (tag as f32);
        }
    });
}

/// A marked default naming every parameter, in a dtype-generic kernel.
#[tile::kernel(dtype = [f32, f64], tag = [1, 2], threads = [32, 64], default(threads = 64, tag = 2))]
pub fn marked_generic(a: Tensor<dtype, (N,)>, c: TensorMut<dtype, (N,)>) {
    T::kernel(T::ceildiv(N, 64), threads, |bx| {
        for i in T::parallel(64) {
            c[bx * 64 + i] = a[bx * 64 + i] + (tag as dtype);
        }
    });
}

fn dev() -> Device {
    Device::from_env().expect("a device")
}

fn ramp(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|i| (i % 97) as f32 * k).collect()
}

#[test]
fn the_variant_space_is_the_filtered_product_default_first() {
    let labels = tuned_axpy::LABELS;
    assert_eq!(
        labels,
        [
            "block_n=64, threads=32",
            "block_n=128, threads=32",
            "block_n=128, threads=64",
            "block_n=256, threads=32",
        ]
    );
    assert_eq!(tuned_axpy::CONFIGS.len(), 4);
    assert_eq!(
        tuned_axpy::Config::DEFAULT,
        tuned_axpy::Config {
            block_n: 64,
            threads: 32
        }
    );
    assert_eq!(tuned_axpy::variants().len(), 4);
    // Each variant is a kernel of its own, with its own key.
    let keys: std::collections::HashSet<&str> = tuned_axpy::variants()
        .specs
        .iter()
        .map(|s| s.cpu.key)
        .collect();
    assert_eq!(keys.len(), 4);
    assert_eq!(generic_scale::variants::<f64>().len(), 2);
    assert_eq!(generic_scale::variants::<f64>().dtype, "f64");
}

#[test]
fn explicit_selection_runs_the_named_variant() -> Result<(), Error> {
    tile::cache::disable();
    let n = 1000;
    let a = Tensor::from_slice(&ramp(n, 1.0), &[n], dev())?;
    let mut c = Tensor::<f32>::zeros(&[n], dev())?;
    use which_variant::Config;
    which_variant::with(Config {
        wrong: true,
        block_n: 256,
    })
    .launch(&a, &mut c)?;
    let got = c.to_vec()?;
    assert!(got.iter().zip(ramp(n, 1.0)).all(|(g, x)| *g == x + 1.0));
    // The default is the first listed: `wrong = false`.
    which_variant::with(Config::DEFAULT).launch(&a, &mut c)?;
    assert_eq!(c.to_vec()?, ramp(n, 1.0));
    // A configuration that is not a variant fails at launch, naming the variants.
    let err = which_variant::with(Config {
        wrong: false,
        block_n: 96,
    })
    .launch(&a, &mut c)
    .expect_err("not a variant");
    let msg = err.to_string();
    assert!(
        msg.contains("is not a variant") && msg.contains("wrong=true, block_n=256"),
        "{msg}"
    );
    // On an explicit stream, and for one dtype of a generic kernel.
    let s = dev().default_stream()?;
    which_variant::with(Config {
        wrong: true,
        block_n: 64,
    })
    .on(&s)
    .launch(&a, &mut c)?;
    s.synchronize()?;
    assert_eq!(c.to_vec()?[5], 6.0);
    let a64 = Tensor::from_slice(&[1.5f64; 300], &[300], dev())?;
    let mut c64 = Tensor::<f64>::zeros(&[300], dev())?;
    generic_scale::with(generic_scale::Config { block_n: 128 }).launch(&a64, &mut c64)?;
    assert!(c64.to_vec()?.iter().all(|&v| v == 4.5));
    Ok(())
}

#[test]
fn a_marked_default_is_what_a_plain_call_runs() -> Result<(), Error> {
    tile::cache::disable();
    use marked_default::Config;
    assert_eq!(
        marked_default::LABELS,
        [
            "tag=3, threads=64",
            "tag=1, threads=32",
            "tag=1, threads=64",
            "tag=2, threads=32",
            "tag=2, threads=64",
            "tag=4, threads=32",
            "tag=4, threads=64",
        ]
    );
    assert_eq!(
        Config::DEFAULT,
        Config {
            tag: 3,
            threads: 64
        }
    );
    assert_eq!(marked_default::CONFIGS[0], Config::DEFAULT);
    let n = 300;
    let a = Tensor::from_slice(&ramp(n, 1.0), &[n], dev())?;
    let mut c = Tensor::<f32>::zeros(&[n], dev())?;
    let ran = |c: &Tensor<f32>| -> Result<f32, Error> {
        let v = c.to_vec()?;
        assert!(v.iter().all(|x| *x == v[0]), "{v:?}");
        Ok(v[0])
    };
    marked_default(&a, &mut c)?;
    assert_eq!(ran(&c)?, 3.0, "a plain call runs the marked default");
    marked_default::with(Config {
        tag: 1,
        threads: 32,
    })
    .launch(&a, &mut c)?;
    assert_eq!(ran(&c)?, 1.0);
    let s = dev().default_stream()?;
    marked_default::on(&s).launch(&a, &mut c)?;
    s.synchronize()?;
    assert_eq!(ran(&c)?, 3.0, "and so does a launch on a stream");
    marked_default::with(Config::default()).launch(&a, &mut c)?;
    assert_eq!(ran(&c)?, 3.0);

    // Every parameter named, per dtype.
    assert_eq!(marked_generic::LABELS[0], "tag=2, threads=64");
    let x = Tensor::from_slice(&[0.5f64; 200], &[200], dev())?;
    let mut y = Tensor::<f64>::zeros(&[200], dev())?;
    marked_generic(&x, &mut y)?;
    assert!(y.to_vec()?.iter().all(|&v| v == 2.5));
    let x = Tensor::from_slice(&[0.5f32; 200], &[200], dev())?;
    let mut y = Tensor::<f32>::zeros(&[200], dev())?;
    marked_generic(&x, &mut y)?;
    assert!(y.to_vec()?.iter().all(|&v| v == 2.5));
    Ok(())
}

#[test]
fn tuning_skips_a_variant_that_mismatches() -> Result<(), Error> {
    tile::cache::disable();
    let n = 5000;
    let a = Tensor::from_slice(&ramp(n, 0.5), &[n], dev())?;
    let mut c = Tensor::<f32>::zeros(&[n], dev())?;
    which_variant::tune().launch(&a, &mut c)?;
    assert_eq!(
        c.to_vec()?,
        ramp(n, 0.5),
        "the chosen variant is a right one"
    );
    let reports = which_variant::reports();
    let r = reports
        .iter()
        .find(|r| r.shapes == [vec![n], vec![n]])
        .expect("a report for these shapes");
    assert_eq!(r.rows.len(), 4);
    for row in &r.rows {
        match (row.variant.contains("wrong=true"), &row.outcome) {
            (true, Outcome::Mismatch(why)) => assert!(why.contains("expected"), "{why}"),
            (false, Outcome::Timed { median_ms, .. }) => assert!(*median_ms > 0.0),
            (_, o) => panic!("variant {}: {o:?}", row.variant),
        }
    }
    assert!(r.chosen_label.contains("wrong=false"), "{}", r.chosen_label);
    assert!(!r.from_cache);
    // On a GPU the outputs are saved and compared on the device (`TILE_DEVICE=cuda`
    // with libnvrtc on the library path; see tile-runtime/src/autotune/outputs.rs).
    let want = match dev() {
        Device::Cpu => "host",
        Device::Cuda(_) => "device",
    };
    assert_eq!(r.checked_on, want);
    // A plain call now uses the in-memory choice (and stays right).
    let mut d = Tensor::<f32>::zeros(&[n], dev())?;
    which_variant(&a, &mut d)?;
    assert_eq!(d.to_vec()?, ramp(n, 0.5));
    Ok(())
}

#[test]
fn tuning_leaves_accumulated_outputs_as_one_launch_would() -> Result<(), Error> {
    tile::cache::disable();
    let n = 3000;
    let a = Tensor::from_slice(&ramp(n, 1.0), &[n], dev())?;
    let c0 = ramp(n, 0.25);
    let mut c = Tensor::from_slice(&c0, &[n], dev())?;
    accumulate::tune().launch(&a, &mut c)?;
    let want: Vec<f32> = c0.iter().zip(ramp(n, 1.0)).map(|(x, y)| x + y).collect();
    assert_eq!(c.to_vec()?, want);
    let r = &accumulate::reports()[0];
    assert!(r.rows.iter().all(|row| row.median_ms().is_some()), "{r:?}");
    Ok(())
}

#[test]
fn tuning_inside_a_capture_is_an_error_and_a_tuned_choice_captures() -> Result<(), Error> {
    tile::cache::disable();
    let n = 777;
    let a = Tensor::from_slice(&ramp(n, 1.0), &[n], Device::Cpu)?;
    let b = Tensor::from_slice(&ramp(n, 2.0), &[n], Device::Cpu)?;
    let mut c = Tensor::<f32>::zeros(&[n], Device::Cpu)?;
    let err = Graph::capture(&Stream::Cpu, |s| {
        tuned_axpy::tune().on(s).launch(&a, &b, &mut c)
    })
    .expect_err("tuning while capturing fails");
    assert!(
        err.to_string()
            .contains("cannot tune inside a graph capture"),
        "{err}"
    );
    tuned_axpy::tune().launch(&a, &b, &mut c)?;
    let mut d = Tensor::<f32>::zeros(&[n], Device::Cpu)?;
    let g = Graph::capture(&Stream::Cpu, |s| {
        tuned_axpy::tune().on(s).launch(&a, &b, &mut d)
    })?;
    g.replay()?;
    let want: Vec<f32> = ramp(n, 1.0)
        .iter()
        .zip(ramp(n, 2.0))
        .map(|(x, y)| x * 2.0 + y)
        .collect();
    assert_eq!(d.to_vec()?, want);
    Ok(())
}

#[test]
fn a_dtype_generic_kernel_tunes_per_dtype() -> Result<(), Error> {
    tile::cache::disable();
    let a = Tensor::from_slice(&[2.0f32; 500], &[500], dev())?;
    let mut c = Tensor::<f32>::zeros(&[500], dev())?;
    generic_scale::tune().launch(&a, &mut c)?;
    assert!(c.to_vec()?.iter().all(|&v| v == 6.0));
    assert_eq!(generic_scale::reports::<f32>().len(), 1);
    assert!(generic_scale::reports::<f64>().is_empty());
    Ok(())
}

#[test]
fn tuning_checks_the_arguments_first() -> Result<(), Error> {
    tile::cache::disable();
    let a = Tensor::from_slice(&ramp(100, 1.0), &[100], dev())?;
    let b = Tensor::from_slice(&ramp(99, 1.0), &[99], dev())?;
    let mut c = Tensor::from_slice(&[7.0f32; 100], &[100], dev())?;
    let err = tuned_axpy::tune()
        .launch(&a, &b, &mut c)
        .expect_err("a shape mismatch");
    let plain = tuned_axpy(&a, &b, &mut c).expect_err("a shape mismatch");
    assert_eq!(err.to_string(), plain.to_string());
    assert!(c.to_vec()?.iter().all(|&v| v == 7.0), "nothing written");
    Ok(())
}

#[test]
fn scalars_and_allocated_outputs_through_every_policy() -> Result<(), Error> {
    tile::cache::disable();
    let x = Tensor::from_slice(&ramp(300, 1.0), &[300], dev())?;
    let want: Vec<f32> = ramp(300, 1.0).iter().map(|v| v * 2.0 + 0.5).collect();
    let y = axpb_tuned(&x, 2.0f32, 0.5)?;
    assert_eq!(y.to_vec()?, want);
    let y = axpb_tuned::tune().launch(&x, 2.0f32, 0.5)?;
    assert_eq!(y.to_vec()?, want);
    let r = &axpb_tuned::reports::<f32>()[0];
    assert_eq!(r.dtypes, "float32,float32,float32,float32");
    assert!(r.rows.iter().all(|row| row.median_ms().is_some()), "{r:?}");
    let c = axpb_tuned::Config {
        block_n: 128,
        threads: 64,
    };
    let y = axpb_tuned::with(c).launch(&x, 2.0f32, 0.5)?;
    assert_eq!(y.to_vec()?, want);
    Ok(())
}

// ---------------------------------------------------------------------------
// The disk cache, in child processes
// ---------------------------------------------------------------------------

const CHILD: &str = "TILE_AUTOTUNE_TEST_CHILD";
const GO: &str = "TILE_AUTOTUNE_TEST_GO";

/// The body of a child process: tunes `tuned_axpy` (through `TILE_AUTOTUNE=1`, a plain
/// call) and prints what it chose and whether it measured. A no-op in a normal run.
#[test]
fn child_main() {
    if std::env::var(CHILD).is_err() {
        return;
    }
    if let Ok(go) = std::env::var(GO) {
        while !Path::new(&go).exists() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let n: usize = std::env::var("TILE_AUTOTUNE_TEST_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096);
    let run = || -> Result<String, Error> {
        let a = Tensor::from_slice(&ramp(n, 1.0), &[n], Device::Cpu)?;
        let b = Tensor::from_slice(&ramp(n, 3.0), &[n], Device::Cpu)?;
        let mut c = Tensor::<f32>::zeros(&[n], Device::Cpu)?;
        let t = Instant::now();
        tuned_axpy(&a, &b, &mut c)?;
        let first = t.elapsed();
        let want: Vec<f32> = ramp(n, 1.0)
            .iter()
            .zip(ramp(n, 3.0))
            .map(|(x, y)| x * 2.0 + y)
            .collect();
        assert_eq!(c.to_vec()?, want);
        let t = Instant::now();
        for _ in 0..100 {
            tuned_axpy(&a, &b, &mut c)?;
        }
        let warm = t.elapsed() / 100;
        let r = tuned_axpy::reports().into_iter().next().expect("a report");
        // A plain call looks the choice up; `with` names it (no lookup).
        let fixed = tuned_axpy::with(tuned_axpy::CONFIGS[r.chosen]);
        // Alternating batches, the fastest batch of each (noise only adds time).
        let (mut fixed_ns, mut looked_up_ns) = (u128::MAX, u128::MAX);
        for _ in 0..20 {
            let t = Instant::now();
            for _ in 0..100 {
                fixed.launch(&a, &b, &mut c)?;
            }
            fixed_ns = fixed_ns.min(t.elapsed().as_nanos() / 100);
            let t = Instant::now();
            for _ in 0..100 {
                tuned_axpy(&a, &b, &mut c)?;
            }
            looked_up_ns = looked_up_ns.min(t.elapsed().as_nanos() / 100);
        }
        Ok(format!(
            "chosen={} cached={} first_us={} warm_us={} timing_ms={:.3} first_launch_ms={:.3} \
             fixed_ns={fixed_ns} looked_up_ns={looked_up_ns}",
            r.chosen,
            r.from_cache,
            first.as_micros(),
            warm.as_micros(),
            r.timing_ms,
            r.first_launch_ms
        ))
    };
    let line = match std::env::var("TILE_AUTOTUNE_TEST_PLANS") {
        Ok(_) => plans_child(n),
        Err(_) => run(),
    };
    match line {
        Ok(line) => println!("\nCHILD OK {line}"),
        Err(e) => {
            println!("\nCHILD FAILED {e}");
            std::process::exit(1);
        }
    }
}

/// A child's plan choice for `AXPY_PLANS` at `n` (a plain pick: `TILE_AUTOTUNE=1`
/// makes it tune, or read the disk cache).
fn plans_child(n: usize) -> Result<String, Error> {
    use tile::autotune::{pick_plan, ArgRef, Pick};
    let a = Tensor::from_slice(&ramp(n, 1.0), &[n], Device::Cpu)?;
    let b = Tensor::from_slice(&ramp(n, 3.0), &[n], Device::Cpu)?;
    let mut c = Tensor::<f32>::zeros(&[n], Device::Cpu)?;
    let mut view = c.clone();
    let args = [
        ArgRef::input(&a),
        ArgRef::input(&b),
        ArgRef::output(&mut view),
    ];
    let off = which_variant::LABELS
        .iter()
        .position(|l| l.contains("wrong=true"))
        .expect("a wrong variant");
    let chosen = pick_plan(&AXPY_PLANS, Pick::Auto, None, &args, &mut |i, s| match i {
        0 => tuned_axpy::on(s).launch(&a, &b, &mut c),
        1 => {
            tuned_axpy::on(s).launch(&a, &b, &mut c)?;
            tuned_axpy::on(s).launch(&a, &b, &mut c)
        }
        _ => which_variant::with(which_variant::CONFIGS[off])
            .on(s)
            .launch(&a, &mut c),
    })?;
    let r = AXPY_PLANS
        .reports()
        .into_iter()
        .next()
        .expect("a plan report");
    Ok(format!(
        "chosen={chosen} cached={} rows={}",
        r.from_cache,
        r.rows.len()
    ))
}

fn temp_root(tag: &str) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("tile-tune-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary cache root");
    dir
}

fn child(root: &Path) -> Command {
    let mut c = Command::new(std::env::current_exe().expect("the test binary"));
    c.args(["child_main", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("TILE_CACHE_DIR", root)
        .env("TILE_AUTOTUNE", "1")
        .env("TILE_DEVICE", "cpu")
        .env("TILE_NUM_THREADS", "1")
        .env_remove("TILE_DISABLE_CACHE")
        .env_remove("TILE_AUTOTUNE_BUCKET");
    c
}

/// `CHILD OK ..` fields of a finished child, as `key=value` pairs.
fn child_ok(out: &std::process::Output) -> Vec<(String, String)> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("CHILD OK ")) else {
        panic!(
            "child failed: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    };
    line.split(' ')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn field<'a>(f: &'a [(String, String)], k: &str) -> &'a str {
    f.iter()
        .find(|(n, _)| n == k)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

fn tuned_entries(root: &Path) -> Vec<tile::cache::CacheEntry> {
    CacheDir::at(root)
        .entries()
        .into_iter()
        .filter(|e| e.kind == EntryKind::Tuned)
        .collect()
}

fn run(c: &mut Command) -> std::process::Output {
    c.output().expect("run the child")
}

#[test]
fn a_tuned_choice_is_published_and_reused_by_the_next_process() {
    let root = temp_root("reuse");
    let first = child_ok(&run(&mut child(&root)));
    assert_eq!(field(&first, "cached"), "false");
    let entries = tuned_entries(&root);
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0].damage.is_none(), "{:?}", entries[0].damage);
    assert!(entries[0]
        .choice
        .as_deref()
        .unwrap_or("")
        .contains("[[4096], [4096], [4096]]"));
    // The next process reads the choice and times nothing.
    let out = run(child(&root).env("TILE_JIT_DIAGNOSTICS", "1"));
    let second = child_ok(&out);
    assert_eq!(field(&second, "cached"), "true");
    assert_eq!(field(&first, "chosen"), field(&second, "chosen"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("autotune-cache tuned_axpy") && stderr.contains("hit chosen="),
        "{stderr}"
    );
    assert!(!stderr.contains("tile phase start: autotune"), "{stderr}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_damaged_choice_is_removed_and_tuned_again() {
    let root = temp_root("damage");
    child_ok(&run(&mut child(&root)));
    type Hurt = fn(&Path);
    let damage: [(&str, Hurt); 3] = [
        ("corrupt choice", |dir| {
            let p = dir.join("choice.json");
            let mut b = std::fs::read(&p).expect("choice.json");
            let k = b.len() / 2;
            b[k] ^= 0x20;
            std::fs::write(&p, b).expect("write");
        }),
        ("truncated choice", |dir| {
            let p = dir.join("choice.json");
            let b = std::fs::read(&p).expect("choice.json");
            std::fs::write(&p, &b[..b.len() / 3]).expect("write");
        }),
        ("truncated manifest", |dir| {
            let p = dir.join("manifest.json");
            let b = std::fs::read(&p).expect("manifest.json");
            std::fs::write(&p, &b[..b.len() - 7]).expect("write");
        }),
    ];
    for (what, hurt) in damage {
        let entries = tuned_entries(&root);
        assert_eq!(entries.len(), 1, "{what}: {entries:?}");
        hurt(&entries[0].path);
        assert!(
            tuned_entries(&root)[0].damage.is_some(),
            "{what}: the damage shows"
        );
        let out = run(child(&root).env("TILE_JIT_DIAGNOSTICS", "1"));
        let again = child_ok(&out);
        assert_eq!(field(&again, "cached"), "false", "{what}: tuned again");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("autotune-cache tuned_axpy") && stderr.contains("miss"),
            "{what}: {stderr}"
        );
        // The tuning phase's lines: start, one per variant, done with the choice.
        assert!(
            stderr.contains("tile phase start: autotune tuned_axpy variants=4"),
            "{stderr}"
        );
        assert_eq!(
            stderr.matches("tile autotune tuned_axpy variant ").count(),
            4,
            "{stderr}"
        );
        assert!(
            stderr.contains("tile phase done: autotune tuned_axpy elapsed="),
            "{stderr}"
        );
        let entries = tuned_entries(&root);
        assert_eq!(entries.len(), 1, "{what}: {entries:?}");
        assert!(entries[0].damage.is_none(), "{what}: rebuilt sound");
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn sixteen_processes_tuning_at_once_agree_on_one_choice() {
    let root = temp_root("race");
    let go = root.join("go");
    let children: Vec<_> = (0..16)
        .map(|_| {
            child(&root)
                .env(GO, &go)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn a child")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(&go, b"go").expect("start them");
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("a child"))
        .collect();
    let fields: Vec<_> = outs.iter().map(child_ok).collect();
    let entries = tuned_entries(&root);
    assert_eq!(entries.len(), 1, "one entry: {entries:?}");
    assert!(entries[0].damage.is_none());
    let choice = entries[0].choice.clone().unwrap_or_default();
    let chosen: std::collections::HashSet<&str> =
        fields.iter().map(|f| field(f, "chosen")).collect();
    assert_eq!(chosen.len(), 1, "every process uses one choice: {fields:?}");
    let label = tuned_axpy::LABELS[field(&fields[0], "chosen").parse::<usize>().expect("index")];
    assert!(
        choice.ends_with(&format!("`{label}`")),
        "{choice} vs {label}"
    );
    // Nothing is left in staging.
    let staging = CacheDir::at(&root).namespace().join(".staging");
    let left: Vec<_> = std::fs::read_dir(&staging)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn power_of_two_buckets_share_a_choice() {
    let root = temp_root("pow2");
    let pow2 = |n: &str| {
        let mut c = child(&root);
        c.env("TILE_AUTOTUNE_BUCKET", "pow2")
            .env("TILE_AUTOTUNE_TEST_N", n);
        child_ok(&run(&mut c))
    };
    assert_eq!(field(&pow2("3000"), "cached"), "false");
    // 4000 rounds up to 4096 as 3000 does: the same entry.
    assert_eq!(field(&pow2("4000"), "cached"), "true");
    assert_eq!(field(&pow2("5000"), "cached"), "false");
    // Exact dims (the default) are keyed apart.
    let exact = child_ok(&run(child(&root).env("TILE_AUTOTUNE_TEST_N", "4000")));
    assert_eq!(field(&exact, "cached"), "false");
    let choices: Vec<String> = tuned_entries(&root)
        .iter()
        .filter_map(|e| e.choice.clone())
        .collect();
    assert_eq!(choices.len(), 3, "{choices:?}");
    assert!(
        choices
            .iter()
            .any(|c| c.contains("[[4096], [4096], [4096]]")),
        "{choices:?}"
    );
    assert!(
        choices
            .iter()
            .any(|c| c.contains("[[4000], [4000], [4000]]")),
        "{choices:?}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Tuning overhead on the CPU backend: the first (tuning) call against a warm call,
/// printed for the record (`cargo test --test autotune -- --nocapture overhead`).
#[test]
fn tuning_overhead_on_the_cpu() {
    let root = temp_root("overhead");
    let f = child_ok(&run(child(&root).env("TILE_AUTOTUNE_TEST_N", "256")));
    let g = child_ok(&run(child(&root).env("TILE_AUTOTUNE_TEST_N", "256")));
    println!(
        "tuned_axpy, 4 variants, N=256, 1 worker: tuning call {} us (timing {} ms, first launches {} ms), \
         cached-choice first call {} us; warm call with the choice looked up {} ns, named with `with` {} ns",
        field(&f, "first_us"),
        field(&f, "timing_ms"),
        field(&f, "first_launch_ms"),
        field(&g, "first_us"),
        field(&g, "looked_up_ns"),
        field(&g, "fixed_ns"),
    );
    let first: u128 = field(&f, "first_us").parse().unwrap_or(0);
    let cached: u128 = field(&g, "first_us").parse().unwrap_or(u128::MAX);
    assert!(cached < first, "a cached choice is cheaper than tuning");
    let _ = std::fs::remove_dir_all(&root);
}

/// Three plans for `c = 2a + b`: one launch, the same launch twice (slower, and
/// right), and a kernel that computes something else (must be skipped).
static AXPY_PLANS: tile::autotune::PlanSet =
    tile::autotune::PlanSet::new("axpy_plans", &["once", "twice", "off"], || {
        vec![tuned_axpy::variants()]
    });

#[test]
fn plans_are_tuned_checked_and_remembered_like_variants() -> Result<(), Error> {
    use tile::autotune::{pick_plan, ArgRef, Pick};
    tile::cache::disable();
    let n = 4099;
    let a = Tensor::from_slice(&ramp(n, 0.5), &[n], dev())?;
    let b = Tensor::from_slice(&ramp(n, 0.25), &[n], dev())?;
    let want: Vec<f32> = ramp(n, 0.5)
        .iter()
        .zip(ramp(n, 0.25))
        .map(|(x, y)| x * 2.0 + y)
        .collect();
    let off = which_variant::LABELS
        .iter()
        .position(|l| l.contains("wrong=true"))
        .expect("a wrong variant");
    let run = |i: usize, s: &Stream, c: &mut Tensor<f32>| -> Result<(), Error> {
        match i {
            0 => tuned_axpy::tune().on(s).launch(&a, &b, c),
            1 => {
                tuned_axpy::tune().on(s).launch(&a, &b, c)?;
                tuned_axpy::tune().on(s).launch(&a, &b, c)
            }
            _ => which_variant::with(which_variant::CONFIGS[off])
                .on(s)
                .launch(&a, c),
        }
    };
    let mut c = Tensor::full(&[n], -1.0f32, dev())?;
    let mut view = c.clone();
    let args = [
        ArgRef::input(&a),
        ArgRef::input(&b),
        ArgRef::output(&mut view),
    ];
    let mut inner = c.clone();
    // Before tuning, a plain pick is plan 0 and nothing runs; a plan that does not
    // exist is an error naming the set.
    let ran = std::cell::Cell::new(0);
    let mut count = |_: usize, _: &Stream| -> Result<(), Error> {
        ran.set(ran.get() + 1);
        Ok(())
    };
    assert_eq!(
        pick_plan(&AXPY_PLANS, Pick::Auto, None, &args, &mut count)?,
        0
    );
    let err = pick_plan(&AXPY_PLANS, Pick::Fixed(3), None, &args, &mut count)
        .expect_err("there is no plan 3");
    assert!(err.to_string().contains("axpy_plans"), "{err}");
    assert_eq!(ran.get(), 0);
    let chosen = pick_plan(&AXPY_PLANS, Pick::Tune, None, &args, &mut |i, s| {
        run(i, s, &mut inner)
    })?;
    // Tuning left C as it was; the caller runs the plan it got.
    assert!(c.to_vec()?.iter().all(|&v| v == -1.0));
    run(chosen, &dev().default_stream()?, &mut c)?;
    assert_eq!(c.to_vec()?, want);
    let reports = AXPY_PLANS.reports();
    let r = reports
        .iter()
        .find(|r| r.shapes == [vec![n], vec![n], vec![n]])
        .expect("a report for these shapes");
    let outcomes: Vec<_> = r.rows.iter().map(|row| &row.outcome).collect();
    assert!(matches!(outcomes[0], Outcome::Timed { .. }), "{r:?}");
    assert!(matches!(outcomes[1], Outcome::Timed { .. }), "{r:?}");
    assert!(matches!(outcomes[2], Outcome::Mismatch(_)), "{r:?}");
    assert!(chosen < 2 && r.chosen == chosen, "{r:?}");
    // The plan inside was tuned on the way (its variants' report exists).
    assert!(tuned_axpy::reports()
        .iter()
        .any(|t| t.shapes == [vec![n], vec![n], vec![n]]));
    // A plain pick now returns the choice, and runs nothing.
    assert_eq!(
        pick_plan(&AXPY_PLANS, Pick::Auto, None, &args, &mut count)?,
        chosen
    );
    assert_eq!(ran.get(), 0);
    Ok(())
}

#[test]
fn a_plan_choice_is_published_and_reused_by_the_next_process() {
    let root = temp_root("plans");
    let first = child_ok(&run(child(&root).env("TILE_AUTOTUNE_TEST_PLANS", "1")));
    assert_eq!(field(&first, "cached"), "false");
    assert_eq!(field(&first, "rows"), "3");
    // The plan's entry, and the entries of the kernels its plans tuned.
    let entries = tuned_entries(&root);
    assert!(
        entries
            .iter()
            .any(|e| e.kernel.as_deref() == Some("axpy_plans")),
        "{entries:?}"
    );
    assert!(entries.iter().all(|e| e.damage.is_none()), "{entries:?}");
    let out = run(child(&root)
        .env("TILE_AUTOTUNE_TEST_PLANS", "1")
        .env("TILE_JIT_DIAGNOSTICS", "1"));
    let second = child_ok(&out);
    assert_eq!(field(&second, "cached"), "true");
    assert_eq!(field(&first, "chosen"), field(&second, "chosen"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("autotune-cache axpy_plans"), "{stderr}");
    assert!(!stderr.contains("tile phase start: autotune"), "{stderr}");
    let _ = std::fs::remove_dir_all(&root);
}
