"""The N x K table of a `bench.py --b-layout nk --kernels default` run: for
each shape, gemm()'s N x K pick, its K x N pick and cuBLAS as F.linear runs
it, all from that one run's JSON, with the two ratios issue 40 asks for,
and the SM clock each of the N x K pick and F.linear ran at (a library call
whose host time exceeds its GPU time is timed behind spins, where the GPU
idles between batches and holds a higher clock).

    python scripts/nk_table.py results/.../llm_nk.json
"""

import json
import sys


def main(path):
    rows = {}
    for r in json.load(open(path))["rows"]:
        rows.setdefault(r["n"], {})[r["kernel"]] = r
    print("| shape | N x K µs | K x N µs | F.linear µs | N x K / F.linear | N x K / own K x N | MHz N x K, F.linear "
          "| N x K kernel |")
    print("|---|---|---|---|---|---|---|---|")
    for shape, by in rows.items():
        nk, kn = by["default"]["ms"], by["default KN"]["ms"]
        peer = next(r for name, r in by.items() if name.startswith("cublas"))
        lib = peer["ms"]
        mhz = ", ".join("—" if r.get("sm_mhz") is None else f"{r['sm_mhz']:.0f}" for r in (by["default"], peer))
        print(f"| {shape} | {nk * 1e3:.1f} | {kn * 1e3:.1f} | {lib * 1e3:.1f} | {lib / nk:.2f} | {kn / nk:.2f} | "
              f"{mhz} | {by['default']['config']} |")


if __name__ == "__main__":
    main(sys.argv[1])
