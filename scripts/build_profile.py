"""Where a kernel's cold build spends its time, stage by stage.

    python scripts/build_profile.py int8_ptx_mma_k32 fp16_ptx_mma int4_ptx_unpack_s8 --target sm_90
    python scripts/build_profile.py ... --tree /tmp/before       # another checkout, for before/after

Each kernel is built once for the target, uncached (NUMGEMM_CACHE=0), as
`NUMGEMM_CACHE=0 python -m numgemm.inspect NAME --target T` builds it: one
front end and T's link (with the cache on, build_config links every offline
target from that front end). Numba's passes are timed exclusively: a device
function that Numba compiles while typing its caller
(numgemm.kernel.regs.device) is counted in its own passes, not in the
caller's type inference. Stages: Numba's passes by group, NVVM (LLVM IR to
LTO-IR), nvJitLink (LTO-IR and the linked .ptx/.cu to a cubin), and the
disassembly that offline inspection adds. "own target" is what inspect
reports (the build's seconds); "whole build" adds the cache key, the tables
and the resource reading around it.
"""

import argparse
import os
import sys
import time
from collections import defaultdict

from sass_hashes import _use_tree  # the same way into another checkout

# Numba's passes, grouped (by the pass's name()); the rest is "other passes".
GROUPS = (
    ("bytecode, SSA, rewrites", ("translate_bytecode", "cuda_translate_bytecode", "fixup_args", "ir_processing", "with_lifting",
                                 "inline_closure_likes", "rewrite_semantic_constants", "dead_branch_prune",
                                 "generic_rewrites", "make_function_op_code_to_jit_function",
                                 "reconstruct_ssa", "rewrite_dynamic_raises", "literal_unroll",
                                 "find_literally", "literal_propagation_subpipeline", "canonicalize_loop_exit",
                                 "canonicalize_loop_entry", "inline_overloads", "dead_code_elimination",
                                 "strip_phis", "propagate_literals", "nopython_rewrites", "ir_legalization",
                                 "LiteralPropagation", "Rewrite dynamic raises")),
    ("IR inlining (inline=\"always\")", ("inline_inlinables",)),
    ("type inference", ("nopython_type_inference", "cuda_nopython_type_inference")),
    ("lowering", ("cuda_native_lowering", "native_lowering", "nopython_backend", "cuda_backend")),
)
# The tools' entry points: (stage, module, attribute path).
TOOLS = (("NVVM", "numba.cuda.cudadrv.nvvm", "compile_ir"),
         ("nvJitLink", "numba.cuda.cudadrv.driver", "_Linker.complete"),
         ("disassembly", "numgemm.sass", "run_tool"))


class PassClock:
    """Exclusive seconds per Numba pass: a pass that runs a nested compile
    (typing a called device function) stops its own clock meanwhile."""

    def __init__(self):
        self.seconds, self.compiles, self._stack = defaultdict(float), 0, []

    def install(self):
        from numba.cuda.core import compiler_machinery as cm

        run = cm.PassManager._runPass

        def timed(pm, index, pss, state):
            now = time.perf_counter()
            if self._stack:
                name, since = self._stack[-1]
                self.seconds[name] += now - since
            self._stack.append([pss.name(), now])
            self.compiles += pss.name().endswith("translate_bytecode")
            try:
                return run(pm, index, pss, state)
            finally:
                name, since = self._stack.pop()
                now = time.perf_counter()
                self.seconds[name] += now - since
                if self._stack:
                    self._stack[-1][1] = now
        cm.PassManager._runPass = timed


def _time_tools(seconds):
    """Wrap each TOOLS entry point to add its wall time to seconds[stage]."""
    import importlib

    for label, module, path in TOOLS:
        owner = importlib.import_module(module)
        *outer, attr = path.split(".")
        for name in outer:
            owner = getattr(owner, name)
        fn = getattr(owner, attr)

        def timed(*a, _fn=fn, _label=label, **kw):
            start = time.perf_counter()
            try:
                return _fn(*a, **kw)
            finally:
                seconds[_label] += time.perf_counter() - start
        setattr(owner, attr, timed)


def profile(cfg, target):
    """(whole seconds, own-target seconds, {stage: seconds}, compiles)."""
    from numgemm.kernel import build_config

    clock, tools = PassClock(), defaultdict(float)
    clock.install()
    _time_tools(tools)
    start = time.perf_counter()
    build = build_config(cfg, target)
    whole = time.perf_counter() - start
    out, grouped = {}, set()
    for label, names in GROUPS:
        out[label] = sum(clock.seconds.get(n, 0.0) for n in names)
        grouped.update(names)
    out["other passes"] = sum(s for n, s in clock.seconds.items() if n not in grouped)
    out.update((label, tools[label]) for label, _, _ in TOOLS)
    if os.environ.get("BUILD_PROFILE_PASSES"):
        print(sorted(clock.seconds.items(), key=lambda kv: -kv[1]), file=sys.stderr)
    return whole, build.seconds, out, clock.compiles


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernels", nargs="+")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--preset", default="tuned")
    ap.add_argument("--tree", metavar="DIR", help="profile the numgemm of another checkout")
    args = ap.parse_args(argv)
    os.environ["NUMGEMM_CACHE"] = "0"
    _use_tree(args.tree)
    from numgemm import registry

    # Module-level helpers (regs.swizzled, the PTX routines) compile once per
    # process, so kernels after the first do not pay for them: for a cold
    # figure of one kernel, name it alone (or use numgemm.inspect).
    rows = [(name, *profile(registry.get(name, args.preset), args.target)) for name in args.kernels]
    print(f"{'stage (s)':32s}" + "".join(f"{n:>24s}" for n, *_ in rows))
    for label in rows[0][3]:
        print(f"{label:32s}" + "".join(f"{s[label]:24.2f}" for _, _, _, s, _ in rows))
    print(f"{'Numba compiles (kernel + callees)':32s}" + "".join(f"{c:24d}" for *_, c in rows))
    print(f"{'whole build':32s}" + "".join(f"{t:24.2f}" for _, t, *_ in rows))
    print(f"{'own target (inspect reports)':32s}" + "".join(f"{t:24.2f}" for _, _, t, *_ in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
