//! Runs every example's own check (its kernel against a host reference on
//! random data, output poisoned first) at sizes that divide its tile and
//! sizes that do not. The device is `Device::default()`: the CPU here, the GPU
//! when the test binary runs on a machine with one (or `TILE_DEVICE=cuda`).

#[allow(dead_code)]
#[path = "../examples/vecadd.rs"]
mod vecadd;

#[allow(dead_code)]
#[path = "../examples/vecadd_buffered.rs"]
mod vecadd_buffered;

#[allow(dead_code)]
#[path = "../examples/elementwise_2d.rs"]
mod elementwise_2d;

#[allow(dead_code)]
#[path = "../examples/quickstart.rs"]
mod quickstart;

use tile::Device;

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[test]
fn vecadd_example() -> TestResult {
    for n in [1 << 16, 2047, 4097, 1] {
        println!("{}", vecadd::run(Device::default(), n)?);
    }
    Ok(())
}

#[test]
fn vecadd_buffered_example() -> TestResult {
    for n in [1 << 16, 1_000_003, 5] {
        println!("{}", vecadd_buffered::run(Device::default(), n)?);
    }
    Ok(())
}

#[test]
fn elementwise_2d_example() -> TestResult {
    for (m, n) in [(64, 128), (1000, 1030), (1, 3)] {
        println!("{}", elementwise_2d::run(Device::default(), m, n)?);
    }
    Ok(())
}

#[test]
fn quickstart_example() -> TestResult {
    for (m, n, k) in [(128, 128, 64), (67, 129, 33), (129, 67, 100)] {
        println!("{}", quickstart::run(Device::default(), m, n, k)?);
    }
    Ok(())
}

#[allow(dead_code)]
#[path = "../examples/softmax.rs"]
mod softmax;

#[allow(dead_code)]
#[path = "../examples/rmsnorm.rs"]
mod rmsnorm;

#[allow(dead_code)]
#[path = "../examples/layernorm.rs"]
mod layernorm;

#[allow(dead_code)]
#[path = "../examples/reduce_sum.rs"]
mod reduce_sum;

#[allow(dead_code)]
#[path = "../examples/cumsum.rs"]
mod cumsum;

#[test]
fn row_kernels_examples() -> TestResult {
    for m in [1, 7] {
        println!("{}", softmax::run(Device::default(), m)?);
        println!("{}", rmsnorm::run(Device::default(), m)?);
        println!("{}", layernorm::run(Device::default(), m)?);
        println!("{}", cumsum::run(Device::default(), m)?);
    }
    for (m, n) in [(5, 1500), (64, 1024)] {
        println!("{}", reduce_sum::run(Device::default(), m, n)?);
    }
    Ok(())
}

// `examples/gemm.rs`, loaded by the padded GEMM's file (one copy).
use gemm_any_pitch::gemm;

#[test]
fn gemm_example() -> TestResult {
    for (m, n, k) in [(128, 128, 64), (67, 129, 33), (160, 136, 72)] {
        println!("{}", gemm::run(Device::default(), m, n, k)?);
    }
    // Some variants alone, by part of their label, and with a fixed kernel
    // by part of its name; a part nothing has is an error.
    let only = gemm::run_only(Device::default(), (67, 129, 33), "cluster=2")?;
    assert_eq!(only.matches("max_abs_err").count(), 3, "{only}");
    let only = gemm::run_only(Device::default(), (67, 129, 33), "gemm_tn+cluster=2")?;
    assert_eq!(only.matches("max_abs_err").count(), 4, "{only}");
    assert!(only.contains("gemm_tn_f16: max_abs_err"), "{only}");
    assert!(gemm::run_only(Device::default(), (67, 129, 33), "no such variant").is_err());
    Ok(())
}

#[allow(dead_code)]
#[path = "../examples/gemm_any_pitch.rs"]
mod gemm_any_pitch;

#[test]
fn gemm_any_pitch_example() -> TestResult {
    // Odd K, odd N, both, neither, M = 1; and an odd K with N aligned at a
    // size where the padded K (104) is more than one k step.
    let mut shapes = gemm_any_pitch::SHAPES.to_vec();
    shapes.push((70, 64, 99));
    for line in gemm_any_pitch::run(Device::default(), &shapes)? {
        println!("{line}");
    }
    Ok(())
}

#[allow(dead_code)]
#[path = "../examples/gemm_fp8.rs"]
mod gemm_fp8;

#[test]
fn gemm_fp8_example() -> TestResult {
    // Dividing the tiles, ragged, one row; K not a multiple of 16 (no
    // 16-byte rows: the element-wise copies on CUDA).
    for (m, n, k) in [(128, 256, 128), (67, 130, 160), (1, 8, 40), (40, 24, 37)] {
        println!("{}", gemm_fp8::run(Device::default(), m, n, k)?);
    }
    Ok(())
}

#[allow(dead_code)]
#[path = "../examples/gemm_splitk.rs"]
mod gemm_splitk;

#[test]
fn gemm_splitk_example() -> TestResult {
    // More splits than K tiles (empty splits write zeros), ragged M/N/K, one row.
    for (m, n, k) in [(20, 136, 300), (1, 64, 1000), (64, 128, 64), (17, 70, 130)] {
        println!("{}", gemm_splitk::run(Device::default(), m, n, k)?);
    }
    Ok(())
}

#[allow(dead_code)]
#[path = "../examples/gemm_int8.rs"]
mod gemm_int8;

#[test]
fn gemm_int8_example() -> TestResult {
    for (m, n, k) in [(64, 64, 32), (67, 129, 33)] {
        println!("{}", gemm_int8::run(Device::default(), m, n, k)?);
    }
    Ok(())
}

#[allow(dead_code)]
#[path = "../examples/flash_attention.rs"]
mod flash_attention;

#[allow(dead_code)]
#[path = "../examples/flash_decoding.rs"]
mod flash_decoding;

#[allow(dead_code)]
#[path = "../examples/flash_attention_bwd.rs"]
mod flash_attention_bwd;

#[test]
fn flash_attention_bwd_example() -> TestResult {
    // Whole tiles, ragged S, a single position.
    for (b, h, s) in [(1, 2, 128), (2, 1, 130), (1, 1, 1)] {
        println!("{}", flash_attention_bwd::run(Device::default(), b, h, s)?);
    }
    Ok(())
}

#[test]
fn flash_decoding_example() -> TestResult {
    use flash_decoding::Shape;
    // One split's worth of keys or less, ragged splits, empty splits (s = 70
    // fills 2 of 8), multi-head and grouped-query, a single cached position.
    let shapes = [
        (1, 4, 4, 64),
        (2, 8, 2, 1000),
        (1, 4, 1, 70),
        (1, 2, 2, 1),
        (1, 16, 1, 300),
    ];
    for (b, h, hkv, s) in shapes {
        println!(
            "{}",
            flash_decoding::run(Device::default(), Shape { b, h, hkv, s })?
        );
    }
    Ok(())
}

#[test]
fn flash_attention_example() -> TestResult {
    use flash_attention::Shape;
    // Whole tiles, a ragged last key/query tile, a single position; multi-head
    // and grouped-query (4 query heads over 2 and over 1 key/value heads);
    // every head dim, causal or not.
    let shapes = [
        (1, 2, 2, 128),
        (2, 1, 1, 130),
        (1, 4, 2, 70),
        (1, 4, 1, 1),
        (1, 1, 1, 200),
    ];
    for (b, h, hkv, s) in shapes {
        for d in [64, 128, 256] {
            for causal in [false, true] {
                let sh = Shape::new(b, h, hkv, s, d, causal);
                println!("{}", flash_attention::run(Device::default(), sh)?);
            }
        }
    }
    // Head dim 64 causal launches a block per query tile where the
    // persistent kernel's 264 blocks would be uneven: 300 tiles of one query
    // tile each (36 blocks run two), grouped-query, ragged S. The shapes above
    // have fewer tiles than blocks: persistent.
    let sh = Shape::new(1, 300, 3, 100, 64, true);
    assert!(!flash_attention::persistent_balances(sh));
    assert!(flash_attention::persistent_balances(Shape::new(
        1, 4, 1, 200, 64, true
    )));
    println!("{}", flash_attention::run(Device::default(), sh)?);
    Ok(())
}

#[allow(dead_code)]
#[path = "../examples/gemv.rs"]
mod gemv;

#[allow(dead_code)]
#[path = "../examples/transpose.rs"]
mod transpose;

#[allow(dead_code)]
#[path = "../examples/gelu_bias.rs"]
mod gelu_bias;

#[test]
fn memory_bound_examples() -> TestResult {
    // Sizes that divide the tiles, ragged ones, one row.
    for (n, k) in [(64, 1024), (37, 1000), (1, 513)] {
        println!("{}", gemv::run(Device::default(), n, k)?);
    }
    for (m, n) in [(128, 64), (100, 129), (1, 70)] {
        println!("{}", transpose::run(Device::default(), m, n)?);
    }
    Ok(())
}

#[test]
fn gelu_bias_example() -> TestResult {
    for (m, n, k) in [(128, 128, 64), (67, 130, 72), (1, 8, 8)] {
        println!("{}", gelu_bias::run(Device::default(), m, n, k)?);
    }
    Ok(())
}
