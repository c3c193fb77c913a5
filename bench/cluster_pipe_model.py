#!/usr/bin/env python3
"""A model of the warp-specialized pipeline of a GEMM in nx x ny clusters, run under random
schedules to look for deadlocks and barrier overflows (bench/RESULTS.md, 2026-12-06).

Each block has S stages, each a full barrier (one arrival: the producer's expect_tx, plus
the tile's bytes) and an empty barrier (popc(mask) x warps arrivals). A block's producer
waits on its empty barrier with the parity opposite its own phase bit, announces A's and
B's bytes on its full barrier, and multicasts its part of A to its cluster row and its part
of B to its cluster column (the copies land later, in any order). Each consumer warp waits
on the full barrier, then releases the previous stage on the empty barrier of every block
of its mask (its row and its column), and the last stage at the end. A barrier's phase
completes when its pending arrivals and its transaction bytes both reach zero; a wait on
parity p passes when the current phase's parity is not p (mbarrier.try_wait.parity).

    python3 bench/cluster_pipe_model.py
"""
import random


def run(nx, ny, stages, steps, warps, seed):
    rnd = random.Random(seed)
    blocks = nx * ny
    row = lambda r: [(r // nx) * nx + x for x in range(nx)]
    col = lambda r: [r % nx + y * nx for y in range(ny)]
    mask = lambda r: sorted(set(row(r)) | set(col(r)))
    a_bytes = b_bytes = 16384

    def barrier(count):
        return dict(pending=count, tx=0, phase=0, count=count)

    full = [[barrier(1) for _ in range(stages)] for _ in range(blocks)]
    empty = [[barrier(len(mask(b)) * warps) for _ in range(stages)] for b in range(blocks)]

    def settle(b):
        if b["pending"] == 0 and b["tx"] == 0:
            b["phase"] += 1
            b["pending"] = b["count"]

    def arrive(b, tx=0):
        b["tx"] += tx
        b["pending"] -= 1
        assert b["pending"] >= 0, "more arrivals than the phase expects"
        settle(b)

    def passes(b, parity):
        return b["phase"] % 2 != parity

    def walker():
        return dict(i=0, stage=0, phase=0, prev=None, done=False)

    prod = [walker() for _ in range(blocks)]
    cons = [[walker() for _ in range(warps)] for _ in range(blocks)]
    landing = []  # (block, stage, bytes) copies in flight

    def advance(w):
        w["i"] += 1
        w["stage"] += 1
        if w["stage"] == stages:
            w["stage"], w["phase"] = 0, w["phase"] ^ 1

    while True:
        moves = [("p", r) for r in range(blocks)
                 if prod[r]["i"] < steps and passes(empty[r][prod[r]["stage"]], prod[r]["phase"] ^ 1)]
        for r in range(blocks):
            for w, c in enumerate(cons[r]):
                if not c["done"] and (c["i"] == steps or passes(full[r][c["stage"]], c["phase"])):
                    moves.append(("c", r, w))
        moves += [("d", k) for k in range(len(landing))]
        if not moves:
            return all(p["i"] == steps for p in prod) and all(c["done"] for cs in cons for c in cs)
        m = rnd.choice(moves)
        if m[0] == "p":
            r = m[1]
            s = prod[r]["stage"]
            arrive(full[r][s], a_bytes + b_bytes)
            landing += [(d, s, a_bytes // nx) for d in row(r)] + [(d, s, b_bytes // ny) for d in col(r)]
            advance(prod[r])
        elif m[0] == "d":
            d, s, n = landing.pop(m[1])
            full[d][s]["tx"] -= n
            settle(full[d][s])
        else:
            c = cons[m[1]][m[2]]
            if c["prev"] is not None:
                for t in mask(m[1]):
                    arrive(empty[t][c["prev"]])
            if c["i"] == steps:
                c["done"] = True
            else:
                c["prev"] = c["stage"]
                advance(c)


if __name__ == "__main__":
    for nx, ny in [(2, 1), (4, 1), (2, 2), (4, 2), (1, 2)]:
        stuck = sum(not run(nx, ny, 4, 9, 2, seed) for seed in range(300))
        print(f"{nx} x {ny}: {stuck} of 300 random schedules deadlocked")
