//! Compile time grows about linearly with the kernel: large generated
//! kernels (a long sum, thousands of statements, many copies of the
//! attention body) each compile, for both targets, within a bound. The
//! bound is 1 s in an optimized build; a debug build (`cargo test`) only
//! reports its times and checks a generous bound that quadratic behaviour
//! would still break. `cargo test --release -p tile-core --test compile_time
//! -- --nocapture` shows the times. The bound applies to the CPU time of the
//! compiling thread (the compiler is single-threaded), so that other work on
//! the machine, such as the tests running beside this one, does not count;
//! the wall time is reported beside it.

use std::time::{Duration, Instant};

/// CPU time this thread has used (wall time where the platform has no
/// per-thread clock).
fn thread_time() -> Duration {
    #[cfg(unix)]
    {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `t` is a live timespec the call writes.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0 {
            return Duration::new(t.tv_sec as u64, t.tv_nsec as u32);
        }
    }
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

fn bound() -> Duration {
    if cfg!(debug_assertions) {
        Duration::from_secs(30)
    } else {
        Duration::from_secs(1)
    }
}

/// Parses `src` as Rust, then runs the compiler on its kernel (the
/// frontend and `compile`, both targets) and returns how long the compiler
/// took; Rust parsing (which the macro gets from rustc) is reported beside it.
fn time_compile(what: &str, src: &str) -> Duration {
    let t = Instant::now();
    let file: syn::File = syn::parse_str(src).expect("valid Rust");
    let parsed = t.elapsed();
    let syn::Item::Fn(mut item) = file.items.into_iter().next().expect("an item") else {
        panic!("{what}: not a function");
    };
    let attr = tile_core::frontend::kernel_attr(&item.attrs).expect("a kernel");
    item.attrs
        .retain(|a| !tile_core::frontend::is_kernel_attr(a));
    let (t, cpu) = (Instant::now(), thread_time());
    let def = tile_core::frontend::parse_kernel(attr, &item)
        .unwrap_or_else(|d| panic!("{what}: {}", d[0]));
    tile_core::compile(def).unwrap_or_else(|d| panic!("{what}: {}", d[0]));
    let (wall, took) = (t.elapsed(), thread_time().saturating_sub(cpu));
    eprintln!("{what}: Rust parsing {parsed:?}, compiling {took:?} of CPU time ({wall:?} wall)");
    assert!(took < bound(), "{what} took {took:?} (bound {:?})", bound());
    took
}

#[test]
fn a_sum_of_6400_terms() {
    // 64 statements of 100 terms each (one expression nests at most 256 deep).
    let body: String = (0..64)
        .map(|s| {
            let terms: Vec<String> = (0..100).map(|i| format!("a[{}]", (s + i) % 64)).collect();
            format!("acc += {};\n", terms.join(" + "))
        })
        .collect();
    let src = format!(
        "#[tile::kernel(n = 64, one = 1, threads = 128)]
         fn k(a: Tensor<f32, (n,)>, c: TensorMut<f32, (one,)>) {{
             T::kernel(1, threads, |bx| {{ let mut acc = 0.0f32; {body} c[0] = acc; }});
         }}"
    );
    time_compile("a sum of 6400 terms", &src);
}

/// The deepest expression the compiler takes (a sum of 250 terms) compiles
/// on a test thread's 2 MiB stack, in debug builds too; a deeper one is a
/// spanned error, found without recursion.
#[test]
fn deep_expressions() {
    let sum = |n: usize| {
        let terms: Vec<String> = (0..n).map(|i| format!("a[{}]", i % 64)).collect();
        format!(
            "#[tile::kernel(n = 64, one = 1, threads = 128)]
             fn k(a: Tensor<f32, (n,)>, c: TensorMut<f32, (one,)>) {{
                 T::kernel(1, threads, |bx| {{ c[0] = {}; }});
             }}",
            terms.join(" + ")
        )
    };
    time_compile("a sum of 250 terms", &sum(250));
    // syn's parser and destructor recurse through the tree: give them room.
    let src = sum(6400);
    let message = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let file: syn::File = syn::parse_str(&src).expect("valid Rust");
            let syn::Item::Fn(mut item) = file.items.into_iter().next().expect("an item") else {
                panic!("not a function");
            };
            let attr = tile_core::frontend::kernel_attr(&item.attrs).expect("a kernel");
            item.attrs
                .retain(|a| !tile_core::frontend::is_kernel_attr(a));
            let errs = tile_core::frontend::parse_kernel(attr, &item).expect_err("too deep");
            errs[0].message.clone()
        })
        .expect("thread")
        .join()
        .expect("no panic");
    assert!(message.contains("nests more than 256 levels"), "{message}");
}

#[test]
fn ten_thousand_statements() {
    let mut body = String::new();
    for i in 0..10_000 {
        body.push_str(&format!(
            "let x{i} = a[bx * 64 + {}] * 2.0 + {i}.0; c[bx * 64 + {}] = x{i};\n",
            i % 64,
            (i * 7) % 64
        ));
    }
    let src = format!(
        "#[tile::kernel(threads = 128)]
         fn k(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>) {{
             T::kernel(T::ceildiv(N, 64), threads, |bx| {{ {body} }});
         }}"
    );
    time_compile("10,000 statements", &src);
}

#[test]
fn fifty_attention_bodies() {
    let example = include_str!("../../examples/flash_attention.rs");
    // The block body of the example's kernel, between its launch and the end.
    let start = example.find("|bx, by, bz| {").expect("launch") + "|bx, by, bz| {".len();
    let end = example[start..].find("\n    });").expect("end of launch") + start;
    // The example is generic over `dtype`; this kernel is its f16 instance.
    let body = example[start..end].replace("<dtype>", "<f16>");
    let copies: String = (0..50).map(|_| format!("{{ {body} }}\n")).collect();
    let src = format!(
        "#[tile::kernel(dim = 64, block_m = 128, block_n = 64, stages = 2, threads = 128)]
         fn flash_attention(
             q: Tensor<f16, (B, H, S, dim)>,
             k: Tensor<f16, (B, HKV, S, dim)>,
             v: Tensor<f16, (B, HKV, S, dim)>,
             o: TensorMut<f16, (B, H, S, dim)>,
         ) {{
             T::kernel([T::ceildiv(S, block_m), H, B], threads, |bx, by, bz| {{ {copies} }});
         }}"
    );
    time_compile("50 attention bodies", &src);
}
