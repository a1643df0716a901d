"""What an epilogue adds to a kernel's SASS: each variant built offline (no
GPU) beside the same kernel without its epilogue fields, and the difference
in loads of the vectors, special-function instructions, local memory
(spills), the k loop and the whole function.

    python scripts/epilogue_sass.py --target sm_90 'fp16_wgmma:bias=True,act="silu"' \
        'int8_wgmma:scale_a="row",scale_b="col",out="bf16"'

Variants are NAME:FIELD=VALUE,... as scripts/variants.py takes them.
"""

import argparse
import collections
import sys

from variants import variant

from numgemm.kernel import build_config
from numgemm.kernel.epilogue import NONE

#: The opcodes that tell the epilogue's work: its loads (generic, global; staged: cp.async, shared), MUFU, local memory.
WATCHED = ("LD.E", "LDG.E", "LDGSTS", "LDS", "MUFU.EX2", "MUFU.RCP", "LDL", "STL")


def counts(build):
    ops = collections.Counter(build.instructions)
    watched = {op: sum(n for o, n in ops.items() if o == op or o.startswith(op + ".")) for op in WATCHED}
    loop = build.main_loop()
    return dict(watched, instructions=len(build.instructions), k_loop=len(loop.ops) if loop else 0,
                local_bytes=build.local_bytes, registers=build.registers)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--target", default="sm_90")
    args = ap.parse_args(argv)
    for spec in args.variants:
        _, _, cfg = variant(spec)
        plain = cfg.replace(**NONE, out=cfg.out if cfg.prec.narrows else "")
        got, base = (counts(build_config(c, args.target, together=())) for c in (cfg, plain))
        print(f"{spec} [{args.target}] ({cfg.name}) against {plain.name}:")
        print("  " + ", ".join(f"{k} {got[k]} ({got[k] - base[k]:+d})" for k in got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
