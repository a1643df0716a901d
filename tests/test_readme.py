"""The README's example kernel is code that works: built offline in CI, run on a GPU."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
EXAMPLE = next(b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "def tile" in b)
WG_EXAMPLE = next(b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "def wg_tile" in b)


@pytest.mark.builds
def test_example_kernel_builds_for_sm89():
    from numba import int8, int32

    from numgemm.inspect import build

    scope = {}
    exec(EXAMPLE.split("rng = ")[0].replace("@cuda.jit\n", ""), scope)   # the kernel, undecorated
    b = build(scope["tile"], (int8[:, ::1], int8[:, ::1], int32[:, ::1]), "sm_89")
    assert b.count("IMMA.16832.S8.S8") == 1 and b.count("LDSM.16.M88.4") == 1 and b.calls == 0


@pytest.mark.gpu
def test_example_runs(capsys):
    exec(EXAMPLE, {})
    assert "ok: one warp" in capsys.readouterr().out


@pytest.mark.builds
def test_wgmma_example_builds_for_sm90a():
    """The one-warpgroup example: four chained IGMMA on the tied accumulators,
    nothing spilled, nothing called."""
    from numba import int8, int32

    from numgemm.inspect import build

    scope = {}
    exec(WG_EXAMPLE.split("rng = ")[0].replace("@cuda.jit\n", ""), scope)
    b = build(scope["wg_tile"], (int8[:, ::1], int8[:, ::1], int32[:, ::1]), "sm_90a")
    assert b.count("IGMMA.64x256x32.S8.S8") == 4 and b.calls == 0 and b.local_bytes == 0


@pytest.mark.gpu
def test_wgmma_example_runs(capsys):
    from numba import cuda

    if cuda.get_current_device().compute_capability < (9, 0):
        pytest.skip("wgmma needs sm_90a")
    exec(WG_EXAMPLE, {})
    assert "ok: one warpgroup" in capsys.readouterr().out


def test_results_table_is_the_bench_json():
    """The README's table is regenerated from the bench JSON it names, never typed."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "scripts/readme_table.py", "--check"], cwd=root)
    assert proc.returncode == 0, "README.md's results table differs from its JSON: run scripts/readme_table.py"


def test_readme_is_a_users_guide():
    assert len(README.splitlines()) <= 250
