#!/usr/bin/env python3
"""How evenly causal attention's query tiles fall on the blocks that run them
(bench/RESULTS.md, 2026-12-06, seventh session).

A query tile `bx` of a causal head walks `bx + 1` tiles of 128 keys (twice
that many of 64), plus a fixed cost per tile (start, first loads, output),
here OVERHEAD key tiles of 64. Two ways to hand tiles to blocks:

- persistent, alternating: `blocks` blocks take linear tiles `bid`,
  `bid + blocks`, .. of the (query tile, head) grid, query tile fastest, the
  order of the query tiles reversed on odd heads (the persistent
  head-dim-64 causal kernel's scheme);
- persistent, pairs: the same slots, but a block's slots 2j and 2j + 1
  hold query tiles `p` and `nq - 1 - p` of one head (equal work per pair;
  the middle tiles of an odd count and the last partial round go one tile
  a slot), a candidate not yet written as a kernel;
- persistent, snake: the tiles ranked heaviest first (as below), block
  `b` taking rank slot `b` of even rounds of `blocks` slots and slot
  `count - 1 - b` of odd ones (`count` the round's tiles: the last round
  may be partial), so the block with a round's heaviest tile gets the next
  round's lightest (`causal_snake` in examples/flash_attention.rs, built as
  an experiment);
- a block per tile, heaviest first: tiles sorted by their keys, each taken
  by whichever block slot frees first (the hardware's order for a grid
  launch; what `causal_rank` asks for, ignoring its sections of heads).

Prints, per shape, the largest block's work over the mean (1.0 is even; the
kernel's time follows the largest block).

    python3 bench/causal_schedule_model.py
"""
import heapq

OVERHEAD = 3.0  # a tile's fixed cost, in key tiles of 64 (about 5 us)
SLOTS = 264  # head dim 64: two blocks on each of 132 multiprocessors


def work(bx):
    return 2 * (bx + 1) + OVERHEAD


def alternating(nq, heads, blocks):
    load = [0.0] * blocks
    for lin in range(nq * heads):
        xt, head = lin % nq, lin // nq
        bx = xt if head % 2 == 0 else nq - 1 - xt
        load[lin % blocks] += work(bx)
    return max(load) / (sum(load) / blocks)


def alternating_over_bound(nq, heads, blocks):
    """The alternating order's busiest block over the least any order could
    give (the larger of the even share and the longest tile): the test by
    which examples/flash_attention.rs launches its persistent head-dim-64
    causal kernel (at most 1.05) or a block per tile (above)."""
    load = [0] * blocks
    for lin in range(nq * heads):
        xt, head = lin % nq, lin // nq
        bx = xt if head % 2 == 0 else nq - 1 - xt
        load[lin % blocks] += int(work(bx))
    bound = max(-(-sum(load) // blocks), int(work(nq - 1)))
    return max(load) / bound


def pair_order(nq, heads):
    """Tiles (head, query tile) so that entries 2i and 2i + 1 are a pair;
    the middle tiles of an odd `nq` last."""
    order = []
    for head in range(heads):
        for p in range(nq // 2):
            order += [(head, p), (head, nq - 1 - p)]
    return order + [(head, nq // 2) for head in range(heads)] * (nq % 2)


def pair_slot(lin, total, blocks):
    """The entry of `pair_order` that linear slot `lin` (block `lin %
    blocks`, its slot `lin // blocks`) takes."""
    full = total // (2 * blocks)  # whole double rounds
    if lin < 2 * blocks * full:
        k, b = divmod(lin, blocks)
        return 2 * ((k // 2) * blocks + b) + k % 2
    t, rest = lin - 2 * blocks * full, total - 2 * blocks * full
    b, both = t % blocks, max(0, rest - blocks)
    if b < both:  # this block has two slots left: a whole pair
        return 2 * blocks * full + 2 * b + t // blocks
    return 2 * blocks * full + 2 * both + t - both


def pairs(nq, heads, blocks):
    order, load = pair_order(nq, heads), [0.0] * blocks
    taken = sorted(pair_slot(lin, nq * heads, blocks) for lin in range(nq * heads))
    assert taken == list(range(nq * heads)), "pair_slot is not a bijection"
    for lin in range(nq * heads):
        load[lin % blocks] += work(order[pair_slot(lin, nq * heads, blocks)][1])
    return max(load) / (sum(load) / blocks)


def snake_slot(lin, total, blocks):
    """The heaviest-first rank that persistent slot `lin` (block `lin %
    blocks`, round `lin // blocks`) takes."""
    w, b = divmod(lin, blocks)
    count = min(blocks, total - w * blocks)
    return lin if w % 2 == 0 else w * blocks + count - 1 - b


def snake(nq, heads, blocks):
    total = nq * heads
    ranked = sorted((work(bx) for bx in range(nq) for _ in range(heads)), reverse=True)
    taken = sorted(snake_slot(lin, total, blocks) for lin in range(total))
    assert taken == list(range(total)), "snake_slot is not a bijection"
    load = [0.0] * blocks
    for lin in range(total):
        load[lin % blocks] += ranked[snake_slot(lin, total, blocks)]
    return max(load) / (sum(load) / blocks)


def heaviest_first(nq, heads, blocks):
    tiles = sorted((work(bx) for bx in range(nq) for _ in range(heads)), reverse=True)
    free = [0.0] * blocks
    for t in tiles:
        heapq.heappush(free, heapq.heappop(free) + t)
    return max(free) / (sum(free) / blocks)


if __name__ == "__main__":
    print("B   H      S   persistent alternating   persistent pairs   persistent snake"
          "   heaviest first   alternating over bound")
    for b, h, s in [(1, 64, 4096), (8, 16, 1024), (4, 32, 2048), (1, 64, 2048),
                    (1, 40, 4096), (2, 24, 5000), (1, 32, 8192), (1, 12, 8192),
                    (1, 16, 16384), (1, 8, 32768)]:
        nq = (s + 127) // 128
        print(f"{b:<3} {h:<3} {s:>6}   {alternating(nq, b * h, SLOTS):>20.3f}"
              f"   {pairs(nq, b * h, SLOTS):>16.3f}   {snake(nq, b * h, SLOTS):>16.3f}"
              f"   {heaviest_first(nq, b * h, SLOTS):>14.3f}"
              f"   {alternating_over_bound(nq, b * h, SLOTS):>22.3f}")
