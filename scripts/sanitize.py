"""Run registered kernels once each, checked, for compute-sanitizer to watch.

    compute-sanitizer --tool memcheck --error-exitcode 9 python scripts/sanitize.py fp16_wgmma int8_wgmma
    python scripts/sanitize.py --all --shape 1x300x520x200

Each kernel computes one product at a shape that is no multiple of any tile
(default batch 1, M 300, N 520, K 200; INT4 with K - 1, odd) into a poisoned
output, compared with the exact reference; kernels this GPU cannot run are
named and skipped. Under the sanitizer a tool's report, not this script's
exit status, is the verdict (--error-exitcode makes it the exit status).
"""

import argparse
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernels", nargs="*", help="registered names of the tuned preset")
    ap.add_argument("--all", action="store_true", help="every registered kernel of both presets")
    ap.add_argument("--shape", default="1x300x520x200", help="BATCHxMxNxK")
    args = ap.parse_args(argv)

    from numba import cuda

    import numgemm
    from numgemm import operands, registry

    batch, M, N, K = map(int, args.shape.lower().split("x"))
    chosen = [(p, n) for p in registry.PRESETS for n in registry.names(p)] if args.all else \
        [("tuned", n) for n in args.kernels]
    cc = tuple(cuda.get_current_device().compute_capability)
    rng, bad = np.random.default_rng(), 0
    for preset, name in chosen:
        cfg = registry.get(name, preset)
        why = cfg.unsupported(cc)
        if why:
            print(f"{preset}/{name}: skipped: {why}")
            continue
        k = K - 1 if cfg.precision == "int4" else K
        a, b, ref = operands.kernel_operands(cfg, batch, M, N, k, rng)
        out = operands.poisoned(cfg.precision, (batch, M, N), cfg.acc)
        numgemm.gemm(a, b, precision=cfg.precision, kernel=name, preset=preset, out=out, k=k)
        why = operands.mismatch(out.copy_to_host(), ref, cfg.precision, cfg.acc)
        bad += why is not None
        print(f"{preset}/{name}: {'ok' if why is None else 'WRONG: ' + why}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
