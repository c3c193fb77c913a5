//! FlashAttention forward, TileLang's flagship example in tile:
//! `O = softmax(Q Kᵀ / √d) V` for `B` batches of `H` query heads over `S`
//! positions, f16 or bf16 in and out, f32 accumulation. Keys and values have `HKV`
//! heads, each shared by `H / HKV` query heads (grouped-query attention;
//! `HKV = H` is plain multi-head attention). A block owns `block_m` query
//! rows of one head at a time (at head dim 64 the kernels are persistent,
//! a fixed grid of blocks walking those tiles, except causal ones at
//! shapes where that grid would share the work unevenly); it walks the keys in tiles of
//! `block_n` with an online softmax (running row maximum `m`, running row
//! sum `l`, the output rescaled when the maximum grows), so the `S × S`
//! score matrix never leaves the chip.
//!
//! Written with fragments, the way a TileLang user writes it: the scores `s`
//! and the output `acc` are tensor-core accumulators, the per-row statistics
//! are 1-D fragments that the compiler ties to the accumulators' rows (each
//! thread holds the rows its accumulator registers cover, so the row
//! reductions are register work and two shuffles), and the probabilities `p`
//! are converted in registers and fed to the second product as its A
//! operand. Keys past `S` (a ragged last tile) are masked to -inf; the causal
//! kernels also mask keys after the query and stop the key loop at the
//! block's last query.
//!
//! `cargo run --release --example flash_attention [B] [H] [HKV] [S]` (checks
//! every kernel at that shape; without arguments on a GPU it also times the
//! benchmark shapes); `cargo run --release --example flash_attention bench`
//! only times them. `flash_attention sweep` times D128 over key lengths
//! 1024 to 16384 at whole waves of 132 blocks (`SWEEP_SHAPES`);
//! `flash_attention time B H HKV S D [causal]` times one shape in f16.

use std::time::Instant;
use tile::prelude::*;

// The order of a causal kernel's blocks. A query tile's work grows with its
// index (later queries see more keys), and the hardware hands out blocks in
// the order of their linear index as multiprocessors free up. Taking the
// heaviest tiles first leaves light ones for the end, where they fill the
// last multiprocessors evenly; head-major order (the grid as written) ends
// on a head's heaviest tiles, which a simulation of B4 H32 S4096 on 132
// multiprocessors puts 3.9% behind the even split (8% at B1 H64). Tiles are
// taken in sections of heads whose keys and values fit L2 together, so
// the blocks running at once share them, as in FlashAttention 3's
// scheduler; across all heads at once each block would read its keys and
// values from memory. Measured on an H100 against the grid's order: 0–1%
// faster at B4 H32 S4096 D128 (f16 and bf16), 2.5–7% at B4 H16 S4096 D256
// (bench/RESULTS.md). A persistent kernel, whose fixed blocks take tiles
// in a fixed order, balances causal work only at some shapes, so the causal
// kernels launch a block per tile, except at head dim 64 where the
// persistent one is even (see `persistent_balances`).

/// Heads per section: about 16 MiB of 2-byte keys and values (`s` rows of
/// `dim` each), at least one head and at most all of them.
#[tile::func]
fn causal_section(heads: i32, s: i32, dim: i32) -> i32 {
    T::max(1, T::min(heads, 4194304 / (s * dim)))
}

/// The rank, heaviest first, of block `lin`'s query tile (the grid's linear
/// index; `nq` tiles a head, `heads` heads taken `sec` at a time): within a
/// section, rank 0 for the last tile of every head, then rank 1, and so on;
/// the tile is `nq - 1 - rank`. (`heads - first` is at least 1 and the
/// quotient is below `nq`: the `max` and the `% nq` change nothing, they let
/// the compiler see that the divisor is positive and the tile index not
/// negative, which a bulk copy needs.)
#[tile::func]
fn causal_rank(lin: i32, nq: i32, heads: i32, sec: i32) -> i32 {
    let first = lin / (sec * nq) * sec;
    lin % (sec * nq) / T::min(sec, T::max(1, heads - first)) % nq
}

/// The head (batch-major: `bz * H + by`) of block `lin`, as in `causal_rank`.
#[tile::func]
fn causal_head(lin: i32, nq: i32, heads: i32, sec: i32) -> i32 {
    let first = lin / (sec * nq) * sec;
    first + lin % (sec * nq) % T::min(sec, T::max(1, heads - first))
}

/// Head dim 64, not causal. Blocks of 128 query rows over 4 warps, 32 rows
/// each: every warp reads whole K and V tiles from shared memory, so more
/// rows per warp means fewer reads per multiply (16 rows per warp ran 12-18%
/// slower on the H200; see bench/RESULTS.md). Four stages of K/V: on Hopper
/// the loop is rotated (each iteration's softmax runs while the previous
/// P·V is in flight), which holds a stage one iteration longer. The kernel
/// is persistent: `blocks` blocks (two per multiprocessor of an H100/H200,
/// as many as fit) walk the query tiles with `T::persistent`, and the
/// producer loads a tile's Q, K and V while the consumers finish the last
/// tile's output. Measured against launching one block per tile: 6% faster
/// at B8 H16 S1024, even at B1 H64 S4096 (causal, where tiles differ in
/// work, only where its order is even; see `persistent_balances`); at head
/// dims 128 and 256 (one block per multiprocessor) it was 1–4% slower or
/// even, so those launch a block per tile (bench/RESULTS.md). The six kernels after it
/// repeat this body with another head dim and tiling, or the causal mask
/// and loop bound: the build reads kernels from the source file, so a macro
/// cannot stamp them out, and a variant list (`dim = [64, 128]`) would make
/// one typed function whose default refuses the other head dims' shapes.
#[tile::kernel(dtype = [f16, bf16], dim = 64, block_m = 128, block_n = 64, stages = 4, threads = 128, blocks = 264)]
pub fn flash_attention(
    q: Tensor<dtype, (B, H, S, dim)>,
    k: Tensor<dtype, (B, HKV, S, dim)>,
    v: Tensor<dtype, (B, HKV, S, dim)>,
    o: TensorMut<dtype, (B, H, S, dim)>,
) {
    T::kernel(blocks, threads, |bid| {
        let q_s = T::alloc_shared::<dtype>([block_m, dim]);
        let k_s = T::alloc_shared::<dtype>([block_n, dim]);
        let v_s = T::alloc_shared::<dtype>([block_n, dim]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let p = T::alloc_fragment::<dtype>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, dim]);
        let m = T::alloc_fragment::<f32>([block_m]);
        let m_prev = T::alloc_fragment::<f32>([block_m]);
        let rescale = T::alloc_fragment::<f32>([block_m]);
        let l = T::alloc_fragment::<f32>([block_m]);
        let row_sum = T::alloc_fragment::<f32>([block_m]);
        let scale = 1.4426950408889634 / T::sqrt(dim as f32);
        for (bx, by, bz) in T::persistent([T::ceildiv(S, block_m), H, B], blocks, bid) {
            let kv_head = by / (H / HKV);
            T::copy(q.at([bz, by, bx * block_m, 0]), q_s);
            T::fill(acc, 0.0);
            T::fill(l, 0.0);
            T::fill(m, -T::infinity::<f32>());
            for kt in T::pipelined(T::ceildiv(S, block_n), stages) {
                T::copy(k.at([bz, kv_head, kt * block_n, 0]), k_s);
                T::copy(v.at([bz, kv_head, kt * block_n, 0]), v_s);
                T::clear(s);
                T::gemm(q_s, k_s, s, transpose_b = true);
                // Only a key tile that crosses the sequence's end needs the mask
                // (a branch taken alike by every thread).
                if (kt + 1) * block_n > S {
                    for (i, j) in T::parallel([block_m, block_n]) {
                        s[(i, j)] =
                            T::if_then_else(kt * block_n + j < S, s[(i, j)], -T::infinity::<f32>());
                    }
                }
                T::copy(m, m_prev);
                T::reduce_max(s, m, 1, false);
                // Softmax in base 2 of the scores times scale = log2(e) / √dim,
                // taken inside exp2 (one FFMA per score): exp2 below is e^x.
                for i in T::parallel(block_m) {
                    rescale[i] = T::exp2(m_prev[i] * scale - m[i] * scale);
                }
                for (i, j) in T::parallel([block_m, dim]) {
                    acc[(i, j)] = acc[(i, j)] * rescale[i];
                }
                for (i, j) in T::parallel([block_m, block_n]) {
                    s[(i, j)] = T::exp2(s[(i, j)] * scale - m[i] * scale);
                }
                T::reduce_sum(s, row_sum, 1);
                for i in T::parallel(block_m) {
                    l[i] = l[i] * rescale[i] + row_sum[i];
                }
                T::copy(s, p);
                T::gemm(p, v_s, acc);
            }
            for (i, j) in T::parallel([block_m, dim]) {
                acc[(i, j)] = acc[(i, j)] / l[i];
            }
            T::copy(acc, o.at([bz, by, bx * block_m, 0]));
        }
    });
}

/// Causal attention, head dim 64: query `i` sees keys `j ≤ i`. A block per
/// query tile, heaviest first (`causal_section`), where the persistent
/// kernel below would split the work unevenly (`persistent_balances`
/// decides). A fixed grid of blocks taking tiles in a fixed order gets
/// uneven work when later tiles are longer, and no fixed order stays even
/// across shapes (bench/causal_schedule_model.py puts the persistent
/// kernel's busiest block 1.3–2.1 times the even share at most head counts
/// from S = 1024 to 8192), while the hardware hands each free slot the next
/// heaviest tile. Measured on an H100 against the persistent kernel: 1.09
/// to 1.55 times as fast at 13 of 37 shapes (B1 H32 S8192 1.42, B2 H12
/// S1536 1.55, B3 H16 S4096 1.18), within 4% at 15 more (bench/RESULTS.md).
#[tile::kernel(dtype = [f16, bf16], dim = 64, block_m = 128, block_n = 64, stages = 4, threads = 128)]
pub fn flash_attention_causal(
    q: Tensor<dtype, (B, H, S, dim)>,
    k: Tensor<dtype, (B, HKV, S, dim)>,
    v: Tensor<dtype, (B, HKV, S, dim)>,
    o: TensorMut<dtype, (B, H, S, dim)>,
) {
    T::kernel([T::ceildiv(S, block_m), H, B], threads, |gx, gy, gz| {
        // Heaviest query tiles first (see `causal_section`).
        let nq = T::ceildiv(S, block_m);
        let sec = causal_section(H * B, S, dim);
        let lin = gx + nq * (gy + H * gz);
        let rank = causal_rank(lin, nq, H * B, sec);
        let bx = nq - 1 - rank;
        let head = causal_head(lin, nq, H * B, sec);
        let by = head % H;
        let bz = head / H;
        let kv_head = by / (H / HKV);
        let q_s = T::alloc_shared::<dtype>([block_m, dim]);
        let k_s = T::alloc_shared::<dtype>([block_n, dim]);
        let v_s = T::alloc_shared::<dtype>([block_n, dim]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let p = T::alloc_fragment::<dtype>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, dim]);
        let m = T::alloc_fragment::<f32>([block_m]);
        let m_prev = T::alloc_fragment::<f32>([block_m]);
        let rescale = T::alloc_fragment::<f32>([block_m]);
        let l = T::alloc_fragment::<f32>([block_m]);
        let row_sum = T::alloc_fragment::<f32>([block_m]);
        let scale = 1.4426950408889634 / T::sqrt(dim as f32);
        T::copy(q.at([bz, by, bx * block_m, 0]), q_s);
        T::fill(acc, 0.0);
        T::fill(l, 0.0);
        T::fill(m, -T::infinity::<f32>());
        // Key tiles up to the block's last query (the loop bound depends on bx).
        for kt in T::pipelined(T::ceildiv(T::min((bx + 1) * block_m, S), block_n), stages) {
            T::copy(k.at([bz, kv_head, kt * block_n, 0]), k_s);
            T::copy(v.at([bz, kv_head, kt * block_n, 0]), v_s);
            T::clear(s);
            T::gemm(q_s, k_s, s, transpose_b = true);
            // Only a key tile that reaches past the block's first query (the
            // diagonal crosses it) or past the sequence's end needs the mask.
            if (kt + 1) * block_n > T::min(bx * block_m, S - 1) + 1 {
                for (i, j) in T::parallel([block_m, block_n]) {
                    s[(i, j)] = T::if_then_else(
                        kt * block_n + j <= T::min(bx * block_m + i, S - 1),
                        s[(i, j)],
                        -T::infinity::<f32>(),
                    );
                }
            }
            T::copy(m, m_prev);
            T::reduce_max(s, m, 1, false);
            // Softmax in base 2 of the scores times scale = log2(e) / √dim,
            // taken inside exp2 (one FFMA per score): exp2 below is e^x.
            for i in T::parallel(block_m) {
                rescale[i] = T::exp2(m_prev[i] * scale - m[i] * scale);
            }
            for (i, j) in T::parallel([block_m, dim]) {
                acc[(i, j)] = acc[(i, j)] * rescale[i];
            }
            for (i, j) in T::parallel([block_m, block_n]) {
                s[(i, j)] = T::exp2(s[(i, j)] * scale - m[i] * scale);
            }
            T::reduce_sum(s, row_sum, 1);
            for i in T::parallel(block_m) {
                l[i] = l[i] * rescale[i] + row_sum[i];
            }
            T::copy(s, p);
            T::gemm(p, v_s, acc);
        }
        for (i, j) in T::parallel([block_m, dim]) {
            acc[(i, j)] = acc[(i, j)] / l[i];
        }
        T::copy(acc, o.at([bz, by, bx * block_m, 0]));
    });
}

/// Causal attention, head dim 64, persistent like the non-causal kernel:
/// the query tiles in opposite orders on alternate heads, which spreads
/// the work evenly at some shapes only. There it beats a block per tile
/// (`flash_attention_causal`), whose blocks each load their Q and store
/// their output without a next tile's loads to overlap: by 5–14% on an
/// H100 at 9 of 37 shapes (B8 H16 S1024 8%, B12 H16 S1024 9%, B4 H16
/// S3072 12%, B1 H20 S3584 14%; bench/RESULTS.md). `persistent_balances`
/// chooses between the two.
#[tile::kernel(dtype = [f16, bf16], dim = 64, block_m = 128, block_n = 64, stages = 4, threads = 128, blocks = 264)]
pub fn flash_attention_causal_persistent(
    q: Tensor<dtype, (B, H, S, dim)>,
    k: Tensor<dtype, (B, HKV, S, dim)>,
    v: Tensor<dtype, (B, HKV, S, dim)>,
    o: TensorMut<dtype, (B, H, S, dim)>,
) {
    T::kernel(blocks, threads, |bid| {
        let q_s = T::alloc_shared::<dtype>([block_m, dim]);
        let k_s = T::alloc_shared::<dtype>([block_n, dim]);
        let v_s = T::alloc_shared::<dtype>([block_n, dim]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let p = T::alloc_fragment::<dtype>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, dim]);
        let m = T::alloc_fragment::<f32>([block_m]);
        let m_prev = T::alloc_fragment::<f32>([block_m]);
        let rescale = T::alloc_fragment::<f32>([block_m]);
        let l = T::alloc_fragment::<f32>([block_m]);
        let row_sum = T::alloc_fragment::<f32>([block_m]);
        let scale = 1.4426950408889634 / T::sqrt(dim as f32);
        for (xt, by, bz) in T::persistent([T::ceildiv(S, block_m), H, B], blocks, bid) {
            // Query tiles in opposite orders on alternate heads: the blocks
            // take tiles `bid`, `bid + blocks`, .., so the long tiles (late
            // queries see more keys) then fall evenly among them.
            let bx = T::if_then_else((bz * H + by) % 2 == 0, xt, T::ceildiv(S, block_m) - 1 - xt);
            let kv_head = by / (H / HKV);
            T::copy(q.at([bz, by, bx * block_m, 0]), q_s);
            T::fill(acc, 0.0);
            T::fill(l, 0.0);
            T::fill(m, -T::infinity::<f32>());
            // Key tiles up to the block's last query (the loop bound depends on bx).
            for kt in T::pipelined(T::ceildiv(T::min((bx + 1) * block_m, S), block_n), stages) {
                T::copy(k.at([bz, kv_head, kt * block_n, 0]), k_s);
                T::copy(v.at([bz, kv_head, kt * block_n, 0]), v_s);
                T::clear(s);
                T::gemm(q_s, k_s, s, transpose_b = true);
                // Only a key tile that reaches past the block's first query (the
                // diagonal crosses it) or past the sequence's end needs the mask.
                if (kt + 1) * block_n > T::min(bx * block_m, S - 1) + 1 {
                    for (i, j) in T::parallel([block_m, block_n]) {
                        s[(i, j)] = T::if_then_else(
                            kt * block_n + j <= T::min(bx * block_m + i, S - 1),
                            s[(i, j)],
                            -T::infinity::<f32>(),
                        );
                    }
                }
                T::copy(m, m_prev);
                T::reduce_max(s, m, 1, false);
                // Softmax in base 2 of the scores times scale = log2(e) / √dim,
                // taken inside exp2 (one FFMA per score): exp2 below is e^x.
                for i in T::parallel(block_m) {
                    rescale[i] = T::exp2(m_prev[i] * scale - m[i] * scale);
                }
                for (i, j) in T::parallel([block_m, dim]) {
                    acc[(i, j)] = acc[(i, j)] * rescale[i];
                }
                for (i, j) in T::parallel([block_m, block_n]) {
                    s[(i, j)] = T::exp2(s[(i, j)] * scale - m[i] * scale);
                }
                T::reduce_sum(s, row_sum, 1);
                for i in T::parallel(block_m) {
                    l[i] = l[i] * rescale[i] + row_sum[i];
                }
                T::copy(s, p);
                T::gemm(p, v_s, acc);
            }
            for (i, j) in T::parallel([block_m, dim]) {
                acc[(i, j)] = acc[(i, j)] / l[i];
            }
            T::copy(acc, o.at([bz, by, bx * block_m, 0]));
        }
    });
}

/// Head dim 128: 128 x 128 tiles over 8 warps. On Hopper both products take
/// `wgmma` (two warpgroups of 64 rows; P is the second one's A operand in
/// registers) and the K/V loop is warp-specialized (a producer warpgroup
/// issues bulk tensor copies) and rotated; elsewhere both run on
/// `mma.sync`. Three stages take 224 KiB of shared memory, Hopper's budget;
/// an A100 block has 164 KiB, which needs `stages = 2` here. The output
/// leaves through a swizzled shared tile in the K stages' bytes (free after
/// the loop) as 16-byte row stores: 3.5–5.5% faster on an H100 than storing
/// the accumulator's two-element pairs from registers (bench/RESULTS.md).
/// The head-dim-64 kernels store from registers: the persistent ones'
/// stages hold the next tile's K and V, and a tile of its own spills on
/// sm_80.
#[tile::kernel(dtype = [f16, bf16], dim = 128, block_m = 128, block_n = 128, stages = 3, threads = 256)]
pub fn flash_attention_d128(
    q: Tensor<dtype, (B, H, S, dim)>,
    k: Tensor<dtype, (B, HKV, S, dim)>,
    v: Tensor<dtype, (B, HKV, S, dim)>,
    o: TensorMut<dtype, (B, H, S, dim)>,
) {
    T::kernel([T::ceildiv(S, block_m), H, B], threads, |bx, by, bz| {
        let kv_head = by / (H / HKV);
        let q_s = T::alloc_shared::<dtype>([block_m, dim]);
        let k_s = T::alloc_shared::<dtype>([block_n, dim]);
        let v_s = T::alloc_shared::<dtype>([block_n, dim]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let p = T::alloc_fragment::<dtype>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, dim]);
        let m = T::alloc_fragment::<f32>([block_m]);
        let m_prev = T::alloc_fragment::<f32>([block_m]);
        let rescale = T::alloc_fragment::<f32>([block_m]);
        let l = T::alloc_fragment::<f32>([block_m]);
        let row_sum = T::alloc_fragment::<f32>([block_m]);
        let scale = 1.4426950408889634 / T::sqrt(dim as f32);
        T::copy(q.at([bz, by, bx * block_m, 0]), q_s);
        T::fill(acc, 0.0);
        T::fill(l, 0.0);
        T::fill(m, -T::infinity::<f32>());
        for kt in T::pipelined(T::ceildiv(S, block_n), stages) {
            T::copy(k.at([bz, kv_head, kt * block_n, 0]), k_s);
            T::copy(v.at([bz, kv_head, kt * block_n, 0]), v_s);
            T::clear(s);
            T::gemm(q_s, k_s, s, transpose_b = true);
            // Only a key tile that crosses the sequence's end needs the mask
            // (a branch taken alike by every thread).
            if (kt + 1) * block_n > S {
                for (i, j) in T::parallel([block_m, block_n]) {
                    s[(i, j)] =
                        T::if_then_else(kt * block_n + j < S, s[(i, j)], -T::infinity::<f32>());
                }
            }
            T::copy(m, m_prev);
            T::reduce_max(s, m, 1, false);
            // Softmax in base 2 of the scores times scale = log2(e) / √dim,
            // taken inside exp2 (one FFMA per score): exp2 below is e^x.
            for i in T::parallel(block_m) {
                rescale[i] = T::exp2(m_prev[i] * scale - m[i] * scale);
            }
            for (i, j) in T::parallel([block_m, dim]) {
                acc[(i, j)] = acc[(i, j)] * rescale[i];
            }
            for (i, j) in T::parallel([block_m, block_n]) {
                s[(i, j)] = T::exp2(s[(i, j)] * scale - m[i] * scale);
            }
            T::reduce_sum(s, row_sum, 1);
            for i in T::parallel(block_m) {
                l[i] = l[i] * rescale[i] + row_sum[i];
            }
            T::copy(s, p);
            T::gemm(p, v_s, acc);
        }
        for (i, j) in T::parallel([block_m, dim]) {
            acc[(i, j)] = acc[(i, j)] / l[i];
        }
        let o_s = T::alloc_shared::<dtype>([block_m, dim]);
        T::annotate_layout(o_s, T::swizzled);
        T::copy(acc, o_s);
        T::copy(o_s, o.at([bz, by, bx * block_m, 0]));
    });
}

/// Causal attention, head dim 128: the blocks take query tiles heaviest
/// first (`causal_section`).
#[tile::kernel(dtype = [f16, bf16], dim = 128, block_m = 128, block_n = 128, stages = 3, threads = 256)]
pub fn flash_attention_d128_causal(
    q: Tensor<dtype, (B, H, S, dim)>,
    k: Tensor<dtype, (B, HKV, S, dim)>,
    v: Tensor<dtype, (B, HKV, S, dim)>,
    o: TensorMut<dtype, (B, H, S, dim)>,
) {
    T::kernel([T::ceildiv(S, block_m), H, B], threads, |gx, gy, gz| {
        // Heaviest query tiles first (see `causal_section`).
        let nq = T::ceildiv(S, block_m);
        let sec = causal_section(H * B, S, dim);
        let lin = gx + nq * (gy + H * gz);
        let rank = causal_rank(lin, nq, H * B, sec);
        let bx = nq - 1 - rank;
        let head = causal_head(lin, nq, H * B, sec);
        let by = head % H;
        let bz = head / H;
        let kv_head = by / (H / HKV);
        let q_s = T::alloc_shared::<dtype>([block_m, dim]);
        let k_s = T::alloc_shared::<dtype>([block_n, dim]);
        let v_s = T::alloc_shared::<dtype>([block_n, dim]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let p = T::alloc_fragment::<dtype>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, dim]);
        let m = T::alloc_fragment::<f32>([block_m]);
        let m_prev = T::alloc_fragment::<f32>([block_m]);
        let rescale = T::alloc_fragment::<f32>([block_m]);
        let l = T::alloc_fragment::<f32>([block_m]);
        let row_sum = T::alloc_fragment::<f32>([block_m]);
        let scale = 1.4426950408889634 / T::sqrt(dim as f32);
        T::copy(q.at([bz, by, bx * block_m, 0]), q_s);
        T::fill(acc, 0.0);
        T::fill(l, 0.0);
        T::fill(m, -T::infinity::<f32>());
        // Key tiles up to the block's last query (the loop bound depends on bx).
        for kt in T::pipelined(T::ceildiv(T::min((bx + 1) * block_m, S), block_n), stages) {
            T::copy(k.at([bz, kv_head, kt * block_n, 0]), k_s);
            T::copy(v.at([bz, kv_head, kt * block_n, 0]), v_s);
            T::clear(s);
            T::gemm(q_s, k_s, s, transpose_b = true);
            // Only a key tile that reaches past the block's first query (the
            // diagonal crosses it) or past the sequence's end needs the mask.
            if (kt + 1) * block_n > T::min(bx * block_m, S - 1) + 1 {
                for (i, j) in T::parallel([block_m, block_n]) {
                    s[(i, j)] = T::if_then_else(
                        kt * block_n + j <= T::min(bx * block_m + i, S - 1),
                        s[(i, j)],
                        -T::infinity::<f32>(),
                    );
                }
            }
            T::copy(m, m_prev);
            T::reduce_max(s, m, 1, false);
            // Softmax in base 2 of the scores times scale = log2(e) / √dim,
            // taken inside exp2 (one FFMA per score): exp2 below is e^x.
            for i in T::parallel(block_m) {
                rescale[i] = T::exp2(m_prev[i] * scale - m[i] * scale);
            }
            for (i, j) in T::parallel([block_m, dim]) {
                acc[(i, j)] = acc[(i, j)] * rescale[i];
            }
            for (i, j) in T::parallel([block_m, block_n]) {
                s[(i, j)] = T::exp2(s[(i, j)] * scale - m[i] * scale);
            }
            T::reduce_sum(s, row_sum, 1);
            for i in T::parallel(block_m) {
                l[i] = l[i] * rescale[i] + row_sum[i];
            }
            T::copy(s, p);
            T::gemm(p, v_s, acc);
        }
        for (i, j) in T::parallel([block_m, dim]) {
            acc[(i, j)] = acc[(i, j)] / l[i];
        }
        let o_s = T::alloc_shared::<dtype>([block_m, dim]);
        T::annotate_layout(o_s, T::swizzled);
        T::copy(acc, o_s);
        T::copy(o_s, o.at([bz, by, bx * block_m, 0]));
    });
}

/// Head dim 256: the D128 kernel's body on 128 × 80 tiles (two warpgroups
/// of 64 rows on Hopper, FA3's shape for this head dim). The accumulator
/// alone is 128 floats per thread and the scores 40 more. Two stages of K
/// and V plus Q take 224 KiB, Hopper's budget but over an A100's 164 KiB
/// (like the D128 kernel's three stages). With two stages the loop rotates
/// and ping-pongs as the D128 one does, V on a barrier pair of its own so
/// that K's stage frees early (`plan_pipelines`). On an H100, 80-key tiles
/// ran 4-7% faster than 64 (bench/RESULTS.md); on the H200, 128 × 64 tiles
/// had run 17-20% faster than 128 × 32 with three stages: a 32-column score
/// tile issues too little work per `wgmma`. The output leaves through a
/// shared tile as in the D128 kernel (here in Q's bytes).
#[tile::kernel(dtype = [f16, bf16], dim = 256, block_m = 128, block_n = 80, stages = 2, threads = 256)]
pub fn flash_attention_d256(
    q: Tensor<dtype, (B, H, S, dim)>,
    k: Tensor<dtype, (B, HKV, S, dim)>,
    v: Tensor<dtype, (B, HKV, S, dim)>,
    o: TensorMut<dtype, (B, H, S, dim)>,
) {
    T::kernel([T::ceildiv(S, block_m), H, B], threads, |bx, by, bz| {
        let kv_head = by / (H / HKV);
        let q_s = T::alloc_shared::<dtype>([block_m, dim]);
        let k_s = T::alloc_shared::<dtype>([block_n, dim]);
        let v_s = T::alloc_shared::<dtype>([block_n, dim]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let p = T::alloc_fragment::<dtype>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, dim]);
        let m = T::alloc_fragment::<f32>([block_m]);
        let m_prev = T::alloc_fragment::<f32>([block_m]);
        let rescale = T::alloc_fragment::<f32>([block_m]);
        let l = T::alloc_fragment::<f32>([block_m]);
        let row_sum = T::alloc_fragment::<f32>([block_m]);
        let scale = 1.4426950408889634 / T::sqrt(dim as f32);
        T::copy(q.at([bz, by, bx * block_m, 0]), q_s);
        T::fill(acc, 0.0);
        T::fill(l, 0.0);
        T::fill(m, -T::infinity::<f32>());
        for kt in T::pipelined(T::ceildiv(S, block_n), stages) {
            T::copy(k.at([bz, kv_head, kt * block_n, 0]), k_s);
            T::copy(v.at([bz, kv_head, kt * block_n, 0]), v_s);
            T::clear(s);
            T::gemm(q_s, k_s, s, transpose_b = true);
            // Only a key tile that crosses the sequence's end needs the mask
            // (a branch taken alike by every thread).
            if (kt + 1) * block_n > S {
                for (i, j) in T::parallel([block_m, block_n]) {
                    s[(i, j)] =
                        T::if_then_else(kt * block_n + j < S, s[(i, j)], -T::infinity::<f32>());
                }
            }
            T::copy(m, m_prev);
            T::reduce_max(s, m, 1, false);
            // Softmax in base 2 of the scores times scale = log2(e) / √dim,
            // taken inside exp2 (one FFMA per score): exp2 below is e^x.
            for i in T::parallel(block_m) {
                rescale[i] = T::exp2(m_prev[i] * scale - m[i] * scale);
            }
            for (i, j) in T::parallel([block_m, dim]) {
                acc[(i, j)] = acc[(i, j)] * rescale[i];
            }
            for (i, j) in T::parallel([block_m, block_n]) {
                s[(i, j)] = T::exp2(s[(i, j)] * scale - m[i] * scale);
            }
            T::reduce_sum(s, row_sum, 1);
            for i in T::parallel(block_m) {
                l[i] = l[i] * rescale[i] + row_sum[i];
            }
            T::copy(s, p);
            T::gemm(p, v_s, acc);
        }
        for (i, j) in T::parallel([block_m, dim]) {
            acc[(i, j)] = acc[(i, j)] / l[i];
        }
        let o_s = T::alloc_shared::<dtype>([block_m, dim]);
        T::annotate_layout(o_s, T::swizzled);
        T::copy(acc, o_s);
        T::copy(o_s, o.at([bz, by, bx * block_m, 0]));
    });
}

/// Causal attention, head dim 256, query tiles heaviest first (`causal_section`).
#[tile::kernel(dtype = [f16, bf16], dim = 256, block_m = 128, block_n = 80, stages = 2, threads = 256)]
pub fn flash_attention_d256_causal(
    q: Tensor<dtype, (B, H, S, dim)>,
    k: Tensor<dtype, (B, HKV, S, dim)>,
    v: Tensor<dtype, (B, HKV, S, dim)>,
    o: TensorMut<dtype, (B, H, S, dim)>,
) {
    T::kernel([T::ceildiv(S, block_m), H, B], threads, |gx, gy, gz| {
        // Heaviest query tiles first (see `causal_section`).
        let nq = T::ceildiv(S, block_m);
        let sec = causal_section(H * B, S, dim);
        let lin = gx + nq * (gy + H * gz);
        let rank = causal_rank(lin, nq, H * B, sec);
        let bx = nq - 1 - rank;
        let head = causal_head(lin, nq, H * B, sec);
        let by = head % H;
        let bz = head / H;
        let kv_head = by / (H / HKV);
        let q_s = T::alloc_shared::<dtype>([block_m, dim]);
        let k_s = T::alloc_shared::<dtype>([block_n, dim]);
        let v_s = T::alloc_shared::<dtype>([block_n, dim]);
        let s = T::alloc_fragment::<f32>([block_m, block_n]);
        let p = T::alloc_fragment::<dtype>([block_m, block_n]);
        let acc = T::alloc_fragment::<f32>([block_m, dim]);
        let m = T::alloc_fragment::<f32>([block_m]);
        let m_prev = T::alloc_fragment::<f32>([block_m]);
        let rescale = T::alloc_fragment::<f32>([block_m]);
        let l = T::alloc_fragment::<f32>([block_m]);
        let row_sum = T::alloc_fragment::<f32>([block_m]);
        let scale = 1.4426950408889634 / T::sqrt(dim as f32);
        T::copy(q.at([bz, by, bx * block_m, 0]), q_s);
        T::fill(acc, 0.0);
        T::fill(l, 0.0);
        T::fill(m, -T::infinity::<f32>());
        // Key tiles up to the block's last query (the loop bound depends on bx).
        for kt in T::pipelined(T::ceildiv(T::min((bx + 1) * block_m, S), block_n), stages) {
            T::copy(k.at([bz, kv_head, kt * block_n, 0]), k_s);
            T::copy(v.at([bz, kv_head, kt * block_n, 0]), v_s);
            T::clear(s);
            T::gemm(q_s, k_s, s, transpose_b = true);
            // Only a key tile that reaches past the block's first query (the
            // diagonal crosses it) or past the sequence's end needs the mask.
            if (kt + 1) * block_n > T::min(bx * block_m, S - 1) + 1 {
                for (i, j) in T::parallel([block_m, block_n]) {
                    s[(i, j)] = T::if_then_else(
                        kt * block_n + j <= T::min(bx * block_m + i, S - 1),
                        s[(i, j)],
                        -T::infinity::<f32>(),
                    );
                }
            }
            T::copy(m, m_prev);
            T::reduce_max(s, m, 1, false);
            // Softmax in base 2 of the scores times scale = log2(e) / √dim,
            // taken inside exp2 (one FFMA per score): exp2 below is e^x.
            for i in T::parallel(block_m) {
                rescale[i] = T::exp2(m_prev[i] * scale - m[i] * scale);
            }
            for (i, j) in T::parallel([block_m, dim]) {
                acc[(i, j)] = acc[(i, j)] * rescale[i];
            }
            for (i, j) in T::parallel([block_m, block_n]) {
                s[(i, j)] = T::exp2(s[(i, j)] * scale - m[i] * scale);
            }
            T::reduce_sum(s, row_sum, 1);
            for i in T::parallel(block_m) {
                l[i] = l[i] * rescale[i] + row_sum[i];
            }
            T::copy(s, p);
            T::gemm(p, v_s, acc);
        }
        for (i, j) in T::parallel([block_m, dim]) {
            acc[(i, j)] = acc[(i, j)] / l[i];
        }
        let o_s = T::alloc_shared::<dtype>([block_m, dim]);
        T::annotate_layout(o_s, T::swizzled);
        T::copy(acc, o_s);
        T::copy(o_s, o.at([bz, by, bx * block_m, 0]));
    });
}

/// The shape of one attention call: `b` batches of `h` query heads and `hkv`
/// key/value heads over `s` positions of head dim `d`.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub b: usize,
    pub h: usize,
    pub hkv: usize,
    pub s: usize,
    pub d: usize,
    pub causal: bool,
}

impl Shape {
    /// `b` batches, `h` query and `hkv` key/value heads, `s` positions,
    /// head dim `d`.
    pub const fn new(b: usize, h: usize, hkv: usize, s: usize, d: usize, causal: bool) -> Self {
        Shape {
            b,
            h,
            hkv,
            s,
            d,
            causal,
        }
    }

    /// FLOPs of the two products, `4 · b · h · s² · d`, halved when causal
    /// (the convention FlashAttention's and torch's benchmarks use).
    pub fn flops(&self) -> f64 {
        let full = 4.0 * (self.b * self.h) as f64 * (self.s * self.s) as f64 * self.d as f64;
        if self.causal {
            full / 2.0
        } else {
            full
        }
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "b={} h={} hkv={} s={} d={}{}",
            self.b,
            self.h,
            self.hkv,
            self.s,
            self.d,
            if self.causal { " causal" } else { "" }
        )
    }
}

/// `O = softmax(Q Kᵀ / √d) V` per head, in f64 (query head `h` reads
/// key/value head `h / (H / HKV)`; causal: query `i` sees keys `j ≤ i`).
fn reference<E: Elem>(q: &[E], k: &[E], v: &[E], sh: Shape) -> Vec<f64> {
    let Shape {
        b,
        h,
        hkv,
        s,
        d,
        causal,
    } = sh;
    let scale = 1.0 / (d as f64).sqrt();
    let wide = |x: &[E]| -> Vec<f64> { x.iter().map(|e| e.to_f64()).collect() };
    let (q, k, v) = (wide(q), wide(k), wide(v));
    let mut o = vec![0f64; b * h * s * d];
    // The heads split over the host's cores: at S in the thousands this
    // reference, not the kernel, is what a check waits for.
    tile::testing::par_rows(&mut o, s * d, |first, out| {
        let mut w = vec![0f64; s];
        for (n, oh) in out.chunks_mut((s * d).max(1)).enumerate() {
            let (bi, hi) = ((first + n) / h, (first + n) % h);
            let qh = (bi * h + hi) * s;
            let kh = (bi * hkv + hi / (h / hkv)) * s;
            for i in 0..s {
                let keys = if causal { i + 1 } else { s };
                for (j, wj) in w[..keys].iter_mut().enumerate() {
                    *wj = (0..d)
                        .map(|c| q[(qh + i) * d + c] * k[(kh + j) * d + c])
                        .sum::<f64>()
                        * scale;
                }
                let mx = w[..keys].iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let mut sum = 0.0;
                for wj in w[..keys].iter_mut() {
                    *wj = (*wj - mx).exp();
                    sum += *wj;
                }
                for c in 0..d {
                    let x: f64 = (0..keys).map(|j| w[j] * v[(kh + j) * d + c]).sum();
                    oh[i * d + c] = x / sum;
                }
            }
        }
    });
    o
}

/// The element types every kernel of this file is built for (each kernel is
/// one source over `dtype`, compiled once per type ahead of time).
pub trait Elem:
    Element
    + flash_attention::Dtype
    + flash_attention_causal::Dtype
    + flash_attention_causal_persistent::Dtype
    + flash_attention_d128::Dtype
    + flash_attention_d128_causal::Dtype
    + flash_attention_d256::Dtype
    + flash_attention_d256_causal::Dtype
{
    /// The check's tolerance against the f64 reference (absolute, relative):
    /// P and the output are rounded to this type.
    const TOL: (f64, f64);
}
impl Elem for f16 {
    const TOL: (f64, f64) = (2e-3, 2e-2);
}
impl Elem for bf16 {
    const TOL: (f64, f64) = (1e-2, 2e-2);
}

/// The blocks of `flash_attention_causal_persistent` (its `blocks`).
const PERSISTENT_BLOCKS: usize = 264;

/// Whether the persistent head-dim-64 causal kernel spreads `sh`'s work
/// evenly enough to be chosen over the block-per-tile one: its busiest
/// block within 5% of the least any order could give, the larger of the
/// even share and the longest tile. A query tile's cost is its key tiles
/// of 64 plus a fixed three (`bench/causal_schedule_model.py`, whose
/// `alternating_over_bound` this is). Timed on an H100 at 37 shapes from
/// S = 512 to 16384, this choice ran 1.1% slower than the faster kernel
/// on average (geometric mean) and 14% at worst (B1 H20 S3584, where
/// the block per tile's last section of heads holds 2 of 20); always a
/// block per tile, 2.5% and 14%; always persistent, 9% and 55%
/// (bench/RESULTS.md). Computed once per shape: a pass over the tiles.
pub fn persistent_balances(sh: Shape) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CHOICES: OnceLock<Mutex<HashMap<(usize, usize), bool>>> = OnceLock::new();
    let (nq, heads) = (sh.s.div_ceil(128), sh.b * sh.h);
    let choices = CHOICES.get_or_init(Default::default);
    let mut choices = choices.lock().unwrap_or_else(|e| e.into_inner());
    *choices.entry((nq, heads)).or_insert_with(|| {
        let work = |bx: usize| 2 * (bx + 1) + 3;
        let mut load = vec![0usize; PERSISTENT_BLOCKS];
        for lin in 0..nq * heads {
            // The kernel's order: tile `xt` of head `lin / nq`, reversed
            // on odd heads; block `lin % blocks` runs it.
            let (xt, head) = (lin % nq, lin / nq);
            let bx = if head % 2 == 0 { xt } else { nq - 1 - xt };
            load[lin % PERSISTENT_BLOCKS] += work(bx);
        }
        let total: usize = load.iter().sum();
        let bound = total.div_ceil(PERSISTENT_BLOCKS).max(work(nq.max(1) - 1));
        let busiest = load.iter().copied().max().unwrap_or(0);
        100 * busiest <= 105 * bound
    })
}

/// Launches the kernel for `sh` (head dim and causality pick it) on `st`.
fn launch<E: Elem>(
    st: &tile::Stream,
    sh: Shape,
    q: &Tensor<E>,
    k: &Tensor<E>,
    v: &Tensor<E>,
    o: &mut Tensor<E>,
) -> Result<(), tile::Error> {
    match (sh.d, sh.causal) {
        (64, false) => flash_attention::on(st).launch(q, k, v, o),
        (64, true) if persistent_balances(sh) => {
            flash_attention_causal_persistent::on(st).launch(q, k, v, o)
        }
        (64, true) => flash_attention_causal::on(st).launch(q, k, v, o),
        (256, false) => flash_attention_d256::on(st).launch(q, k, v, o),
        (256, true) => flash_attention_d256_causal::on(st).launch(q, k, v, o),
        // Any other head dim: the d128 kernels refuse the shape.
        (_, false) => flash_attention_d128::on(st).launch(q, k, v, o),
        (_, true) => flash_attention_d128_causal::on(st).launch(q, k, v, o),
    }
}

/// Checks the kernel for `sh` in f16 and in bf16 against the host reference
/// on `dev`; returns the summary lines. `main` and `tests/examples.rs` call it.
pub fn run(dev: Device, sh: Shape) -> Result<String, Box<dyn std::error::Error>> {
    Ok(format!(
        "{}\n{}",
        run_as::<f16>(dev, sh)?,
        run_as::<bf16>(dev, sh)?
    ))
}

/// [`run`] in element type `E`.
pub fn run_as<E: Elem>(dev: Device, sh: Shape) -> Result<String, Box<dyn std::error::Error>> {
    let q = tile::testing::random_tensor::<E>(&[sh.b, sh.h, sh.s, sh.d], 31, dev)?;
    let k = tile::testing::random_tensor::<E>(&[sh.b, sh.hkv, sh.s, sh.d], 32, dev)?;
    let v = tile::testing::random_tensor::<E>(&[sh.b, sh.hkv, sh.s, sh.d], 33, dev)?;
    let mut o = Tensor::full(&[sh.b, sh.h, sh.s, sh.d], E::from_f64(f64::NAN), dev)?;
    let t = Instant::now();
    launch(&dev.default_stream()?, sh, &q, &k, &v, &mut o)?;
    dev.synchronize()?;
    let el = t.elapsed();
    let want = reference(&q.to_vec()?, &k.to_vec()?, &v.to_vec()?, sh);
    let report = tile::testing::assert_allclose(&o.to_vec()?, &want, E::TOL.0, E::TOL.1)?;
    Ok(format!(
        "flash_attention: device={dev} {sh} {} max_abs_err={:.3e} time={:.3} ms (first call)",
        E::DTYPE,
        report.max_abs,
        el.as_secs_f64() * 1e3
    ))
}

/// Median time of the kernel for `sh` on random inputs (L2 flushed between
/// runs), as a summary line with TFLOP/s ([`Shape::flops`]).
pub fn bench<E: Elem>(dev: Device, sh: Shape) -> Result<String, Box<dyn std::error::Error>> {
    let q = tile::testing::random_tensor::<E>(&[sh.b, sh.h, sh.s, sh.d], 41, dev)?;
    let k = tile::testing::random_tensor::<E>(&[sh.b, sh.hkv, sh.s, sh.d], 42, dev)?;
    let v = tile::testing::random_tensor::<E>(&[sh.b, sh.hkv, sh.s, sh.d], 43, dev)?;
    let mut o = Tensor::<E>::empty(&[sh.b, sh.h, sh.s, sh.d], dev)?;
    let r = tile::do_bench(
        &dev.default_stream()?,
        |st| launch(st, sh, &q, &k, &v, &mut o),
        &tile::BenchOptions::default(),
    )?;
    Ok(format!(
        "flash_attention {sh}{}: {:.3} ms, {:.1} TFLOP/s ({})",
        if E::DTYPE == tile::DType::F16 {
            ""
        } else {
            " bf16"
        },
        r.median_ms,
        sh.flops() / (r.median_ms * 1e-3) / 1e12,
        r.method
    ))
}

/// The shapes of the attention benchmark (torch SDPA runs the same ones in
/// `bench/gpu_run.sh`).
pub const BENCH_SHAPES: [Shape; 8] = [
    Shape::new(4, 32, 32, 4096, 128, false),
    Shape::new(4, 32, 32, 4096, 128, true),
    Shape::new(1, 64, 64, 4096, 64, false),
    Shape::new(8, 16, 16, 1024, 64, false),
    Shape::new(1, 32, 8, 4096, 128, false),
    Shape::new(1, 64, 64, 4096, 64, true),
    Shape::new(4, 16, 16, 4096, 256, false),
    Shape::new(4, 16, 16, 4096, 256, true),
];

/// Head dim 128 over key lengths 1024 to 16384, non-causal and causal,
/// `(B, H, S)` chosen so that the grid is a whole number of waves of 132
/// blocks of 128 query rows (an H100's or H200's multiprocessors): 128, 64,
/// 32, 16 and 32 waves of blocks that walk 8, 16, 32, 64 and 128 key
/// tiles. A wave's time against its key tiles is a line whose slope is the
/// time of one key tile and whose intercept is what a block costs besides
/// (start, first loads, pipeline fill and drain, output), so the sweep
/// tells how much of the gap to another kernel (SDPA in `bench/sdpa.py
/// sweep`, the same shapes) is per block rather than per key tile.
pub const SWEEP_SHAPES: [(usize, usize, usize); 5] = [
    (1, 2112, 1024),
    (1, 528, 2048),
    (1, 132, 4096),
    (1, 33, 8192),
    (1, 33, 16384),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::default();
    // `flash_attention bench`: only the timed benchmark shapes (no checks).
    if std::env::args().nth(1).as_deref() == Some("bench") {
        return time_shapes(dev);
    }
    // `flash_attention time B H HKV S D [causal]`: one shape, timed in f16.
    if std::env::args().nth(1).as_deref() == Some("time") {
        let a: Vec<String> = std::env::args().skip(2).collect();
        let n = |i: usize| -> Result<usize, Box<dyn std::error::Error>> {
            Ok(a.get(i)
                .ok_or("usage: flash_attention time B H HKV S D [causal]")?
                .parse()?)
        };
        let causal = a.get(5).map(String::as_str) == Some("causal");
        let sh = Shape::new(n(0)?, n(1)?, n(2)?, n(3)?, n(4)?, causal);
        println!("{}", bench::<f16>(dev, sh)?);
        return Ok(());
    }
    if std::env::args().nth(1).as_deref() == Some("sweep") {
        for causal in [false, true] {
            for (b, h, s) in SWEEP_SHAPES {
                println!(
                    "{}",
                    bench::<f16>(dev, Shape::new(b, h, h, s, 128, causal))?
                );
            }
        }
        return Ok(());
    }
    // With no arguments on a GPU it also times the benchmark shapes.
    let timed = std::env::args().len() == 1 && dev.is_cuda();
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let mut next = |default: usize| args.next().transpose().map(|x| x.unwrap_or(default));
    let (b, h, hkv) = (next(1)?, next(4)?, next(2)?);
    let s = next(if dev == Device::Cpu { 200 } else { 1000 })?;
    for d in [64, 128, 256] {
        for causal in [false, true] {
            println!("{}", run(dev, Shape::new(b, h, hkv, s, d, causal))?);
        }
    }
    if timed {
        time_shapes(dev)?;
    }
    Ok(())
}

/// Times the benchmark shapes in f16, and the first (D128) shape in bf16,
/// causal and not.
fn time_shapes(dev: Device) -> Result<(), Box<dyn std::error::Error>> {
    for sh in BENCH_SHAPES {
        println!("{}", bench::<f16>(dev, sh)?);
    }
    for sh in &BENCH_SHAPES[..2] {
        println!("{}", bench::<bf16>(dev, *sh)?);
    }
    Ok(())
}
