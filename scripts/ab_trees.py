"""Time one kernel as several checkouts build it, in the same process and run.

    git worktree add /tmp/before <commit>
    python scripts/ab_trees.py --before /tmp/before int8_ptx_mma_k32 fp16_ptx_mma --sizes 4096 8192
    python scripts/ab_trees.py --before /tmp/before --after . /tmp/variant ...

A change to how kernels are built that changes their SASS is judged by
timing the old build against the new one. Each tree builds the kernels in a
process of its own, into a cache of its own; the cubins are loaded here and
launched on the same operands, in turn for --rounds rounds of CUDA-event
medians (numgemm.timing: a burst of --repeats launches, or with --steady
each in steady state, with its SM clock and energy a GEMM), and every
output is checked against exact dot products. The ratio is before / after:
above 1, the after build is faster. Needs a GPU.
"""

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_BUILD = """
import json, os, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, {tree!r})
from numgemm import registry
from numgemm.kernel import device_cubin, prebuild
cfgs = {{name: registry.get(name, {preset!r}) for name in {names!r}}}
prebuild(list(cfgs.values()), {cc!r}, {jobs})
out = {{}}
for name, cfg in cfgs.items():
    cubin, entry = device_cubin(cfg, {cc!r})
    path = {folder!r} + "/" + name + ".cubin"
    open(path, "wb").write(cubin)
    out[name] = {{"config": cfg.name, "entry": entry, "cubin": path}}
print(json.dumps(out))
"""


def build_tree(tree, names, preset, cc, folder, jobs):
    """{name: {config, entry, cubin path}} as the checkout at tree builds them."""
    os.makedirs(folder, exist_ok=True)
    src = _BUILD.format(tree=str(Path(tree).resolve()), names=names, preset=preset, cc=tuple(cc),
                        folder=folder, jobs=jobs)
    env = dict(os.environ, NUMGEMM_CACHE_DIR=os.path.join(folder, "cache"))
    done = subprocess.run([sys.executable, "-c", src], env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernels", nargs="+")
    ap.add_argument("--before", required=True, metavar="DIR", help="the other checkout (git worktree)")
    ap.add_argument("--after", nargs="+", default=["."], metavar="DIR",
                    help="the checkouts to compare with it (default: this one)")
    ap.add_argument("--preset", default="tuned")
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=10, help="a burst's timed launches")
    ap.add_argument("--steady", action="store_true", help="time each round in steady state (timing.time_steady)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)

    import numpy as np
    from cuda.core import ObjectCode
    from numba import cuda

    from numgemm import operands, registry
    from numgemm.api import plan_gemm
    from numgemm.timing import time_gpu, time_steady
    try:
        from numgemm.plans import allow_dynamic_shared
    except ImportError:         # a tree from before api.py was split
        from numgemm.api import _allow_dynamic_shared as allow_dynamic_shared

    ctx = cuda.current_context()
    cc = tuple(ctx.device.compute_capability)
    trees = [args.before, *args.after]
    with tempfile.TemporaryDirectory() as folder:
        with ThreadPoolExecutor(len(trees)) as pool:      # each tree builds in its own process
            jobs = max(1, (os.cpu_count() or 1) // len(trees))
            built = list(pool.map(lambda it: build_tree(it[1], args.kernels, args.preset, cc,
                                                        os.path.join(folder, str(it[0])), jobs), enumerate(trees)))
        funcs = [{name: ctx.create_module_image(ObjectCode.from_cubin(Path(b["cubin"]).read_bytes()))
                  .get_function(b["entry"]) for name, b in tree.items()} for tree in built]
    rng = np.random.default_rng(0)
    rows = []
    for name in args.kernels:
        cfg = registry.get(name, args.preset)
        if any(tree[name]["config"] != cfg.name for tree in built):
            sys.exit(f"{name}: the trees name different configs ({[t[name]['config'] for t in built]}); "
                     "a timing of two configs is the bench's job")
        for n in args.sizes:
            a, b = operands.values(cfg.precision, 1, n, n, n, rng)
            da, db = operands.to_device(cfg.precision, cfg.b_layout, a[0], b[0])
            plans = []
            for t, tree in enumerate(trees):
                out = operands.poisoned(cfg.precision, (n, n), cfg.c_dtype)
                plan = copy.copy(plan_gemm(da, db, precision=cfg.precision, kernel=cfg, out=out, k=n))
                plan.cufunc = funcs[t][name]
                allow_dynamic_shared(plan.cufunc, cfg.smem_bytes)
                plan.launch()
                cuda.synchronize()
                # 256 entries against exact dot products (an int64 product of N = 8192 takes minutes)
                if not operands.sample_matches(out.copy_to_host()[None], a, b, cfg.precision, rng, cfg.acc):
                    sys.exit(f"{name} at N={n}, as {tree} builds it: wrong result")
                plans.append(plan)
            times, mhz, joules = ([[] for _ in trees] for _ in range(3))
            for _ in range(args.rounds):
                for t, plan in enumerate(plans):
                    if args.steady:
                        got = time_steady(lambda i, p=plan: p.launch())
                        times[t].append(got.ms)
                        mhz[t].append(got.sm_mhz)
                        joules[t].append(got.joules)
                    else:
                        times[t].append(time_gpu(lambda i, p=plan: p.launch(), repeats=args.repeats)[0])
            ms = [statistics.median(x) for x in times]
            row = {"kernel": name, "config": cfg.name, "N": n, "trees": trees, "ms": ms, "rounds": times}
            if args.steady:
                row.update(sm_mhz=mhz, joules=joules)
            rows.append(row)
            extra = ("  " + "  ".join(f"{statistics.median(m):.0f} MHz {statistics.median(j) * 1e3:.2f} mJ"
                                      for m, j in zip(mhz, joules))) if args.steady else ""
            print(f"{name:26s} N={n:5d}  before {ms[0] * 1e3:9.1f} us  "
                  + "  ".join(f"{tree}: {m * 1e3:9.1f} us ({ms[0] / m:.3f})" for tree, m in zip(args.after, ms[1:]))
                  + f"  [before/after; {args.rounds} rounds{', steady' if args.steady else ''}, all checked]"
                  + extra, flush=True)
    if args.json:
        name = ctx.device.name
        Path(args.json).write_text(json.dumps({"device": name.decode() if isinstance(name, bytes) else name,
                                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
