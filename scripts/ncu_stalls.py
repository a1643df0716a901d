"""Where a kernel's warps wait, instruction by instruction, from Nsight Compute's source page.

    ncu --section SourceCounters --section WarpStateStats -o run python scripts/w4a16_once.py 256
    ncu -i run.ncu-rep --page source --print-source sass --csv | gzip > run.csv.gz
    python scripts/ncu_stalls.py run.csv.gz [--top 30]

Prints the warp-stall samples by reason over the whole kernel, then the
instructions with the most samples: each one's share of all samples and
its three largest reasons (a stall is charged to the instruction that
waits to issue, so a wait that a fence's MEMBAR makes shows on the
instruction after it).
"""

import argparse
import collections
import csv
import gzip


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ncu's --page source --csv output (gzip-compressed where it ends in .gz)")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    opener = gzip.open if args.csv.endswith(".gz") else open
    with opener(args.csv, "rt") as f:
        rows = [r for r in csv.reader(f)]
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    names, data = rows[head], rows[head + 1:]
    col = {h: i for i, h in enumerate(names)}
    reasons = [h for h in names if h.startswith("stall_") and "Not Issued" not in h]
    samples = col["Warp Stall Sampling (All Samples)"]

    def count(r, i):
        return int(r[i] or 0)
    total = sum(count(r, samples) for r in data)
    by_reason = collections.Counter({h[6:]: sum(count(r, col[h]) for r in data) for h in reasons})
    print(f"{total} samples: " + ", ".join(f"{k} {v}" for k, v in by_reason.most_common() if v))
    for r in sorted(data, key=lambda r: -count(r, samples))[:args.top]:
        top = sorted(((count(r, col[h]), h[6:]) for h in reasons), reverse=True)[:3]
        print(f"{r[0][-5:]} {count(r, samples):6d} {100 * count(r, samples) / total:5.1f}%  {r[1].strip()[:58]:58s} "
              + ", ".join(f"{name} {n}" for n, name in top if n))


if __name__ == "__main__":
    main()
