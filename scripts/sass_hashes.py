"""Hash the SASS of every registered kernel on every target it builds for.

    python scripts/sass_hashes.py --jobs 2 > before.json
    python scripts/sass_hashes.py --jobs 2 --compare before.json

A restructuring of the kernel builder that should change nothing is checked
this way: the SASS of each (preset, kernel, target) is hashed with the
mangled function names blanked, and as its instruction mix (opcode counts,
registers, local memory), and two runs are compared entry by entry. Each run
builds afresh, in a cache of its own, one process per config; --tree hashes
another checkout (git worktree add /tmp/before <commit>).
"""

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def _work():
    from numgemm import registry
    from numgemm.toolchain import TARGETS, parse_target

    seen = {}
    for preset in registry.PRESETS:
        for name in registry.names(preset):
            cfg = registry.get(name, preset)
            for target in TARGETS:
                if parse_target(target) >= cfg.min_cc:
                    seen.setdefault((cfg, target), []).append(f"{preset}/{name}")
    return seen


def _hash(item):
    """One config on its targets: the first build makes all of them at once
    (one front end), as numgemm.kernel.build_config does, in a cache of this
    run's own; the others are read back from it. Each SASS is hashed twice:
    whole (names blanked), and as its instruction mix with the registers and
    local memory (the mix is what ptxas keeps where its order varies)."""
    try:
        from numgemm.kernel import build_config
    except ImportError:                     # a tree from before numgemm/kernel/
        from numgemm.kernels import build_config

    cfg, targets = item
    out = []
    for target in targets:
        start = time.perf_counter()
        b = build_config(cfg, target)
        mix = json.dumps([sorted(b.histogram().items()), b.registers, b.local_bytes])
        out.append((cfg, target, _digest(b.sass), hashlib.sha256(mix.encode()).hexdigest()[:16], b.registers,
                    time.perf_counter() - start))
    return out


def _use_tree(tree):
    """Workers import numgemm from tree (ahead of an editable install's finder)."""
    if tree:
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
        sys.path.insert(0, str(Path(tree).resolve()))


def _digest(sass):
    # numgemm.sass.Build.digest, written here too: a tree from before it has none
    return hashlib.sha256(re.sub(r"_Z[\w$]+", "_Z", sass).encode()).hexdigest()[:16]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--compare", metavar="JSON", help="an earlier run's output: print what differs")
    ap.add_argument("--tree", metavar="DIR", help="hash the numgemm of another checkout (e.g. a git worktree)")
    args = ap.parse_args(argv)
    _use_tree(args.tree)
    work = _work()
    per_config = {}
    for cfg, target in work:
        per_config.setdefault(cfg, []).append(target)
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        os.environ["NUMGEMM_CACHE_DIR"] = folder
        # A fresh process per config: ptxas's order for kernels that spill or
        # call (INT4 s4 on sm_90) follows the names numba-cuda gave the code
        # built before it in the process, so shared workers would vary it.
        fresh = {"max_tasks_per_child": 1} if sys.version_info >= (3, 11) else {}
        with ProcessPoolExecutor(args.jobs, initializer=_use_tree, initargs=(args.tree,), **fresh) as pool:
            for done in pool.map(_hash, list(per_config.items())):
                for cfg, target, digest, mix, regs, secs in done:
                    for key in work[cfg, target]:
                        out[f"{key}@{target}"] = {"sass": digest, "mix": mix, "registers": regs, "config": cfg.name}
                    print(f"{cfg.name} {target}: {digest} {mix} ({secs:.1f} s)", file=sys.stderr)
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
        def differs(k, what):
            return before.get(k, {}).get(what) != out.get(k, {}).get(what)
        order = sorted(k for k in before.keys() | out.keys() if differs(k, "sass") and not differs(k, "mix"))
        mix = sorted(k for k in before.keys() | out.keys() if differs(k, "mix"))
        for k in order:
            print(f"same mix, other order: {k}")
        for k in mix:
            print(f"differs: {k}: {before.get(k, {}).get('sass')} -> {out.get(k, {}).get('sass')}")
        print(f"{len(out)} builds: {len(out) - len(order) - len(mix)} identical SASS, "
              f"{len(order)} the same instructions in another order, {len(mix)} differ")
        return 1 if mix else 0
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
