"""numgemm.bench: the CLI, its data and its checks (the timing itself needs a GPU)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from numgemm import bench
from tests.conftest import HAVE_GPU

ROOT = Path(__file__).resolve().parent.parent


def test_arguments_narrow_the_run():
    args = bench.parse(["--precision", "int8", "--sizes", "512", "--preset", "tuned",
                        "--kernels", "int8_wmma"])
    chosen = bench.select(args)
    assert [(p, n) for p, n, _ in chosen] == [("tuned", "int8_wmma")]
    everything = bench.select(bench.parse(["--all"]))
    assert len(everything) == sum(len(bench.select(bench.parse(["--preset", p]))) for p in ("paper", "tuned"))


@pytest.mark.skipif(HAVE_GPU, reason="checks the message given without a GPU")
def test_without_a_gpu_it_says_so_in_one_line():
    proc = subprocess.run([sys.executable, "bench.py", "--all"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stdout.strip().count("\n") == 0 and "needs an NVIDIA GPU" in proc.stdout


@pytest.mark.parametrize("precision", bench.PRECISION_ORDER)
def test_checks_catch_wrong_results(precision, rng):
    """The full and sampled checks fail on a wrong output, pass on the right one."""
    a, b = bench.make_inputs(precision, 2, 24, 16, 40, rng)
    ref = bench.reference(precision, a, b)
    out = ref.astype(np.float32 if precision == "fp16" else np.int32)
    assert bench.check_full(out, ref, precision)
    wrong = out.copy()
    wrong[1, 3, 5] += 7
    assert not bench.check_full(wrong, ref, precision)

    class Dev:                          # stands in for a device array
        def __init__(self, x):
            self.x = x

        def copy_to_host(self):
            return self.x

    assert bench.check_sample(Dev(out), a, b, precision, rng)
    assert not bench.check_sample(Dev(np.zeros_like(out)), a, b, precision, rng)


def test_family_selection_has_the_base_first():
    chosen = bench.select(bench.parse(["--family", "int4_k64_ablation", "--preset", "tuned"]))
    names = [n for _, n, _ in chosen]
    assert names[0] == "int4_ptx_mma_k64" and len(names) >= 8
    assert {"int4_ptx_mma_k64_ldA1", "int4_ptx_mma_k64_ca", "int4_ptx_mma_k64_kn"} <= set(names)


def test_table_has_the_columns():
    row = bench.Row("int8", 512, "tuned", "int8_ptx_mma_k32", "cfg", ms=1.0, tops=2.0, vs_wmma=1.5)
    text = bench.table([row])
    for header in ("x WMMA", "x fp16_wmma", "x library", "% mma ceil", "compile s", "host us"):
        assert header in text
    assert "1.50" in text
