"""numgemm.ptx_twins: BF16's routines are FP16's with bf16 operands, FP8's are
INT8's with e4m3 or e5m2 operands and f32 sums, and the files in ptx_asm/
are what the module writes."""

import re

import pytest

from numgemm import primitives
from numgemm.ptx_twins import TWINS, twins


def test_the_twin_files_are_written_from_their_sources():
    for path, text in twins().items():
        assert path.read_text() == text, f"{path.name} is stale: run python -m numgemm.ptx_twins"


def _sources(twin):
    return [r for r in primitives.ROUTINES.values() if r.path.endswith("/" + twin.source)
            and re.match(twin.routines, r.symbol)]


def test_each_f32_accumulating_fp16_routine_has_its_bf16_twin_and_nothing_else_differs():
    routines = primitives.ROUTINES
    sources = [r for t in TWINS if t.types[1] == "bf16" for r in _sources(t)]
    assert len(sources) == 14                   # mma k8 and k16; wgmma at 5 N, 4 of them also K x N, 3 with A
    #                                             from registers (W4A16)
    for r in sources:
        twin = routines[r.name.replace("f16", "bf16")]
        assert twin.path.endswith("_bf16.ptx") and twin.inputs == r.inputs and twin.output == r.output
        assert twin.body == r.body.replace(".f16.f16", ".bf16.bf16")
        assert re.search(r"SASS:\s*H\w*\.\S+\.F32\.BF16", twin.doc)
    assert "mma_m16n8k16_bf16_bf16" not in routines       # bf16 accumulates in f32 only


@pytest.mark.parametrize("typ", ["e4m3", "e5m2"])
def test_int8s_k32_routines_have_fp8_twins_with_f32_sums(typ):
    """mma m16n8k32 and wgmma at N = 128, 256 and swap's 16: the same operands,
    the sums' registers f32, the instruction's types, wgmma's imm-scale-a and -b."""
    routines = primitives.ROUTINES
    sources = [r for t in TWINS if typ in t.types for r in _sources(t)]
    assert sorted(r.name for r in sources) == ["mma_m16n8k32_s8_s32", "wgmma_m64n128k32_s32_s8_s8",
                                               "wgmma_m64n16k32_s32_s8_s8", "wgmma_m64n256k32_s32_s8_s8"]
    for r in sources:
        twin = routines[r.name.replace("_s8", f"_{typ}").replace("_s32", "_f32")]
        assert twin.path.endswith("_fp8.ptx") and [op.regs for op in twin.inputs] == [op.regs for op in r.inputs]
        assert {op.ptxtype for op in twin.inputs if op.name in ("c", "d")} <= {"f32"} and twin.output.ptxtype == "f32"
        body = r.body.replace(".s32.s8.s8", f".f32.{typ}.{typ}").replace(f"{typ}.s32", f"{typ}.f32")
        body = body.replace("%a, %b, %p;", "%a, %b, %p, 1, 1;")
        assert twin.body == body
        assert re.search(rf"SASS: Q\w*\.\S+\.F32\.{typ.upper()}\.{typ.upper()}", twin.doc)
