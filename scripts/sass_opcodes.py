"""Where two checkouts' SASS of the same kernels differs, by opcode: each
kernel built afresh in each tree (a cache of its own), its instructions
counted by opcode, and the counts that differ printed.

    git worktree add /tmp/before <commit>
    python scripts/sass_opcodes.py --before /tmp/before --target sm_90 int8_wgmma fp16_wgmma
    python scripts/sass_opcodes.py --before /tmp/before --loop 'bf16_wgmma_cl1:bn=128,pingpong=True' \\
        'w4a16_wgmma:copy="tma"'

A kernel is a registered name, or NAME:FIELD=VALUE,... for it with fields
changed (as scripts/variants.py takes them); w4a16_wgmma names the W4A16
wgmma kernel (numgemm.kernel.w4a16_wgmma.W4A16Wgmma's defaults, sm_90a).
--loop counts the k loop alone (numgemm.sass.Build.main_loop: the loop
with the most mma instructions), with its instructions a mma.
sass_hashes.py says which builds differ; this says by how much.
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

from variants import changes_of

_COUNT = """
import json, re, sys, collections
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, {tree!r})
from numgemm import registry
from numgemm.kernel import build_config
from numgemm.sass import build_many
OPCODE = re.compile(r"^\\s*/\\*[0-9a-f]+\\*/\\s+(@!?U?P\\w+\\s+)?([A-Z][A-Z0-9_.]*)", re.M)

def built(name, changes):
    if name == "w4a16_wgmma":
        from numgemm.kernel.w4a16_wgmma import W4A16Wgmma
        w = W4A16Wgmma(**changes)
        return build_many(w.function(), w.argtypes(), ["sm_90a"], name=w.name, launch_bounds=(w.threads, 1),
                          strict_ptxas=True)["sm_90a"]
    return build_config(registry.get(name).replace(**changes), {target!r})

out = {{}}
for spec, (name, changes) in {kernels!r}.items():
    b = built(name, changes)
    if {loop!r}:
        loop = b.main_loop()
        out[spec] = [collections.Counter(loop.ops), loop.mmas] if loop else [{{}}, 0]
    else:
        out[spec] = [collections.Counter(m.group(2) for m in OPCODE.finditer(b.sass)), None]
print(json.dumps(out))
"""


def counts(tree, names, target, loop):
    """{kernel: [{opcode: count}, the loop's mmas (--loop) or None]} as tree builds them."""
    # each NAME:FIELD=VALUE,... parsed here, so that the tree builds from literals (repr() gives them back)
    kernels = {spec: (spec.partition(":")[0], changes_of(spec.partition(":")[2])) for spec in names}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMGEMM_CACHE_DIR=cache)
        code = _COUNT.format(tree=os.path.abspath(tree), kernels=kernels, target=target, loop=loop)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def size(ops, mmas):
    """A count's instructions, and in a loop its mmas and instructions a mma."""
    n = sum(ops.values())
    return f"{n}" + (f" ({mmas} mma, {n / mmas:.1f} a mma)" if mmas else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=".")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--loop", action="store_true", help="count the k loop's instructions alone")
    ap.add_argument("names", nargs="+")
    args = ap.parse_args(argv)
    before, after = (counts(t, args.names, args.target, args.loop) for t in (args.before, args.after))
    for name in args.names:
        (b, b_mmas), (a, a_mmas) = before[name], after[name]
        b, a = collections.Counter(b), collections.Counter(a)
        diff = {op: a[op] - b[op] for op in sorted(b.keys() | a.keys()) if a[op] != b[op]}
        print(f"{name} {args.target}{' k loop' if args.loop else ''}: {size(b, b_mmas)} -> {size(a, a_mmas)} "
              "instructions; " + (", ".join(f"{op} {d:+d}" for op, d in diff.items()) or "the same counts"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
