"""numgemm.gemm(): C = A @ B on the GPU with a registered or given kernel.

Inputs are NumPy arrays (copied to the GPU, the result copied back) or any
object with __cuda_array_interface__ (Numba device arrays, CuPy, PyTorch):
those are used in place. B's layout is read from its strides: a row-major
K x N array is "kn"; the transpose of a row-major N x K array ("B
transposed", b = bt.T) is "nk", the layout of the INT8/INT4 kernels.

INT4 operands are packed two per byte along K (numgemm.pack_int4): A as
(M, ceil(K/2)) uint8, B as (ceil(K/2), N), i.e. the transpose of a packed
(N, ceil(K/2)) array.
"""

import collections
import functools
import sys
from dataclasses import dataclass

import numpy as np
from numba import cuda
from numba.cuda.cudadrv.devicearray import DeviceNDArray

from . import driver, frameworks, registry, tensormap, tuning
from .config import KernelConfig
from .launches import Address, Launch, Repeat
from .precision import PRECISIONS


class NotOnThisGPU(RuntimeError):
    """A kernel numgemm knows not to launch on this GPU (it would end the
    process's CUDA context)."""


def gemm(a, b, *, precision=None, kernel=None, preset="tuned", out=None, out_dtype=None, k=None, stream=None):
    """C = A @ B.

    a: (M, K) or (batch, M, K); b: (K, N) or (batch, K, N), or (K, N) shared by
    every batch. precision: "fp16" (float16 in, float32 out), "int8" (int8 in,
    int32 out) or "int4" (packed uint8 in, int32 out); inferred from a's dtype
    except for int4. kernel: a registered name (numgemm.registry), a
    KernelConfig, or None for the preset's default. out: optional output of
    shape (batch, M, N) / (M, N). out_dtype: C's dtype; FP16 may have float16
    (the f32 sums rounded to half as they are stored, as torch.matmul returns
    them); None: out's dtype, else the kernel's (float32, int32). k: the true
    K of INT4 operands when it is odd. stream: None (the current stream of
    the operands' framework: numgemm.frameworks), a raw handle, or a stream
    of torch, CuPy or Numba. Returns out, or a new C in the operands'
    framework (a NumPy array when a and b are NumPy).
    """
    call = _call(a, b, out, stream, (precision, kernel, preset, k, str(out_dtype)))
    if call is not None:
        key, addresses, handle, fw, device = call
        try:
            repeat = _REPEATS.get(key)
        except TypeError:                       # an unhashable argument, which the checks will refuse
            repeat = call = None
        if repeat is not None:                  # the same call as before, on these arrays
            _REPEATS.move_to_end(key)
            if repeat.new_c is None:
                repeat(addresses, handle)
                return out
            c, c_address = repeat.new_c(fw, device, handle, stream is None)
            if c_address is not None:
                repeat((*addresses[:2], c_address), handle)
                return c
    shape = _checked(a, b, precision, kernel, preset, k, out, out_dtype)
    if 0 in shape.mnk:                          # as NumPy answers: empty, or zeros for K = 0
        return _empty_product(a, b, shape, out)
    plan = _plan(a, b, shape, preset, out, stream)
    plan.launch()
    result = plan.result()
    if call is not None:
        new_c = None
        if out is None:
            new_c = _NewC(result, shape.c_dtype)
            addresses = (*addresses[:2], new_c.address_of(result))
        _REPEATS[key] = Repeat(plan.prepared, addresses, plan.maps, new_c, (fw, device), plan.stateful)
        if len(_REPEATS) > _REPEATS_MAX:
            _REPEATS.popitem(last=False)
    return result


#: gemm()'s recent calls on device arrays, prepared (launches.Repeat), most
#: recent last, by everything about the call but the arrays' addresses (see
#: _call): a call like one of them costs its key, C's allocation where it
#: returns a new C, and the driver's launches. Each holds its launches' raw
#: arguments and the state of numgemm's own that they read (workspaces,
#: tensor maps), no caller's array. Calls on NumPy inputs (copied to the GPU)
#: are not kept.
_REPEATS = collections.OrderedDict()
_REPEATS_MAX = 256


def _call(a, b, out, stream, options):
    """(key, the arrays' addresses (a, b, out or None), the stream's raw
    handle, the result's framework, its torch device) of a call on device
    arrays, or None where no Repeat can serve it (a host array, no CUDA
    context yet). The key is everything a prepared call depends on but the
    addresses: the arrays' descriptions (frameworks.describe), which of them
    share an address, the options, the context and the stream (a Repeat's
    workspaces are used by one stream at a time)."""
    da, db = frameworks.describe(a), frameworks.describe(b)
    dc = frameworks.describe(out) if out is not None else (None, None)
    if da is None or db is None or dc is None:
        return None
    ctx = driver.current_context()
    if not ctx:                                 # no context yet: the first call makes one
        return None
    kinds = (da[1][0], db[1][0], dc[1][0] if out is not None else None)
    fw = next(k for k in frameworks.ORDER if k in kinds)
    device = next((d[1][4] for d in (da, db, dc) if d[1] is not None and d[1][0] == "torch"), None)
    handle = frameworks.handle(stream) if stream is not None else frameworks.current_stream(fw, device)
    addresses = (da[0], db[0], dc[0])
    shared = (da[0] == db[0], dc[0] == da[0] or dc[0] == db[0])
    return (da[1], db[1], dc[1], shared, options, ctx, handle), addresses, handle, fw, device


class _NewC:
    """How a repeated call that returns a new C makes it: of C's shape and
    dtype, from the framework's allocator, at an address aligned as the
    first C was (its low byte: allocators align to 256 bytes and more), else
    (None, None) and the call takes the whole path."""

    def __init__(self, first, dtype):
        self.shape, self.dtype, self.low = tuple(first.shape), dtype, self.address_of(first) & 255
        torch = sys.modules.get("torch")
        self._torch = None              # torch.empty on the current stream, its arguments made once
        if torch is not None and isinstance(first, torch.Tensor):
            self._torch = functools.partial(torch.empty, self.shape, dtype=first.dtype, device=first.device)

    @staticmethod
    def address_of(c):
        return frameworks.describe(c)[0]

    def __call__(self, fw, device, handle, follow):
        """(C, its address) for a call on stream `handle`; follow: the
        framework's current stream, on which torch allocates by default."""
        if self._torch is not None and follow:
            c = self._torch()
            address = c.data_ptr()
        else:
            c = frameworks.Allocator(fw, device, handle).new(self.shape, self.dtype)
            address = self.address_of(c)
        return (c, address) if address & 255 == self.low else (None, None)


@dataclass
class GemmPlan:
    """A validated GEMM with its kernel compiled and its arguments prepared:
    launch() enqueues the kernel with none of numba-cuda's per-launch argument
    handling (the bench times kernels this way).

    It owns every piece of device state its launch reads besides the
    operands and C: tensor maps, workspaces, flags, padded rows. No other
    call rewrites them, so a kept plan stays right however many other GEMMs
    run between its launches; its own launches, sharing that state, must
    not overlap (on two streams at once). The operands and C are the
    caller's, held as pointers: a plan whose arrays were freed must not be
    launched."""

    cfg: KernelConfig
    args: tuple
    grid: tuple
    out: object
    host_out: bool
    stream: object                  # a raw handle, or None: the framework's current stream at each launch
    workspace: object = None        # split-K: the (batch * split_k, M, N) partial sums; stream_k: a slot a CTA
    counts: object = None           # split_sum="last": a tile's arrivals (batch x tiles, int32, zeroed);
                                    # stream_k: a flag a slot's consumer warp (zeroed)
    widened: object = None          # unpack="pass": (the s4 operand widened first: B, or with swap A; the
                                    # workspace its widening kernel fills)
    maps: tuple = ()                # copy="tma", c_tma: the tensormap.Maps its kernel reads, its own
    pads: tuple = ()                # (operand, its copy in padded rows): copied by every launch, first
    framework: str = "numba"        # of the result: whose current stream a following plan launches on
    device: object = None           # torch's device index, for its current stream
    first_stream: int = 0           # the stream the plan was made on

    def __post_init__(self):
        from .kernel import (  # the builder loads on the first plan
            argtypes,
            device_function,
            helper_function,
            launch_args,
        )
        from .kernel.pad_rows import PadRows
        from .kernel.split_k import SplitSum
        from .kernel.widen_pass import WidenPass

        device = cuda.get_current_device().id
        self.cufunc = device_function(self.cfg, device)     # the kernel cache's
        _allow_dynamic_shared(self.cufunc, self.cfg.smem_bytes)
        stream, then = self.first_stream, None
        self._last = stream                              # the stream result() waits for
        self._held = False                               # its state kept for a graph (launch())
        C = self.args[2]
        if self.counts is not None:                      # split-K summed by each tile's last block; stream-K
            self.args = (*self.args[:2], (self.workspace, C, self.counts), *self.args[3:])
        elif self.workspace is not None:                 # split-K: the partial sums, then their sum
            spec = SplitSum.of(self.cfg)
            then = Launch(helper_function(spec, device).handle, spec.grid(*C.shape), spec.threads, 0,
                           stream, launch_args(spec.argtypes(), (self.workspace, C, self.cfg.split_k)), spec.name)
            self.args = (*self.args[:2], self.workspace, *self.args[3:])
        self.prepared = Launch(self.cufunc.handle, self.grid, self.cfg.threads, self.cfg.smem_bytes, stream,
                                launch_args(argtypes(self.cfg), self.args), self.cfg.name, self.cfg.cluster,
                                then, (self.workspace, self.counts, self.maps))
        if self.widened is not None:                     # unpack="pass": an operand widened first, every launch
            spec, (B, W) = WidenPass(), self.widened
            self.prepared = Launch(helper_function(spec, device).handle, spec.grid(B), spec.threads, 0, stream,
                                    launch_args(spec.argtypes(), (B, W)), spec.name, then=self.prepared, keep=W)
        for src, dst in reversed(self.pads):             # rows padded to 16 bytes, before all else
            spec = PadRows()
            self.prepared = Launch(helper_function(spec, device).handle, spec.grid(dst), spec.threads, 0, stream,
                                    launch_args(spec.argtypes(), (src, dst)), spec.name, then=self.prepared,
                                    keep=dst)

    @property
    def stateful(self):
        """Whether its launch reads device state of numgemm's own."""
        return bool(self.maps or self.pads) or any(x is not None for x in (self.workspace, self.counts, self.widened))

    def launch(self, stream=None):
        """Enqueue the GEMM: on stream (a raw handle or a stream object), else
        on the plan's own, else (a plan made with stream=None) on its
        framework's current stream now, so that a launch inside a CUDA
        graph's capture is captured. A captured launch reads the plan's
        state when the graph replays: that state is then kept for the life
        of the process (tensormap.GRAPHS_HOLD), the plan's arrays are the
        caller's to keep."""
        if stream is not None:
            stream = frameworks.handle(stream)
        elif self.stream is not None:
            stream = self.stream
        else:
            stream = frameworks.current_stream(self.framework, self.device)
        if not self._held and self.stateful and frameworks.capturing(stream):
            tensormap.GRAPHS_HOLD.append(self.prepared)
            self._held = True
        self.prepared(stream)
        self._last = stream

    def result(self):
        """C: the output array, or for NumPy inputs a NumPy copy (after the last launch)."""
        if not self.host_out:
            return self.out
        from cuda.bindings import driver as drv

        frameworks.check(drv.cuStreamSynchronize(drv.CUstream(self._last)))
        return self.out.copy_to_host()


@dataclass
class _Shape:
    precision: str
    prec: object
    bmnk: tuple                     # batch, M, N, K (K in elements)
    b_units: bool                   # INT4 B as K x N 16-bit units
    cfg: object                     # the KernelConfig named by kernel= (storing C as c_dtype), or None
    c_dtype: object                 # C's NumPy dtype

    @property
    def mnk(self):
        return self.bmnk[1:]


def _checked(a, b, precision, kernel, preset, k, out=None, out_dtype=None):
    """Everything about the arguments that needs no GPU: dtypes, ranks, K and
    its bound, the inner dimensions, the batch, the preset, the kernel named
    and C's dtype, each refused with a message naming the argument."""
    if preset not in registry.PRESETS:
        raise ValueError(f"preset must be one of {registry.PRESETS}, got {preset!r}")
    cfg = None
    if isinstance(kernel, str):
        cfg = registry.get(kernel, preset)
    elif isinstance(kernel, KernelConfig):
        cfg = kernel
    elif kernel is not None:
        raise TypeError(f"kernel must be a registered name or a KernelConfig, got {type(kernel).__name__}")
    if precision is None and cfg is not None and _DTYPE_PRECISION.get(_dtype_name(a)) is None:
        precision = cfg.precision       # a dtype that leaves it open (INT4's uint8): the kernel's
    precision = _precision(a, precision)
    prec = PRECISIONS[precision]
    if cfg is not None and cfg.precision != precision:
        raise ValueError(f"kernel {cfg.name} is {cfg.precision}; the operands are {precision}")
    for x, name in ((a, "a"), (b, "b")):      # what can be checked before the GPU is needed
        _check_dtype(x, name, prec)
        if len(getattr(x, "shape", ())) not in (2, 3):
            raise ValueError(f"a and b must be 2-D or batched 3-D; got {name} of shape {getattr(x, 'shape', None)}")
    (batch, M, ka), (batch_b, kb, N) = ((1,) * (3 - len(x.shape)) + tuple(x.shape) for x in (a, b))
    K = _true_k(prec, ka, k)
    if prec.max_k is not None and K > prec.max_k:
        raise ValueError(f"K={K} is past what int32 accumulation holds exactly for {precision}: K <= {prec.max_k} "
                         f"keeps the worst case (every product {prec.values[0]} x {prec.values[0]}) below 2**31; "
                         "split K and sum the parts in int64")
    b_units = prec.name == "int4" and _dtype_name(b) == "uint16"   # K x N INT4: 4 k per unit
    if kb != (-(-K // 4) if b_units else ka):
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}"
                         + (" (INT4 operands are packed: a (M, K/2); b (K/2, N) uint8 or "
                            "(K/4, N) uint16 units, see pack_int4_kn)" if precision == "int4" else ""))
    if batch_b not in (1, batch):
        raise ValueError(f"b's batch {batch_b} is neither 1 nor a's batch {batch}")
    if batch > 65535:
        raise ValueError(f"batch {batch} is more than the grid allows (65535)")
    c_dtype = _c_dtype(prec, cfg, out, out_dtype)
    if cfg is not None:                 # refused here, before the GPU is needed, where it cannot
        cfg = with_c_dtype(cfg, c_dtype)
    return _Shape(precision, prec, (batch, M, N, K), b_units, cfg, c_dtype)


def _c_dtype(prec, cfg, out, out_dtype):
    """C's dtype: out_dtype, else out's, else the named kernel's, else the
    precision's; FP16 has float32 or float16, the integers int32."""
    given = out_dtype if out_dtype is not None else getattr(out, "dtype", None)
    what = "out_dtype" if out_dtype is not None else "out's dtype"
    if given is None:
        return cfg.c_dtype if cfg is not None else np.dtype(prec.out_dtype)
    try:                                    # a torch dtype by its name: torch.float16
        want = np.dtype(str(given).removeprefix("torch.") if type(given).__module__ == "torch" else given)
    except TypeError:
        raise TypeError(f"{what} must name a NumPy dtype, got {given!r}") from None
    allowed = [np.dtype(prec.out_dtype)] + ([np.dtype(np.float16)] if prec.name == "fp16" else [])
    if want not in allowed:
        raise TypeError(f"{what}: {prec.name} gives C as {' or '.join(d.name for d in allowed)}; got {want.name}")
    return want


def _empty_product(a, b, shape, out):
    """The product of a GEMM with M, N or K zero, as NumPy gives it: an empty
    array, or zeros for K = 0; into out where it is given."""
    batch, M, N, K = shape.bmnk
    dtype = shape.c_dtype
    batched = len(a.shape) == 3 or len(b.shape) == 3
    if out is not None:                 # checked as a launch's out is, then zeroed
        C, _, result = _output(out, batched, batch, M, N, dtype, False)
        if C.size:
            C.copy_to_device(np.zeros(C.shape, C.dtype))
        return result
    zeros = np.zeros((batch, M, N) if batched else (M, N), dtype)
    fw = frameworks.of(a, b)
    if fw == "numpy":
        return zeros
    result, view = frameworks.Allocator(fw, frameworks.device_of(fw, a, b)).empty(zeros.shape, dtype)
    if view.size:
        view.copy_to_device(zeros)
    return result


def plan_gemm(a, b, *, precision=None, kernel=None, preset="tuned", out=None, out_dtype=None, k=None, stream=None):
    """Validate the operands, pick and compile the kernel: a GemmPlan. With
    stream=None its launches follow the framework's current stream."""
    shape = _checked(a, b, precision, kernel, preset, k, out, out_dtype)
    if 0 in shape.mnk:
        raise ValueError(f"plan_gemm needs M, N and K of at least 1, got {shape.mnk}; gemm() answers empty "
                         "shapes as NumPy does")
    return _plan(a, b, shape, preset, out, stream)


def _plan(a, b, shape, preset, out, stream):
    """The GemmPlan of operands that _checked() has passed."""
    host = isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    precision, (batch, M, N, K), b_units = shape.precision, shape.bmnk, shape.b_units
    if not cuda.is_available():
        raise RuntimeError("numgemm.gemm needs a CUDA GPU and driver; none is available")
    fw = frameworks.of(a, b, out)       # whose stream and allocator (out=None: the result's framework)
    device = frameworks.device_of(fw, a, b, out)
    follow = stream is None             # launch on the framework's current stream, whichever it is then
    stream = frameworks.handle(stream) if stream is not None else frameworks.current_stream(fw, device)
    alloc = frameworks.Allocator(fw, device, stream)
    a, b = _device(a, "a"), _device(b, "b")
    a3 = _unit_strides(a if a.ndim == 3 else _batched(a), "kn")
    b3 = b if b.ndim == 3 else _batched(b)
    layout = _layout(b3, "b", _wanted_layout(precision, shape.cfg, b_units))
    b3 = _unit_strides(b3, layout)
    _row_major(a3, "a")
    if precision == "int4" and (layout == "kn") != b_units:
        raise ValueError("INT4 b is either the transpose of a packed N x K array (uint8, "
                         "b = pack_int4(bt).T) or K x N uint16 units (pack_int4_kn(b)); "
                         f"got {_dtype_name(b)} laid out {layout.upper()}")

    dev = cuda.get_current_device()
    cc = tuple(dev.compute_capability)
    cfg = _config(shape.cfg, precision, layout, preset, (M, N, K), cc)
    if shape.cfg is None:               # gemm()'s choice, storing C as asked
        cfg = with_c_dtype(cfg, shape.c_dtype, chosen=True)
    if batch * cfg.split_k > 65535:         # grid.z: the batch times the split
        if shape.cfg is not None:
            raise ValueError(f"kernel {cfg.name} splits K {cfg.split_k} ways: batch {batch} x {cfg.split_k} is "
                             "more than the grid allows (65535)")
        cfg = cfg.replace(split_k=1, split_sum="kernel")
    why = cfg.unsupported(cc)
    if why:
        raise NotOnThisGPU(why)
    # The kernel reads rows as whole, aligned 16-byte copies: where they are not, padded copies, made
    # by the plan's launch itself (pads: (operand, copy) pairs).
    (A, pad_a), (B, pad_b) = (_aligned_rows(_bytes(x), alloc)
                              for x in (a3, b3 if layout == "kn" else transposed(b3)))
    pads = tuple(p for p in (pad_a, pad_b) if p is not None)
    KB = A.shape[2]
    if cfg.op == "dp4a":                       # reads 32-bit words: 4 int8 each
        A, B = (_view(x, (x.shape[0], x.shape[1], x.shape[2] // 4), (*x.strides[:2], 4), np.uint32)
                for x in (A, B))
    C, host_out, result = _output(out, a.ndim == 3 or b.ndim == 3, batch, M, N, cfg.c_dtype, host, alloc)
    c_aligned = int(C.device_ctypes_pointer.value % 32 == 0
                    and all(s % 32 == 0 for s in C.strides[:2]))
    if cfg.c_dtype == np.float16:       # halves stored as the 16-bit patterns the kernels pack
        C = _as_bits(C)
    maps = []                           # the tensor maps the kernel reads: the plan's own
    if cfg.c_tma and c_aligned:         # the kernel finds C's tensor map where the flag was
        maps.append(tensormap.c_maps(_bytes(C), stream, alloc))
        c_aligned = Address(maps[-1].address)
    k_rows = B.shape[1] if layout == "kn" else K
    widened, kM, kN = None, M, N        # kM x kN: the kernel's output
    if cfg.swap:                        # C^T = B A^T: the caller's B is the kernel's A side
        A, B, kM, kN = B, A, N, M
    if cfg.unpack == "pass":            # the kernel's B side: the s8 that the widening kernel writes first
        widened = (B, alloc.empty((B.shape[0], B.shape[1], 2 * B.shape[2]), np.uint8)[1])
        B = widened[1]
    tiles = cfg.grid_blocks(kM, kN, dev.MULTIPROCESSOR_COUNT)
    if cfg.copy == "tma":
        maps.append(tensormap.operand_maps(A, B, cfg, stream, alloc))
    work = counts = None
    sums = np.float32 if cfg.acc == "f32" else np.int32     # a workspace's partial sums
    if cfg.split_k > 1:                 # the kernel stores into slices of a workspace, aligned and packed
        work = alloc.empty((batch * cfg.split_k, M, N), sums)[1]
        c_aligned = int(N % 8 == 0)
    if cfg.split_sum == "last":         # zero once; each launch's last blocks set their tile's back to 0
        counts = alloc.zeros(batch * tiles, np.int32)
    if cfg.stream_k:                    # a slot a CTA of every batch; each flag is set back to 0 as it is read
        n_acc, threads = cfg.partial_shape
        work = alloc.empty(batch * tiles * n_acc * threads, sums)[1]
        counts = alloc.zeros(batch * tiles * threads // 32, np.int32)
    ab_maps = Address(maps[-1].address) if cfg.copy == "tma" else 0
    return GemmPlan(cfg, (A, B, C, kM, kN, k_rows, KB, B.shape[2], c_aligned, ab_maps),
                    (tiles, 1, batch * cfg.split_k), result, host_out, None if follow else stream,
                    workspace=work, counts=counts,
                    widened=widened, maps=tuple(maps), pads=pads, framework=fw, device=device, first_stream=stream)


# --- validation and views -------------------------------------------------------

_DTYPE_PRECISION = {"float16": "fp16", "int8": "int8"}       # the dtypes that name a precision


def _precision(a, precision):
    if precision is None:
        dtype = _dtype_name(a)
        inferred = _DTYPE_PRECISION.get(dtype)
        if inferred is None:
            raise TypeError(f"cannot infer the precision from dtype {dtype}: pass precision="
                            "'fp16' (float16), 'int8' (int8) or 'int4' (uint8, packed)")
        return inferred
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {tuple(PRECISIONS)}, got {precision!r}")
    return precision


def _dtype_name(x):
    return str(getattr(x, "dtype", "")).removeprefix("torch.")


def _check_dtype(x, name, prec):
    fw = frameworks.kind(x)             # (asking a torch Parameter for its interface raises)
    if fw is None or (fw == "torch" and not x.is_cuda):
        raise TypeError(f"{name} must be a NumPy array or have __cuda_array_interface__ (a GPU array of torch, "
                        f"CuPy or Numba); got {type(x).__name__}" + (" on the CPU" if fw else ""))
    dtype = _dtype_name(x)
    allowed = [np.dtype(prec.host_dtype).name]
    if prec.name == "int4" and name == "b":
        allowed.append("uint16")                     # K x N units (pack_int4_kn)
    if dtype not in allowed:
        what = "packed uint8 (numgemm.pack_int4)" if prec.name == "int4" else allowed[0]
        raise TypeError(f"{prec.name} takes {name} as {what}; got dtype {dtype}")


def _device(x, name):
    if isinstance(x, np.ndarray):
        # A transposed (Fortran-order) array keeps its layout on the device.
        if x.flags.c_contiguous:
            return cuda.to_device(x)
        if np.swapaxes(x, -1, -2).flags.c_contiguous:
            return transposed(cuda.to_device(np.swapaxes(x, -1, -2)))
        return cuda.to_device(np.ascontiguousarray(x))
    return frameworks.numba_view(x)


def _view(x, shape, strides, dtype=None):
    dtype = np.dtype(dtype or x.dtype)
    return DeviceNDArray(shape, strides, dtype, gpu_data=x.gpu_data)


def _batched(x):
    return _view(x, (1, *x.shape), (0, *x.strides))


def transposed(x):
    """x with its last two axes exchanged, as a view (no copy) of a Numba device
    array: B as gemm's "nk" layout is transposed(bt) for a row-major N x K bt."""
    x = frameworks.numba_view(x)
    shape, strides = list(x.shape), list(x.strides)
    shape[-2:], strides[-2:] = shape[:-3:-1], strides[:-3:-1]
    return _view(x, tuple(shape), tuple(strides))



def _layout(b, name, wanted):
    """B's layout by its strides: "kn" (its rows contiguous) or "nk" (its
    columns). A one-wide B (N or K of 1) has both; then `wanted` decides."""
    item = b.dtype.itemsize
    kn = b.strides[2] == item or b.shape[2] == 1
    nk = b.strides[1] == item or b.shape[1] == 1
    if kn and nk:
        return wanted
    if kn or nk:
        return "kn" if kn else "nk"
    raise ValueError(f"{name} must be row-major (K x N) or the transpose of a row-major N x K "
                     f"array; got strides {b.strides}")


def _wanted_layout(precision, cfg, b_units):
    """The layout a one-wide B is taken in: the named kernel's; INT4's by its
    dtype (uint8: packed N x K, transposed; uint16: K x N units); else the
    layout of the precision's kernels."""
    if cfg is not None:
        return cfg.b_layout
    if precision == "int4":
        return "kn" if b_units else "nk"
    return registry.choice_layout(precision)


def _unit_strides(x, layout):
    """x (batch, rows, cols) with the strides of its one-long axes made those
    of a packed array in layout ("kn": row-major, "nk": column-major): such an
    axis is never stepped along, but its stride is a pitch the kernel and the
    TMA descriptors read."""
    item, strides = x.dtype.itemsize, list(x.strides)
    inner, outer = (2, 1) if layout == "kn" else (1, 2)
    if x.shape[inner] == 1:
        strides[inner] = item
    if x.shape[outer] == 1:
        strides[outer] = x.shape[inner] * strides[inner]
    return x if tuple(strides) == tuple(x.strides) else _view(x, x.shape, tuple(strides))


def _row_major(a, name):
    if a.strides[2] != a.dtype.itemsize:
        raise ValueError(f"{name} must be row-major (its last axis contiguous); got strides {a.strides}")


def _true_k(prec, width, k):
    if prec.name != "int4":
        if k is not None and k != width:
            raise ValueError(f"k={k} differs from the operands' K={width}")
        return width
    if k is None:
        return 2 * width
    if not 2 * width - 1 <= k <= 2 * width:
        raise ValueError(f"k={k} does not fit {width} packed bytes")
    return k


def _bytes(x):
    """A (batch, rows, bytes) uint8 view of x."""
    item = x.dtype.itemsize
    return _view(x, (x.shape[0], x.shape[1], x.shape[2] * item),
                 (x.strides[0], x.strides[1], 1), np.uint8)


def _aligned_rows(x, alloc):
    """(x, None) for x, a (batch, rows, bytes) uint8 view, when its rows are
    whole 16-byte copies at 16-byte addresses; otherwise (a new array of
    rows zero-padded to a multiple of 16 bytes, (x, that array)): the copy
    the plan's launch makes (kernel.pad_rows)."""
    ptr = x.device_ctypes_pointer.value or 0
    pitches = [s for s, n in zip(x.strides[:2], x.shape[:2]) if n > 1]   # strides that are used
    if x.shape[2] % 16 == 0 and ptr % 16 == 0 and all(s % 16 == 0 for s in pitches):
        return x, None
    padded = alloc.empty((x.shape[0], x.shape[1], -(-x.shape[2] // 16) * 16), np.uint8)[1]
    return padded, (x, padded)


def _as_bits(c):
    return _view(c, c.shape, c.strides, np.uint16)


def _output(out, batched, batch, M, N, dtype, host, alloc=None):
    """(C as the kernel takes it, (batch, M, N); whether it goes back to the
    host; what the call returns): out, checked, or a new C from alloc's
    framework (NumPy inputs: a Numba array copied back)."""
    shape = (batch, M, N) if batched else (M, N)
    if out is None:
        result, dev = alloc.empty(shape, dtype) if not host else (None, cuda.device_array(shape, dtype))
        return (dev if batched else dev.reshape(1, M, N)), host, dev if host else result
    if isinstance(out, np.ndarray):
        raise TypeError("out must be a device array (__cuda_array_interface__); "
                        "for NumPy inputs leave it out and a NumPy result is returned")
    dev = frameworks.numba_view(out)
    if tuple(dev.shape) != shape:
        raise ValueError(f"out has shape {tuple(dev.shape)}; expected {shape}")
    if np.dtype(dev.dtype) != np.dtype(dtype):
        raise TypeError(f"out has dtype {dev.dtype}; expected {np.dtype(dtype).name}")
    if dev.strides[-1] != dev.dtype.itemsize:
        raise ValueError(f"out must be row-major (its last axis contiguous); got strides {dev.strides}")
    return (dev if batched else _batched(dev)), False, out


# How to pass B in each layout (a Numba device array's .T is a transposed copy, not a view).
_LAYOUT_HINT = {"nk": "b = bt.T for a row-major N x K array bt; numgemm.transposed(bt) for a Numba "
                      "device array, whose .T copies",
                "kn": "b as a row-major K x N array"}


def _config(cfg, precision, layout, preset, mnk, cc):
    """The kernel to launch: cfg (named by the caller and checked by _checked())
    where it fits B's layout and K, else the choice for this shape on this GPU
    (numgemm.tuning: the tuned winners, else the preset's default)."""
    k = mnk[2]
    if cfg is None:
        try:
            return tuning.choose(precision, layout, *mnk, cc, preset)
        except ValueError as e:
            other = "kn" if layout == "nk" else "nk"
            raise ValueError(f"{e} ({_LAYOUT_HINT[other]})") from None
    if cfg.b_layout != layout:
        raise ValueError(f"kernel {cfg.name} takes B as {cfg.b_layout.upper()} "
                         f"({_LAYOUT_HINT[cfg.b_layout]}); "
                         f"this b is {layout.upper()}")
    if cfg.max_k is not None and k > cfg.max_k:
        exact = cfg.exact_twin
        twin = next((n for n, c in registry.REGISTRY[preset].items() if c == exact), exact.name)
        raise ValueError(f"kernel {cfg.name} widens s4 to 16 x s8 and is exact for K <= {cfg.max_k}; "
                         f"K is {k} ({twin} widens exactly)")
    return cfg


def with_c_dtype(cfg, c_dtype, chosen=False):
    """cfg storing C as c_dtype: FP16's f32 sums rounded to half (out="f16")
    where float16 is wanted; a kernel gemm() chose that sums split-K in its
    last blocks has its slices summed by the split-K kernel instead, which
    rounds them."""
    if cfg.c_dtype == c_dtype:
        return cfg
    if c_dtype != np.float16:
        raise ValueError(f"kernel {cfg.name} stores C as {cfg.c_dtype.name}, not {c_dtype.name}")
    changes = {"out": "f16"}
    if chosen and cfg.split_sum == "last":
        changes["split_sum"] = "kernel"
    try:
        return cfg.replace(**changes)
    except ValueError as e:
        raise ValueError(f"kernel {cfg.name} cannot store C as {c_dtype.name}: {e}") from None


def _allow_dynamic_shared(cufunc, nbytes):
    """Kernels may use more than 48 KB of dynamic shared memory only after
    opting in; numba-cuda has no API for it, the driver has."""
    if nbytes <= 48 * 1024:
        return
    from numba.cuda.cudadrv.driver import binding, driver

    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.cuKernelSetAttribute(attr, nbytes, cufunc.handle, cufunc.device.id)

