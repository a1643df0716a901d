"""Copy the package into DIR with one part of the INT4 widening producer cut
out, to time what that part costs (the kernels' results are then wrong:
variants.py prints FAIL beside their times).

    python scripts/probe_widen.py /tmp/probe_noload noload
    cd /tmp/probe_noload && PYTHONPATH=/tmp/probe_noload NUMGEMM_CACHE_DIR=/tmp/cache_noload \\
        python <repo>/scripts/variants.py 8192,4096 int4_wgmma_unpack_s8_ld: int4_wgmma_unpack_s8_ld_pw:

Probes: nofence (no fence.proxy.async before the producer arrives), nostore
(the producer lands nothing in the stages), noalu (the s4 words stored as
they came, not widened), noload (no ld.global: the registers keep whatever
they held), nomma (the consumers issue no wgmma), lds (each ld.global a
ld.shared of the first 16 KB instead); ldnc, ldweak, ldnc256, ldweak256
(ld.global.nc / weak, with or without the L2::256B prefetch, for .cg).
"""

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOADS = {"ldnc": "ld.global.nc.L1::no_allocate.v4.b32", "ldweak": "ld.global.L1::no_allocate.v4.b32",
         "ldnc256": "ld.global.nc.L1::no_allocate.L2::256B.v4.b32",
         "ldweak256": "ld.global.L1::no_allocate.L2::256B.v4.b32"}
CG = "    @%load ld.global.cg.v4.b32 {%r0, %r1, %r2, %r3}, [%src];"
EDITS = {
    "nofence": [("numgemm/kernel/copy_widen_ring.py", "        ptx.fence_proxy_async()             #", "        pass  #")],
    "nostore": [("numgemm/kernel/copy_widen_ring.py", "        threads.land(st.copies, off)\n", "")],
    "noalu": [("numgemm/kernel/copy_widen.py", "    widen = ptx.unpack_s4_s8x16 if cfg.scaled else ptx.unpack_s4_s8\n",
               "    widen = device(lambda w: (w, w ^ u32(1)))\n"),
              ("numgemm/kernel/copy_widen.py", "from .regs import device, getter, setter",
               "from .regs import device, getter, setter, u32")],
    "noload": [("numgemm/kernel/skeleton_ws.py", 'f"    issue(stage(c{i}, {i}, o, False), -1)"', 'f"    stage(c{i}, {i}, o, False)"'),
               ("numgemm/kernel/skeleton_ws.py", 'f"            issue(stage(c{i}, kt + {i + sets}, o, False), -1)"',
                'f"            stage(c{i}, kt + {i + sets}, o, False)"')],
    "nomma": [("numgemm/kernel/warp_wgmma.py", 'lines.append("commit()")',
               'lines[:] = [x for x in lines if "mma0(" not in x]; lines.append("commit()")')],
    "lds": [("ptx_asm/cp_async.ptx", CG, "    cvt.u32.u64 %lo, %src;\n    and.b32 %lo, %lo, 16368;\n"
             "    @%load ld.shared.v4.b32 {%r0, %r1, %r2, %r3}, [%lo];"),
            ("ptx_asm/cp_async.ptx", ".reg .b32 %valid, %r<4>;\n    .reg .pred %load;\n    ld.param.b64 %src, [src];\n"
             "    ld.param.b32 %valid, [valid];\n    mov.b32 %r0, 0;\n    mov.b32 %r1, 0;\n    mov.b32 %r2, 0;\n"
             "    mov.b32 %r3, 0;\n    setp.ne.b32 %load, %valid, 0;\n" + CG,
             ".reg .b32 %valid, %r<4>, %lo;\n    .reg .pred %load;\n    ld.param.b64 %src, [src];\n"
             "    ld.param.b32 %valid, [valid];\n    mov.b32 %r0, 0;\n    mov.b32 %r1, 0;\n    mov.b32 %r2, 0;\n"
             "    mov.b32 %r3, 0;\n    setp.ne.b32 %load, %valid, 0;\n" + CG)],
    **{name: [("ptx_asm/cp_async.ptx", "@%load ld.global.cg.v4.b32", "@%load " + ld)] for name, ld in LOADS.items()},
}


def main(dst, probe):
    dst = Path(dst)
    shutil.rmtree(dst, ignore_errors=True)
    for d in ("numgemm", "ptx_asm", "baselines"):
        shutil.copytree(REPO / d, dst / d)
    for rel, old, new in reversed(EDITS[probe]):      # lds: declare %lo, then replace the load
        path = dst / rel
        text = path.read_text()
        if old not in text:
            sys.exit(f"{probe}: {rel} no longer has the line this probe cuts")
        path.write_text(text.replace(old, new, 1))
    print(f"probe {probe} in {dst}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in EDITS:
        sys.exit(f"usage: probe_widen.py DIR {{{','.join(EDITS)}}}")
    main(*sys.argv[1:])
