//! Copies, fills, `if`, and serial loops with `let mut` accumulation.

use super::*;

// ---------------------------------------------------------------------------
// Copies through shared memory and fragments
// ---------------------------------------------------------------------------

/// Global → shared → fragment → global, with an f16 → f32 conversion on the
/// way into the fragment.
#[tile::kernel(block_m = 16, block_n = 32, threads = 128)]
pub fn copy_widen_2d(a: Tensor<f16, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_m, block_n]);
            let c_l = T::alloc_fragment::<f32>([block_m, block_n]);
            T::copy(a.at([by * block_m, bx * block_n]), a_s);
            T::copy(a_s, c_l);
            T::copy(c_l, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// A 1-D fragment copied from and to one row of a 2-D tensor (leading unit dim).
#[tile::kernel(block_n = 64, threads = 64)]
pub fn row_scale(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel([T::ceildiv(N, block_n), M], threads, |bx, by| {
        let r = T::alloc_fragment::<f32>([block_n]);
        T::copy(a.at([by, bx * block_n]), r);
        for i in T::parallel(block_n) {
            r[i] = r[i] * 3.0 - 1.0;
        }
        T::copy(r, c.at([by, bx * block_n]));
    });
}

#[test]
fn copy_through_shared_and_fragment() -> TestResult {
    for (s, &(m, n)) in [(16, 32), (48, 96), (17, 33), (100, 1), (1, 100)]
        .iter()
        .enumerate()
    {
        let a = random_tensor::<f16>(&[m, n], 900 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        copy_widen_2d(&a, &mut c)?;
        check(&format!("copy_widen_2d {m}x{n}"), &c, &host(&a), 0.0, 0.0);
    }
    Ok(())
}

#[test]
fn copy_rows_with_unit_leading_dim() -> TestResult {
    for (s, &(m, n)) in [(4, 64), (3, 200), (1, 1), (9, 63)].iter().enumerate() {
        let a = random_tensor::<f32>(&[m, n], 950 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        row_scale(&a, &mut c)?;
        let want: Vec<f64> = host(&a)
            .iter()
            .map(|&x| round_to::<f32>(x * 3.0 - 1.0))
            .collect();
        check(&format!("row_scale {m}x{n}"), &c, &want, 1e-6, 1e-6);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// `T::fill` and `T::clear`
// ---------------------------------------------------------------------------

#[tile::kernel(block_n = 128, threads = 128)]
pub fn fill_and_clear(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>, z: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let f = T::alloc_fragment::<f32>([block_n]);
        let zi = T::alloc_fragment::<i32>([block_n]);
        T::fill(f, 2.5);
        T::clear(zi);
        for i in T::parallel(block_n) {
            f[i] = f[i] + a[bx * block_n + i];
            zi[i] = zi[i] + 7;
        }
        T::copy(f, c.at(bx * block_n));
        T::copy(zi, z.at(bx * block_n));
    });
}

/// Fill of a shared 2-D tile with a value computed from the block index.
#[tile::kernel(block_m = 8, block_n = 16, threads = 128)]
pub fn fill_block_id(c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let s = T::alloc_shared::<f32>([block_m, block_n]);
            T::fill(s, (by * 1000 + bx) as f32);
            T::copy(s, c.at([by * block_m, bx * block_n]));
        },
    );
}

#[test]
fn fill_and_clear_tiles() -> TestResult {
    for (s, &n) in [128usize, 1000, 1, 129].iter().enumerate() {
        let a = random_tensor::<f32>(&[n], 1000 + s as u64, dev())?;
        let mut c = Tensor::full(&[n], f32::NAN, dev())?;
        let mut z = Tensor::full(&[n], i32::MIN, dev())?;
        fill_and_clear(&a, &mut c, &mut z)?;
        let want: Vec<f64> = host(&a).iter().map(|&x| round_to::<f32>(x + 2.5)).collect();
        check(&format!("fill n={n}"), &c, &want, 0.0, 0.0);
        check_exact(&format!("clear n={n}"), &z, &vec![7i32; n]);
    }
    Ok(())
}

#[test]
fn fill_with_block_dependent_value() -> TestResult {
    for &(m, n) in &[(8usize, 16usize), (20, 40), (1, 1), (17, 15)] {
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        fill_block_id(&mut c)?;
        let want: Vec<f64> = (0..m * n)
            .map(|e| ((e / n / 8) * 1000 + (e % n) / 16) as f64)
            .collect();
        check(&format!("fill_block_id {m}x{n}"), &c, &want, 0.0, 0.0);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// `if` as a statement and as a value
// ---------------------------------------------------------------------------

#[tile::kernel(block_n = 256, threads = 128)]
pub fn piecewise(a: Tensor<f32, (N,)>, c: TensorMut<f32, (N,)>, d: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let x = a[bx * block_n + i];
            if x > 0.5 {
                c[bx * block_n + i] = x;
            } else if x > -0.5 {
                c[bx * block_n + i] = 0.0;
            } else {
                c[bx * block_n + i] = x * -2.0;
            }
            d[bx * block_n + i] = if x < 0.25 {
                x + 1.0
            } else {
                T::if_then_else(x >= 0.75, 9.0, -9.0)
            };
        }
    });
}

/// Block-level `if` on the block index: only even blocks write 1, odd blocks 2.
#[tile::kernel(block_n = 100, threads = 128)]
pub fn parity(c: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        if bx % 2 == 0 {
            for i in T::parallel(block_n) {
                c[bx * block_n + i] = 1;
            }
        } else {
            for i in T::parallel(block_n) {
                c[bx * block_n + i] = 2;
            }
        }
    });
}

#[test]
fn if_statements_and_values() -> TestResult {
    for (s, &n) in [256usize, 1000, 3, 4097].iter().enumerate() {
        let a = random_tensor::<f32>(&[n], 1100 + s as u64, dev())?;
        let mut c = Tensor::full(&[n], f32::NAN, dev())?;
        let mut d = Tensor::full(&[n], f32::NAN, dev())?;
        piecewise(&a, &mut c, &mut d)?;
        let av = host(&a);
        let wc: Vec<f64> = av
            .iter()
            .map(|&x| {
                if x > 0.5 {
                    x
                } else if x > -0.5 {
                    0.0
                } else {
                    round_to::<f32>(x * -2.0)
                }
            })
            .collect();
        let wd: Vec<f64> = av
            .iter()
            .map(|&x| {
                if x < 0.25 {
                    round_to::<f32>(x + 1.0)
                } else if x >= 0.75 {
                    9.0
                } else {
                    -9.0
                }
            })
            .collect();
        check(&format!("piecewise c n={n}"), &c, &wc, 0.0, 0.0);
        check(&format!("piecewise d n={n}"), &d, &wd, 0.0, 0.0);
    }
    for &n in &[100usize, 250, 1, 999] {
        let mut c = Tensor::full(&[n], -1i32, dev())?;
        parity(&mut c)?;
        let want: Vec<i32> = (0..n)
            .map(|e| if (e / 100) % 2 == 0 { 1 } else { 2 })
            .collect();
        check_exact(&format!("parity n={n}"), &c, &want);
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// `let mut` accumulation in serial loops
// ---------------------------------------------------------------------------

/// Row sums and positive counts over a dynamic K, plus a sum over the first
/// half of each row selected with an `if` on the serial index.
#[tile::kernel(block_m = 32, threads = 32)]
pub fn row_stats(
    a: Tensor<f32, (M, K)>,
    sum: TensorMut<f32, (M,)>,
    pos: TensorMut<i32, (M,)>,
    half: TensorMut<f32, (M,)>,
) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        for i in T::parallel(block_m) {
            let row = bx * block_m + i;
            let mut s = 0.0;
            let mut n = 0;
            let mut h: f32 = 0.0;
            for k in T::serial(K) {
                let v = a[(row, k)];
                s += v;
                if v > 0.0 {
                    n += 1;
                }
                if k < K / 2 {
                    h = h + v;
                }
            }
            sum[row] = s;
            pos[row] = n;
            half[row] = h;
        }
    });
}

/// Horner evaluation of a polynomial whose degree is a runtime dim (`coef[0]`
/// is the highest-degree coefficient), with `T::serial(start, end)`, and a
/// `T::unroll` over a constant range.
#[tile::kernel(block_n = 64, unroll_n = 4, threads = 64)]
pub fn horner(x: Tensor<f32, (N,)>, coef: Tensor<f32, (D,)>, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let xv = x[bx * block_n + i];
            let mut acc = 0.0;
            for d in T::serial(0, D) {
                acc = acc * xv + coef[d];
            }
            let mut extra = 0.0;
            for u in T::unroll(unroll_n) {
                extra += (u + 1) as f32;
            }
            y[bx * block_n + i] = acc + extra;
        }
    });
}

#[test]
fn let_mut_accumulation() -> TestResult {
    for (s, &(m, k)) in [(32usize, 16usize), (33, 7), (1, 1), (100, 129), (64, 0)]
        .iter()
        .enumerate()
    {
        let a = random_tensor::<f32>(&[m, k], 1200 + s as u64, dev())?;
        let mut sum = Tensor::full(&[m], f32::NAN, dev())?;
        let mut pos = Tensor::full(&[m], i32::MIN, dev())?;
        let mut half = Tensor::full(&[m], f32::NAN, dev())?;
        row_stats(&a, &mut sum, &mut pos, &mut half)?;
        let av = host(&a);
        let rows: Vec<&[f64]> = if k == 0 {
            vec![&[][..]; m]
        } else {
            av.chunks(k).collect()
        };
        let ws: Vec<f64> = rows.iter().map(|r| r.iter().sum()).collect();
        let wp: Vec<i32> = rows
            .iter()
            .map(|r| r.iter().filter(|&&v| v > 0.0).count() as i32)
            .collect();
        let wh: Vec<f64> = rows.iter().map(|r| r[..k / 2].iter().sum()).collect();
        check(&format!("row sum {m}x{k}"), &sum, &ws, 1e-4, 1e-5);
        check_exact(&format!("row positives {m}x{k}"), &pos, &wp);
        check(&format!("row half-sum {m}x{k}"), &half, &wh, 1e-4, 1e-5);
    }
    Ok(())
}

#[test]
fn serial_range_and_unroll() -> TestResult {
    for (s, &(n, d)) in [(64usize, 3usize), (100, 1), (7, 6), (200, 0)]
        .iter()
        .enumerate()
    {
        let x = random_tensor::<f32>(&[n], 1300 + s as u64, dev())?;
        let coef = random_tensor::<f32>(&[d], 1400 + s as u64, dev())?;
        let mut y = Tensor::full(&[n], f32::NAN, dev())?;
        horner(&x, &coef, &mut y)?;
        let cv = host(&coef);
        let want: Vec<f64> = host(&x)
            .iter()
            .map(|&xv| cv.iter().fold(0.0, |acc, &c| acc * xv + c) + 10.0)
            .collect();
        check(&format!("horner n={n} d={d}"), &y, &want, 1e-5, 1e-5);
    }
    Ok(())
}

/// A bounds guard whose index uses a serial loop variable inside a
/// `T::parallel` nest (`c[d + 1]`, or `a[(row, k)]` with `k in 0..K / 2`).
/// The interior/edge split must not hoist such guards in front of the nest,
/// where the inner loop variable is not defined (a regression test).
#[test]
fn guard_on_inner_loop_variable_compiles() {
    for src in [
        r#"
        #[tile::kernel(block_n = 64, threads = 64)]
        pub fn shifted(c: Tensor<f32, (D,)>, y: TensorMut<f32, (N,)>) {
            T::kernel(T::ceildiv(N, block_n), threads, |bx| {
                for i in T::parallel(block_n) {
                    for d in T::serial(D - 1) {
                        y[bx * block_n + i] = c[d + 1];
                    }
                }
            });
        }
        "#,
        r#"
        #[tile::kernel(block_n = 64, threads = 64)]
        pub fn half_rows(a: Tensor<f32, (M, K)>, y: TensorMut<f32, (M,)>) {
            T::kernel(T::ceildiv(M, block_n), threads, |bx| {
                for i in T::parallel(block_n) {
                    let mut s = 0.0;
                    for k in 0..K / 2 {
                        s += a[(bx * block_n + i, k)];
                    }
                    y[bx * block_n + i] = s;
                }
            });
        }
        "#,
    ] {
        let def = tile_core::frontend::parse_kernel_source(src)
            .unwrap_or_else(|d| panic!("parse: {}", d[0]));
        if let Err(d) = tile_core::compile(def) {
            panic!("compile: {}", d[0]);
        }
    }
}
