"""numgemm.cache: the on-disk kernel cache (keys, entries, damage, eviction, processes)."""

import os
import shutil
import subprocess
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from numgemm import cache, registry
from numgemm.kernel import argtypes, build_config

ROOT = Path(__file__).resolve().parent.parent
CFG = registry.get("int8_ptx_mma_k32", "paper")          # builds in about a second


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An empty cache of this test's own."""
    monkeypatch.setenv("NUMGEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NUMGEMM_CACHE", raising=False)
    monkeypatch.delenv("NUMGEMM_CACHE_MAX_MB", raising=False)
    for k in cache.STATS:
        monkeypatch.setitem(cache.STATS, k, 0)
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache holding CFG's builds (sm_89, sm_90), made once for the module."""
    folder = tmp_path_factory.mktemp("built")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMGEMM_CACHE_DIR", str(folder))
        mp.delenv("NUMGEMM_CACHE", raising=False)
        return folder, build_config(CFG, "sm_89")


@pytest.fixture
def filled(store, built):
    """This test's own cache, holding CFG's builds; and CFG's sm_89 build."""
    shutil.copytree(built[0], store)
    return store, built[1]


def key_of(cfg, target="sm_89"):
    return cache.key(cfg, target, argtypes(cfg), {"launch_bounds": [cfg.threads, cfg.min_blocks]})


def test_key_covers_what_decides_the_machine_code(monkeypatch):
    k = key_of(CFG)
    assert k == key_of(registry.get("int8_ptx_mma_k32", "paper"))          # stable in a process
    assert k != key_of(CFG, "sm_90") != key_of(CFG, "sm_90a")
    for change in ({"stages": 3}, {"cache": "cg"}, {"linkage": "link"}, {"zfill_src": "any"}):
        assert key_of(CFG.replace(**change)) != k, change
    assert cache.key(CFG, "sm_89", argtypes(CFG), {"launch_bounds": [256, 2]}) != k
    monkeypatch.setattr(cache, "toolchain_versions", lambda: {"numba-cuda": "0.31"})
    assert key_of(CFG) != k


def test_a_changed_source_file_changes_the_digest(tmp_path, monkeypatch):
    from numgemm import toolchain

    ptx = tmp_path / "ptx_asm"
    ptx.mkdir()
    for p in toolchain.PTX_DIR.glob("*.ptx"):
        (ptx / p.name).write_bytes(p.read_bytes())
    monkeypatch.setattr(toolchain, "PTX_DIR", ptx)
    before = cache.sources_digest.__wrapped__()
    with open(ptx / "mma.ptx", "a") as f:
        f.write("// one more comment\n")
    assert cache.sources_digest.__wrapped__() != before


@pytest.mark.builds
def test_round_trip_in_a_new_process(store):
    """A build stored by one process is loaded by the next, with nothing built."""
    env = dict(os.environ, NUMGEMM_CACHE_DIR=str(store))
    script = ("import json; from numgemm import cache, registry; from numgemm.kernel import build_config; "
              "b = build_config(registry.get('int8_ptx_mma_k32', 'paper'), 'sm_89'); "
              "print(json.dumps([cache.STATS, b.count('IMMA'), b.cached]))")
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    import json
    (first, imma1, cached1), (second, imma2, cached2) = (json.loads(r.stdout.splitlines()[-1]) for r in runs)
    assert first["builds"] == 1 and first["stores"] == 2 and not cached1       # sm_89 and sm_90 at once
    assert second == {"hits": 1, "builds": 0, "stores": 0, "rejected": 0} and cached2
    assert imma1 == imma2 > 0


@pytest.mark.builds
def test_a_changed_field_misses(filled):
    build_config(CFG, "sm_89")
    assert cache.STATS == {"hits": 1, "builds": 0, "stores": 0, "rejected": 0}
    build_config(CFG.replace(stages=3), "sm_89")
    assert cache.STATS == {"hits": 1, "builds": 1, "stores": 2, "rejected": 0}


@pytest.mark.builds
@pytest.mark.parametrize("damage", ["flip", "truncate", "swap"])
def test_a_damaged_entry_is_rebuilt_with_a_warning(filled, damage):
    good = filled[1]
    path = cache._path(key_of_built(CFG, "sm_89"))
    blob = path.read_bytes()
    if damage == "flip":
        blob = blob[:-10] + bytes([blob[-10] ^ 0xFF]) + blob[-9:]
    elif damage == "truncate":
        blob = blob[: len(blob) // 2]
    else:       # another key's entry under this key's name
        blob = cache._path(key_of_built(CFG, "sm_90")).read_bytes()
    path.write_bytes(blob)
    with pytest.warns(cache.NumgemmCacheWarning, match="rebuilding"):
        again = build_config(CFG, "sm_89")
    assert again.digest == good.digest and not again.cached
    assert cache.STATS["rejected"] == 1 and cache.load(key_of_built(CFG, "sm_89")) is not None


def key_of_built(cfg, target):
    from numgemm.kernel import _options

    return cache.key(cfg, target, argtypes(cfg), _options(cfg))


def test_least_recently_used_go_first(store, monkeypatch):
    for i in range(3):
        cache.store(f"{i:064x}", {"name": f"k{i}"}, {"cubin": os.urandom(300_000)})
        os.utime(cache._path(f"{i:064x}"), (time.time() - 100 + i, time.time() - 100 + i))
    assert cache.load(f"{0:064x}") is not None            # used now: the newest
    monkeypatch.setenv("NUMGEMM_CACHE_MAX_MB", "0.4")          # room for one large entry
    cache.store(f"{3:064x}", {"name": "k3"}, {"cubin": os.urandom(100)})
    left = {p.stem for p, _, _ in cache.entries()}
    assert left == {f"{0:064x}", f"{3:064x}"}


@pytest.mark.builds
def test_off_means_nothing_is_read_or_written(filled, monkeypatch):
    monkeypatch.setenv("NUMGEMM_CACHE", "0")
    before = sorted(p.stat().st_mtime_ns for p, _, _ in cache.entries())
    assert not build_config(CFG, "sm_89").cached            # there, but not read
    assert cache.STATS == {"hits": 0, "builds": 1, "stores": 0, "rejected": 0}
    assert sorted(p.stat().st_mtime_ns for p, _, _ in cache.entries()) == before     # nor touched


def _writer(args):
    folder, seed = args
    os.environ["NUMGEMM_CACHE_DIR"] = folder
    for i in range(40):
        cache.store("f" * 64, {"writer": seed, "i": i}, {"cubin": os.urandom(50_000 + 1000 * seed)})
    return True


def _reader(folder):
    os.environ["NUMGEMM_CACHE_DIR"] = folder
    seen = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # a half-written entry would warn
        for _ in range(200):
            seen += cache.load("f" * 64) is not None
    return seen


def test_concurrent_writers_never_leave_half_an_entry(store):
    with ProcessPoolExecutor(3) as pool:
        writers = [pool.submit(_writer, (str(store), s)) for s in (1, 2)]
        seen = pool.submit(_reader, str(store)).result()
        assert all(w.result() for w in writers)
    assert cache.load("f" * 64) is not None and seen >= 0
    assert not list(store.glob("*/.tmp-*"))


def test_a_build_under_way_is_waited_for_not_repeated(store):
    """Two callers after one missing entry at once (threads: flock holds
    between open files as between processes): one builds, the other waits
    for it and reads its entry; no lock file is left."""
    import threading

    built, got = [], []

    def build():
        built.append(threading.get_ident())
        time.sleep(0.3)
        return {"name": "k"}, {"cubin": b"x" * 16}

    def ask():
        got.append(cache.cached("e" * 64, build, lambda meta, parts: parts["cubin"]))
    callers = [threading.Thread(target=ask) for _ in range(2)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert len(built) == 1 and got == [b"x" * 16] * 2
    assert cache.STATS["builds"] == 1 and cache.STATS["hits"] == 1
    assert not list(store.glob("*/*.lock"))


@pytest.mark.builds
def test_command_line(filled, capsys):
    store = filled[0]
    assert cache.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert str(store) in out and "2 entries" in out and CFG.name in out
    assert cache.main(["--clear"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out and not cache.entries()


def test_module_entry_point_is_quiet(store):
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "numgemm.cache"],
                          capture_output=True, text=True, cwd=ROOT, env=dict(os.environ))
    assert proc.returncode == 0 and "numgemm kernel cache" in proc.stdout, proc.stderr


@pytest.mark.builds
def test_an_unwritable_folder_warns_and_builds(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("NUMGEMM_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("NUMGEMM_CACHE", raising=False)
    with pytest.warns(cache.NumgemmCacheWarning, match="not written"):
        b = build_config(CFG, "sm_89")
    assert b.count("IMMA") > 0 and not b.cached


def test_the_key_reads_code_not_prose():
    """Comments, docstrings and blank lines change no key (editing them would
    make every next build cold); a changed expression does."""
    from numgemm.cache import code

    before = b'"""A module."""\nimport x  # why\n\n\ndef f(a):\n    """What f does."""\n    return a + 1\n'
    prose = b'"""The module, described anew."""\nimport x\n\ndef f(a):\n    # a comment\n    return a + 1  # why not\n'
    assert code(before) == code(prose)
    assert code(before) != code(before.replace(b"a + 1", b"a + 2"))
