"""Rewrites a generated warp-specialized GEMM kernel (`tile inspect --emit source`)
into the prologue experiments of bench/RESULTS.md's 2026-12-07 (sixth session) entry:

    python3 prologue.py IN.cu OUT.cu [--early N] [--relaxed] [--stamps]

--early N   the producer's elected thread initializes the pipe's barriers itself and
            issues the first min(N, k steps) stages' bulk copies before the block (or
            cluster) barrier, whole tiles without multicast; the producer loop then
            starts at step N. (As generated, thread 0 initializes, every thread waits
            at the barrier, and the producer's first copy follows its setmaxnreg.)
--relaxed   the cluster barrier that publishes the barriers' initialization arrives
            relaxed (the initialization has its own release fence) instead of
            `barrier.cluster.arrive.release`, which compiles to MEMBAR.ALL.GPU.
--stamps    kloop.cu's trace hooks at the prologue's points: after the block barrier
            (slot 500, thread 0), the producer after setmaxnreg (501), the consumers
            after theirs (502, thread 0), the early copies issued (503).

The patterns are the generated text's own lines; a kernel they do not match is an
error, not a silent copy.
"""
import re
import sys


def main():
    args = sys.argv[1:]
    src, dst = args[0], args[1]
    early = int(args[args.index("--early") + 1]) if "--early" in args else 0
    relaxed = "--relaxed" in args
    stamps = "--stamps" in args
    text = open(src).read()

    m = re.search(r"\n( *)if \(threadIdx\.x == 0\) (tl_pipe(\d+))->init\(([^;]*)\);\n", text)
    if not m:
        sys.exit(f"{src}: no pipe init line")
    ind, pipe, n, init_arg = m.group(1), m.group(2), m.group(3), m.group(4)
    sync_re = re.compile(
        r"\n( *)(if \(tl_cl%s\) tl::tma::cluster_sync(?:_init)?\(\); else __syncthreads\(\);|__syncthreads\(\);)\n" % n)
    ms = sync_re.search(text, m.end() - 1)
    if not ms or ms.start() != m.end() - 1:
        sys.exit(f"{src}: the barrier does not follow the init")
    sync = ms.group(2)
    prod_re = re.compile(
        r"\n( *)if \(threadIdx\.x >= (\d+)\) \{\n( *)tl::tma::setmaxnreg_dec<(\d+)>\(\);\n"
        r"( *)if \(tl_use_tma%s && threadIdx\.x == \2\) \{\n( *)(tl::tma::Pipe<(\d+)>::State tl_st%s;)\n"
        r"( *)for \(int tl_i%s = 0; tl_i%s < tl_n%s; \+\+tl_i%s\) \{\n(.*?)\n\9\}\n" % (n, n, n, n, n, n),
        re.S)
    mp = prod_re.search(text, ms.end() - 1)
    if not mp or mp.start() != ms.end() - 1:
        sys.exit(f"{src}: the producer branch does not follow the barrier")
    p = mp.group(2)
    body = mp.group(10)
    stages = int(mp.group(8))

    if relaxed and "cluster_sync" in sync:
        sync = sync.replace(
            "tl::tma::cluster_sync();",
            'asm volatile("barrier.cluster.arrive.relaxed.aligned;\\n'
            'barrier.cluster.wait.aligned;\\n" ::: "memory");')
    stamp_sync = " if (threadIdx.x == 0) KL_S(500);" if stamps else ""

    head = []
    if early:
        pre = min(early, stages)
        # Whole tiles without multicast in the early steps: each block's stage gets all of
        # its bytes from its own copies, as the full barrier expects either way.
        early_body = re.sub(r"if \(tl_mc%s\)" % n, "if (false)", body)
        head.append(f"{ind}int tl_pre{n} = 0;")
        head.append(f"{ind}if (threadIdx.x == {p}) {{")
        head.append(f"{ind}  {pipe}->init({init_arg});")
        head.append(f'{ind}  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");')
        head.append(f"{ind}  if (tl_use_tma{n}) {{")
        head.append(f"{ind}    tl_pre{n} = min(tl_n{n}, {pre});")
        head.append(f"{ind}    tl::tma::Pipe<{stages}>::State tl_st{n};")
        head.append(f"{ind}    for (int tl_i{n} = 0; tl_i{n} < tl_pre{n}; ++tl_i{n}) {{")
        head.append(early_body)
        head.append(f"{ind}    }}")
        if stamps:
            head.append(f"{ind}    KL_S(503);")
        head.append(f"{ind}  }}")
        head.append(f"{ind}}}")
    else:
        head.append(m.group(0).strip("\n"))
    head.append(f"{ind}{sync}{stamp_sync}")
    i1, i3, i5, i6, i10 = mp.group(1), mp.group(3), mp.group(5), mp.group(6), mp.group(9)
    head.append(f"{i1}if (threadIdx.x >= {p}) {{")
    head.append(f"{i3}tl::tma::setmaxnreg_dec<{mp.group(4)}>();" + (f" if (threadIdx.x == {p}) KL_S(501);" if stamps else ""))
    head.append(f"{i5}if (tl_use_tma{n} && threadIdx.x == {p}) {{")
    head.append(f"{i6}{mp.group(7)}")
    start = "0"
    if early:
        head.append(f"{i6}for (int tl_q{n} = 0; tl_q{n} < tl_pre{n}; ++tl_q{n}) tl_st{n}.advance();")
        start = f"tl_pre{n}"
    head.append(f"{i10}for (int tl_i{n} = {start}; tl_i{n} < tl_n{n}; ++tl_i{n}) {{")
    head.append(body)
    head.append(f"{i10}}}")
    out = text[:m.start()] + "\n" + "\n".join(head) + "\n" + text[mp.end():]
    if stamps:
        inc = re.compile(r"\n( *)tl::tma::setmaxnreg_inc<(\d+)>\(\);\n")
        mi = inc.search(out, m.start())
        if not mi:
            sys.exit(f"{src}: no setmaxnreg_inc")
        out = out[:mi.end() - 1] + " if (threadIdx.x == 0) KL_S(502);" + out[mi.end() - 1:]
    open(dst, "w").write(out)


if __name__ == "__main__":
    main()
