"""numgemm.peers: the libraries timed beside numgemm's kernels."""

import pytest

from numgemm.peers import peer_runs


@pytest.mark.gpu
@pytest.mark.parametrize("precision,M", [("fp16", 16), ("int8", 64)])
def test_peers_rotate_over_operand_sets(precision, M, rng):
    """run(i) multiplies operand set i % sets, as numgemm's kernels are timed
    (inputs that overflow L2 come from DRAM); each result is checked against
    the exact products of the set it ran on."""
    torch = pytest.importorskip("torch")
    runs = peer_runs(precision, M, 96, 192, 1, rng, sets=3)
    assert runs
    for name, run, check in runs:
        for i in (0, 1, 2, 4):
            run(i)
            torch.cuda.synchronize()
            assert check(), (name, i)
