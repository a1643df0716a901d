"""Why do library rows read no energy? time_steady on F.linear with its decisions printed."""
import numpy as np, time, math
from numgemm import timing, peers
from numgemm.measure import operand_sets, rotations, bytes_moved
orig_over = timing.power_between
def over(readings, lo, hi, min_s):
    inside = [r for r in readings if lo <= r[0] <= hi]
    steps = [n for b, n in zip(readings, readings[1:]) if lo <= n[0] <= hi and n[1] != b[1]]
    print(f"    readings {len(readings)}, inside {len(inside)}, window {hi - lo:.3f} s, steps {len(steps)}"
          + (f", span {steps[-1][0]-steps[0][0]:.3f}" if len(steps) > 1 else ""))
    return orig_over(readings, lo, hi, min_s)
timing.power_between = over
orig_counts = timing.Steady.counts
def counts(self, est_ms, host_s):
    r = orig_counts(self, est_ms, host_s)
    print(f"    est {est_ms*1e3:.1f} us, host {host_s*1e6:.1f} us -> warm {r[0]}, timed {r[1]}, behind spin {r[2]}")
    return r
timing.Steady.counts = counts
rng = np.random.default_rng(0)
for M, N, K in [(256, 8192, 8192), (2048, 2048, 2048), (64, 4096, 4096)]:
    sets = rotations(bytes_moved("fp16", 1, M, N, K))
    for name, run, check in peers.peer_runs("fp16", M, N, K, 1, rng, sets, "nk"):
        t = time.perf_counter()
        m = timing.time_steady(run, timing.Steady())
        print(f"{M}x{N}x{K} {name}: {m.ms*1e3:.1f} us, {m.sm_mhz} MHz, {m.power_w} W, {m.joules} J ({time.perf_counter()-t:.1f} s)")
