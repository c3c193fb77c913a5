//! Launches the downstream crate's kernels on the CPU (chosen explicitly) and
//! checks them against a host reference; also checks that they were linked
//! ahead of time by the crate's build script.

use tile::prelude::*;
use tile::testing::{assert_allclose, random_tensor, random_vec};
use tile_downstream_test::{half, scale_add, softsign_scaled, ALPHA, GAIN};

#[test]
fn kernels_are_linked_ahead_of_time() {
    assert!(
        scale_add::SPEC.cpu.aot.is_some(),
        "scale_add was not linked by build.rs"
    );
    assert!(
        half::scale_f16::SPEC.cpu.aot.is_some(),
        "scale_f16 was not linked by build.rs"
    );
}

#[test]
fn a_scalar_a_const_and_a_helper() -> Result<(), Box<dyn std::error::Error>> {
    assert!(
        softsign_scaled::SPEC.cpu.aot.is_some(),
        "softsign_scaled was not linked"
    );
    let dev = Device::Cpu;
    let n = 1000;
    let x = random_tensor::<f32>(&[n], 30, dev)?;
    let mut out = Tensor::full(&[n], f32::NAN, dev)?;
    softsign_scaled(&x, 3.0, &mut out)?;
    let want: Vec<f64> = x
        .to_vec()?
        .iter()
        .map(|&a| (a / (1.0 + a.abs()) * GAIN * 3.0) as f64)
        .collect();
    assert_allclose(&out.to_vec()?, &want, 1e-6, 1e-6)?;
    Ok(())
}

#[test]
fn scale_add_matches_host_reference() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::Cpu;
    for (s, &n) in [512usize, 2047, 4096, 1, 100_003].iter().enumerate() {
        let x = random_tensor::<f32>(&[n], 10 + s as u64, dev)?;
        let y = random_tensor::<f32>(&[n], 20 + s as u64, dev)?;
        let mut out = Tensor::full(&[n], f32::NAN, dev)?;
        scale_add(&x, &y, &mut out)?;
        let want: Vec<f64> = x
            .to_vec()?
            .iter()
            .zip(y.to_vec()?)
            .map(|(&a, b)| (ALPHA * a + b) as f64)
            .collect();
        assert_allclose(&out.to_vec()?, &want, 1e-6, 1e-6).map_err(|e| format!("n={n}: {e}"))?;
    }
    Ok(())
}

#[test]
fn scale_add_refuses_mismatched_lengths() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::Cpu;
    let x = random_tensor::<f32>(&[10], 1, dev)?;
    let y = random_tensor::<f32>(&[11], 2, dev)?;
    let mut out = Tensor::full(&[10], f32::NAN, dev)?;
    let err = scale_add(&x, &y, &mut out).expect_err("lengths differ");
    assert_eq!(
        err.to_string(),
        "kernel scale_add input y shape mismatch: dim 0 expected 10 (N bound by x), got 11"
    );
    assert!(out.to_vec()?.iter().all(|v| v.is_nan()));
    Ok(())
}

#[test]
fn scale_f16_matches_host_reference() -> Result<(), Box<dyn std::error::Error>> {
    for &n in &[256usize, 1000, 3] {
        let x: Vec<f16> = random_vec(n, n as u64, -4.0, 4.0);
        let got = half::scale_f16_host(&x)?;
        // Multiplying by -2 is exact in f16 in this range.
        let want: Vec<f64> = x.iter().map(|v| -2.0 * v.to_f64()).collect();
        assert_allclose(&got, &want, 0.0, 0.0).map_err(|e| format!("n={n}: {e}"))?;
    }
    Ok(())
}
