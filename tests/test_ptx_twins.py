"""numgemm.ptx_twins: BF16's routines are FP16's with bf16 operands, and the
files in ptx_asm/ are what the module writes."""

import re

from numgemm import primitives
from numgemm.ptx_twins import SOURCES, twins


def test_the_twin_files_are_written_from_their_sources():
    for path, text in twins().items():
        assert path.read_text() == text, f"{path.name} is stale: run python -m numgemm.ptx_twins"


def test_each_f32_accumulating_fp16_routine_has_its_bf16_twin_and_nothing_else_differs():
    routines = primitives.ROUTINES
    sources = [r for r in routines.values() if any(w.match(r.symbol) for _, w in SOURCES.values())]
    assert len(sources) == 11                   # mma k8 and k16; wgmma at 5 N, 4 of them also K x N
    for r in sources:
        twin = routines[r.name.replace("f16", "bf16")]
        assert twin.path.endswith("_bf16.ptx") and twin.inputs == r.inputs and twin.output == r.output
        assert twin.body == r.body.replace(".f16.f16", ".bf16.bf16")
        assert re.search(r"SASS:\s*H\w*\.\S+\.F32\.BF16", twin.doc)
    assert "mma_m16n8k16_bf16_bf16" not in routines       # bf16 accumulates in f32 only
