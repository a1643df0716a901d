import numpy as np
import pytest


def _gpu_available():
    try:
        from numba import cuda

        return cuda.is_available()
    except Exception:  # noqa: BLE001 - no driver raises several kinds
        return False


HAVE_GPU = _gpu_available()


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    # Fresh data on every run, reproducible from the seed in the failure report.
    seed = np.random.SeedSequence().entropy % 2**32
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)
