"""What gemm() checks before any GPU is needed: dtypes, ranks, K and its
bound, the inner dimensions, the batch, the preset, the kernel named, C's
dtype and the epilogue's scales, bias and activation, each refused with a
message naming the argument (Shape: what passed)."""

from dataclasses import dataclass

import numpy as np

from . import frameworks, registry
from .config import KernelConfig
from .kernel.epilogue import NONE
from .precision import BY_DTYPE, NARROW, PRECISIONS


@dataclass
class Shape:
    precision: str
    prec: object
    bmnk: tuple                     # batch, M, N, K (K in elements)
    b_units: bool                   # INT4 B as K x N 16-bit units
    cfg: object                     # the KernelConfig named by kernel= (storing C as c_dtype), or None
    c_dtype: object                 # C's NumPy dtype
    epilogue: dict = None           # KernelConfig's epilogue fields the call asks for (Epilogue.fields)
    vectors: tuple = (None,) * 3    # scale_a, scale_b, bias as given: an array, a number, or None

    @property
    def mnk(self):
        return self.bmnk[1:]


def checked(a, b, precision, kernel, preset, k, out=None, out_dtype=None, epilogue=(None,) * 4):
    """Everything about the arguments that needs no GPU: dtypes, ranks, K and
    its bound, the inner dimensions, the batch, the preset, the kernel named,
    out's shape, C's dtype and the epilogue (scale_a, scale_b, bias,
    activation), each refused with a message naming the argument."""
    if preset not in registry.PRESETS:
        raise ValueError(f"preset must be one of {registry.PRESETS}, got {preset!r}")
    cfg = None
    if isinstance(kernel, str):
        cfg = registry.get(kernel, preset)
    elif isinstance(kernel, KernelConfig):
        cfg = kernel
    elif kernel is not None:
        raise TypeError(f"kernel must be a registered name or a KernelConfig, got {type(kernel).__name__}")
    if precision is None and cfg is not None and BY_DTYPE.get(dtype_name(a)) is None:
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
    b_units = prec.b_units is not None and dtype_name(b) == np.dtype(prec.b_units).name   # K x N in 16-bit units
    if kb != (-(-K // prec.k_per_unit) if b_units else ka):
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}"
                         + (" (INT4 operands are packed: a (M, K/2); b (K/2, N) uint8 or "
                            "(K/4, N) uint16 units, see pack_int4_kn)" if prec.packed else ""))
    if batch_b not in (1, batch):
        raise ValueError(f"b's batch {batch_b} is neither 1 nor a's batch {batch}")
    if batch > 65535:
        raise ValueError(f"batch {batch} is more than the grid allows (65535)")
    check_out(out, (batch, M, N) if 3 in (len(a.shape), len(b.shape)) else (M, N))
    fields = _epilogue(prec, M, N, a, *epilogue)
    if cfg is not None:                 # refused here, before the GPU is needed, where it cannot
        # one C row (or column): a kernel's scale a row (a column) reads the one value a "tensor" gives
        for name, per, n in (("scale_a", "row", M), ("scale_b", "col", N)):
            if n == 1 and fields[name] == "tensor" and getattr(cfg, name) == per:
                fields[name] = per
        cfg = with_epilogue(cfg, fields)
    c_dtype = _c_dtype(prec, cfg, out, out_dtype, any(fields.values()))
    if cfg is not None:
        cfg = with_c_dtype(cfg, c_dtype)
    return Shape(precision, prec, (batch, M, N, K), b_units, cfg, c_dtype, fields, tuple(epilogue[:3]))


def check_out(out, shape):
    """out= as far as it can be checked before the GPU is needed: None, or
    an array of C's shape that is not a NumPy one (its dtype and strides are
    read from its device view: views.output)."""
    if out is None:
        return
    if isinstance(out, np.ndarray):
        raise TypeError("out must be a device array (__cuda_array_interface__); "
                        "for NumPy inputs leave it out and a NumPy result is returned")
    got = tuple(getattr(out, "shape", ()))
    if got != tuple(shape):
        raise ValueError(f"out has shape {got}; expected {tuple(shape)}")


def _epilogue(prec, M, N, a, scale_a, scale_b, bias, activation):
    """KernelConfig's epilogue fields for gemm()'s scale_a, scale_b, bias and
    activation: a scale is a number or a float32 array of one element
    ("tensor"), or of one a row of C (scale_a: (M,) or (M, 1), "row") or a
    column (scale_b: (N,) or (1, N), "col"); the bias (N,) float32. Arrays
    live where the operands do (NumPy with NumPy, else on the GPU)."""
    host = isinstance(a, np.ndarray)
    fields = dict(NONE)
    for name, x, per, n, along in (("scale_a", scale_a, "row", M, (M, 1)), ("scale_b", scale_b, "col", N, (1, N)),
                                   ("bias", bias, "col", N, None)):
        if x is None:
            continue
        if is_number(x) and name != "bias":
            fields[name] = "tensor"
            continue
        fw = frameworks.kind(x)
        if fw is None or (fw == "torch" and not x.is_cuda) or (fw == "numpy") != host:
            raise TypeError(f"{name} must be " + ("a number or " if name != "bias" else "") +
                            f"a float32 {'NumPy' if host else 'GPU'} array, as a and b are; got {type(x).__name__}"
                            + (" on the CPU" if fw == "torch" else ""))
        if dtype_name(x) != "float32":
            raise TypeError(f"{name} must be float32; got dtype {dtype_name(x)}")
        shape = tuple(x.shape)
        if name != "bias" and int(np.prod(shape)) == 1:
            fields[name] = "tensor"
        elif shape == (n,) or (along is not None and shape == along):
            fields[name] = True if name == "bias" else per
        else:
            wanted = f"({n},)" + (f" or {along}" if along else "") + (" or one element" if name != "bias" else "")
            raise ValueError(f"{name} must have shape {wanted} for C of {M} x {N}; got {shape}")
    if activation is not None:
        names = KernelConfig.__dataclass_fields__["act"].metadata["values"][1:]
        if activation not in names:
            raise ValueError(f"activation must be one of {', '.join(names)} or None; got {activation!r}")
        fields["act"] = activation
    return fields


def _c_dtype(prec, cfg, out, out_dtype, epilogue=False):
    """C's dtype: out_dtype, else out's, else the named kernel's, else the
    precision's; FP16 has float32 or float16, the integers int32 (through
    an epilogue: float32, bfloat16 or float16)."""
    given = out_dtype if out_dtype is not None else getattr(out, "dtype", None)
    what = "out_dtype" if out_dtype is not None else "out's dtype"
    scaled = epilogue and prec.exact                # an integer's sums, scaled: floats
    base, narrows = (np.dtype(np.float32), tuple(NARROW)) if scaled else (np.dtype(prec.out_dtype), prec.narrows)
    if given is None:
        return cfg.c_dtype if cfg is not None else base
    name = getattr(given, "__name__", str(given).removeprefix("torch."))     # ml_dtypes' type; torch's dtype
    named = [base.name, *(NARROW[n].dtype_name for n in narrows)]
    narrow = next((n for n in narrows if NARROW[n].encoding and NARROW[n].encoding == name), "")
    if narrow:                              # bfloat16: a C of its bit patterns
        return np.dtype(NARROW[narrow].dtype)
    if name in prec.dtype_aliases:          # FP8's own format is no C
        raise TypeError(f"{what}: {prec.name} gives C as {' or '.join(named)}; got {name}")
    try:                                    # a torch dtype by its name: torch.float16
        want = np.dtype(name if type(given).__module__ == "torch" else given)
    except TypeError:
        raise TypeError(f"{what} must name a NumPy dtype, got {given!r}") from None
    if want not in (base, *(np.dtype(NARROW[n].dtype) for n in narrows)):
        raise TypeError(f"{what}: {prec.name} gives C as {' or '.join(named)}"
                        + (" through the epilogue" if scaled else "") + f"; got {want.name}")
    return want


def _precision(a, precision):
    if precision is None:
        dtype = dtype_name(a)
        inferred = BY_DTYPE.get(dtype)
        if inferred is None:
            names = ", ".join(f"'{p.name}' ({np.dtype(p.host_dtype).name}{', packed' if p.packed else ''})"
                              for p in PRECISIONS.values())
            raise TypeError(f"cannot infer the precision from dtype {dtype}: pass precision= one of {names}")
        return inferred
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {tuple(PRECISIONS)}, got {precision!r}")
    return precision


def dtype_name(x):
    return str(getattr(x, "dtype", "")).removeprefix("torch.")


def _check_dtype(x, name, prec):
    fw = frameworks.kind(x)             # (asking a torch Parameter for its interface raises)
    if fw is None or (fw == "torch" and not x.is_cuda):
        raise TypeError(f"{name} must be a NumPy array or have __cuda_array_interface__ (a GPU array of torch, "
                        f"CuPy or Numba); got {type(x).__name__}" + (" on the CPU" if fw else ""))
    dtype = dtype_name(x)
    allowed = [np.dtype(prec.host_dtype).name, *prec.dtype_aliases]
    if prec.b_units is not None and name == "b":
        allowed.append(np.dtype(prec.b_units).name)     # K x N in 16-bit units (pack_int4_kn)
    if dtype not in allowed:
        what = f"packed {allowed[0]} (numgemm.pack_int4)" if prec.packed else allowed[0]
        raise TypeError(f"{prec.name} takes {name} as {what}; got dtype {dtype}")


def _true_k(prec, width, k):
    if not prec.packed:
        if k is not None and k != width:
            raise ValueError(f"k={k} differs from the operands' K={width}")
        return width
    if k is None:
        return 2 * width
    if not 2 * width - 1 <= k <= 2 * width:
        raise ValueError(f"k={k} does not fit {width} packed bytes")
    return k


def is_number(x):
    """Whether x is a real number (Python's or NumPy's), which a scale may be."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def with_epilogue(cfg, fields, chosen=False):
    """cfg with the epilogue a call asks for (fields: KernelConfig's scale_a,
    scale_b, bias, act); a kernel gemm() chose that adds split-K's slices in
    its last blocks, or streams K, has them summed by the split-K kernel
    instead, which applies it to whole sums."""
    have = {f: getattr(cfg, f) for f in fields}
    if have == fields:
        return cfg
    if cfg.epilogue:
        raise ValueError(f"kernel {cfg.name} applies {have}; the call asks for {fields}")
    changes = dict(fields)
    if chosen and (cfg.split_sum == "last" or cfg.stream_k):
        changes.update(split_sum="kernel", stream_k=False)
    if chosen and cfg.scaled:                   # its sums are 256-fold until its store shifts them
        cfg = cfg.exact_twin
    try:
        return cfg.replace(**changes)
    except ValueError as e:
        raise ValueError(f"kernel {cfg.name} cannot apply the epilogue: {e}") from None


def with_c_dtype(cfg, c_dtype, chosen=False):
    """cfg storing C as c_dtype: the f32 sums rounded to the precision's
    narrower C (FP16: float16, out="f16"; BF16: bfloat16's bits, out="bf16";
    FP8: either) where that is wanted; a kernel gemm() chose that sums split-K in its
    last blocks has its slices summed by the split-K kernel instead, which
    rounds them."""
    if cfg.c_dtype == c_dtype:
        return cfg
    narrow = next((n for n in cfg.narrows if np.dtype(NARROW[n].dtype) == c_dtype), "")
    if not narrow:
        raise ValueError(f"kernel {cfg.name} stores C as {cfg.c_dtype.name}, not {c_dtype.name}")
    changes = {"out": narrow}
    if chosen and cfg.split_sum == "last":
        changes["split_sum"] = "kernel"
    try:
        return cfg.replace(**changes)
    except ValueError as e:
        raise ValueError(f"kernel {cfg.name} cannot store C as {c_dtype.name}: {e}") from None
