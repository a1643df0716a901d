"""Offline inspection from the command line: build registered kernels for a
chosen target on a machine without a GPU, and print their SASS, histogram,
resources and main loop (numgemm.sass does the building and reading).

    python -m numgemm.inspect int8_ptx_mma_k32 --target sm_90 --sass
    python -m numgemm.inspect fp16_ptx_mma --target sm_90 --loop
    python -m numgemm.inspect --all --target sm_89
"""

import argparse
import sys
from pathlib import Path

from .cli import entry, kernel_names
from .sass import Build, Loop, build  # noqa: F401 - the library side, re-exported
from .toolchain import TARGETS, has_native_s4_mma, parse_target, target_name


def s4_note(target):
    """What this target does with s4 tensor-core instructions: a fact about
    the target, reported, not an error."""
    cc = parse_target(target)
    if has_native_s4_mma(cc):
        return f"{target_name(cc)}: s4 mma.sync and WMMA s4 compile to native IMMA S4 instructions."
    return (f"{target_name(cc)}: no native s4 tensor-core instruction; ptxas emulates s4 mma.sync "
            "and WMMA s4 (widening to s8 in a called routine). numgemm's int4_ptx_unpack_s8 "
            "widens in the kernel instead.")


def conversion_note(target):
    """The precisions whose mma.sync ptxas converts on this target
    (Precision.mma_converted_on), or "" where none."""
    from .precision import PRECISIONS

    cc = parse_target(target)
    names = [p.name for p in PRECISIONS.values() if cc in p.mma_converted_on]
    if not names:
        return ""
    return (f"{target_name(cc)}: ptxas converts {' and '.join(names)} mma.sync to f16 HMMA; their wgmma "
            "is native.")


@entry("python -m numgemm.inspect")
def main(argv=None):
    from . import registry
    from .kernel import build_config

    ap = argparse.ArgumentParser(prog="python -m numgemm.inspect", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernels", nargs="*", help="registered kernel names (see --list)")
    ap.add_argument("--all", action="store_true", help="every registered kernel")
    ap.add_argument("--list", action="store_true", help="list the registered kernels")
    ap.add_argument("--target", default="sm_89", choices=TARGETS + ("sm_86",))
    ap.add_argument("--preset", default="tuned", choices=("paper", "tuned"))
    ap.add_argument("--linkage", default=None, choices=("inline", "link"))
    ap.add_argument("--sass", action="store_true", help="print the SASS")
    ap.add_argument("--hist", action="store_true", help="print the instruction histogram")
    ap.add_argument("--loop", action="store_true",
                    help="print the main loop's shape: M mma, L ldmatrix, G global load, B barrier")
    ap.add_argument("--save", metavar="DIR", help="write <name>.<target>.cubin and .sass there")
    args = ap.parse_args(argv)

    if args.list:
        for name in registry.names(args.preset):
            print(name)
        return 0
    names = registry.names(args.preset) if args.all else args.kernels
    if not names:
        ap.error("name a kernel, or --all, or --list")
    kernel_names(names, (args.preset,))
    print(s4_note(args.target))
    if conversion_note(args.target):
        print(conversion_note(args.target))
    for name in names:
        cfg = registry.get(name, args.preset)
        if args.linkage:
            cfg = cfg.replace(linkage=args.linkage)
        why = cfg.unsupported(args.target, launch=False)
        if why:
            print(f"{name}: not built: {why}")
            continue
        b = build_config(cfg, args.target)
        print(b.summary())
        if args.hist:
            for op, n in b.histogram().most_common():
                print(f"  {n:6d}  {op}")
        if args.loop:
            loop = b.main_loop()
            print(f"  {loop.summary()}\n  {loop.shape}" if loop else "  no loop with an mma")
        if args.sass:
            print(b.sass)
        if args.save:
            out = Path(args.save)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{cfg.name}.{b.target}.cubin").write_bytes(b.cubin)
            (out / f"{cfg.name}.{b.target}.sass").write_text(b.sass)
    return 0


if __name__ == "__main__":
    sys.exit(main())
