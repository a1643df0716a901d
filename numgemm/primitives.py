"""The hand-written PTX routines (ptx_asm/) and WMMA fragments (baselines/)
as functions a Numba CUDA kernel can call.

Every routine in ptx_asm/*.ptx is a real `.func` that ptxas assembles on its
own. It reaches a kernel in one of two linkages, with identical results:

- ``inline`` (the default): the routine's body is emitted into the kernel as
  inline PTX by a Numba ``@intrinsic``, so it is register-allocated with the
  kernel and no call remains;
- ``link``: the ``.ptx`` file is linked as an external device function
  (``cuda.declare_device(..., link=..., abi="c")``): one CALL per use, which is
  what a call boundary costs in a hot loop.

Both are generated from the file, so the file is the only source of the
instruction: the routine's header comment becomes its docstring; its
``ld.param`` / ``st.param`` lines say which registers are operands; the lines
between them are the body. Tuple parameters (``a0, a1, ...``) become one tuple
argument ``a``; a routine returning several registers returns a tuple.

    >>> from numgemm.primitives import mma_m16n8k32_s8_s32, ldmatrix_x4
    >>> from numgemm import primitives
    >>> linked = primitives.routines("link")   # same names, linked as calls

The WMMA baselines (baselines/*.cu) are CUDA C device functions compiled by
NVRTC and inlined by nvJitLink's LTO; their fragments cross into Numba as
small per-thread arrays, which stay in registers after inlining.

Two address helpers, ``shared_addr`` and ``global_addr``, give the operands
that ldmatrix and cp.async take.
"""

import functools
import re
from dataclasses import dataclass, replace
from types import ModuleType

from llvmlite import ir
from numba import cuda, from_dtype, types
from numba.cuda import cgutils
from numba.cuda.extending import intrinsic

from .precision import PRECISIONS
from .toolchain import BASELINES_DIR, PTX_DIR, enable_wmma_headers

LINKAGES = ("inline", "link")

_NUMBA_TYPES = {
    "b32": types.uint32,
    "u32": types.uint32,
    "s32": types.int32,
    "f32": types.float32,
    "b64": types.uint64,
    "u64": types.uint64,
}
_CONSTRAINTS = {"b32": "r", "u32": "r", "s32": "r", "f32": "f", "b64": "l", "u64": "l"}
# Opcodes that only compute on registers: routines made of these alone may be
# moved or merged by LLVM; any other instruction touches memory or ordering.
_PURE_OPCODES = {"mma", "and", "or", "xor", "not", "add", "sub", "mul", "shl", "shr",
                 "prmt", "lop3", "mov", "cvt", "createpolicy", "dp4a", "bfe", "ex2", "rcp", "fma"}


@dataclass(frozen=True)
class Operand:
    """One argument or result: a scalar register or a tuple of them."""

    name: str
    regs: tuple
    ptxtype: str

    @property
    def numba_type(self):
        ty = _NUMBA_TYPES[self.ptxtype]
        return ty if len(self.regs) == 1 else types.UniTuple(ty, len(self.regs))


@dataclass(frozen=True)
class Routine:
    """A routine parsed from ptx_asm/: its operands, body and documentation."""

    name: str        # Python name, e.g. "mma_m16n8k32_s8_s32"
    symbol: str      # PTX name, e.g. "numgemm_mma_m16n8k32_s8_s32"
    path: str
    doc: str
    inputs: tuple    # of Operand, in call order
    output: object   # Operand, or None for a routine returning nothing
    temps: tuple     # ".reg" declarations the body needs beyond its operands
    body: str
    pure: bool

    @property
    def signature(self):
        ret = self.output.numba_type if self.output else types.none
        return ret(*(op.numba_type for op in self.inputs))

    def inline_asm(self):
        """(PTX text, LLVM constraint string) for the inline linkage. A
        register that is both an input and the result (wgmma's accumulators)
        is tied: its input constraint names the output's number, so that
        input and output are one register and no move comes between."""
        outs = self.output.regs if self.output else ()
        ins = [r for op in self.inputs for r in op.regs]
        number = {}
        for i, reg in enumerate([*outs, *ins]):
            number.setdefault(reg, f"${i}")
        body = re.sub(r"%\w+", lambda m: number.get(m.group(0), m.group(0)), self.body)
        text = "{\n" + "".join(f"{d};\n" for d in self.temps) + body + "}"
        out_c = [f"={_CONSTRAINTS[self.output.ptxtype]}"] * len(outs) if self.output else []
        tied = {reg: str(i) for i, reg in enumerate(outs)}
        in_c = [tied.get(r, _CONSTRAINTS[op.ptxtype]) for op in self.inputs for r in op.regs]
        clobber = [] if self.pure else ["~{memory}"]
        return text, ",".join(out_c + in_c + clobber)


_FUNC = re.compile(
    r"((?:^//[^\n]*\n)*)"                       # header comment
    r"^\.visible\s+\.func\s*(?:\((?P<ret>[^)]*)\))?\s*(?P<sym>\w+)\s*"
    r"\((?P<params>[^)]*)\)\s*\{(?P<body>.*?)^\}",
    re.M | re.S,
)
_REG_DECL = re.compile(r"^\.reg\s+\.(\w+)\s+(.*)$")
# A scalar or a vector (ld.param.v4.f32 {%d0, %d1, %d2, %d3}, [d+16]) of an array parameter.
_LD_PARAM = re.compile(r"^ld\.param\.(?:v\d\.)?(\w+)\s+(\{[^}]*\}|%\w+)\s*,\s*\[(\w+)(?:\+(\d+))?\]$")
_ST_PARAM = re.compile(r"^st\.param\.(?:v\d\.)?(\w+)\s+\[(\w+)(?:\+(\d+))?\]\s*,\s*(\{[^}]*\}|%\w+)$")


def _vector(text):
    """'{%a, %b}' or '%a' -> ['%a', '%b'] / ['%a']"""
    return [r.strip() for r in text.strip("{}").split(",")]


def _param_names(text):
    return [re.sub(r"\[.*", "", p.split()[-1]) for p in text.split(",") if p.strip()]


def _expand(decl):
    """'%a<4>, %b' -> ['%a0', '%a1', '%a2', '%a3', '%b']"""
    regs = []
    for item in decl.split(","):
        item = item.strip()
        m = re.fullmatch(r"(%\w+?)<(\d+)>", item)
        regs.extend([f"{m.group(1)}{i}" for i in range(int(m.group(2)))] if m else [item])
    return regs


def _comment(block):
    return "\n".join(re.sub(r"^// ?", "", line) for line in block.strip().splitlines())


def _parse_func(m, path, notes):
    sym = m.group("sym")
    doc = _comment(m.group(1)) + "\n\n" + notes
    stmts = [" ".join(s.split()) for s in
             re.sub(r"//[^\n]*", "", m.group("body")).split(";")]
    reg_type, loads, stores, body = {}, {}, [], []
    for s in filter(None, stmts):
        if d := _REG_DECL.match(s):
            for reg in _expand(d.group(2)):
                reg_type[reg] = d.group(1)
        elif ld := _LD_PARAM.match(s):
            off = int(ld.group(4) or 0)
            loads.setdefault(ld.group(3), []).extend(
                ((off, i), reg, ld.group(1)) for i, reg in enumerate(_vector(ld.group(2))))
        elif st := _ST_PARAM.match(s):
            off = int(st.group(3) or 0)
            stores.extend(((off, i), reg, st.group(1)) for i, reg in enumerate(_vector(st.group(4))))
        elif s != "ret":
            body.append(s)

    # Tuple parameters are named <group><index> (a0, a1, ... -> argument "a"),
    # or are one array loaded in vectors (d[512] -> argument "d").
    groups = {}
    for p in _param_names(m.group("params")):
        if p not in loads:
            raise ValueError(f"{path}: {sym}: parameter {p} is never loaded")
        g = re.fullmatch(r"([a-z]+)\d+", p)
        groups.setdefault(g.group(1) if g else p, []).extend((r, t) for _, r, t in sorted(loads[p]))
    inputs = tuple(Operand(name, tuple(r for r, _ in regs), regs[0][1])
                   for name, regs in groups.items())
    output = None
    if stores:
        stores.sort()
        output = Operand(_param_names(m.group("ret"))[0],
                         tuple(r for _, r, _ in stores), stores[0][2])
    operands = {r for op in (*inputs, output) if op for r in op.regs}
    temps = tuple(f".reg .{reg_type[r]} {r}" for r in reg_type if r not in operands)
    opcodes = {s.split(".")[0].split()[0] for s in body}
    return Routine(
        name=sym.removeprefix("numgemm_"), symbol=sym, path=str(path), doc=doc,
        inputs=inputs, output=output, temps=temps,
        body="".join(f"{s};\n" for s in body), pure=opcodes <= _PURE_OPCODES,
    )


def parse_ptx(path):
    """The routines of one .ptx file, in file order."""
    text = path.read_text()
    notes = _comment(re.match(r"(?:^//[^\n]*\n)*", text, re.M).group(0))
    return [_parse_func(m, path, notes) for m in _FUNC.finditer(text)]


ROUTINES = {r.name: r for p in sorted(PTX_DIR.glob("*.ptx")) for r in parse_ptx(p)}


def _describe(r, linkage):
    args = ", ".join(op.name for op in r.inputs)
    ret = f" -> {r.output.name}" if r.output else ""
    return f"{r.name}({args}){ret}   [{linkage}: {r.symbol} in {r.path}]\n\n{r.doc}"


def _inline(r):
    sig = r.signature
    text, constraints = r.inline_asm()

    def codegen(context, builder, signature, args):
        flat = []
        for ty, val in zip(signature.args, args):
            if isinstance(ty, types.BaseTuple):
                flat.extend(builder.extract_value(val, i) for i in range(ty.count))
            else:
                flat.append(val)
        if r.output is None:
            ret_ty = ir.VoidType()
        else:
            elem = context.get_value_type(_NUMBA_TYPES[r.output.ptxtype])
            n = len(r.output.regs)
            ret_ty = elem if n == 1 else ir.LiteralStructType([elem] * n)
        fnty = ir.FunctionType(ret_ty, [v.type for v in flat])
        asm = ir.InlineAsm(fnty, text, constraints, side_effect=not r.pure)
        res = builder.call(asm, flat)
        if r.output is None:
            return context.get_dummy_value()
        if len(r.output.regs) == 1:
            return res
        items = [builder.extract_value(res, i) for i in range(len(r.output.regs))]
        return context.make_tuple(builder, signature.return_type, items)

    def check(args):
        for got, want in zip(args, sig.args):
            if isinstance(want, types.UniTuple) != isinstance(got, types.BaseTuple):
                return None
            if isinstance(want, types.UniTuple) and len(got) != want.count:
                return None
        return sig, codegen

    # Numba reads the typer's parameter names; they are the routine's own.
    params = "".join(f", {op.name}" for op in r.inputs)
    scope = {"check": check}
    exec(f"def {r.name}(typingctx{params}):\n    return check([{params[2:]}])\n", scope)
    typer = scope[r.name]
    typer.__doc__ = _describe(r, "inline")
    typer.__module__ = __name__
    return intrinsic(typer)


def _link(r):
    fn = cuda.declare_device(r.symbol, r.signature, link=[r.path], abi="c")
    return fn


def routines(linkage="inline"):
    """All PTX routines in one linkage, as a namespace of Numba callables.

    Call it once at module level and use its attributes inside kernels; the
    same names exist in both linkages, with the same arguments and results.
    """
    if linkage not in LINKAGES:
        raise ValueError(f"linkage must be one of {LINKAGES}, got {linkage!r}")
    if linkage not in _namespaces:
        make = _inline if linkage == "inline" else _link
        _namespaces[linkage] = _namespace(
            linkage, routines.__doc__,
            linkage=linkage, **{name: make(r) for name, r in ROUTINES.items()})
    return _namespaces[linkage]


def _namespace(name, doc, **attrs):
    # A module object, not a SimpleNamespace: Numba resolves attributes of
    # modules inside kernels, so `ns.mma_...(...)` works in a kernel body.
    ns = ModuleType(f"{__name__}.{name}", doc)
    ns.__dict__.update(attrs)
    return ns


_namespaces = {}
globals().update({k: v for k, v in vars(routines("inline")).items() if not k.startswith("__")})


@functools.cache
def setmaxnreg(direction, count):
    """setmaxnreg.<direction>.sync.aligned.u32 count, inline: the routine
    setmaxnreg_dec_40 or setmaxnreg_inc_232 of ptx_asm/wgmma.ptx with count
    in its place (the instruction takes the count as an immediate). count: a
    multiple of 8 in 24 .. 256, at most the launch bound's registers for
    "dec" and at least them for "inc" (ptxas refuses the others)."""
    if direction not in ("dec", "inc") or count % 8 or not 24 <= count <= 256:
        raise ValueError(f"setmaxnreg: direction 'dec' or 'inc' and a count in 24..256, a multiple of 8; "
                         f"got {direction!r}, {count!r}")
    base = ROUTINES["setmaxnreg_dec_40" if direction == "dec" else "setmaxnreg_inc_232"]
    body = re.sub(r"\d+;$", f"{count};", base.body.rstrip("\n")) + "\n"
    return _inline(replace(base, name=f"setmaxnreg_{direction}_{count}", body=body))


# --- addresses ---------------------------------------------------------------

def _element_pointer(context, builder, arrty, arr, index):
    data = context.make_array(arrty)(context, builder, arr).data
    return builder.gep(data, [index])


def _address(name, space, bits, doc):
    """An intrinsic (arr, i) -> the address of element i in a PTX state space:
    the generic pointer cast to LLVM address space `space`, as a `bits`-bit
    integer. LLVM folds the cast where it knows the space already."""
    ret = types.uint32 if bits == 32 else types.uint64

    def typer(typingctx, arr, index):
        if not isinstance(arr, types.Array) or not isinstance(index, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ptr = _element_pointer(context, builder, sig.args[0], args[0], args[1])
            cast = builder.addrspacecast(ptr, ir.PointerType(ptr.type.pointee, space))
            return builder.ptrtoint(cast, ir.IntType(bits))

        return ret(arr, index), codegen

    typer.__name__ = typer.__qualname__ = name
    typer.__doc__ = doc
    return intrinsic(typer)


shared_addr = _address("shared_addr", 3, 32, """shared_addr(arr, i) -> uint32: the .shared address of element i of a
    shared array, counted in elements from its first (pointer arithmetic, so
    it is the flat C-order index of a contiguous array). This is the operand
    ldmatrix and cp.async take as destination; it costs no instruction.""")

global_addr = _address("global_addr", 1, 64, """global_addr(arr, i) -> uint64: the .global address of element i of a
    device array (flat, in elements from its first), the source operand of
    cp.async.""")


@intrinsic
def zeros(typingctx, n, dtype):
    """zeros(n, dtype) -> a tuple of n zeros of a Numba number type (n a
    constant): the accumulators a wgmma takes in and hands back (128 for
    m64n256). A literal tuple of that many zeros trips Numba's bytecode
    analysis; this one is an LLVM constant."""
    if not isinstance(n, types.IntegerLiteral) or not isinstance(dtype, types.NumberClass):
        return None
    tup = types.UniTuple(dtype.instance_type, n.literal_value)

    def codegen(context, builder, sig, args):
        zero = context.get_constant(tup.dtype, 0)
        return context.make_tuple(builder, tup, [zero] * tup.count)

    return tup(n, dtype), codegen


@intrinsic
def pointer(typingctx, arr, index):
    """pointer(arr, i) -> CPointer(dtype): pointer to element i of an array
    (flat, in elements), for the WMMA functions' pointer arguments."""
    if not isinstance(arr, types.Array) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return _element_pointer(context, builder, sig.args[0], args[0], args[1])

    return types.CPointer(arr.dtype)(arr, index), codegen


# --- WMMA fragments (baselines/) ---------------------------------------------

@dataclass(frozen=True)
class WmmaOp:
    """The four WMMA device functions of one precision in baselines/.

    Fragments live in Numba per-thread arrays of the given lengths; LTO inlines
    the functions, after which the arrays are registers.
    """

    precision: str
    shape: tuple          # (m, n, k) of one WMMA operation
    a_regs: int           # uint32 per thread holding the A fragment
    b_regs: int
    acc_regs: int         # accumulator elements per thread
    b_layouts: tuple      # B layouts this precision supports: "nk", "kn"

    @property
    def path(self):
        return str(BASELINES_DIR / f"wmma_{self.precision}.cu")

    elem: object          # Numba type of the elements the tile pointers point at (s4: packed bytes)
    acc: object           # Numba type of the accumulators


#: The WMMA baselines, from the precisions that have one (numgemm.precision).
WMMA = {p.wmma_name: WmmaOp(p.wmma_name, p.wmma, *p.wmma_regs, p.wmma_b_layouts, from_dtype(p.host_dtype),
                            from_dtype(p.out_dtype))
        for p in PRECISIONS.values() if p.wmma_name}


def wmma_functions(precision):
    """Numba callables for one precision's WMMA functions in baselines/:

    - load_a(frag uint32*, a*, lda): A fragment from a row-major tile
    - load_b_nk(frag, b*, ldb) / load_b_kn(frag, b*, ldb): B fragment from an
      N x K (col_major) or K x N (row_major) tile
    - mma_nk(acc*, a_frag*, b_frag*) / mma_kn(...): acc += A * B, for a B
      fragment loaded by load_b_nk / load_b_kn
    - store(c*, ldc, acc*): accumulator to a row-major tile

    The leading dimensions are in elements; pointers are made with pointer().
    """
    if precision not in _wmma_namespaces:
        enable_wmma_headers()
        op = WMMA[precision]
        elem = op.elem
        acc = op.acc
        u32p, ep, accp = types.CPointer(types.uint32), types.CPointer(elem), types.CPointer(acc)
        sigs = {
            "load_a": types.int32(u32p, ep, types.uint32),
            "store": types.int32(accp, types.uint32, accp),
        }
        for layout in op.b_layouts:
            sigs[f"load_b_{layout}"] = types.int32(u32p, ep, types.uint32)
            sigs[f"mma_{layout}"] = types.int32(accp, u32p, u32p)
        _wmma_namespaces[precision] = _namespace(f"wmma_{precision}", wmma_functions.__doc__, op=op, **{
            name: cuda.declare_device(f"numgemm_wmma_{precision}_{name}", sig, link=[op.path])
            for name, sig in sigs.items()})
    return _wmma_namespaces[precision]


_wmma_namespaces = {}


def wmma_calls(precision, name, offsets):
    """An intrinsic f(*args) that calls WMMA function `name` once per row of
    offsets, with f's arguments: call r passes pointer argument i plus
    offsets[r][i] elements, and scalar arguments (offset None) unchanged.

    One Numba call for a warp tile's fragments: written as one Numba call per
    WMMA function, the tuned INT4 k-tile (512 8x8x32 operations) spent four
    minutes in Numba's own inlining and typing; LTO inlines these calls as it
    does those."""
    w = wmma_functions(precision)
    fn = getattr(w, name)                          # the declared function: symbol and signature
    sig, path = fn.sig, w.op.path

    def check(args):
        for got, want in zip(args, sig.args):
            if isinstance(want, types.CPointer) and got != want:
                return None          # a fragment or tile pointer of the wrong element type
            if not isinstance(want, types.CPointer) and not isinstance(got, types.Integer):
                return None
        return types.none(*args), codegen

    def codegen(context, builder, call_sig, args):
        context.active_code_library.add_linking_file(path)
        i32 = ir.IntType(32)
        params = [context.get_value_type(t) for t in sig.args]
        callee = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i32.as_pointer(), *params]),
                                                fn.name)
        status = cgutils.alloca_once(builder, i32)
        args = [v if isinstance(want, types.CPointer) else context.cast(builder, v, got, want)
                for v, got, want in zip(args, call_sig.args, sig.args)]
        for row in offsets:
            builder.call(callee, [status] + [v if off is None else builder.gep(v, [ir.Constant(ir.IntType(64), off)])
                                             for v, off in zip(args, row)])
        return context.get_dummy_value()

    params = ", ".join(f"a{i}" for i in range(len(sig.args)))
    scope = {"check": check}
    exec(f"def {name}_x{len(offsets)}(typingctx, {params}):\n    return check([{params}])\n", scope)
    return intrinsic(scope[f"{name}_x{len(offsets)}"])
