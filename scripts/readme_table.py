"""Write the README's results table from a bench JSON, between its markers.

    python scripts/readme_table.py results/2026-11-30-h200-swizzle/tuned.json
    python scripts/readme_table.py --check      # exit 1 if the README's table differs

The table is never typed by hand: it is the bench's instruction ladder
(the fastest WMMA, mma.sync and wgmma kernels and the library, per
precision) at the JSON's largest size, with the device, date and source
file it came from.
"""

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BEGIN, END = "<!-- results-table -->", "<!-- /results-table -->"


def table(path):
    """The JSON's instruction ladder (numgemm.report.ladder) at its largest size."""
    from numgemm.report import Row, ladder

    data = json.loads((ROOT / path).read_text())
    n = max(r["n"] for r in data["rows"] if isinstance(r["n"], int))
    rows = [Row(**r) for r in data["rows"] if r["n"] == n]
    mode = data.get("timing", "burst").split(":")[0]     # "steady state" or "burst"
    head = f"{data['device']}, {data['date']}, N = {n}, batch {data['batch']}, {mode} (`{path}`):"
    body = ladder(rows, data["ceilings"]).splitlines()
    # Drop the N column: one size.
    cells = [line.split("|") for line in body]
    return "\n".join([head, ""] + ["|".join(c[:2] + c[3:]) for c in cells])


def source(text):
    """The JSON the README's table says it came from."""
    m = re.search(re.escape(BEGIN) + r"\n.*?\(`([^`]+\.json)`\)", text, re.S)
    return m.group(1) if m else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="?", help="bench --json output, relative to the repository")
    ap.add_argument("--check", action="store_true", help="only compare the README with the JSON it names")
    args = ap.parse_args(argv)
    text = README.read_text()
    path = args.json or source(text)
    if path is None:
        ap.error("name a bench JSON (the README names none)")
    new = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: f"{BEGIN}\n{table(path)}\n{END}", text,
                 flags=re.S)
    if args.check:
        return 0 if new == text else 1
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
