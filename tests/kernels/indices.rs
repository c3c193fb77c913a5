//! Indices the compiler cannot prove in bounds: below zero (a stencil's
//! `g - 1`, a halo copy's origin, ids read from memory), beyond 32 bits,
//! and read by a guarded load on a ragged iteration. Reads outside the
//! tensor give 0 and writes outside are skipped, whatever lies beside the
//! tensor in memory: each tensor here is a slice of a larger one whose
//! edges hold a sentinel.

use super::*;

/// Random values in the middle of `n + 2 * pad` elements, `edge` around them.
fn with_edges(n: usize, pad: usize, edge: f32, seed: u64) -> Result<Tensor<f32>, tile::Error> {
    let mut v = vec![edge; n + 2 * pad];
    for (i, x) in random_vec::<f32>(n, seed, -1.0, 1.0)
        .into_iter()
        .enumerate()
    {
        v[pad + i] = x;
    }
    Tensor::from_slice(&v, &[n + 2 * pad], dev())
}

/// `y[g] = x[g - 1] + 2 x[g] + x[g + 1]`, zero outside `x`.
fn stencil_ref(x: &[f64]) -> Vec<f64> {
    let at = |i: isize| x.get(i as usize).copied().filter(|_| i >= 0).unwrap_or(0.0);
    (0..x.len() as isize)
        .map(|g| at(g - 1) + 2.0 * at(g) + at(g + 1))
        .collect()
}

#[tile::kernel(block_n = 128, threads = 128)]
pub fn stencil3(x: Tensor<f32, (N,)>, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let g = bx * block_n + i;
            y[g] = x[g - 1] + 2.0 * x[g] + x[g + 1];
        }
    });
}

/// The same stencil with a halo: each block copies `block_n + 2` elements
/// starting one before its own, so block 0's copy starts at -1.
#[tile::kernel(block_n = 64, halo = 66, threads = 64)]
pub fn stencil3_halo(x: Tensor<f32, (N,)>, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        let s = T::alloc_shared::<f32>([halo]);
        T::copy(x.at(bx * block_n - 1), s);
        for i in T::parallel(block_n) {
            y[bx * block_n + i] = s[i] + 2.0 * s[i + 1] + s[i + 2];
        }
    });
}

#[test]
fn negative_offsets_read_zero_not_the_memory_before() -> TestResult {
    for (s, &n) in [1usize, 5, 64, 128, 130, 1000].iter().enumerate() {
        let parent = with_edges(n, 1, -1000.0, 1300 + s as u64)?;
        let x = parent.slice(0, 1..n + 1)?;
        let want = stencil_ref(&host(&x));
        let mut y = Tensor::full(&[n], f32::NAN, dev())?;
        stencil3(&x, &mut y)?;
        check(&format!("stencil3 n={n}"), &y, &want, 1e-5, 1e-5);
        let mut y = Tensor::full(&[n], f32::NAN, dev())?;
        stencil3_halo(&x, &mut y)?;
        check(&format!("stencil3_halo n={n}"), &y, &want, 1e-5, 1e-5);
    }
    Ok(())
}

/// `out[t, :] = table[ids[t], :]`: a row of zeros for an id outside the table.
#[tile::kernel(block_d = 32, threads = 32)]
pub fn embedding(table: Tensor<f32, (V, D)>, ids: Tensor<i32, (S,)>, out: TensorMut<f32, (S, D)>) {
    T::kernel([T::ceildiv(D, block_d), S], threads, |bx, by| {
        for d in T::parallel(block_d) {
            out[(by, bx * block_d + d)] = table[(ids[by], bx * block_d + d)];
        }
    });
}

#[test]
fn ids_below_zero_or_past_the_table_read_zero() -> TestResult {
    let (v, d) = (5usize, 40usize);
    // Two sentinel rows before and after the table.
    let parent = with_edges(v * d, 2 * d, 777.0, 1310)?.reshape(&[v + 4, d])?;
    let table = parent.slice(0, 2..v + 2)?;
    let ids = [-1i32, 0, -2, 4, 5, 6, i32::MIN, i32::MAX, 3, -7];
    let idt = Tensor::from_slice(&ids, &[ids.len()], dev())?;
    let mut out = Tensor::full(&[ids.len(), d], f32::NAN, dev())?;
    embedding(&table, &idt, &mut out)?;
    let rows = host(&table);
    let rows = &rows;
    let want: Vec<f64> = ids
        .iter()
        .flat_map(|&id| {
            let r = usize::try_from(id).ok().filter(|&r| r < v);
            (0..d).map(move |c| r.map_or(0.0, |r| rows[r * d + c]))
        })
        .collect();
    check("embedding", &out, &want, 0.0, 0.0);
    Ok(())
}

/// `y[idx[g]] = x[g]` with 64-bit indices.
#[tile::kernel(block_n = 64, threads = 64)]
pub fn scatter(x: Tensor<f32, (N,)>, idx: Tensor<i64, (N,)>, y: TensorMut<f32, (P,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let g = bx * block_n + i;
            y[idx[g]] = x[g];
        }
    });
}

/// The same through a `let`: the index is a value read into a scalar first.
#[tile::kernel(block_n = 64, threads = 64)]
pub fn scatter_let(x: Tensor<f32, (N,)>, idx: Tensor<i64, (N,)>, y: TensorMut<f32, (P,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let g = bx * block_n + i;
            let j = idx[g];
            y[j] = x[g];
        }
    });
}

#[test]
fn writes_to_negative_wide_or_ragged_indices_are_skipped() -> TestResult {
    // n = 70 leaves 58 ragged iterations in the second block: their `idx[g]`
    // reads 0, and the write to y[0] must not happen (no valid index is 0).
    let (n, p) = (70usize, 100usize);
    let idx: Vec<i64> = (0..n as i64)
        .map(|g| match g % 7 {
            0 => -1,
            1 => (1i64 << 32) + 1 + g, // wraps to 1 + g in 32 bits
            2 => -(1i64 << 32) + 2,    // wraps to 2
            3 => p as i64 + g,
            _ => g + 3,
        })
        .collect();
    let x = random_tensor::<f32>(&[n], 1320, dev())?;
    let xs = host(&x);
    let mut want = vec![55.0f64; p + 2];
    for (g, &j) in idx.iter().enumerate() {
        if (0..p as i64).contains(&j) {
            want[1 + j as usize] = xs[g];
        }
    }
    let idt = Tensor::from_slice(&idx, &[n], dev())?;
    type Scatter = fn(&Tensor<f32>, &Tensor<i64>, &mut Tensor<f32>) -> Result<(), tile::Error>;
    let kernels: [(&str, Scatter); 2] = [
        ("scatter", |x, i, y| scatter(x, i, y)),
        ("scatter_let", |x, i, y| scatter_let(x, i, y)),
    ];
    for (name, k) in kernels {
        let parent = Tensor::full(&[p + 2], 55.0f32, dev())?;
        let mut y = parent.slice(0, 1..p + 1)?;
        k(&x, &idt, &mut y)?;
        check(name, &parent, &want, 0.0, 0.0);
    }
    Ok(())
}

/// `c = A' · B` where row `r` of `A'` is row `r - 1` of `A` (zero for the
/// first): the A tile's origin is one row above the block's. On CUDA that
/// copy cannot be a `cp.async` tile copy (its edge predicate counts rows
/// from the origin) and becomes a guarded loop; B's stays a tile copy.
#[tile::kernel(block_m = 64, block_n = 64, block_k = 32, threads = 128)]
pub fn shifted_gemm(a: Tensor<f16, (M, K)>, b: Tensor<f16, (K, N)>, c: TensorMut<f32, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_m, block_k]);
            let b_s = T::alloc_shared::<f16>([block_k, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::clear(acc);
            for k in T::pipelined(T::ceildiv(K, block_k), 2) {
                T::copy(a.at([by * block_m - 1, k * block_k]), a_s);
                T::copy(b.at([k * block_k, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

#[test]
fn a_tile_copy_from_a_row_above_the_tensor_reads_zeros() -> TestResult {
    for (s, &(m, n, k)) in [(64, 64, 32), (70, 33, 45), (1, 8, 8)].iter().enumerate() {
        let a = random_tensor::<f16>(&[m, k], 1330 + s as u64, dev())?;
        let b = random_tensor::<f16>(&[k, n], 1340 + s as u64, dev())?;
        let (ha, hb) = (host(&a), host(&b));
        let want: Vec<f64> = (0..m * n)
            .map(|e| {
                let (r, c) = (e / n, e % n);
                match r {
                    0 => 0.0,
                    r => (0..k).map(|t| ha[(r - 1) * k + t] * hb[t * n + c]).sum(),
                }
            })
            .collect();
        let mut c = Tensor::full(&[m, n], f32::NAN, dev())?;
        shifted_gemm(&a, &b, &mut c)?;
        check(&format!("shifted_gemm {m}x{n}x{k}"), &c, &want, 1e-3, 1e-3);
    }
    Ok(())
}
