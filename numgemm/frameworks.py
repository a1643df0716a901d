"""The array frameworks a call meets: PyTorch, CuPy, Numba and NumPy.

Which one holds an array, which one the result belongs to, a stream's raw
handle, the current stream a call launches on when it names none, and new
device memory from the framework's own allocator (torch's caching allocator,
which also serves allocations inside a CUDA graph's capture).

The rules, as the README states them: C comes back in the framework of the
operands, the first of torch, CuPy and Numba that holds one (NumPy only when
both are NumPy); with stream=None a call launches on that framework's current
stream (torch.cuda.current_stream(device), CuPy's current stream), else on
Numba's default stream.
"""

import functools
import sys

import numpy as np

from . import driver
from .precision import ENCODINGS

ORDER = ("torch", "cupy", "numba")


def kind(x):
    """"torch", "cupy", "numba", "numpy", or None for anything else."""
    if isinstance(x, np.ndarray):
        return "numpy"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        return "torch"
    module = type(x).__module__
    if module.startswith("cupy"):
        return "cupy"
    if hasattr(x, "__cuda_array_interface__"):
        return "numba"          # Numba's device arrays, and any other holder of the interface
    return None


def of(*arrays):
    """The framework a result of these arrays belongs to (None entries ignored)."""
    kinds = {kind(x) for x in arrays if x is not None}
    return next((k for k in ORDER if k in kinds), "numpy")


def device_of(framework, *arrays):
    """The device index of the first of arrays that `framework` holds, where
    the framework needs it for its current stream and allocator (torch), else None."""
    if framework != "torch":
        return None
    return next(x.device.index for x in arrays if x is not None and kind(x) == "torch")


def handle(stream):
    """The raw CUstream of a stream object: an int as it is; the CUDA stream
    protocol (__cuda_stream__: Numba, cuda.core, recent CuPy and PyTorch);
    torch's .cuda_stream; CuPy's .ptr."""
    if isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
        return int(stream)
    if hasattr(stream, "__cuda_stream__"):
        return int(stream.__cuda_stream__()[1])
    for attr in ("cuda_stream", "ptr"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise TypeError(f"stream must be None, a raw stream handle (int), or a stream of torch, CuPy or Numba; "
                    f"got {type(stream).__name__}")


def current_stream(framework, device=None):
    """The stream a call on `framework`'s arrays launches on when it names
    none: torch's current stream (of device, an index; None: torch's current
    device), CuPy's current stream, Numba's default stream (0, the legacy
    stream, unless Numba was set to per-thread default streams)."""
    if framework == "torch":
        torch = sys.modules["torch"]
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)     # the handle, no Stream object made
        if raw is None:
            return torch.cuda.current_stream(device).cuda_stream
        return raw(torch.cuda.current_device() if device is None else device)
    if framework == "cupy":
        return sys.modules["cupy"].cuda.get_current_stream().ptr
    return _numba_default()


@functools.cache
def _numba_default():
    from numba import cuda

    return handle(cuda.default_stream())


def numba_view(x):
    """x as a Numba device array, without the stream synchronisation that
    importing through __cuda_array_interface__ does by default: numgemm
    orders its work by launching on the caller's stream, and a synchronisation
    would stall the host (and is refused inside a CUDA graph's capture)."""
    from numba import cuda
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    if isinstance(x, DeviceNDArray):
        return x
    bits = None
    if kind(x) == "torch":
        if x.requires_grad:                         # a Parameter: the same memory, without autograd
            x = x.detach()
        if str(x.dtype).removeprefix("torch.") in ENCODINGS:    # bfloat16, float8_*: the interface has none
            torch = sys.modules["torch"]
            bits = np.dtype(f"u{x.element_size()}")
            x = x.view(torch.int16 if bits.itemsize == 2 else torch.uint8)
    arr = cuda.as_cuda_array(x, sync=False)
    return DeviceNDArray(arr.shape, arr.strides, bits, gpu_data=arr.gpu_data) if bits is not None else arr


class Allocator:
    """New device memory for one plan, from the framework its result belongs
    to (torch: its caching allocator on the operands' device, which also
    serves a CUDA graph's capture; CuPy: its pool; else Numba), as Numba
    views that keep the memory alive."""

    def __init__(self, framework, device=None, stream=0):
        self.framework, self.device, self.stream = framework, device, stream

    def empty(self, shape, dtype, encoding=""):
        """(array of the framework, its Numba view); encoding: the format
        whose bit patterns dtype holds (BF16's C), a torch tensor's dtype."""
        x = self.new(shape, dtype, encoding)
        return x, numba_view(x)

    def new(self, shape, dtype, encoding=""):
        """An array of the framework, uninitialised."""
        if self.framework == "torch":
            torch = sys.modules["torch"]
            dtype = getattr(torch, encoding or np.dtype(dtype).name)
            if self.stream == current_stream("torch", self.device):
                return torch.empty(shape, dtype=dtype, device=self.device)
            # The block belongs to the stream that uses it: torch reuses it only after that stream's work.
            with torch.cuda.stream(torch.cuda.ExternalStream(self.stream, device=f"cuda:{self.device}")):
                return torch.empty(shape, dtype=dtype, device=self.device)
        if self.framework == "cupy":
            return sys.modules["cupy"].empty(shape, dtype)
        from numba import cuda

        return cuda.device_array(shape, dtype)

    def zeros(self, shape, dtype):
        """A Numba view of new memory set to zero on the plan's stream and,
        outside a graph's capture, finished before this returns (a later
        launch may go on another stream)."""
        from cuda.bindings import driver as drv

        _, view = self.empty(shape, dtype)
        nbytes = view.size * view.dtype.itemsize
        check(drv.cuMemsetD8Async(view.device_ctypes_pointer.value, 0, nbytes, drv.CUstream(self.stream)))
        if not driver.capturing(self.stream):
            check(drv.cuStreamSynchronize(drv.CUstream(self.stream)))
        return view


def check(result):
    """Raise where a cuda.bindings driver call's result says it failed."""
    from cuda.bindings import driver as drv

    if result[0] != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {result[0].name}")


def describe(x):
    """(address, description) of a device array, read the cheap way its
    framework offers: the description is everything else a kernel's
    arguments read of it (kind, shape, strides, dtype, device) and the
    address's alignment (its low byte); None for anything else."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):      # first: a model's calls are torch's
        device = x.get_device()
        if device < 0:
            return None
        p = x.data_ptr()
        return p, ("torch", x.shape, x.stride(), x.dtype, device, p & 255)
    k = kind(x)
    if k == "cupy" and hasattr(getattr(x, "data", None), "ptr"):
        p = x.data.ptr
        return p, ("cupy", x.shape, x.strides, x.dtype.str, x.device.id, p & 255)
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    if isinstance(x, DeviceNDArray):
        p = x.device_ctypes_pointer.value or 0
        return p, ("numba", x.shape, x.strides, x.dtype.str, p & 255)
    return None
