"""Merge a --tune run over some shapes into a winners file.

    python scripts/merge_winners.py numgemm/tuned/sm_90.json skinny.json merged.json

Entries of the same (precision, B layout, M, N, K) are replaced by the newer
run's, the others kept; the command of the newer run is appended to the file's.
Where the newer run's GPU is not the file's, its entries and its command say
which GPU and date they were measured on. (How the
shipped sm_90 winners got their M = 1 and 16 entries, with this step's wording
then "for M = 1 and 16": results/2026-12-01-h200-shapes.)
"""

import json
import sys


def main(base, new, out):
    b, n = (json.load(open(p)) for p in (base, new))

    def key(e):
        return e["precision"], e["config"]["b_layout"], e["m"], e["n"], e["k"]
    other = n.get("device") != b.get("device")
    fresh = {key(e): {**e, "device": n["device"], "date": n["date"]} if other else e for e in n["entries"]}
    b["entries"] = [fresh.pop(key(e), e) for e in b["entries"]] + list(fresh.values())
    on = f" (on an {n['device']}, {n['date']})" if other else ""
    b["command"] = b["command"] + "; then, for its shapes" + on + ": " + n["command"]
    with open(out, "w") as fh:
        json.dump(b, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
