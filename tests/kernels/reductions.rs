//! Reductions, scans, atomics, variables, swizzle and print.

use super::*;

// ---------------------------------------------------------------------------
// Reductions, scans, atomics, variables, swizzle, print
// ---------------------------------------------------------------------------

/// Every reduction over both dims of a fragment tile, from f16 into f32.
#[tile::kernel(m = 8, n = 64, ops = 4, threads = 128)]
pub fn reduce_all(
    a: Tensor<f16, (m, n)>,
    rows: TensorMut<f32, (ops, m)>,
    cols: TensorMut<f32, (ops, n)>,
) {
    T::kernel(1, threads, |bx| {
        let t = T::alloc_fragment::<f16>([m, n]);
        let r = T::alloc_fragment::<f32>([m]);
        let c = T::alloc_shared::<f32>([n]);
        T::copy(a.at([bx * m, 0]), t);
        T::reduce_sum(t, r, 1);
        T::copy(r, rows.at([0, 0]));
        T::reduce_max(t, r, 1);
        T::copy(r, rows.at([1, 0]));
        T::reduce_min(t, r, 1);
        T::copy(r, rows.at([2, 0]));
        T::reduce_abssum(t, r, 1);
        T::copy(r, rows.at([3, 0]));
        T::reduce_sum(t, c, 0);
        T::copy(c, cols.at([0, 0]));
        T::reduce_max(t, c, 0);
        T::copy(c, cols.at([1, 0]));
        T::reduce_min(t, c, dim = 0);
        T::copy(c, cols.at([2, 0]));
        T::reduce_abssum(t, c, 0, true);
        T::copy(c, cols.at([3, 0]));
    });
}

/// Accumulating reductions (`clear = false`) over the column tiles of a row
/// block, from a shared tile; dynamic N, ragged tiles zero-padded.
#[tile::kernel(block_m = 4, block_n = 32, threads = 64)]
pub fn row_sums(x: Tensor<f32, (M, N)>, y: TensorMut<f32, (M,)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let tile = T::alloc_shared::<f32>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m]);
        T::clear(acc);
        for k in T::serial(T::ceildiv(N, block_n)) {
            T::copy(x.at([bx * block_m, k * block_n]), tile);
            T::reduce_sum(tile, acc, 1, false);
        }
        T::copy(acc, y.at(bx * block_m));
    });
}

#[test]
fn reductions() -> TestResult {
    let (m, n) = (8, 64);
    let a = random_tensor::<f16>(&[m, n], 3100, dev())?;
    let mut rows = Tensor::full(&[4, m], f32::NAN, dev())?;
    let mut cols = Tensor::full(&[4, n], f32::NAN, dev())?;
    reduce_all(&a, &mut rows, &mut cols)?;
    let av = host(&a);
    let mut want_rows = vec![0f64; 4 * m];
    let mut want_cols = vec![0f64; 4 * n];
    for (k, op) in [0usize, 1, 2, 3].iter().enumerate() {
        let f = |xs: Vec<f64>| match op {
            0 => xs.iter().sum(),
            1 => xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
            2 => xs.iter().cloned().fold(f64::INFINITY, f64::min),
            _ => xs.iter().map(|x| x.abs()).sum(),
        };
        for i in 0..m {
            want_rows[k * m + i] = f((0..n).map(|j| av[i * n + j]).collect());
        }
        for j in 0..n {
            want_cols[k * n + j] = f((0..m).map(|i| av[i * n + j]).collect());
        }
    }
    check("row reductions", &rows, &want_rows, 1e-4, 1e-5);
    check("column reductions", &cols, &want_cols, 1e-4, 1e-5);

    for (s, &(m, n)) in [(64, 32), (37, 100), (4, 1)].iter().enumerate() {
        let x = random_tensor::<f32>(&[m, n], 3200 + s as u64, dev())?;
        let mut y = Tensor::full(&[m], f32::NAN, dev())?;
        row_sums(&x, &mut y)?;
        let xv = host(&x);
        let want: Vec<f64> = (0..m)
            .map(|i| (0..n).map(|j| xv[i * n + j]).sum())
            .collect();
        check(&format!("row_sums {m}x{n}"), &y, &want, 1e-4, 1e-5);
    }
    Ok(())
}

#[tile::kernel(m = 6, n = 40, threads = 64)]
pub fn scans(
    a: Tensor<f32, (m, n)>,
    along_rows: TensorMut<f32, (m, n)>,
    along_cols: TensorMut<f32, (m, n)>,
    reversed: TensorMut<f32, (m, n)>,
) {
    T::kernel(1, threads, |bx| {
        let t = T::alloc_shared::<f32>([m, n]);
        let o = T::alloc_fragment::<f32>([m, n]);
        T::copy(a.at([bx, 0]), t);
        T::cumsum(t, o, 1);
        T::copy(o, along_rows);
        T::cumsum(t, o, 0);
        T::copy(o, along_cols);
        T::cumsum(t, o, dim = 1, reverse = true);
        T::copy(o, reversed);
    });
}

#[test]
fn cumulative_sums() -> TestResult {
    let (m, n) = (6, 40);
    let a = random_tensor::<f32>(&[m, n], 3300, dev())?;
    let mut r = Tensor::full(&[m, n], f32::NAN, dev())?;
    let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
    let mut v = Tensor::full(&[m, n], f32::NAN, dev())?;
    scans(&a, &mut r, &mut c, &mut v)?;
    let av = host(&a);
    let (mut wr, mut wc, mut wv) = (vec![0f64; m * n], vec![0f64; m * n], vec![0f64; m * n]);
    for i in 0..m {
        for j in 0..n {
            wr[i * n + j] = (0..=j).map(|k| av[i * n + k]).sum();
            wc[i * n + j] = (0..=i).map(|k| av[k * n + j]).sum();
            wv[i * n + j] = (j..n).map(|k| av[i * n + k]).sum();
        }
    }
    check("cumsum dim 1", &r, &wr, 1e-4, 1e-5);
    check("cumsum dim 0", &c, &wc, 1e-4, 1e-5);
    check("cumsum reverse", &v, &wv, 1e-4, 1e-5);
    Ok(())
}

/// Column sums by atomics from every block: element form and tile form.
#[tile::kernel(block_m = 16, n = 64, threads = 64)]
pub fn atomic_col_sums(x: Tensor<f32, (M, n)>, s1: TensorMut<f32, (n,)>, s2: TensorMut<f32, (n,)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bx| {
        let part = T::alloc_shared::<f32>([n]);
        let t = T::alloc_shared::<f32>([block_m, n]);
        T::copy(x.at([bx * block_m, 0]), t);
        T::reduce_sum(t, part, 0);
        for j in T::parallel(n) {
            T::atomic_add(s1[j], part[j]);
        }
        T::atomic_add(s2.at(0), part);
    });
}

#[test]
fn atomic_adds_from_every_block() -> TestResult {
    for (s, m) in [64usize, 100, 3].into_iter().enumerate() {
        let n = 64;
        let x = random_tensor::<f32>(&[m, n], 3400 + s as u64, dev())?;
        let mut s1 = Tensor::zeros(&[n], dev())?;
        let mut s2 = Tensor::zeros(&[n], dev())?;
        atomic_col_sums(&x, &mut s1, &mut s2)?;
        let xv = host(&x);
        let want: Vec<f64> = (0..n)
            .map(|j| (0..m).map(|i| xv[i * n + j]).sum())
            .collect();
        check(
            &format!("atomic element form m={m}"),
            &s1,
            &want,
            1e-4,
            1e-5,
        );
        check(&format!("atomic tile form m={m}"), &s2, &want, 1e-4, 1e-5);
    }
    Ok(())
}

/// `T::alloc_var`, `T::infinity`, `T::max_value`.
#[tile::kernel(block_n = 128, k8 = 8, threads = 128)]
pub fn running_min(x: Tensor<f32, (N, k8)>, y: TensorMut<f32, (N,)>, z: TensorMut<i32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let lo = T::alloc_var::<f32>(T::infinity::<f32>());
            let count = T::alloc_var::<i32>();
            for k in T::serial(k8) {
                lo = T::min(lo, x[(bx * block_n + i, k)]);
                count += 1;
            }
            y[bx * block_n + i] = lo;
            z[bx * block_n + i] = T::min(count, T::max_value::<i32>());
        }
    });
}

#[test]
fn variables_and_constants() -> TestResult {
    let n = 300;
    let x = random_tensor::<f32>(&[n, 8], 3500, dev())?;
    let mut y = Tensor::full(&[n], f32::NAN, dev())?;
    let mut z = Tensor::full(&[n], -1i32, dev())?;
    running_min(&x, &mut y, &mut z)?;
    let xv = host(&x);
    let want: Vec<f64> = (0..n)
        .map(|i| (0..8).map(|k| xv[i * 8 + k]).fold(f64::INFINITY, f64::min))
        .collect();
    check("running min", &y, &want, 0.0, 0.0);
    check_exact("count", &z, &vec![8; n]);
    Ok(())
}

/// A 2-D element-wise kernel with block rasterization: every tile must still
/// be visited exactly once.
#[tile::kernel(block_m = 16, block_n = 16, threads = 128)]
pub fn swizzled_add(a: Tensor<f32, (M, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            T::use_swizzle(3);
            for (i, j) in T::parallel([block_m, block_n]) {
                c[(by * block_m + i, bx * block_n + j)] =
                    a[(by * block_m + i, bx * block_n + j)] + 1.0;
            }
        },
    );
}

#[test]
fn swizzle_visits_every_tile_once() -> TestResult {
    for (s, &(m, n)) in [(100, 200), (16, 16), (250, 33)].iter().enumerate() {
        let a = random_tensor::<f32>(&[m, n], 3600 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        swizzled_add(&a, &mut c)?;
        let want: Vec<f64> = host(&a).iter().map(|v| round_to::<f32>(v + 1.0)).collect();
        check(&format!("swizzled {m}x{n}"), &c, &want, 0.0, 0.0);
    }
    Ok(())
}

#[tile::kernel(n = 4, threads = 32)]
pub fn printer(a: Tensor<f32, (n,)>) {
    T::kernel(1, threads, |bx| {
        let t = T::alloc_shared::<f32>([n]);
        T::copy(a, t);
        T::print(t[0] + t[1], "sum of the first two");
        T::print(t);
    });
}

#[test]
fn print_runs() -> TestResult {
    let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4], dev())?;
    printer(&a)?;
    dev().synchronize()?;
    Ok(())
}

/// `T::get_thread_binding` in a CUDA-only kernel: each thread writes its index.
#[tile::kernel(n = 128, threads = 128, target = "cuda")]
pub fn lane_ids(c: TensorMut<i32, (n,)>) {
    T::kernel(1, threads, |bx| {
        let t = T::alloc_local::<i32>([1]);
        t[0] = T::get_thread_binding();
        c[t[0]] = t[0];
    });
}

#[test]
fn thread_binding_is_cuda_only() -> TestResult {
    assert!(lane_ids::SPEC.cpu.source.is_empty());
    assert!(lane_ids::SPEC.cuda.source.contains("threadIdx.x"));
    let mut c = Tensor::full(&[128], -1i32, dev())?;
    let r = lane_ids(&mut c);
    if dev().is_cuda() {
        r?;
        check_exact("lane ids", &c, &(0..128).collect::<Vec<i32>>());
    } else {
        assert!(r.is_err(), "a CUDA-only kernel must refuse a CPU launch");
        check_exact("untouched", &c, &vec![-1; 128]);
    }
    Ok(())
}

/// A transpose through a swizzled shared tile (`T::annotate_layout`): rows
/// are written and columns read; the layout changes where elements live, not
/// the result.
#[tile::kernel(b = 64, threads = 128)]
pub fn transpose_swizzled(a: Tensor<f16, (M, N)>, c: TensorMut<f16, (N, M)>) {
    T::kernel([T::ceildiv(N, b), T::ceildiv(M, b)], threads, |bx, by| {
        let s = T::alloc_shared::<f16>([b, b]);
        T::annotate_layout(s, T::swizzled);
        T::copy(a.at([by * b, bx * b]), s);
        for (i, j) in T::parallel([b, b]) {
            c[(bx * b + i, by * b + j)] = s[(j, i)];
        }
    });
}

#[test]
fn swizzled_layout_transpose() -> TestResult {
    assert!(transpose_swizzled::SPEC.ir.contains("layout=\"swizzled\""));
    for (s, &(m, n)) in [(128, 64), (100, 70)].iter().enumerate() {
        let a = random_tensor::<f16>(&[m, n], 3700 + s as u64, dev())?;
        let mut c = Tensor::full(&[n, m], f16::NAN, dev())?;
        transpose_swizzled(&a, &mut c)?;
        let av = host(&a);
        let want: Vec<f64> = (0..n * m).map(|x| av[(x % m) * n + x / m]).collect();
        check(&format!("transpose {m}x{n}"), &c, &want, 0.0, 0.0);
    }
    Ok(())
}

/// Outputs the launcher allocates (`Output<..>`, TileLang's `out_idx`):
/// shapes come from the inputs' bound dims; the call returns them.
#[tile::kernel(block_n = 256, threads = 128)]
pub fn add_and_scale(
    a: Tensor<f32, (M, N)>,
    b: Tensor<f32, (M, N)>,
    sum: Output<f32, (M, N)>,
    scaled: Output<f16, (M, N)>,
) {
    T::kernel([T::ceildiv(N, block_n), M], threads, |bx, by| {
        for j in T::parallel(block_n) {
            sum[(by, bx * block_n + j)] = a[(by, bx * block_n + j)] + b[(by, bx * block_n + j)];
            scaled[(by, bx * block_n + j)] = (a[(by, bx * block_n + j)] * 0.5) as f16;
        }
    });
}

#[tile::kernel(threads = 64)]
pub fn negate(a: Tensor<f32, (N,)>, out: Output<f32, (N,)>) {
    T::kernel(T::ceildiv(N, 64), threads, |bx| {
        for i in T::parallel(64) {
            out[bx * 64 + i] = -a[bx * 64 + i];
        }
    });
}

#[test]
fn launcher_allocated_outputs() -> TestResult {
    for (s, &(m, n)) in [(3, 256), (5, 1000)].iter().enumerate() {
        let a = random_tensor::<f32>(&[m, n], 3800 + s as u64, dev())?;
        let b = random_tensor::<f32>(&[m, n], 3900 + s as u64, dev())?;
        let (sum, scaled) = add_and_scale(&a, &b)?;
        assert_eq!(sum.shape(), &[m, n]);
        assert_eq!(scaled.device(), dev());
        let (av, bv) = (host(&a), host(&b));
        let want: Vec<f64> = av
            .iter()
            .zip(&bv)
            .map(|(x, y)| round_to::<f32>(x + y))
            .collect();
        check("sum", &sum, &want, 0.0, 0.0);
        let half: Vec<f64> = av.iter().map(|x| round_to::<f16>(x * 0.5)).collect();
        check("scaled", &scaled, &half, 0.0, 0.0);
    }
    let a = random_tensor::<f32>(&[1000], 4000, dev())?;
    let out = negate::on(&dev().default_stream()?).launch(&a)?;
    check(
        "negate",
        &out,
        &host(&a).iter().map(|x| -x).collect::<Vec<_>>(),
        0.0,
        0.0,
    );
    // A bad input is refused before anything is launched.
    let bad = random_tensor::<f32>(&[4, 300], 4001, dev())?;
    let err = add_and_scale(&a.reshape(&[4, 250])?, &bad)
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("input b shape mismatch"), "{err}");
    Ok(())
}

/// A 64 KiB shared tile: past the 48 KiB static limit the CUDA backend uses
/// dynamic shared memory (the runtime sizes it at launch).
#[tile::kernel(bm = 64, n = 256, threads = 256)]
pub fn big_shared_scale(a: Tensor<f32, (M, n)>, c: TensorMut<f32, (M, n)>) {
    T::kernel(T::ceildiv(M, bm), threads, |bx| {
        let s = T::alloc_shared::<f32>([bm, n]);
        T::copy(a.at([bx * bm, 0]), s);
        for (i, j) in T::parallel([bm, n]) {
            s[(i, j)] = s[(i, j)] * 3.0;
        }
        T::copy(s, c.at([bx * bm, 0]));
    });
}

#[test]
fn shared_memory_beyond_48k() -> TestResult {
    assert_eq!(big_shared_scale::SPEC.cuda.shared_bytes, 64 * 256 * 4);
    assert!(big_shared_scale::SPEC
        .cuda
        .source
        .contains("extern __shared__"));
    for (s, m) in [128usize, 100].into_iter().enumerate() {
        let a = random_tensor::<f32>(&[m, 256], 4100 + s as u64, dev())?;
        let mut c = Tensor::full(&[m, 256], f32::NAN, dev())?;
        big_shared_scale(&a, &mut c)?;
        let want: Vec<f64> = host(&a).iter().map(|x| round_to::<f32>(x * 3.0)).collect();
        check(&format!("big shared m={m}"), &c, &want, 0.0, 0.0);
    }
    Ok(())
}
