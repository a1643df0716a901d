"""numgemm.microbench: which measured ceiling a kernel's or a library's row is read against
(the microbenchmarks themselves need a GPU)."""

from numgemm import microbench, registry


def test_a_library_is_measured_against_the_fastest_instruction():
    """cuBLAS on sm_90 issues wgmma: its share is of the wgmma ceiling where
    one was measured, of mma.sync's where not (and INT4's library is INT8's)."""
    hopper = {"mma_m16n8k16_f16_f32": 640.0, "wgmma_m64n256k16_f32_f16_f16": 910.0,
              "mma_m16n8k32_s8_s32": 1290.0, "wgmma_m64n256k32_s32_s8_s8": 1940.0}
    assert microbench.fastest_ceiling("fp16", hopper) == 910.0 and microbench.fastest_ceiling("int8", hopper) == 1940.0
    assert microbench.fastest_ceiling("fp16", {"mma_m16n8k16_f16_f32": 240.0}) == 240.0
    assert microbench.ceiling_for(registry.get("fp16_ptx_mma"), hopper) == 640.0
