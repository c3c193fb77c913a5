//! A tile copied once before a warp-specialized loop and read in every
//! iteration (on Hopper the producer's prologue, `prologue=(a_s)`: it issues
//! the copy right before the first stage's, on a barrier of its own). Beside
//! attention's Q, this puts it under a loop whose consumer is one gemm (one
//! `wgmma` group in flight), on one and on two consumer warpgroups, with
//! ragged rows (the engine's zero fill past M) and row pitches off 16 bytes
//! (the consumers' element-wise fallback copies the tile themselves). The
//! persistent form loads it again for each of a block's tiles, once the
//! consumers released the last one's (a second barrier, its parity flipping
//! from tile to tile).

use super::*;

/// `c = a · (b_0 + b_1 + ..)`: the block's `block_m × 64` rows of `a` once,
/// then each `64 × block_n` tile of `b` down its rows, all multiplied by
/// the same `a` tile into one accumulator.
#[tile::kernel(
    block_m = [64, 128],
    block_n = 64,
    dim = 64,
    stages = 3,
    threads = [128, 256],
    filter = (block_m == 64) == (threads == 128)
)]
pub fn prologue_gemm(a: Tensor<f16, (M, dim)>, b: Tensor<f16, (R, N)>, c: TensorMut<f16, (M, N)>) {
    T::kernel(
        [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
        threads,
        |bx, by| {
            let a_s = T::alloc_shared::<f16>([block_m, dim]);
            let b_s = T::alloc_shared::<f16>([dim, block_n]);
            let acc = T::alloc_fragment::<f32>([block_m, block_n]);
            T::copy(a.at([by * block_m, 0]), a_s);
            T::clear(acc);
            for kt in T::pipelined(T::ceildiv(R, dim), stages) {
                T::copy(b.at([kt * dim, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        },
    );
}

/// [`prologue_gemm`] as a persistent kernel: 5 blocks walk the output
/// tiles, each reloading its `a` tile per output tile.
#[tile::kernel(
    block_m = [64, 128],
    block_n = 64,
    dim = 64,
    stages = 3,
    threads = [128, 256],
    blocks = 5,
    filter = (block_m == 64) == (threads == 128)
)]
pub fn prologue_persistent(
    a: Tensor<f16, (M, dim)>,
    b: Tensor<f16, (R, N)>,
    c: TensorMut<f16, (M, N)>,
) {
    T::kernel(blocks, threads, |bid| {
        let a_s = T::alloc_shared::<f16>([block_m, dim]);
        let b_s = T::alloc_shared::<f16>([dim, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, block_n]);
        for (bx, by) in T::persistent(
            [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
            blocks,
            bid,
        ) {
            T::copy(a.at([by * block_m, 0]), a_s);
            T::clear(acc);
            for kt in T::pipelined(T::ceildiv(R, dim), stages) {
                T::copy(b.at([kt * dim, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            T::copy(acc, c.at([by * block_m, bx * block_n]));
        }
    });
}

/// [`prologue_persistent`] with the `a` tile declared per output tile and
/// the output staged through a shared tile declared after the loop: the
/// staging tile takes `a`'s bytes, so on Hopper the consumers release the
/// prologue only once they have read the staged output (the next tile's
/// `a` is copied into the same bytes).
#[tile::kernel(
    block_m = [64, 128],
    block_n = 64,
    dim = 64,
    stages = 3,
    threads = [128, 256],
    blocks = 5,
    filter = (block_m == 64) == (threads == 128)
)]
pub fn prologue_persistent_staged(
    a: Tensor<f16, (M, dim)>,
    b: Tensor<f16, (R, N)>,
    c: TensorMut<f16, (M, N)>,
) {
    T::kernel(blocks, threads, |bid| {
        let b_s = T::alloc_shared::<f16>([dim, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, block_n]);
        for (bx, by) in T::persistent(
            [T::ceildiv(N, block_n), T::ceildiv(M, block_m)],
            blocks,
            bid,
        ) {
            let a_s = T::alloc_shared::<f16>([block_m, dim]);
            T::copy(a.at([by * block_m, 0]), a_s);
            T::clear(acc);
            for kt in T::pipelined(T::ceildiv(R, dim), stages) {
                T::copy(b.at([kt * dim, bx * block_n]), b_s);
                T::gemm(a_s, b_s, acc);
            }
            let c_s = T::alloc_shared::<f16>([block_m, block_n]);
            T::annotate_layout(c_s, T::swizzled);
            T::copy(acc, c_s);
            T::copy(c_s, c.at([by * block_m, bx * block_n]));
        }
    });
}

#[test]
fn prologue_tile_read_by_every_iteration() -> TestResult {
    // Whole tiles; ragged M and R; one k step; N off 16 bytes a row (130:
    // the fallback, which copies `a`'s tile in the consumers).
    // Persistent: 3 to 21 tiles over 5 blocks.
    for (m, n, r) in [
        (128, 128, 192),
        (200, 192, 100),
        (64, 64, 64),
        (77, 130, 130),
        (390, 448, 200),
    ] {
        let a = random_tensor::<f16>(&[m, 64], 7300 + m as u64, dev())?;
        let b = random_tensor::<f16>(&[r, n], 7400 + n as u64, dev())?;
        // a · (sum of b's 64-row tiles, the last one zero-padded).
        let bh = host(&b);
        let tiles = r.div_ceil(64);
        let mut bsum = vec![0.0f64; 64 * n];
        for t in 0..tiles {
            for i in 0..64 {
                let row = t * 64 + i;
                if row < r {
                    for j in 0..n {
                        bsum[i * n + j] += bh[row * n + j];
                    }
                }
            }
        }
        let want: Vec<f64> = matmul_ref(&host(&a), &bsum, m, n, 64, false)
            .into_iter()
            .map(round_to::<f16>)
            .collect();
        // Every variant of each kernel against the same reference (a macro:
        // each kernel is a module of its own types).
        macro_rules! each_variant {
            ($($kernel:ident),*) => {$(
                for (cfg, label) in $kernel::CONFIGS.iter().zip($kernel::LABELS) {
                    let mut c = Tensor::full(&[m, n], f16::NAN, dev())?;
                    $kernel::with(*cfg).launch(&a, &b, &mut c)?;
                    let what = format!("{} {label}, {m}x{n}, R {r}", stringify!($kernel));
                    check(&what, &c, &want, 3e-2, 3e-2);
                }
            )*};
        }
        each_variant!(
            prologue_gemm,
            prologue_persistent,
            prologue_persistent_staged
        );
    }
    Ok(())
}
