"""The WMMA warp routine (baselines/, through numgemm.primitives): the baseline.

It mirrors numgemm.kernel.warp_mma: the same warp tiles read from the same
shared tiles, with nvcuda::wmma load_matrix_sync / mma_sync / store_matrix_sync
in place of ldmatrix and mma.sync. A warp tile's loads and mmas are each one
call of P.wmma_calls (one WMMA function call per fragment, at constant
offsets), and the store is generated source: a Numba loop around the external
WMMA calls is not unrolled before LTO inlines them, and the fragment indices it
leaves dynamic put the accumulators in local memory. A WMMA fragment's layout
is opaque, so edge tiles are staged through shared memory.
"""

from numba import cuda

from .. import primitives as P
from .regs import ACC, device, fragments, generated, zeroed
from .seams import WarpRoutine


def routine(cfg):
    """cfg's WMMA warp routine: WarpRoutine(init, frags, load, compute, store)."""
    w = P.wmma_functions(cfg.prec.wmma_name)
    om, on, ok = cfg.op_shape
    wm, wn = cfg.warp_tile
    mi, nj = wm // om, wn // on
    na, nb, nacc = w.op.a_regs, w.op.b_regs, w.op.acc_regs
    ksb, pitch_a, pitch_b = cfg.kstep_bytes, cfg.pitch_a, cfg.pitch_b
    shift = 1 if cfg.prec.bits == 16 else 0                    # byte offset -> element
    per_byte = max(1, 8 // cfg.prec.bits)                      # WMMA elements per byte
    lda, ldb = (pitch_a * per_byte) >> shift, (pitch_b * per_byte) >> shift
    layout = cfg.b_layout
    acc_t = ACC[cfg.acc]
    elem = w.op.elem
    env = {"cuda": cuda, "P": P, "w": w, "acc_t": acc_t}

    nfa, nfb = mi * na, nj * nb
    # B's k step moves down K x N rows of 2-byte columns, or along N x K rows.
    kn = layout == "kn"
    b_kstep = ok * pitch_b if kn else ksb
    load_as = P.wmma_calls(w.op.precision, "load_a", [(i * na, (i * om * pitch_a) >> shift, None)
                                                      for i in range(mi)])
    load_bs = P.wmma_calls(w.op.precision, f"load_b_{layout}",
                           [(j * nb, (j * on * (2 if kn else pitch_b)) >> shift, None) for j in range(nj)])
    mmas = P.wmma_calls(w.op.precision, f"mma_{layout}", [((i * nj + j) * nacc, i * na, j * nb)
                                                          for i in range(mi) for j in range(nj)])

    def load(fa, fb, buf, a_tile, b_tile, kk, lane):
        sm = cuda.shared.array(0, elem)
        base = P.shared_addr(sm, 0)
        load_as(P.pointer(fa, buf * nfa), P.pointer(sm, (a_tile - base + kk * ksb) >> shift), lda)
        load_bs(P.pointer(fb, buf * nfb), P.pointer(sm, (b_tile - base + kk * b_kstep) >> shift), ldb)

    def compute(acc, fa, fb, buf):
        mmas(P.pointer(acc, 0), P.pointer(fa, buf * nfa), P.pointer(fb, buf * nfb))

    # Store: a block tile wholly inside C (and C 32-byte aligned) goes straight
    # to C; one that overhangs C goes through shared memory (the pipeline's,
    # free by now) and from there, bounds-checked, to C. The choice is
    # block-uniform, and each fragment has one store call: two call sites would
    # keep the accumulators in local memory. The pitch is chosen once: a choice
    # per fragment was 64 more branches for Numba's passes (2 s of int4_wmma's
    # build) and the same SASS.
    bm, bn, threads, tp = cfg.bm, cfg.bn, cfg.threads, cfg.c_tile_pitch
    store = ["ldc = C.strides[1] >> 2",                   # C holds 4-byte elements
             "c_z = z * (C.strides[0] >> 2)",
             f"inside = c_aligned != 0 and m0 + {bm} <= M and n0 + {bn} <= N",
             "if not inside:",
             "    cuda.syncthreads()",
             "tile = cuda.shared.array(0, acc_t)",
             f"ld = ldc if inside else {tp}"]
    for i in range(mi):
        for j in range(nj):
            store += [
                f"r, c = wr0 + {i * om}, wc0 + {j * on}",
                f"dst = P.pointer(C, c_z + (m0 + r) * ldc + n0 + c) if inside else P.pointer(tile, r * {tp} + c)",
                f"w.store(dst, ld, P.pointer(acc, {(i * nj + j) * nacc}))"]
    store += ["if not inside:",
              "    cuda.syncthreads()",
              f"    for e in range({bm * bn // threads}):",
              f"        r, c = (e * {threads} + tid) // {bn}, (e * {threads} + tid) % {bn}",
              "        if m0 + r < M and n0 + c < N:",
              f"            C[z, m0 + r, n0 + c] = tile[r * {tp} + c]"]

    return WarpRoutine(zeroed(mi * nj * nacc, acc_t),
                       fragments(nfa * cfg.reg_buffers, nfb * cfg.reg_buffers),
                       device(load), device(compute),
                       generated("store", "acc, C, z, m0, n0, wr0, wc0, M, N, tid, c_aligned", store, env))


def rules(cfg):
    """What the WMMA routine needs: 16-column fragments whole in a warp
    tile, sub-byte B column-major."""
    err = []
    if cfg.op == "wmma" and cfg.op_shape[1] == 16 and cfg.warp_tile[1] % 16:
        err.append("WMMA 16x16 needs warp tiles in multiples of 16")
    if cfg.op == "wmma" and cfg.b_layout not in cfg.prec.wmma_b_layouts:
        err.append("sub-byte WMMA takes B col-major (N x K) only")
    return err
