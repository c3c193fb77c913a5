//! The padding of reads outside a tensor: `T::copy(.., pad = v)` and
//! `T::padded(x[i], v)`. Every input here is negative, so a running maximum
//! that read the default 0 past the edge would be wrong; the f32 tensors
//! are slices of larger ones whose edges hold a large sentinel, so a read
//! past the edge would be wrong too.

use super::*;

/// Row maxima of `x` (`block_m` rows a block, `block_n` columns a step),
/// through a fragment that a padded copy fills.
#[tile::kernel(block_m = 4, block_n = 64, threads = 64)]
pub fn row_max_padded(x: Tensor<f32, (M, N)>, y: TensorMut<f32, (M,)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bm| {
        let tile = T::alloc_fragment::<f32>([block_m, block_n]);
        let m = T::alloc_fragment::<f32>([block_m]);
        T::fill(m, -T::infinity::<f32>());
        for k in T::serial(T::ceildiv(N, block_n)) {
            T::copy(
                x.at([bm * block_m, k * block_n]),
                tile,
                pad = -T::infinity::<f32>(),
            );
            T::reduce_max(tile, m, 1, false);
        }
        T::copy(m, y.at([bm * block_m]));
    });
}

/// The same through shared tiles in a software pipeline, from f16 (the pad
/// is converted to the tile's f16; the shared tile is row-major f16 as a
/// tensor-core operand would be).
#[tile::kernel(block_m = 16, block_n = 64, stages = 3, threads = 128)]
pub fn row_max_pipelined(x: Tensor<f16, (M, N)>, y: TensorMut<f32, (M,)>) {
    T::kernel(T::ceildiv(M, block_m), threads, |bm| {
        let s = T::alloc_shared::<f16>([block_m, block_n]);
        let tile = T::alloc_fragment::<f32>([block_m, block_n]);
        let m = T::alloc_fragment::<f32>([block_m]);
        T::fill(m, -T::infinity::<f32>());
        for k in T::pipelined(T::ceildiv(N, block_n), stages) {
            T::copy(
                x.at([bm * block_m, k * block_n]),
                s,
                pad = -T::infinity::<f16>(),
            );
            T::copy(s, tile);
            T::reduce_max(tile, m, 1, false);
        }
        T::copy(m, y.at([bm * block_m]));
    });
}

/// `y[i] = x[i + 1] * x[i - 1]`, with 1 outside `x` (a product's padding).
#[tile::kernel(block_n = 128, threads = 128)]
pub fn neighbour_product(x: Tensor<f32, (N,)>, y: TensorMut<f32, (N,)>) {
    T::kernel(T::ceildiv(N, block_n), threads, |bx| {
        for i in T::parallel(block_n) {
            let g = bx * block_n + i;
            y[g] = T::padded(x[g + 1], 1.0) * T::padded(x[g - 1], 1.0);
        }
    });
}

/// A matrix of `rows × cols` values in `(-2, -1)`, between rows of `1e30`
/// (the tensor is a slice of the larger one; four rows before it keep it
/// 16-byte aligned).
fn negative_matrix(rows: usize, cols: usize, seed: u64) -> Result<Tensor<f32>, tile::Error> {
    let mut v = vec![1e30f32; (rows + 5) * cols];
    v[4 * cols..(rows + 4) * cols].copy_from_slice(&random_vec::<f32>(
        rows * cols,
        seed,
        -2.0,
        -1.0,
    ));
    Tensor::from_slice(&v, &[rows + 5, cols], dev())?.slice(0, 4..rows + 4)
}

fn row_max_ref(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    (0..rows)
        .map(|r| {
            x[r * cols..(r + 1) * cols]
                .iter()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect()
}

#[test]
fn a_padded_copy_reads_the_pad_past_the_edge() -> TestResult {
    for (s, &(rows, cols)) in [
        (4usize, 64usize),
        (5, 70),
        (1, 1),
        (37, 200),
        (16, 63),
        (33, 129),
    ]
    .iter()
    .enumerate()
    {
        let x = negative_matrix(rows, cols, 1400 + s as u64)?;
        let want = row_max_ref(&host(&x), rows, cols);
        let mut y = Tensor::full(&[rows], f32::NAN, dev())?;
        row_max_padded(&x, &mut y)?;
        check(
            &format!("row_max_padded {rows}x{cols}"),
            &y,
            &want,
            0.0,
            0.0,
        );

        // f16 needs a contiguous copy of its own (the values round to f16).
        let vals: Vec<f16> = host(&x).iter().map(|&v| f16::from_f64(v)).collect();
        let xh = Tensor::from_slice(&vals, &[rows, cols], dev())?;
        let want = row_max_ref(&host(&xh), rows, cols);
        let mut y = Tensor::full(&[rows], f32::NAN, dev())?;
        row_max_pipelined(&xh, &mut y)?;
        check(
            &format!("row_max_pipelined {rows}x{cols}"),
            &y,
            &want,
            0.0,
            0.0,
        );
    }
    Ok(())
}

#[test]
fn a_padded_read_gives_the_pad_outside_the_tensor() -> TestResult {
    for (s, &n) in [1usize, 2, 127, 128, 129, 1000].iter().enumerate() {
        let parent = Tensor::from_slice(
            &[
                vec![1e30f32],
                random_vec::<f32>(n, 1410 + s as u64, -2.0, -1.0),
                vec![1e30f32],
            ]
            .concat(),
            &[n + 2],
            dev(),
        )?;
        let x = parent.slice(0, 1..n + 1)?;
        let xv = host(&x);
        let at = |i: isize| {
            if i < 0 || i as usize >= n {
                1.0
            } else {
                xv[i as usize]
            }
        };
        let want: Vec<f64> = (0..n as isize).map(|g| at(g + 1) * at(g - 1)).collect();
        let mut y = Tensor::full(&[n], f32::NAN, dev())?;
        neighbour_product(&x, &mut y)?;
        check(&format!("neighbour_product n={n}"), &y, &want, 1e-6, 1e-6);
    }
    Ok(())
}
