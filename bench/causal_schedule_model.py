#!/usr/bin/env python3
"""How evenly causal attention's query tiles fall on the blocks that run them
(bench/RESULTS.md, 2026-12-06, seventh session).

A query tile `bx` of a causal head walks `bx + 1` tiles of 128 keys (twice
that many of 64), plus a fixed cost per tile (start, first loads, output),
here OVERHEAD key tiles of 64. Two ways to hand tiles to blocks:

- persistent, alternating: `blocks` blocks take linear tiles `bid`,
  `bid + blocks`, .. of the (query tile, head) grid, query tile fastest, the
  order of the query tiles reversed on odd heads (the head-dim-64 kernel's
  scheme until this session);
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


def heaviest_first(nq, heads, blocks):
    tiles = sorted((work(bx) for bx in range(nq) for _ in range(heads)), reverse=True)
    free = [0.0] * blocks
    for t in tiles:
        heapq.heappush(free, heapq.heappop(free) + t)
    return max(free) / (sum(free) / blocks)


if __name__ == "__main__":
    print("B   H      S   persistent alternating   heaviest first")
    for b, h, s in [(1, 64, 4096), (8, 16, 1024), (4, 32, 2048), (1, 64, 2048),
                    (1, 40, 4096), (2, 24, 5000), (1, 32, 8192), (1, 12, 8192),
                    (1, 16, 16384), (1, 8, 32768)]:
        nq = (s + 127) // 128
        print(f"{b:<3} {h:<3} {s:>6}   {alternating(nq, b * h, SLOTS):>20.3f}"
              f"   {heaviest_first(nq, b * h, SLOTS):>14.3f}")
