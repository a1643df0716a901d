"""Every routine in ptx_asm/ is real PTX: ptxas assembles each file alone."""

import re

import pytest

from numgemm.primitives import ROUTINES
from numgemm.toolchain import PTX_DIR, TARGETS, run_tool

PTX_FILES = sorted(PTX_DIR.glob("*.ptx"))


def _file_target(path):
    """(oldest sm number, arch suffix) of a file's .target line."""
    m = re.search(r"^\.target sm_(\d+)(a?)", path.read_text(), re.M)
    return int(m.group(1)), m.group(2)


# Each file on every target from its own .target up (tma.ptx: sm_90); an
# arch-specific file (wgmma.ptx: sm_90a) on its own target only.
ASSEMBLE = [(p, t + _file_target(p)[1]) for p in PTX_FILES for t in TARGETS
            if int(t[3:]) >= _file_target(p)[0] and (not _file_target(p)[1] or int(t[3:]) == _file_target(p)[0])]


@pytest.mark.parametrize("path,target", ASSEMBLE, ids=[f"{p.name}-{t}" for p, t in ASSEMBLE])
def test_ptxas_assembles(path, target, tmp_path):
    run_tool("ptxas", f"-arch={target}", "-c", str(path), "-o", str(tmp_path / "out.o"))
    assert (tmp_path / "out.o").stat().st_size > 0


def test_every_routine_is_documented():
    for r in ROUTINES.values():
        opcode = re.match(r"[a-z0-9]+", r.doc).group(0)
        assert opcode in r.body, f"{r.name}: header does not start with its instruction"
        assert r.symbol == "numgemm_" + r.name


def test_routines_found():
    expected = {
        "mma_m16n8k8_f16_f32", "mma_m16n8k16_f16_f32", "mma_m16n8k16_f16_f16",
        "mma_m16n8k16_s8_s32", "mma_m16n8k32_s8_s32", "mma_m16n8k32_s4_s32",
        "mma_m16n8k64_s4_s32", "unpack_s4_s8", "cp_async_commit",
        "policy_evict_first", "policy_evict_last", "pack_b16x2", "pack_b8x4", "cvt_f16x2_f32", "dp4a_s8",
        "st_global_v2_f32", "st_global_v2_s32", "st_global_b32", "st_global_v2_b32",
        *(f"ldmatrix_{n}{t}" for n in ("x1", "x2", "x4") for t in ("", "_trans")),
        *(f"cp_async_{c}{h}" for c in ("ca", "cg") for h in ("", "_hint")),
        *(f"cp_async_wait_{n}" for n in range(4)),
        "mbarrier_init", "mbarrier_init_fence", "mbarrier_arrive_expect_tx", "mbarrier_wait",
        "tma_load_3d", "tensormap_acquire", "mbarrier_arrive",
        "wgmma_desc_sw128", "wgmma_desc_sw64", "wgmma_fence", "wgmma_commit", "wgmma_wait_0", "wgmma_wait_1",
        "wgmma_m64n32k16_f32_f16_f16_tb", "wgmma_m64n192k16_f32_f16_f16_tb",
        "wgmma_m64n256k16_f32_f16_f16", "wgmma_m64n256k16_f32_f16_f16_tb", "wgmma_m64n256k32_s32_s8_s8",
        "setmaxnreg_dec_40", "setmaxnreg_inc_232",
    }
    assert expected <= set(ROUTINES)
