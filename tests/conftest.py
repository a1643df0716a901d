import numpy as np
import pytest


def _gpu_available():
    try:
        from numba import cuda

        return cuda.is_available()
    except Exception:  # noqa: BLE001 - no driver raises several kinds
        return False


HAVE_GPU = _gpu_available()


#: A GPU test that takes longer has hung (a kernel waiting on a barrier that
#: never fills): it fails by name instead of holding the suite (setup.cfg's
#: timeout, for every test, is the CPU builds').
GPU_TIMEOUT_S = 300


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" not in item.keywords:
            continue
        if not HAVE_GPU:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        elif item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(GPU_TIMEOUT_S))


@pytest.fixture
def rng(request):
    # Fresh data on every run, reproducible from the seed in the failure report.
    seed = np.random.SeedSequence().entropy % 2**32
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


class Shaped:
    """A stand-in for a device array that has a shape and nothing else: all
    that gemm()'s checks read of out= before a GPU is needed."""

    def __init__(self, shape):
        self.shape = shape
