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
//! `flash_attention time B H HKV S D [causal]` times one shape in f16. The
//! head-dim-128 kernels have two variants (see `flash_attention_d128`):
//! `FA_D128=32` (or `128`) makes the timed commands launch one, and
//! `FA_D128=tune` tunes them on each shape (`TILE_AUTOTUNE=1` tunes every
//! launch, the checks' too).

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

/// Heads per section: at most about 16 MiB of 2-byte keys and values (`s`
/// rows of `dim` each), at least one head, and the sections as even as
/// that allows (20 heads at most 9 a section go 7, 7, 6, not 9, 9, 2: a
/// short last section starts its heaviest tiles only once the others'
/// are handed out, and ran B1 H20 S3584 D64 1.42 times as long on an H100;
/// 1.16 at B1 H24 S6144, 1.18 at B1 H20 S2048 D128, bench/RESULTS.md).
#[tile::func]
fn causal_section(heads: i32, s: i32, dim: i32) -> i32 {
    let most = T::max(1, T::min(heads, 4194304 / (s * dim)));
    T::ceildiv(heads, T::ceildiv(heads, most))
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
///
/// The second variant (`block_n = 32, threads = 128`) is one warpgroup over
/// all 128 query rows and key tiles of 32: 80 KiB of shared memory, so two
/// blocks share a Hopper multiprocessor and one block's start and epilogue
/// run under the other's main loop, which a block of 224 KiB leaves bare
/// (what a D128 block costs around its loop was 2–4 µs more than SDPA's in
/// the key-length sweep, bench/RESULTS.md). Key tiles of 48 or 64 need more
/// registers than the consumer warpgroup has in a two-block launch (the
/// accumulator, the scores and their converted copy: they spill). The
/// default stays the first variant; the tuner chooses per shape.
#[tile::kernel(dtype = [f16, bf16], dim = 128, block_m = 128, block_n = [128, 32], stages = 3, threads = [256, 128], filter = (block_n == 128) == (threads == 256))]
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
/// first (`causal_section`). The same two variants as `flash_attention_d128`.
#[tile::kernel(dtype = [f16, bf16], dim = 128, block_m = 128, block_n = [128, 32], stages = 3, threads = [256, 128], filter = (block_n == 128) == (threads == 256))]
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

// The host side (shapes, reference, launch choice, checks, timings, command line).
#[path = "flash_attention/host.rs"]
mod host;
pub use host::{persistent_balances, run, Shape};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    host::main()
}
