"""Where numgemm finds its sources and CUDA's tools, and the facts about targets.

Everything here works without a GPU: the CUDA pieces come from pip wheels
(NVRTC, NVVM, nvJitLink, the nvcc wheel's ptxas and crt/ headers, cuobjdump,
nvdisasm), found through cuda-pathfinder, or from a CUDA toolkit on the
machine (CUDA_HOME).
"""

import functools
import os
import subprocess
from pathlib import Path

from cuda import pathfinder

#: The targets numgemm builds and inspects for: Ampere, Ada (the study's L4), Hopper.
TARGETS = ("sm_80", "sm_89", "sm_90")


def _source_dir(name):
    # An installed numgemm carries the folders inside the package (setup.cfg's
    # package_dir); a source checkout has them beside it.
    here = Path(__file__).resolve().parent
    for candidate in (here / name, here.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"numgemm cannot find its {name}/ folder next to {here}; "
        "install numgemm from its source tree (pip install -e .)"
    )


PTX_DIR = _source_dir("ptx_asm")
BASELINES_DIR = _source_dir("baselines")


def parse_target(target):
    """'sm_89', 'sm_90a', '89', 89 or (8, 9) -> (8, 9)."""
    if isinstance(target, tuple):
        return tuple(target[:2])
    text = str(target).lower().removeprefix("sm_").rstrip("a")
    if not text.isdigit() or len(text) < 2:
        raise ValueError(f"unknown target {target!r}; expected e.g. 'sm_89'")
    return int(text[:-1]), int(text[-1])


def target_name(cc):
    return f"sm_{cc[0]}{cc[1]}"


def arch_suffix(target):
    """'a' for an arch-specific target ('sm_90a', or (9, 0, 'a')), else ''."""
    if isinstance(target, tuple):
        return target[2] if len(target) > 2 else ""
    return "a" if str(target).lower().endswith("a") else ""


def has_native_s4_mma(cc):
    """Whether ptxas emits native IMMA for s4 mma.sync / WMMA on this target.

    Native s4 tensor-core instructions exist on sm_80, sm_86, sm_87 and sm_89;
    on sm_90 ptxas emulates them (a called routine widens s4 to s8), which is
    why numgemm has an INT4 path that widens in the kernel and issues s8 mma.
    """
    return tuple(cc) in {(8, 0), (8, 6), (8, 7), (8, 9)}


@functools.cache
def tool(name):
    """Path of a CUDA binary utility (ptxas, cuobjdump, nvdisasm)."""
    path = pathfinder.find_nvidia_binary_utility(name)
    if path is None:
        raise RuntimeError(
            f"{name} not found: install the CUDA wheels that carry it "
            "(nvidia-cuda-nvcc for ptxas, nvidia-cuda-cuobjdump, "
            "nvidia-cuda-nvdisasm) or a CUDA toolkit"
        )
    return path


def run_tool(name, *args):
    proc = subprocess.run([tool(name), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout + proc.stderr


def _wmma_include_candidates():
    try:
        yield Path(pathfinder.find_nvidia_header_directory("nvcc"))
    except Exception:  # noqa: BLE001 - pathfinder raises several kinds
        pass
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            yield Path(os.environ[var]) / "include"
    yield Path("/usr/local/cuda/include")


@functools.cache
def enable_wmma_headers():
    """Let NVRTC see crt/mma.h, which mma.h (WMMA) includes, and baselines/.

    NVRTC's wheel ships mma.h without crt/mma.h; the nvcc wheel or a CUDA
    toolkit has it. NVRTC gets the baselines' source without its folder, so
    their shared header needs the folder on the path too. numba-cuda fixes
    NVRTC's options: both go into its extra search paths.
    """
    from numba.cuda import config

    for inc in _wmma_include_candidates():
        if (inc / "crt" / "mma.h").is_file():
            paths = [p for p in config.CUDA_NVRTC_EXTRA_SEARCH_PATHS.split(":") if p]
            paths += [str(d) for d in (inc, BASELINES_DIR) if str(d) not in paths]
            config.CUDA_NVRTC_EXTRA_SEARCH_PATHS = ":".join(paths)
            return inc
    raise RuntimeError(
        "WMMA baselines need crt/mma.h, which NVRTC's wheel lacks: "
        "pip install nvidia-cuda-nvcc, or set CUDA_HOME to a CUDA toolkit"
    )
