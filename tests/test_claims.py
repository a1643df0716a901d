"""numgemm.claims: the verdicts from stored measurements, and the offline SASS facts."""

import json
from pathlib import Path

import pytest

from numgemm import claims

STORED = Path(__file__).resolve().parent.parent / "results" / "2026-12-01-h200-why" / "claims.json"
H200 = {"name": "H200", "cc": (9, 0)}


def _times(given=None):
    """Times at N=512 and 8192 where every kernel takes 1 ms unless given {(kernel, N): ms}."""
    t = {(k, n): 1.0 for k in claims.KERNELS for n in (512, 8192)}
    t.update(given or {})
    return t


def test_stored_run_gives_a_verdict_for_every_claim():
    out = claims.from_stored(json.loads(STORED.read_text()))
    assert [c.number for c in out] == list(range(1, 10))
    assert out[8].verdict == claims.UNTESTABLE      # that run timed no FP8
    assert all(c.verdict in (claims.HOLDS, claims.FAILS, claims.UNTESTABLE) for c in out)
    by = {c.number: c for c in out}
    assert by[2].verdict == claims.HOLDS            # INT8 PTX faster at every size, fewer instructions
    assert by[5].verdict == claims.FAILS and "1.65 s" in by[5].note
    assert by[4].verdict == claims.UNTESTABLE       # every s4 mma is emulated on sm_90


def test_fp16_parity_holds_and_a_clear_win_does_not():
    assert claims.evaluate(_times(), {}, {}, H200)[0].verdict == claims.HOLDS
    win = _times({("fp16_wmma", 8192): 1.5})
    assert claims.evaluate(win, {}, {}, H200)[0].verdict == claims.FAILS


def test_claims_that_need_counters_say_so_without_them():
    out = {c.number: c for c in claims.evaluate(_times(), {}, {}, H200)}
    assert out[3].verdict == out[8].verdict == claims.UNTESTABLE


def test_occupancy_claim_reads_the_pairs():
    counters = {"int8_wmma": {"occupancy %": 60.0}, "int8_ptx_mma_k32": {"occupancy %": 40.0}}
    slower_wmma = _times({("int8_wmma", 8192): 2.0})
    c = claims.evaluate(slower_wmma, counters, {}, H200)[2]
    assert c.verdict == claims.HOLDS                  # the more occupied kernel is the slower one
    c = claims.evaluate(_times({("int8_ptx_mma_k32", 8192): 2.0}), counters, {}, H200)[2]
    assert c.verdict == claims.FAILS


def test_int4_claim_on_sm89_turns_on_the_sass():
    native = {"int4_wmma_native_s4": True, "int4_ptx_mma": "IMMA.16864.S4.S4"}
    c = claims.evaluate(_times(), {}, native, {"name": "L4", "cc": (8, 9)})[3]
    assert c.verdict == claims.FAILS and "native" in c.note


def test_fp8_claim_asks_the_library_and_int8():
    fp8 = {(claims.FP8, n): 1.0 for n in (512, 8192)} | {(claims.INT8, n): 1.0 for n in (512, 8192)}
    c = claims.evaluate(_times({**fp8, (claims.FP8_LIBRARY, 512): 0.8, (claims.FP8_LIBRARY, 8192): 1.2}),
                        {}, {}, H200)[8]
    assert c.verdict == claims.HOLDS and "512: 0.80x, 8192: 1.20x" in c.measured
    slow = _times({**fp8, (claims.FP8_LIBRARY, 8192): 1.2, (claims.INT8, 8192): 0.8})
    assert claims.evaluate(slow, {}, {}, H200)[8].verdict == claims.FAILS      # FP8 at 0.8x INT8's speed
    assert claims.evaluate(_times(fp8), {}, {}, H200)[8].verdict == claims.UNTESTABLE    # no library timed


@pytest.mark.builds
def test_sass_facts_for_the_studys_gpu():
    facts = claims.sass_facts("sm_89")
    assert facts["int4_wmma_native_s4"] is True
    assert facts["int4_ptx_mma"] == "IMMA.16864.S4.S4"
    assert "QMMA.16832.F32.E4M3.E4M3" in facts["e4m3_ptx_mma"] and "HMMA" not in facts["e4m3_ptx_mma"]


def test_table_prints_every_claim():
    text = claims.table(claims.evaluate(_times(), {}, {}, H200))
    assert text.count("\n|") >= 8 and "verdict" in text
