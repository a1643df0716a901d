"""Run registered kernels once each, checked, for compute-sanitizer to watch.

    compute-sanitizer --tool memcheck --error-exitcode 9 python scripts/sanitize.py fp16_wgmma int8_wgmma
    python scripts/sanitize.py --all --shape 1x300x520x200
    python scripts/sanitize.py --split 3 fp16_wgmma int8_ptx_tma
    python scripts/sanitize.py --w4a16

--all is every registered kernel of both presets and every tuned winner
this GPU's architecture ships (numgemm/tuned/), built first, --jobs at a
time (outside the sanitizer: python scripts/sanitize.py --all --build-only).
Each kernel computes one product at a shape that is no multiple of any tile
(default batch 1, M 300, N 520, K 200; INT4 with K - 1, odd) into a poisoned
output, compared with the exact reference; kernels this GPU cannot run are
named and skipped. --split S runs the named kernels split over K S ways (at
the default shape, 3 leaves some blocks an empty run). Under the sanitizer a
tool's report, not this script's exit status, is the verdict
(--error-exitcode makes it the exit status). --w4a16 adds W4A16 (gemm(x,
prepack_w4(...))) at M 1, 5, 37, 70 and 300 (gemm()'s kernel for each: 8 rows,
16, two 16-row tiles; on Hopper wgmma's 128-row and two 128-row tiles) with N
520 and K 384, FP16 and BF16, with and without zero points; with
--w4a16-variants again for each variant of gemm()'s kernel
(numgemm.weight_only.variant: FIELD=VALUE,..., as scripts/w4a16.py takes
them), at the M whose kernel has those fields.
"""

import argparse
import os
import sys

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernels", nargs="*", help="registered names of the tuned preset, or NAME:FIELD=VALUE,... "
                    "(a variant, as scripts/variants.py takes)")
    ap.add_argument("--all", action="store_true", help="every registered kernel of both presets")
    ap.add_argument("--shape", default="1x300x520x200", help="BATCHxMxNxK")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="build processes")
    ap.add_argument("--build-only", action="store_true", help="build the kernels into the cache and stop")
    ap.add_argument("--split", type=int, default=1, help="the named kernels split over K this many ways")
    ap.add_argument("--w4a16", action="store_true", help="W4A16 calls too (gemm()'s kernel at five M)")
    ap.add_argument("--w4a16-variants", nargs="*", default=[], metavar="FIELD=VALUE,...",
                    help="with --w4a16: again with gemm()'s W4A16 kernel so changed (copy=\"tma\", ...)")
    args = ap.parse_args(argv)

    from numba import cuda

    import numgemm
    from numgemm import operands, registry, tuning
    from numgemm.kernel import prebuild
    from numgemm.precision import PRECISIONS
    from numgemm.toolchain import target_name

    batch, M, N, K = map(int, args.shape.lower().split("x"))
    cc = tuple(cuda.get_current_device().compute_capability)
    if args.all:
        chosen = [(f"{p}/{n}", p, registry.get(n, p)) for p in registry.PRESETS for n in registry.names(p)]
        chosen += [(f"winner/{name}", "tuned", c) for c, name in tuning.winners(target_name(cc)).items()]
    else:
        from variants import variant

        split = {"split_k": args.split} if args.split > 1 else {}
        chosen = [(f"tuned/{n}" + (f"_split{args.split}" if split else ""), "tuned", variant(n)[2].replace(**split))
                  for n in args.kernels]
    runnable = [c for _, _, c in chosen if c.unsupported(cc) is None]
    needed, hits, built, secs = prebuild(runnable, cc, args.jobs)
    print(f"{needed} kernels: {hits} from the cache, {built} built in {secs:.0f} s", flush=True)
    if args.build_only:
        return 0
    rng, bad = np.random.default_rng(), 0
    for label, preset, cfg in chosen:
        why = cfg.unsupported(cc)
        if why:
            print(f"{label}: skipped: {why}")
            continue
        k = K - 1 if PRECISIONS[cfg.precision].bits < 8 else K     # a K that the packing pads
        a, b, ref = operands.kernel_operands(cfg, batch, M, N, k, rng)
        out = operands.poisoned(cfg.precision, (batch, M, N), cfg.c_dtype)
        vectors = operands.epilogue_vectors(cfg, M, N, rng)       # the epilogue's, where it has one
        numgemm.gemm(a, b, precision=cfg.precision, kernel=cfg, preset=preset, out=out, k=k,
                     **dict(zip(("scale_a", "scale_b", "bias"), vectors)), activation=cfg.act or None)
        ref = operands.through_epilogue(ref, *vectors, cfg.act)
        why = operands.mismatch(out.copy_to_host(), ref, cfg.precision, cfg.acc)
        bad += why is not None
        print(f"{label}: {'ok' if why is None else 'WRONG: ' + why}", flush=True)
    if args.w4a16:
        from numgemm import weight_only
        from variants import changes_of

        for changes in ["", *args.w4a16_variants]:
            with weight_only.variant(**changes_of(changes)):
                bad += _w4a16(rng)
    return 1 if bad else 0


def _w4a16(rng, n=520, k=384):
    """gemm(x, prepack_w4(...)) into a poisoned C, checked against float64,
    with the kernel weight_only.choose gives (a variant's, inside
    weight_only.variant); the count of mismatches."""
    from numba import cuda

    import numgemm
    from numgemm import operands, weight_only
    from numgemm.precision import PRECISIONS
    from numgemm.quant import dequantize_w4, prepack_w4

    bad = 0
    for precision in ("fp16", "bf16"):
        prec = PRECISIONS[precision]
        for zeros in (False, True):
            w = rng.integers(0, 16, (n, k)) if zeros else rng.integers(-8, 8, (n, k))
            z = rng.integers(0, 16, (n, k // 128)) if zeros else None
            p = prepack_w4(w, rng.uniform(0.005, 0.02, (n, k // 128)).astype(np.float32), z, precision=precision)
            bits = p.scales.T if prec.encoding else p.scales.T.view(np.float16)
            for M in (1, 5, 37, 70, 300):
                ref_w = dequantize_w4(w, bits, z, weight_only.rounds(M, p))
                x = prec.encode(rng.standard_normal((M, k)).astype(np.float32))
                out = cuda.to_device(np.full((M, n), np.nan, np.float32))
                label = f"w4a16 {precision}{' zeros' if zeros else ''} M {M}"
                try:
                    spec = weight_only.choose(M, n, p, "f32", cuda.get_current_device(), out)     # C: float32
                except TypeError as e:            # a variant's field that this M's kernel does not have
                    print(f"{label}: skipped: {e}")
                    continue
                numgemm.gemm(cuda.to_device(x), p, out=out)
                why = operands.mismatch(out.copy_to_host(), prec.decode(x) @ ref_w.T, precision)
                bad += why is not None
                print(f"{label} ({spec.name}): {'ok' if why is None else 'WRONG: ' + why}", flush=True)
    return bad


if __name__ == "__main__":
    sys.exit(main())
