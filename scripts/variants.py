"""Same-run timings of kernel variants: a registered kernel with fields changed.

    python scripts/variants.py 8192,4096 fp16_wgmma: fp16_wgmma:cluster=2 'int8_wgmma:persistent=True,stages=3'
    python scripts/variants.py 16x4096x4096 int8_ptx_mma_k32_m16: int8_ptx_mma_k32_m16:split_k=2

The sizes are N (N x N x N) or M x N x K, comma-separated. Each argument
after them is NAME:FIELD=VALUE,... (nothing after the colon:
the kernel as registered). Every variant is timed at every size in one
process (CUDA-event median of 20 launches after warm-up), its inputs
rotated over as many sets as overflow L2 three times, as bench.py and
--tune time them, and its output sampled against the exact product; a
line per (size, variant). The variants are built first, as many at a time
as the machine has cores (--jobs N to change it). With --peers, the
libraries of each variant's precision (numgemm.peers: cuBLAS fp16,
cuBLASLt and Triton int8, those installed) are timed after them at each
size, in the same run, B in the first variant's layout. With --steady,
every row (peers included) is timed in the bench's steady state
(timing.Steady: warmed 200 ms, then the median of about 100 ms of
launches) and prints its SM clock and J/GEMM.
"""

import ast
import os
import sys
from types import SimpleNamespace

import numpy as np
from numba import cuda

from numgemm import operands, registry
from numgemm.kernel import prebuild
from numgemm.measure import operand_sets, timed
from numgemm.peers import peer_runs
from numgemm.timing import Steady, time_gpu, time_steady


def variant(spec):
    """(name, fields, the config) of "NAME:FIELD=VALUE,..."."""
    name, _, fields = spec.partition(":")
    return name, fields, registry.get(name).replace(**changes_of(fields))


def changes_of(fields):
    """{field: value} of "FIELD=VALUE,...", each value a Python literal."""
    changes = {}
    for item in filter(None, fields.split(",")):
        key, _, value = item.partition("=")
        changes[key.strip()] = ast.literal_eval(value.strip())
    return changes


def main(argv):
    with_peers, steady = "--peers" in argv, Steady() if "--steady" in argv else None
    argv = [a for a in argv if a not in ("--peers", "--steady")]
    jobs = os.cpu_count() or 1
    if "--jobs" in argv:
        at = argv.index("--jobs")
        jobs, argv = int(argv[at + 1]), argv[:at] + argv[at + 2:]
    shapes = [tuple(map(int, x.split("x"))) if "x" in x else (int(x),) * 3 for x in argv[0].split(",")]
    variants = [variant(spec) for spec in argv[1:]]
    cc = tuple(cuda.get_current_device().compute_capability)
    needed, hits, built, secs = prebuild([cfg for _, _, cfg in variants], cc, jobs)
    print(f"{needed} kernels: {hits} from the cache, {built} built in {secs:.0f} s", flush=True)
    rng = np.random.default_rng()
    args = SimpleNamespace(batch=1, repeats=20)
    for M, N, K in shapes:
        host, dev = {}, {}
        for name, fields, cfg in variants:
            p = cfg.precision
            if p not in host:
                host[p] = operand_sets(p, 1, (M, N, K), rng)
            if (p, cfg.b_layout) not in dev:
                dev[p, cfg.b_layout] = [operands.to_device(p, cfg.b_layout, a, b) for a, b in host[p]]
            measured, ok, _, _ = timed(p, cfg, (M, N, K), dev[p, cfg.b_layout], host[p], args, rng, steady=steady)
            shape = f"{M}x{N}x{K}" if (M, N) != (K, K) else str(K)
            print(f"{shape:>5s} {name:22s} {fields:40s} {row(measured, M * N * K, steady)} {'ok' if ok else 'FAIL'}",
                  flush=True)
        for p in host if with_peers else ():
            for name, run, check in peer_runs(p, M, N, K, 1, rng, len(host[p]), b_layout=variants[0][2].b_layout):
                measured = time_steady(run, steady) if steady else SimpleNamespace(ms=time_gpu(run, repeats=20)[0])
                print(f"{shape:>5s} {name:63s} {row(measured, M * N * K, steady)} {'ok' if check() else 'FAIL'}",
                      flush=True)
    return 0


def row(measured, mnk, steady):
    """A timing's columns: ms and T(FL)OPS, and in steady state the SM clock and J/GEMM."""
    text = f"{measured.ms:.4f} ms {2 * mnk / measured.ms / 1e9:8.1f} T(FL)OPS"
    return text + (f" {measured.sm_mhz:5.0f} MHz {measured.joules:.4f} J" if steady else "")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
