"""numgemm.toolchain: the quick front end changes how long Numba takes, not what it makes."""

import contextlib

import pytest


@pytest.mark.builds
@pytest.mark.parametrize("out", ["", "f16"])
def test_the_quick_front_end_makes_numbas_own_ir(out, monkeypatch):
    """split-K's sum kernel through Numba's front end with and without
    toolchain.quick_front_end: the same LLVM IR, once the names that count
    Numba's compiles are blanked (the registered builds' SASS is compared whole in
    results/2026-12-04-cpu-front-end)."""
    import re

    from numgemm import sass
    from numgemm.kernel.split_k import SplitSum

    spec = SplitSum("f32", out)

    def ir():
        lib, _ = sass.front_end(spec.function(), spec.argtypes(), (9, 0))
        text = lib.get_llvm_str()
        return re.sub(r"_Z[\w$]+|\$\d+", "_Z", text)      # mangled names, which count the compiles

    quick = ir()
    monkeypatch.setattr(sass, "quick_front_end", contextlib.nullcontext)
    assert ir() == quick
