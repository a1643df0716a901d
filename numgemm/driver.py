"""The few CUDA driver calls numgemm makes on every call, through ctypes.

cuda.bindings wraps each argument in an object and each result in an enum:
about a microsecond a call, and a launch through it (cuLaunchKernelEx with a
CUlaunchConfig object) several. A repeated gemm() makes three or four such
calls, against torch.matmul's dozen microseconds of host time in all, so
these go to libcuda directly; everything else stays with cuda.bindings.
"""

import ctypes
import ctypes.util
import functools

CLUSTER_DIMENSION = 4       # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION


class LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, padding to 8 bytes, a 64-byte value (for the
    cluster dimension, its first three words)."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint32 * 16)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig."""
    _fields_ = [("grid", ctypes.c_uint32 * 3), ("block", ctypes.c_uint32 * 3), ("smem", ctypes.c_uint32),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)),
                ("num_attrs", ctypes.c_uint32)]


_SIGNATURES = {
    # Its callers pass ready ctypes objects (byref of the config, the function, the parameter array,
    # None): without argument types ctypes passes them as they are, half a microsecond sooner.
    "cuLaunchKernelEx": None,
    "cuStreamIsCapturing": [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)],
    "cuCtxGetCurrent": [ctypes.POINTER(ctypes.c_void_p)],
    "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuTensorMapEncodeTiled": [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                               ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                               ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                               ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int],
}


@functools.cache
def lib():
    """libcuda with the argument types of the calls used here."""
    try:        # the driver the process has loaded already; find_library would run ldconfig and gcc
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        cuda = ctypes.CDLL(ctypes.util.find_library("cuda"))
    for name, args in _SIGNATURES.items():
        fn = getattr(cuda, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    return cuda


class _Calls:
    """The calls of _SIGNATURES as plain attributes (calls.cuLaunchKernelEx),
    bound on first use: a call on every gemm() pays one attribute lookup,
    not lib()'s cache and the library's own lookup."""

    def __getattr__(self, name):
        if name not in _SIGNATURES:
            raise AttributeError(name)
        cuda = lib()
        for n in _SIGNATURES:
            setattr(self, n, getattr(cuda, n))
        return getattr(self, name)


calls = _Calls()


def error_name(code):
    name = ctypes.c_char_p()
    calls.cuGetErrorName(code, name)
    return name.value.decode() if name.value else f"CUresult {code}"


def current_context():
    """The current CUDA context's handle, or 0 where there is none."""
    ctx = ctypes.c_void_p()        # passed as it is, ctypes takes its address (cheaper than byref)
    return ctx.value or 0 if calls.cuCtxGetCurrent(ctx) == 0 else 0


def capturing(stream):
    """Whether stream (a raw handle) is being captured into a CUDA graph."""
    status = ctypes.c_int()
    err = calls.cuStreamIsCapturing(stream or None, status)
    if err:
        raise RuntimeError(f"cuStreamIsCapturing failed: {error_name(err)}")
    return status.value != 0       # CU_STREAM_CAPTURE_STATUS_NONE
