"""Where a kernel's cold build spends its time, stage by stage.

    python scripts/build_profile.py int8_ptx_mma_k32 fp16_ptx_mma int4_ptx_unpack_s8 --target sm_90

Each kernel is built once, uncached (NUMGEMM_CACHE=0), under cProfile; the
stages are the cumulative times of the functions that run them (the
profiler adds its own overhead, mostly to the front end). Numba's front end:
inlining the inline="always" device functions (deriving each callee's IR,
copying it in), type inference, lowering to LLVM IR; then NVVM (LLVM IR to
LTO-IR), nvJitLink (LTO-IR and the linked .ptx/.cu to a cubin), and the
disassembly that offline inspection adds.
"""

import argparse
import cProfile
import os
import pstats
import sys
import time

STAGES = (
    ("inline device functions", "inline_closurecall.py", "inline_function"),
    ("  derive callee IR", "inline_closurecall.py", "run_untyped_passes"),
    ("  copy callee IR", "inline_closurecall.py", "copy_ir"),
    ("type inference", "typed_passes.py", "type_inference_stage"),
    ("lowering", "lowering.py", "lower"),
    ("NVVM", "nvvm.py", "compile_ir"),
    ("nvJitLink", "driver.py", "complete"),
    ("disassembly", "toolchain.py", "run_tool"),
)


def profile(cfg, target):
    from numgemm.kernel import build_config

    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    build_config(cfg, target)
    prof.disable()
    total = time.perf_counter() - start
    stats = pstats.Stats(prof).stats
    out = {}
    for label, path, func in STAGES:
        out[label] = max((v[3] for (f, _, name), v in stats.items() if f.endswith(path) and name == func),
                         default=0.0)
    return total, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernels", nargs="+")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--preset", default="tuned")
    args = ap.parse_args(argv)
    os.environ["NUMGEMM_CACHE"] = "0"
    from numgemm import registry

    rows = [(name, *profile(registry.get(name, args.preset), args.target)) for name in args.kernels]
    print(f"{'stage (s, cumulative)':28s}" + "".join(f"{n:>22s}" for n, _, _ in rows))
    for label, _, _ in STAGES:
        print(f"{label:28s}" + "".join(f"{s[label]:22.2f}" for _, _, s in rows))
    print(f"{'whole build (profiled)':28s}" + "".join(f"{t:22.2f}" for _, t, _ in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
