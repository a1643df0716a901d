"""numgemm.measure: the operand sets a timed run rotates over (offline), and
a kernel checked and timed as the bench does (GPU)."""

import pytest

from numgemm.selection import LLM_SHAPES
from numgemm.measure import MAX_SETS, bytes_moved, from_l2, rotations
from numgemm.precision import PRECISIONS

H200_L2 = 60 * 2**20
H100_L2 = 50 * 2**20
BENCH_SHAPES = [(n, n, n) for n in (512, 1024, 2048, 4096, 8192)] + \
    [tuple(map(int, s.split("x"))) for s in LLM_SHAPES]


@pytest.mark.parametrize("l2", [H100_L2, H200_L2])
@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("batch", [1, 4])
def test_the_bench_shapes_rotate_past_three_l2s(l2, precision, batch):
    """Every shape the bench times, 512³ included (up to 144 sets of 1.25 MiB
    for INT4), rotates over enough sets to overflow L2 three times: each
    timed run reads its operands from DRAM."""
    for M, N, K in BENCH_SHAPES:
        nbytes = bytes_moved(precision, batch, M, N, K)
        sets = rotations(nbytes, l2)
        assert sets * nbytes >= 3 * l2, (M, N, K, sets)
        assert sets == 1 or (sets - 1) * nbytes < 3 * l2          # no more than it takes
        assert not from_l2(nbytes, l2)


def test_shapes_too_small_to_rotate_past_l2_are_said():
    """A 64³ INT8 GEMM's 24 KB would need thousands of sets: MAX_SETS, and
    the row is flagged as timed from L2."""
    nbytes = bytes_moved("int8", 1, 64, 64, 64)
    assert rotations(nbytes, H200_L2) == MAX_SETS
    assert from_l2(nbytes, H200_L2)
    assert not from_l2(bytes_moved("int8", 1, 512, 512, 512), H200_L2)
