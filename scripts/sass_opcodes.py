"""Where two checkouts' SASS of the same kernels differs, by opcode: each
kernel built afresh in each tree (a cache of its own), its instructions
counted by opcode, and the counts that differ printed.

    git worktree add /tmp/before <commit>
    python scripts/sass_opcodes.py --before /tmp/before --target sm_90 int8_wgmma fp16_wgmma

sass_hashes.py says which builds differ; this says by how much.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

_COUNT = """
import json, re, sys, collections
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, {tree!r})
from numgemm import registry
from numgemm.kernel import build_config
out = {{}}
for name in {names!r}:
    sass = build_config(registry.get(name), {target!r}).sass
    ops = [m.group(2) for m in re.finditer(r"^\\s*/\\*[0-9a-f]+\\*/\\s+(@!?U?P\\w+\\s+)?([A-Z][A-Z0-9_.]*)", sass, re.M)]
    out[name] = collections.Counter(ops)
print(json.dumps(out))
"""


def counts(tree, names, target):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMGEMM_CACHE_DIR=cache)
        code = _COUNT.format(tree=os.path.abspath(tree), names=names, target=target)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=".")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("names", nargs="+")
    args = ap.parse_args(argv)
    before, after = counts(args.before, args.names, args.target), counts(args.after, args.names, args.target)
    for name in args.names:
        b, a = collections.Counter(before[name]), collections.Counter(after[name])
        diff = {op: a[op] - b[op] for op in sorted(b.keys() | a.keys()) if a[op] != b[op]}
        print(f"{name} {args.target}: {sum(b.values())} -> {sum(a.values())} instructions; "
              + (", ".join(f"{op} {d:+d}" for op, d in diff.items()) or "the same counts"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
