"""numgemm.precision: each precision's facts, and that no other module keeps
its own by testing a precision's name."""

import re
from pathlib import Path

import numpy as np

import numgemm
from numgemm.precision import BY_DTYPE, PRECISIONS


def test_the_facts_that_derive_from_the_data():
    fp16, int8, int4 = (PRECISIONS[n] for n in ("fp16", "int8", "int4"))
    assert BY_DTYPE == {"float16": "fp16", "int8": "int8"}          # packed uint8 names no precision
    assert (fp16.exact, int8.exact, int4.exact) == (False, True, True)
    assert int4.packed and not int8.packed and int4.wide is int8 and int8.wide is int8
    assert fp16.out_dtypes == (np.dtype(np.float32), np.dtype(np.float16)) and int8.out_dtypes == (np.dtype(np.int32),)
    assert (int8.max_k, int4.max_k, fp16.max_k) == ((2**31 - 1) // 128**2, (2**31 - 1) // 64, None)
    assert fp16.mma_sass(16, 8, 16, "f16") == "HMMA.16816.F16" and int4.mma_sass(16, 8, 64) == "IMMA.16864.S4.S4"
    assert int8.wgmma_sass(64, 256, 32) == "IGMMA.64x256x32.S8.S8"
    assert int4.k_per_unit == 4 and fp16.k_per_unit == 1


def test_no_module_tests_a_precision_by_its_name():
    """A new precision is a new entry in PRECISIONS: a module that compared a
    precision with "fp16" would need editing for it."""
    names = "|".join(PRECISIONS)
    test = re.compile(rf"""(==|!=|\bin)\s*\(?["']({names})["']|["']({names})["']\s*(==|!=|in\b)""")
    found = [f"{path.name}:{i}: {line.strip()}"
             for path in sorted(Path(numgemm.__file__).parent.rglob("*.py")) if path.name != "precision.py"
             for i, line in enumerate(path.read_text().splitlines(), 1) if test.search(line)]
    assert not found, "\n".join(found)
