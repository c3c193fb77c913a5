//! Integer GEMM: `C = A · B` with i8 inputs and exact i32 accumulation
//! (`T::gemm` on i8 tiles into an i32 fragment), any M, N, K.
//!
//! `cargo run --release --example gemm_int8 [M N K]`

use std::time::Instant;
use tile::prelude::*;

#[tile::kernel(block_m = 64, block_n = 64, block_k = 32, threads = 128)]
pub fn gemm_int8(a: Tensor<i8, (M, K)>, b: Tensor<i8, (K, N)>, c: TensorMut<i32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<i8>([block_m, block_k]);
            let b_s = T::alloc_shared::<i8>([block_k, block_n]);
            let acc = T::alloc_fragment::<i32>([block_m, block_n]);
            T::clear(acc);
            for ko in T::serial(T::ceildiv(K, block_k)) {
                T::copy(a.at([by * block_m, ko * block_k]), a_s);
                T::copy(b.at([ko * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// Checks `gemm_int8` exactly against a host reference at `m × n × k` on
/// `dev`; returns the summary line. `main` and `tests/examples.rs` call it.
pub fn run(
    dev: Device,
    m: usize,
    n: usize,
    k: usize,
) -> Result<String, Box<dyn std::error::Error>> {
    let a = tile::testing::random_tensor::<i8>(&[m, k], 23, dev)?;
    let b = tile::testing::random_tensor::<i8>(&[k, n], 24, dev)?;
    let mut c = Tensor::full(&[m, n], i32::MIN, dev)?;
    let t = Instant::now();
    gemm_int8(&a, &b, &mut c)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let (av, bv, cv) = (a.to_vec()?, b.to_vec()?, c.to_vec()?);
    for i in 0..m {
        for j in 0..n {
            let want: i32 = (0..k)
                .map(|p| av[i * k + p] as i32 * bv[p * n + j] as i32)
                .sum();
            if cv[i * n + j] != want {
                return Err(
                    format!("gemm_int8 ({i}, {j}): got {}, want {want}", cv[i * n + j]).into(),
                );
            }
        }
    }
    Ok(format!(
        "gemm_int8: device={dev} m={m} n={n} k={k} exact time={:.3} ms (first call)",
        el.as_secs_f64() * 1e3
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| s.parse())
        .collect::<Result<_, _>>()?;
    let (m, n, k) = match args.as_slice() {
        [m, n, k] => (*m, *n, *k),
        _ => (200, 136, 100),
    };
    println!("{}", run(Device::default(), m, n, k)?);
    Ok(())
}
