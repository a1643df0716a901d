"""Write the README's results table from a bench JSON, between its markers.

    python scripts/readme_table.py results/2026-11-30-h200-swizzle/tuned.json
    python scripts/readme_table.py --check      # exit 1 if the README's table differs

The table is never typed by hand: it is the bench's own rows at the JSON's
largest size, with the device, date and source file it came from.
"""

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BEGIN, END = "<!-- results-table -->", "<!-- /results-table -->"


def table(path):
    data = json.loads((ROOT / path).read_text())
    n = max(r["n"] for r in data["rows"] if isinstance(r["n"], int))
    f = lambda x, fmt: "" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)  # noqa: E731
    lines = [f"{data['device']}, {data['date']}, N = {n}, batch {data['batch']} (`{path}`):", "",
             "| kernel | time ms | T(FL)OPS | % mma ceil | x WMMA | x library |",
             "|---|---|---|---|---|---|"]
    for r in data["rows"]:
        if r["n"] == n and r["status"] == "ok":
            lines.append(f"| {r['kernel']} | {f(r['ms'], '.3f')} | {f(r['tops'], '.1f')} | "
                         f"{f(r['ceiling_pct'], '.1f')} | {f(r['vs_wmma'], '.2f')} | {f(r['vs_library'], '.2f')} |")
    return "\n".join(lines)


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
