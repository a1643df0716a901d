"""numgemm.primitives: every PTX routine and WMMA function in a one-warp kernel.

Offline (CI, no GPU): each kernel is built for sm_89 and its SASS holds the
routine's instruction; the inline linkage leaves no CALL, LDL or STL, the link
linkage a CALL. On a GPU (marker gpu): each kernel's result against NumPy on
fresh random operands, exact for integers, in both linkages.
"""

from dataclasses import dataclass

import numpy as np
import pytest
from numba import cuda, types

from numgemm import primitives as P
from numgemm.inspect import build, s4_note

u32, i32, f32 = types.uint32, types.int32, types.float32
LANE = np.arange(32)
G, T = LANE >> 2, LANE & 3


def _compile(src, **env):
    """A kernel from generated source: tuple arities differ per routine."""
    scope = {"cuda": cuda, "P": P, **env}
    exec(src, scope)
    return scope["kernel"]


def _tup(name, n):
    return f"{name}[l, 0]" if n == 1 else "(" + ", ".join(f"{name}[l, {i}]" for i in range(n)) + ",)"


# --- mma.sync ------------------------------------------------------------------

@dataclass(frozen=True)
class MmaCase:
    routine: str
    kind: str        # f16, s8, s4
    k: int
    na: int          # A registers
    nb: int
    acc: str         # f32, s32, f16 (f16x2 pairs)
    sass: str

    @property
    def bits(self):
        return {"f16": 16, "s8": 8, "s4": 4}[self.kind]

    @property
    def nc(self):
        return 2 if self.acc == "f16" else 4


MMA = [
    MmaCase("mma_m16n8k8_f16_f32", "f16", 8, 2, 1, "f32", "HMMA.1688.F32"),
    MmaCase("mma_m16n8k16_f16_f32", "f16", 16, 4, 2, "f32", "HMMA.16816.F32"),
    MmaCase("mma_m16n8k16_f16_f16", "f16", 16, 4, 2, "f16", "HMMA.16816.F16"),
    MmaCase("mma_m16n8k16_s8_s32", "s8", 16, 2, 1, "s32", "IMMA.16816.S8.S8"),
    MmaCase("mma_m16n8k32_s8_s32", "s8", 32, 4, 2, "s32", "IMMA.16832.S8.S8"),
    MmaCase("mma_m16n8k32_s4_s32", "s4", 32, 2, 1, "s32", "IMMA.16832.S4.S4"),
    MmaCase("mma_m16n8k64_s4_s32", "s4", 64, 4, 2, "s32", "IMMA.16864.S4.S4"),
]


def mma_kernel(case, ns):
    nc = case.nc
    src = f"""
def kernel(A, B, C, D):
    l = cuda.laneid
    d = fn({_tup('A', case.na)}, {_tup('B', case.nb)}, {_tup('C', nc)})
""" + "".join(f"    D[l, {i}] = d[{i}]\n" for i in range(nc))
    return _compile(src, fn=getattr(ns, case.routine))


def mma_argtypes(case):
    c = {"f32": f32, "s32": i32, "f16": u32}[case.acc]
    return (u32[:, ::1], u32[:, ::1], c[:, ::1], c[:, ::1])


def _bits(values, kind):
    """Element values -> their unsigned bit patterns."""
    if kind == "f16":
        return values.astype(np.float16).view(np.uint16).astype(np.int64)
    return values.astype(np.int64) & ((1 << {"s8": 8, "s4": 4}[kind]) - 1)


def _pack(bits, width):
    """[..., e] element bit patterns -> [...] uint32, element 0 lowest."""
    shifts = np.arange(bits.shape[-1]) * width
    return (bits << shifts).sum(-1).astype(np.uint32)


def mma_fragments(case, a, b):
    """Per-lane A and B registers in the layouts documented in mma.ptx."""
    e = 32 // case.bits
    abits, bbits = _bits(a, case.kind), _bits(b, case.kind)
    fa = np.empty((32, case.na), np.uint32)
    for i in range(case.na):
        rows, k0 = G + 8 * (i % 2), (i // 2) * (case.k // 2) + T * e
        fa[:, i] = _pack(np.stack([abits[rows, k0 + j] for j in range(e)], -1), case.bits)
    fb = np.empty((32, case.nb), np.uint32)
    for i in range(case.nb):
        k0 = i * (case.k // case.nb) + T * e
        fb[:, i] = _pack(np.stack([bbits[k0 + j, G] for j in range(e)], -1), case.bits)
    return fa, fb


def c_coords(i, nc):
    """Rows and first column of accumulator register i for every lane."""
    if nc == 2:                       # f16x2: registers cover rows g, g+8
        return G + 8 * i, 2 * T
    return G + 8 * (i // 2), 2 * T + (i % 2)


def random_operand(rng, kind, shape):
    if kind == "f16":
        return rng.standard_normal(shape).astype(np.float16)
    lo = {"s8": -128, "s4": -8}[kind]
    return rng.integers(lo, -lo, shape)


def run_mma(case, ns, rng):
    a = random_operand(rng, case.kind, (16, case.k))
    b = random_operand(rng, case.kind, (case.k, 8))
    fa, fb = mma_fragments(case, a, b)
    if case.acc == "s32":
        c = rng.integers(-10**6, 10**6, (16, 8))
        ref = a.astype(np.int64) @ b.astype(np.int64) + c
    else:
        c = rng.standard_normal((16, 8)).astype(np.float16 if case.acc == "f16" else np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64) + c
    fc = np.empty((32, case.nc), {"f32": np.float32, "s32": np.int32, "f16": np.uint32}[case.acc])
    for i in range(case.nc):
        rows, col = c_coords(i, case.nc)
        if case.acc == "f16":
            fc[:, i] = _pack(np.stack([_bits(c[rows, col + j], "f16") for j in (0, 1)], -1), 16)
        else:
            fc[:, i] = c[rows, col]
    d = cuda.to_device(np.full_like(fc, 0x7FC00000 if fc.dtype != np.int32 else -(2**31)))
    cuda.jit(mma_kernel(case, ns))[1, 32](cuda.to_device(fa), cuda.to_device(fb), cuda.to_device(fc), d)
    fd = d.copy_to_host()
    out = np.empty((16, 8))
    for i in range(case.nc):
        rows, col = c_coords(i, case.nc)
        if case.acc == "f16":
            halves = np.stack([fd[:, i] & 0xFFFF, fd[:, i] >> 16], -1).astype(np.uint16)
            out[rows, col], out[rows, col + 1] = halves.view(np.float16).T
        else:
            out[rows, col] = fd[:, i]
    if case.acc == "s32":
        np.testing.assert_array_equal(out.astype(np.int64), ref)
    else:
        tol = 2e-3 if case.acc == "f16" else 1e-5
        assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < tol


# --- ldmatrix --------------------------------------------------------------------

LDMATRIX = [(n, trans) for n in (1, 2, 4) for trans in (False, True)]
SLOTS = 64    # 16-byte rows of shared memory; lanes point at a permutation of them


def ldmatrix_name(n, trans):
    return f"ldmatrix_x{n}" + ("_trans" if trans else "")


def ldmatrix_kernel(n, trans, ns):
    src = f"""
def kernel(src, slot, out):
    sm = cuda.shared.array({SLOTS * 4}, uint32)
    l = cuda.laneid
    for i in range({SLOTS * 4 // 32}):
        sm[i * 32 + l] = src[i * 32 + l]
    cuda.syncwarp()
    r = fn(P.shared_addr(sm, slot[l] * 4))
""" + ("    out[l, 0] = r\n" if n == 1 else "".join(f"    out[l, {i}] = r[{i}]\n" for i in range(n)))
    return _compile(src, fn=getattr(ns, ldmatrix_name(n, trans)), uint32=u32)


def run_ldmatrix(n, trans, ns, rng):
    rows = rng.integers(0, 2**16, (SLOTS, 8), dtype=np.uint16)
    slot = rng.permutation(SLOTS)[:32].astype(np.int32)
    out = cuda.to_device(np.full((32, n), 0xDEADBEEF, np.uint32))
    ldmatrix_kernel(n, trans, ns)
    cuda.jit(ldmatrix_kernel(n, trans, ns))[1, 32](
        cuda.to_device(rows.view(np.uint32).ravel()), cuda.to_device(slot), out)
    got = out.copy_to_host()
    for i in range(n):
        m = rows[slot[8 * i: 8 * i + 8]].astype(np.uint32)     # matrix i, 8 x 8
        r, c = (2 * T, G) if trans else (G, 2 * T)
        lo, hi = (m[r, c], m[r + 1, c]) if trans else (m[r, c], m[r, c + 1])
        np.testing.assert_array_equal(got[:, i], lo | (hi << 16), err_msg=f"matrix {i}")


# --- cp.async ---------------------------------------------------------------------

CP_ASYNC = [(cache, policy) for cache in ("ca", "cg")
            for policy in (None, "evict_first", "evict_last")] + [("b16", None), ("v4ca", None), ("v4cg", None)]


def cp_async_kernel(cache, policy, ns):
    """Lane l copies 16 bytes, or writes 16 zeros where valid[l] == 0; cache
    "b16": the scalar 2-byte copy, into the low half of the lane's first word;
    "v4ca" / "v4cg": through registers (ld.global.v4 + st.shared.v4)."""
    commit, wait = ns.cp_async_commit, ns.cp_async_wait_0
    if cache == "b16":
        copy = ns.copy_b16
    elif cache.startswith("v4"):
        ld, st = getattr(ns, f"ld_global_{cache[2:]}_v4"), ns.st_shared_v4
        copy = cuda.jit(device=True, inline="always")(lambda dst, src, valid: st(dst, ld(src, valid)))
    elif policy:
        hinted, make_policy = getattr(ns, f"cp_async_{cache}_hint"), getattr(ns, f"policy_{policy}")
        copy = cuda.jit(device=True, inline="always")(
            lambda dst, src, valid: hinted(dst, src, valid, make_policy()))
    else:
        copy = getattr(ns, f"cp_async_{cache}")

    def kernel(src, valid, out):
        sm = cuda.shared.array(128, u32)
        l = cuda.laneid
        for i in range(4):
            sm[l * 4 + i] = 0xDEADBEEF
        cuda.syncwarp()
        copy(P.shared_addr(sm, l * 4), P.global_addr(src, l * 4), valid[l])
        commit()
        wait()
        cuda.syncwarp()
        for i in range(4):
            out[l * 4 + i] = sm[l * 4 + i]
    return kernel


def run_cp_async(cache, policy, ns, rng):
    src = rng.integers(1, 2**32, 128, dtype=np.uint32)
    valid = rng.integers(0, 2, 32).astype(np.int32)
    valid[:3] = (1, 0, 7)                                        # any nonzero copies
    out = cuda.to_device(np.zeros(128, np.uint32))
    cuda.jit(cp_async_kernel(cache, policy, ns))[1, 32](cuda.to_device(src), cuda.to_device(valid), out)
    want = src.reshape(32, 4) * (valid[:, None] != 0)             # zero-filled where not valid
    if cache == "b16":                                           # 2 bytes; the rest untouched
        low = want[:, 0] & 0xFFFF
        want = np.full((32, 4), 0xDEADBEEF, np.uint32)
        want[:, 0] = 0xDEAD0000 | low
    np.testing.assert_array_equal(out.copy_to_host().reshape(32, 4), want)


def cp_wait_kernel(n, ns):
    wait = getattr(ns, f"cp_async_wait_{n}")
    copy, commit = ns.cp_async_cg, ns.cp_async_commit

    def kernel(src, out):
        sm = cuda.shared.array(128 * 4, u32)
        l = cuda.laneid
        for g in range(n + 1):                    # n + 1 groups in flight
            copy(P.shared_addr(sm, g * 128 + l * 4), P.global_addr(src, g * 128 + l * 4), 1)
            commit()
        wait()                                    # leaves at most n pending: group 0 is done
        cuda.syncwarp()
        for i in range(4):
            out[l * 4 + i] = sm[l * 4 + i]
    return kernel


# --- s4 -> s8 -----------------------------------------------------------------------

UNPACKS = {"unpack_s4_s8": (1, 7), "unpack_s4_s8x16": (16, 3)}   # routine: (scale, ALU instructions)


def unpack_kernel(ns, routine="unpack_s4_s8"):
    unpack = getattr(ns, routine)

    def kernel(x, out):
        i = cuda.grid(1)
        if i < x.size:
            r = unpack(x[i])
            out[i, 0] = r[0]
            out[i, 1] = r[1]
    return kernel


def unpack_reference(words, scale=1):
    nib = (words[:, None] >> (4 * np.arange(8))) & 0xF
    vals = (scale * np.where(nib >= 8, nib - 16, nib)).astype(np.int8)          # e0..e7
    return np.stack([vals[:, 0::2], vals[:, 1::2]], 1).view(np.uint32)[..., 0]


# --- packing and dp4a ---------------------------------------------------------------

def scalar_kernel(ns, routine):
    """out[i] = routine applied to row i of x (its arity: 2, tuple of 4, or 3)."""
    fn = getattr(ns, routine)
    if routine == "pack_b16x2":
        def kernel(x, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = fn(x[i, 0], x[i, 1])
    elif routine == "pack_b8x4":
        def kernel(x, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = fn((x[i, 0], x[i, 1], x[i, 2], x[i, 3]))
    else:
        def kernel(x, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = fn(x[i, 0], x[i, 1], x[i, 2])
    return kernel


def scalar_reference(routine, x):
    if routine == "pack_b16x2":
        return (x[:, 0] & 0xFFFF) | ((x[:, 1] & 0xFFFF) << 16)
    if routine == "pack_b8x4":
        return sum((x[:, j] & 0xFF) << (8 * j) for j in range(4))
    a, b = (x[:, j].astype(np.uint32).view(np.int8).reshape(-1, 4).astype(np.int64) for j in (0, 1))
    return ((a * b).sum(1) + x[:, 2].astype(np.uint32).view(np.int32)).astype(np.int32).view(np.uint32)


SCALARS = [("pack_b16x2", "PRMT"), ("pack_b8x4", "PRMT"), ("dp4a_s8", "IDP.4A.S8.S8")]


def cvt_half_kernel(ns):
    """out[i] = x[i, 0] and x[i, 1] rounded to an f16 pair, x[i, 0] low."""
    cvt = ns.cvt_f16x2_f32

    def kernel(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = cvt(x[i, 0], x[i, 1])
    return kernel


# --- WMMA ---------------------------------------------------------------------------

WMMA_CASES = [("f16", "nk"), ("f16", "kn"), ("s8", "nk"), ("s8", "kn"), ("s4", "nk")]
WMMA_SASS = {"f16": "HMMA.16816.F32", "s8": "IMMA.16816.S8.S8", "s4": "IMMA.8832.S4.S4"}


def wmma_kernel(precision, layout):
    w = P.wmma_functions(precision)
    m, n, k = w.op.shape
    load_b, mma = getattr(w, f"load_b_{layout}"), getattr(w, f"mma_{layout}")
    elem = {"f16": types.float16, "s8": types.int8, "s4": types.uint8}[precision]
    acc_t = f32 if precision == "f16" else i32
    ka = k // 2 if precision == "s4" else k          # stored elements (bytes for s4) per row
    na, nb, nacc = w.op.a_regs, w.op.b_regs, w.op.acc_regs
    ldb = n if layout == "kn" else k
    size_a, size_b = m * ka, n * ka         # shared array sizes must be constants

    def kernel(a, b, c):
        sa = cuda.shared.array(size_a, elem)
        sb = cuda.shared.array(size_b, elem)
        lane = cuda.laneid
        for i in range(lane, size_a, 32):
            sa[i] = a[i]
        for i in range(lane, size_b, 32):
            sb[i] = b[i]
        cuda.syncwarp()
        fa = cuda.local.array(na, u32)
        fb = cuda.local.array(nb, u32)
        acc = cuda.local.array(nacc, acc_t)
        for i in range(nacc):
            acc[i] = 0
        w.load_a(P.pointer(fa, 0), P.pointer(sa, 0), k)
        load_b(P.pointer(fb, 0), P.pointer(sb, 0), ldb)
        mma(P.pointer(acc, 0), P.pointer(fa, 0), P.pointer(fb, 0))
        mma(P.pointer(acc, 0), P.pointer(fa, 0), P.pointer(fb, 0))    # accumulates
        w.store(P.pointer(c, 0), n, P.pointer(acc, 0))

    return kernel, (elem[::1], elem[::1], acc_t[::1])


def run_wmma(precision, layout, rng):
    from numgemm.quant import pack_int4

    m, n, k = P.WMMA[precision].shape
    kind = {"f16": "f16", "s8": "s8", "s4": "s4"}[precision]
    a = random_operand(rng, kind, (m, k))
    bt = random_operand(rng, kind, (n, k))                       # B as N x K
    b_store = bt.T.copy() if layout == "kn" else bt
    if precision == "s4":
        a_dev, b_dev = pack_int4(a).ravel(), pack_int4(b_store).ravel()
    else:
        dt = np.float16 if precision == "f16" else np.int8
        a_dev, b_dev = a.astype(dt).ravel(), b_store.astype(dt).ravel()
    c = cuda.to_device(np.full(m * n, -12345, np.float32 if precision == "f16" else np.int32))
    kernel, _ = wmma_kernel(precision, layout)
    cuda.jit(kernel)[1, 32](cuda.to_device(a_dev), cuda.to_device(b_dev), c)
    got = c.copy_to_host().reshape(m, n)
    if precision == "f16":
        ref = 2 * (a.astype(np.float64) @ bt.T.astype(np.float64))
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5
    else:
        np.testing.assert_array_equal(got, 2 * (a.astype(np.int64) @ bt.T.astype(np.int64)))


# --- offline: SASS for sm_89 (CI) ------------------------------------------------------

def offline_cases():
    """(id, kernel factory(ns), argtypes, SASS prefix that must appear)."""
    for c in MMA:
        yield c.routine, lambda ns, c=c: mma_kernel(c, ns), mma_argtypes(c), c.sass
    for n, trans in LDMATRIX:
        sass = f"LDSM.16.M{'T' if trans else ''}88" + ("" if n == 1 else f".{n}")
        yield (ldmatrix_name(n, trans), lambda ns, n=n, t=trans: ldmatrix_kernel(n, t, ns),
               (u32[::1], i32[::1], u32[:, ::1]), sass)
    for cache, policy in CP_ASYNC:
        yield (f"cp_async_{cache}_{policy}", lambda ns, c=cache, p=policy: cp_async_kernel(c, p, ns),
               (u32[::1], i32[::1], u32[::1]),
               {"cg": "LDGSTS.E.BYPASS", "ca": "LDGSTS.E.", "b16": "STS.U16",
                "v4ca": "LDG.E.128.STRONG.SM", "v4cg": "LDG.E.128.STRONG.GPU"}[cache])
    for n in range(4):
        yield (f"cp_async_wait_{n}", lambda ns, n=n: cp_wait_kernel(n, ns),
               (u32[::1], u32[::1]), "DEPBAR.LE")
    for routine in UNPACKS:
        yield routine, lambda ns, r=routine: unpack_kernel(ns, r), (u32[::1], u32[:, ::1]), "LOP3"
    for routine, sass in SCALARS:
        yield routine, lambda ns, r=routine: scalar_kernel(ns, r), (u32[:, ::1], u32[::1]), sass
    yield "cvt_f16x2_f32", cvt_half_kernel, (f32[:, ::1], u32[::1]), "F2FP.F16.F32.PACK_AB"


OFFLINE = list(offline_cases())


@pytest.mark.builds
@pytest.mark.parametrize("linkage", P.LINKAGES)
@pytest.mark.parametrize("name,factory,argtypes,sass", OFFLINE, ids=[c[0] for c in OFFLINE])
def test_sass_sm89(name, factory, argtypes, sass, linkage):
    b = build(factory(P.routines(linkage)), argtypes, "sm_89")
    assert b.count(sass) >= 1, f"{name}: no {sass} in\n{b.sass}"
    if linkage == "inline":
        assert b.calls == 0 and b.count("LDL") == 0 and b.count("STL") == 0
        assert b.local_bytes == 0
    else:
        assert b.calls >= 1


@pytest.mark.builds
def test_sass_cache_operator_sm89():
    """.ca keeps the line in L1 (no BYPASS), .cg bypasses it."""
    ns = P.routines("inline")
    ca = build(cp_async_kernel("ca", None, ns), (u32[::1], i32[::1], u32[::1]), "sm_89")
    cg = build(cp_async_kernel("cg", None, ns), (u32[::1], i32[::1], u32[::1]), "sm_89")
    assert ca.count("LDGSTS") == 1 and ca.count("LDGSTS.E.BYPASS") == 0
    assert cg.count("LDGSTS.E.BYPASS") == 1


@pytest.mark.builds
def test_wait_group_immediate_sm89():
    ns = P.routines("inline")
    for n in range(4):
        b = build(cp_wait_kernel(n, ns), (u32[::1], u32[::1]), "sm_89")
        assert f"DEPBAR.LE SB0, 0x{n}" in b.sass


def test_setmaxnreg_takes_its_count_in_place_of_the_files():
    """setmaxnreg(direction, count): the ptx_asm routine with the count as its
    immediate (one routine a count, the same object each time); counts ptxas
    would refuse are refused first."""
    dec = P.setmaxnreg("dec", 128)
    assert dec is P.setmaxnreg("dec", 128) and dec is not P.setmaxnreg("dec", 120)
    assert P.ROUTINES["setmaxnreg_inc_232"].body == "setmaxnreg.inc.sync.aligned.u32 232;\n"
    for bad in (("dec", 100), ("inc", 16), ("inc", 264), ("up", 128)):
        with pytest.raises(ValueError, match="setmaxnreg: direction 'dec' or 'inc' and a count in 24..256"):
            P.setmaxnreg(*bad)


@pytest.mark.builds
@pytest.mark.parametrize("routine", UNPACKS)
def test_unpack_is_a_handful_of_alu_instructions(routine):
    """The widening costs what its header says: seven ALU instructions, three scaled."""
    ns = P.routines("inline")

    def copy_kernel(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i, 0] = x[i]
            out[i, 1] = x[i] + 1
    sig = (u32[::1], u32[:, ::1])
    with_unpack = build(unpack_kernel(ns, routine), sig, "sm_89")
    plain = build(copy_kernel, sig, "sm_89")
    extra = len(with_unpack.instructions) - len(plain.instructions)
    assert extra <= UNPACKS[routine][1], f"{routine} added {extra} instructions"


@pytest.mark.builds
@pytest.mark.parametrize("target", ["sm_89", "sm_90"])
@pytest.mark.parametrize("precision,layout", WMMA_CASES)
def test_wmma_sass(precision, layout, target):
    kernel, argtypes = wmma_kernel(precision, layout)
    b = build(kernel, argtypes, target)
    assert b.local_bytes == 0 and b.count("LDL") == 0 and b.count("STL") == 0
    if precision == "s4" and target == "sm_90":
        # Hopper has no s4 tensor-core instruction: ptxas emulates it with s8
        # IMMA behind a call. A fact about the target, which numgemm reports.
        assert b.count("IMMA.8832.S4") == 0 and b.count("IMMA") >= 1
        assert "no native s4" in s4_note(target)
    else:
        assert b.count(WMMA_SASS[precision].split(".S4")[0]) >= 1
        assert b.calls == 0, "LTO should have inlined the WMMA function"


@pytest.mark.builds
@pytest.mark.parametrize("routine", ["mma_m16n8k32_s4_s32", "mma_m16n8k64_s4_s32"])
def test_s4_mma_on_sm90_is_not_native(routine):
    case = next(c for c in MMA if c.routine == routine)
    b = build(mma_kernel(case, P.routines("inline")), mma_argtypes(case), "sm_90")
    assert b.count("IMMA.16864.S4") == 0 and b.count("IMMA.16832.S4") == 0
    assert b.count("IMMA") >= 1                        # the emulation's s8 IMMA
    native = build(mma_kernel(case, P.routines("inline")), mma_argtypes(case), "sm_89")
    assert native.count(case.sass) == 1
    assert "no native s4" in s4_note("sm_90") and "native" in s4_note("sm_89")


# --- on the GPU ------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("linkage", P.LINKAGES)
@pytest.mark.parametrize("case", MMA, ids=lambda c: c.routine)
def test_mma_gpu(case, linkage, rng):
    run_mma(case, P.routines(linkage), rng)


@pytest.mark.gpu
@pytest.mark.parametrize("linkage", P.LINKAGES)
@pytest.mark.parametrize("n,trans", LDMATRIX)
def test_ldmatrix_gpu(n, trans, linkage, rng):
    run_ldmatrix(n, trans, P.routines(linkage), rng)


@pytest.mark.gpu
@pytest.mark.parametrize("linkage", P.LINKAGES)
@pytest.mark.parametrize("cache,policy", CP_ASYNC)
def test_cp_async_gpu(cache, policy, linkage, rng):
    run_cp_async(cache, policy, P.routines(linkage), rng)


@pytest.mark.gpu
@pytest.mark.parametrize("linkage", P.LINKAGES)
@pytest.mark.parametrize("n", range(4))
def test_cp_async_wait_gpu(n, linkage, rng):
    src = rng.integers(0, 2**32, 512, dtype=np.uint32)
    out = cuda.to_device(np.zeros(128, np.uint32))
    cuda.jit(cp_wait_kernel(n, P.routines(linkage)))[1, 32](cuda.to_device(src), out)
    np.testing.assert_array_equal(out.copy_to_host(), src[:128])


@pytest.mark.gpu
@pytest.mark.parametrize("linkage", P.LINKAGES)
@pytest.mark.parametrize("routine", UNPACKS)
def test_unpack_gpu(linkage, routine, rng):
    words = rng.integers(0, 2**32, 4096, dtype=np.uint32)
    words[:3] = (0, 0xFFFFFFFF, 0x89ABCDEF)
    out = cuda.to_device(np.full((words.size, 2), 0xDEADBEEF, np.uint32))
    cuda.jit(unpack_kernel(P.routines(linkage), routine))[words.size // 128, 128](cuda.to_device(words), out)
    np.testing.assert_array_equal(out.copy_to_host(), unpack_reference(words, UNPACKS[routine][0]))


@pytest.mark.gpu
@pytest.mark.parametrize("linkage", P.LINKAGES)
@pytest.mark.parametrize("routine", [r for r, _ in SCALARS])
def test_scalar_routines_gpu(routine, linkage, rng):
    x = rng.integers(0, 2**32, (1024, 4), dtype=np.uint64).astype(np.uint32)
    out = cuda.to_device(np.zeros(1024, np.uint32))
    cuda.jit(scalar_kernel(P.routines(linkage), routine))[8, 128](cuda.to_device(x), out)
    np.testing.assert_array_equal(out.copy_to_host(), scalar_reference(routine, x.astype(np.uint64)).astype(np.uint32))


@pytest.mark.gpu
@pytest.mark.parametrize("linkage", P.LINKAGES)
def test_cvt_half_rounds_as_numpy(linkage, rng):
    """To nearest, ties to even (halfway values drawn on purpose), subnormal
    halves kept, past 65504 inf, NaN stays NaN: as NumPy's float32 -> float16."""
    h = rng.standard_normal(512).astype(np.float16)
    x = np.concatenate([rng.standard_normal(2048) * 10.0 ** rng.integers(-9, 6, 2048),
                        h.astype(np.float32) + np.spacing(h).astype(np.float32) / 2,     # halfway
                        [65504, 65520, 1e9, -1e9, 6e-8, 3e-8, -0.0, np.nan]]).astype(np.float32)
    x = x[: x.size // 2 * 2].reshape(-1, 2)
    out = cuda.to_device(np.zeros(len(x), np.uint32))
    cuda.jit(cvt_half_kernel(P.routines(linkage)))[(len(x) + 127) // 128, 128](cuda.to_device(x), out)
    got = out.copy_to_host().view(np.float16).reshape(-1, 2)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, x.astype(np.float16))


@pytest.mark.gpu
@pytest.mark.parametrize("precision,layout", WMMA_CASES)
def test_wmma_gpu(precision, layout, rng):
    run_wmma(precision, layout, rng)
