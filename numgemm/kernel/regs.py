"""Numba register plumbing: how per-thread arrays stay in registers.

Fragments and accumulators live in flat per-thread arrays
(``cuda.local.array``) that the PTX routines read and write as tuples. LLVM
keeps such an array in registers only while every index is a constant, so
the kernels index them with Python-level constants (loops of constant trip
count, or source written out by generated()) and move values through the
getters and setters here. The bench's ceiling microbenchmark and the tests
use the same helpers.
"""

from llvmlite import ir
from numba import cuda, types
from numba.cuda.extending import intrinsic

from ..tiles import swizzled_offset

u8, u32, u64, i32 = types.uint8, types.uint32, types.uint64, types.int32
#: Numba type of an accumulator register, by KernelConfig.acc (f16: two halves in a 32-bit word).
ACC = {"f32": types.float32, "s32": types.int32, "f16": types.uint32}
#: Numba type of one element of C as the kernel writes it (f16, bf16 as their 16 bits).
OUT = {"f32": types.float32, "s32": types.int32, "f16": types.uint16, "bf16": types.uint16}


def device(fn):
    """fn as a device function that NVVM inlines at every call site
    (LLVM's alwaysinline). Numba types and lowers it once per argument
    types, where inline="always" would copy its IR into each caller and type
    it there: the front end's cost grew with the call sites (~170 in a tuned
    kernel). After NVVM inlines it, constant arguments are constants again,
    so fragment indices stay compile-time and the arrays stay in registers."""
    return cuda.jit(device=True, forceinline=True)(fn)


def inlined(fn):
    """fn as a device function that Numba inlines at the IR level: for the
    few that return a cuda.local.array, which Numba allows only from a body
    it inlines (a called function's array would live in its own frame)."""
    return cuda.jit(device=True, inline="always")(fn)


def getter(n):
    """get(a, i) -> a[i] (n=1) or the tuple a[i:i + n] (n = 2, 4)."""
    if n == 1:
        return device(lambda a, i: a[i])
    if n == 2:
        return device(lambda a, i: (a[i], a[i + 1]))
    return device(lambda a, i: (a[i], a[i + 1], a[i + 2], a[i + 3]))


def setter(n):
    """put(a, i, v): a[i] = v (n=1), or a[i:i + n] = the tuple v (n = 2, 4)."""
    if n == 1:
        def put(a, i, v):
            a[i] = v
    elif n == 2:
        def put(a, i, v):
            a[i] = v[0]
            a[i + 1] = v[1]
    else:
        def put(a, i, v):
            a[i] = v[0]
            a[i + 1] = v[1]
            a[i + 2] = v[2]
            a[i + 3] = v[3]
    return device(put)


def zeroed(n, dtype):
    """A device function returning a zeroed per-thread array of n accumulators."""
    def init():
        acc = cuda.local.array(n, dtype)
        for i in range(n):
            acc[i] = 0
        return acc
    return inlined(init)


def fragments(n_a, n_b):
    """A device function returning per-thread arrays for n_a A and n_b B
    fragment registers (all reg_buffers sets)."""
    def frags():
        return cuda.local.array(n_a, u32), cuda.local.array(n_b, u32)
    return inlined(frags)


def generated(name, params, lines, env):
    """A device function from generated source lines (its body): how a loop
    that LLVM would leave rolled, or that would index registers with a
    run-time value, is written out."""
    src = f"def {name}({params}):\n" + "".join(f"    {line}\n" for line in lines)
    exec(compile(src, f"<numgemm {name}>", "exec"), env)
    return device(env[name])


@intrinsic
def divmod32(typingctx, a, b):
    """(a // b, a % b) in unsigned 32-bit arithmetic. Numba widens integer
    arithmetic to 64 bits, and a 64-bit division by a run-time value is a
    called routine."""
    def codegen(context, builder, sig, args):
        x, y = (builder.trunc(v, ir.IntType(32)) if v.type.width > 32 else v for v in args)
        return context.make_tuple(builder, sig.return_type, [builder.udiv(x, y), builder.urem(x, y)])
    return types.UniTuple(u32, 2)(a, b), codegen


@intrinsic
def bits_of(typingctx, v):
    """The 32 bits of an f32, as a uint32 (no conversion): for a b32 store."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return u32(v), codegen


@intrinsic
def sar8(typingctx, v):
    """v >> 8 for an int32, in 32 bits (Numba would widen it to 64)."""
    def codegen(context, builder, sig, args):
        return builder.ashr(args[0], ir.Constant(args[0].type, 8))
    return v(v), codegen


#: config.swizzled_offset (the 128-byte swizzle) as a device function: the
#: copy paths write where the warp routines' readers look.
swizzled = device(swizzled_offset)
