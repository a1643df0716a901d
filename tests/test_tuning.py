"""numgemm.tuning: the winners files and gemm()'s choice."""

import json
import warnings
from pathlib import Path

import pytest

from numgemm import registry, tune, tuning
from numgemm.config import KernelConfig
from numgemm.kernel import build_config
from numgemm.selection import LLM_SHAPES

H200 = (9, 0)


@pytest.fixture
def user_winners(tmp_path, monkeypatch):
    """A cache folder of the test's own, with a winners file written into it;
    the package's winners out of the way (an empty folder)."""
    monkeypatch.setenv("NUMGEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tuning, "SHIPPED", tmp_path / "shipped")
    tuning._entries.cache_clear()
    tuning.choose.cache_clear()

    def write(entries, arch="sm_90", text=None):
        path = tmp_path / "tuned" / f"{arch}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text if text is not None else json.dumps({"arch": arch, "entries": entries}))
        tuning._entries.cache_clear()
        tuning.choose.cache_clear()
        return path
    yield write
    tuning._entries.cache_clear()
    tuning.choose.cache_clear()


def entry(precision, m, n, k, cfg):
    return {"precision": precision, "m": m, "n": n, "k": k, "kernel": cfg.name, "config": cfg.describe()}


def test_m_classes():
    assert [tuning.m_class(m) for m in (1, 2, 16, 17, 64, 65, 256, 257, 5000)] == [1, 16, 16, 64, 64, 256, 256,
                                                                                  1024, 1024]


def test_choose_takes_the_nearest_winner_of_the_class(user_winners):
    m16 = registry.get("int8_ptx_mma_k32_m16")
    split = m16.replace(split_k=4)
    big = registry.get("int8_ptx_tma")
    user_winners([entry("int8", 16, 4096, 4096, split), entry("int8", 16, 8192, 8192, m16),
                  entry("int8", 4096, 4096, 4096, big)])
    assert tuning.choose("int8", "nk", 9, 3000, 4096, H200) == split       # M 9: the class of 16
    assert tuning.choose("int8", "nk", 16, 9000, 7000, H200) == m16
    assert tuning.choose("int8", "nk", 2000, 512, 512, H200) == big        # the only entry of M >= 1024
    # No entry of that class, another GPU, another preset: the registry's default.
    for args in (("int8", "nk", 64, 4096, 4096, H200), ("int8", "nk", 16, 4096, 4096, (8, 9)),
                 ("int8", "nk", 16, 4096, 4096, H200, "paper")):
        assert tuning.choose(*args) == registry.default(*args[:2], args[6] if len(args) > 6 else "tuned",
                                                        args[5], args[2], args[4])


def test_the_users_classes_replace_the_packages(user_winners, tmp_path):
    """A user's file replaces the package's entries class by class; a class it
    lacks still comes from the package."""
    shipped = registry.get("int8_ptx_mma_k32_m16").replace(stages=5)
    mine = registry.get("int8_ptx_mma_k32_m16").replace(split_k=2)
    (tmp_path / "shipped").mkdir()
    tile = registry.get("int8_ptx_tma")
    (tmp_path / "shipped" / "sm_90.json").write_text(json.dumps({"entries": [
        entry("int8", 16, 8192, 8192, shipped), entry("int8", 64, 8192, 8192, tile)]}))
    user_winners([entry("int8", 16, 8192, 8192, mine)])
    assert tuning.choose("int8", "nk", 16, 8192, 8192, H200) == mine
    assert tuning.choose("int8", "nk", 64, 8192, 8192, H200) == tile


def test_a_twin_precisions_winners_fill_the_shapes_not_searched(user_winners):
    """FP8 takes INT8's winners, in its own operands, where it has none of its
    own at that shape; its own one where it has."""
    int8_mid = registry.get("int8_wgmma").replace(bm=64, bn=128, warps_m=4, stages=8)
    int8_small = registry.get("int8_ptx_mma_k32")
    e4m3_small = registry.get("e4m3_wgmma").replace(bm=64, bn=128, warps_m=4, stages=6)
    user_winners([entry("int8", 1024, 1024, 1024, int8_mid), entry("int8", 512, 512, 512, int8_small),
                  entry("e4m3", 512, 512, 512, e4m3_small)])
    assert tuning.choose("e4m3", "nk", 512, 512, 512, H200) == e4m3_small
    assert tuning.choose("e4m3", "nk", 1024, 1024, 1024, H200) == int8_mid.replace(precision="e4m3", acc="f32")
    assert tuning.choose("int8", "nk", 512, 512, 512, H200) == int8_small


def test_choose_widens_exactly_past_the_scaled_reach(user_winners):
    scaled = registry.get("int4_ptx_unpack_s8_m16").replace(split_k=2)
    user_winners([entry("int4", 16, 8192, 8192, scaled)])
    assert tuning.choose("int4", "nk", 16, 8192, 8192, H200) == scaled
    assert tuning.choose("int4", "nk", 16, 8192, scaled.max_k + 1, H200) == scaled.replace(unpack="register")


def test_a_damaged_winners_file_is_said_and_left(user_winners):
    user_winners(None, text="{not json")
    with pytest.warns(UserWarning, match="unreadable"):
        cfg = tuning.choose("int8", "nk", 16, 4096, 4096, H200)
    assert cfg == registry.default("int8", "nk", "tuned", H200, 16, 4096)
    bad = entry("int8", 16, 4096, 4096, registry.get("int8_ptx_mma_k32_m16"))
    bad["config"]["stages"] = 9
    user_winners([bad, dict(bad, config={"precision": "int8", "no_such_field": 1})])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuning.choose("int8", "nk", 16, 4096, 4096, H200)
    assert sum("left out" in str(w.message) for w in caught) == 2


SHIPPED = tuning.SHIPPED / "sm_90.json"


@pytest.mark.skipif(not SHIPPED.is_file(), reason="no shipped sm_90 winners")
def test_shipped_winners_cover_every_class(monkeypatch, tmp_path):
    """The package's sm_90 winners: an entry for each precision at every
    shape --tune measures, and for FP16 with B as an N x K weight at every
    --shapes llm shape (4096^3 and 8192^3 take the 2048^3 one) and at a small
    Llama's layer shapes, FP8 (e4m3, tuned on an H100) where INT8's winners
    do not carry over, BF16 (tuned on an H100) where FP16's were slower than
    its own search's, each a valid config that gemm() chooses there."""
    doc = json.loads(SHIPPED.read_text())
    assert doc["arch"] == "sm_90" and doc["device"] and doc["date"]
    got = {(e["precision"], e["config"]["b_layout"], e["m"], e["n"], e["k"]) for e in doc["entries"]}
    llm = [tuple(map(int, s.split("x"))) for s in LLM_SHAPES]
    # TinyLlama's layer shapes (scripts/model_forward.py) at 16, 128 and 512 tokens, as nn.Linear stores them
    model = {(m, n, k) for m in (16, 128, 512) for n, k in ((2048, 2048), (256, 2048), (5632, 2048), (2048, 5632))}
    assert got == {(p, "kn" if p == "fp16" else "nk", *s) for p in ("fp16", "int8", "int4") for s in tune.SHAPES} | \
        {("fp16", "nk", *s) for s in llm} | {("fp16", "nk", *s) for s in model} | \
        {("e4m3", "nk", *s) for s in ((512, 512, 512), (1024, 1024, 1024), (64, 4096, 4096))} | \
        {("bf16", "kn", *s) for s in ((512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (1, 4096, 4096))}
    # No user file in the way; the kernel cache stays the user's, so that a warm run builds nothing.
    monkeypatch.setattr(tuning, "winners_files", lambda arch: [tmp_path / f"{arch}.json", SHIPPED])
    tuning._entries.cache_clear()
    tuning.choose.cache_clear()
    try:
        for e in doc["entries"]:
            cfg = tuning.choose(e["precision"], e["config"]["b_layout"], e["m"], e["n"], e["k"], H200)
            assert cfg == KernelConfig(**e["config"]), e["kernel"]     # (fields added since take their defaults)
    finally:
        tuning._entries.cache_clear()
        tuning.choose.cache_clear()


def _winners():
    """The shipped winners' configs, a test each, so that pytest-xdist shares their builds among its workers."""
    if not SHIPPED.is_file():
        return []
    return list(dict.fromkeys(KernelConfig(**e["config"]) for e in json.loads(SHIPPED.read_text())["entries"]))


@pytest.mark.builds
@pytest.mark.parametrize("cfg", _winners(), ids=lambda c: c.name)
def test_a_shipped_winner_builds_without_spills_or_calls(cfg):
    """Each winner builds for sm_90 (the kernel cache's, or built here),
    nothing in local memory and no called routines."""
    build = build_config(cfg, "sm_90", together=())
    assert build.local_bytes == 0 and build.calls == 0, build.summary()


def test_merging_a_run_of_another_gpu_says_where_its_entries_come_from(tmp_path):
    """scripts/merge_winners.py: the newer run's entries replace the same shapes'
    and join the others; from another GPU, each says its device and date."""
    import runpy

    merge = runpy.run_path(str(Path(__file__).parents[1] / "scripts" / "merge_winners.py"))["main"]
    m16, tile = registry.get("int8_ptx_mma_k32_m16"), registry.get("int8_ptx_tma")
    base = {"device": "NVIDIA H200", "date": "2026-12-01", "command": "python bench.py --tune",
            "entries": [entry("int8", 16, 8192, 8192, m16), entry("int8", 64, 8192, 8192, tile)]}
    new = {"device": "NVIDIA H100 80GB HBM3", "date": "2026-12-06", "command": "python bench.py --tune --shapes x",
           "entries": [entry("int8", 16, 8192, 8192, m16.replace(stages=5)), entry("e4m3", 16, 8192, 8192, m16)]}
    paths = [tmp_path / f"{n}.json" for n in ("base", "new", "out")]
    for p, doc in zip(paths, (base, new)):
        p.write_text(json.dumps(doc))
    merge(*map(str, paths))
    out = json.loads(paths[2].read_text())
    assert [(e["precision"], e["m"], e["config"]["stages"], e.get("device")) for e in out["entries"]] == [
        ("int8", 16, 5, "NVIDIA H100 80GB HBM3"), ("int8", 64, tile.stages, None),
        ("e4m3", 16, m16.stages, "NVIDIA H100 80GB HBM3")]
    assert out["device"] == "NVIDIA H200" and out["command"].endswith(
        "then, for its shapes (on an NVIDIA H100 80GB HBM3, 2026-12-06): python bench.py --tune --shapes x")
