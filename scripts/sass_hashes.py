"""Hash the SASS of every registered kernel on every target it builds for.

    python scripts/sass_hashes.py --jobs 2 > before.json
    python scripts/sass_hashes.py --jobs 2 --compare before.json

A restructuring of the kernel builder that should change nothing is checked
this way: the SASS of each (preset, kernel, target) is hashed with the
mangled function names blanked (they carry the defining module's path), and
two runs are compared entry by entry.
"""

import argparse
import hashlib
import json
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor

_MANGLED = re.compile(r"_Z[\w$]+")


def _build_config():
    try:
        from numgemm.kernel import build_config
    except ImportError:         # the builder before numgemm/kernel/
        from numgemm.kernels import build_config
    return build_config


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
    cfg, target = item
    start = time.perf_counter()
    b = _build_config()(cfg, target)
    sass = _MANGLED.sub("_Z", b.sass)
    return cfg, target, hashlib.sha256(sass.encode()).hexdigest()[:16], b.registers, time.perf_counter() - start


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--compare", metavar="JSON", help="an earlier run's output: print what differs")
    args = ap.parse_args(argv)
    work = _work()
    out = {}
    with ProcessPoolExecutor(args.jobs) as pool:
        for cfg, target, digest, regs, secs in pool.map(_hash, list(work)):
            for key in work[cfg, target]:
                out[f"{key}@{target}"] = {"sass": digest, "registers": regs, "config": cfg.name}
            print(f"{cfg.name} {target}: {digest} ({secs:.1f} s)", file=sys.stderr)
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
        differ = sorted(k for k in before.keys() | out.keys() if before.get(k, {}).get("sass") != out.get(k, {}).get("sass"))
        for k in differ:
            print(f"differs: {k}: {before.get(k, {}).get('sass')} -> {out.get(k, {}).get('sass')}")
        print(f"{len(out)} builds, {len(differ)} differ")
        return 1 if differ else 0
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
