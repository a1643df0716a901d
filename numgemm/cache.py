"""The on-disk cache of built kernels, shared by every process.

A build is keyed by everything that decides its machine code: every field
of the config, the target with its arch suffix, the kernel's argument types,
the compile options, a digest of ptx_asm/, baselines/ and numgemm's own
kernel-building modules, and the versions of the toolchain (numba,
numba-cuda, llvmlite, NVVM, NVRTC, nvJitLink and the CUDA wheels). Change
any of them and the entry is simply never asked for again; least-recently
used entries leave once the cache outgrows its bound.

    python -m numgemm.cache            where it is, its size and entries
    python -m numgemm.cache --list     every entry
    python -m numgemm.cache --clear    remove every entry

Environment: NUMGEMM_CACHE_DIR moves the folder (default: the platform's
user cache folder, e.g. ~/.cache/numgemm); NUMGEMM_CACHE=0 turns the cache
off; NUMGEMM_CACHE_MAX_MB bounds its size (default 2048).

An entry is one file, written to a temporary name and renamed into place,
so a concurrent reader sees a whole entry or none. Its header carries its
key and a SHA-256 of its payload: a corrupt, truncated or mismatched entry
is reported with a NumgemmCacheWarning, removed and rebuilt, never used.
numba-cuda's own cache cannot serve here: it refuses kernels that link
files, and its key hashes closure cells that differ between processes.
"""

import argparse
import ast
import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import sys
import tempfile
import time
import warnings
import zlib
from pathlib import Path

FORMAT = 1
_MAGIC = b"NUMGEMM\x01"
_SUFFIX = ".ngk"
#: What this process did with the cache: hits, builds (misses), stores, rejected entries.
STATS = {"hits": 0, "builds": 0, "stores": 0, "rejected": 0}


class NumgemmCacheWarning(UserWarning):
    """A cache entry could not be used (corrupt, truncated, mismatched) or written."""


def enabled():
    return os.environ.get("NUMGEMM_CACHE", "1").strip().lower() not in ("0", "false", "no", "off")


def folder():
    """The cache's folder: NUMGEMM_CACHE_DIR, or the platform's user cache folder."""
    if os.environ.get("NUMGEMM_CACHE_DIR"):
        return Path(os.environ["NUMGEMM_CACHE_DIR"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("numgemm", appauthor=False))


def max_bytes():
    return int(float(os.environ.get("NUMGEMM_CACHE_MAX_MB", "2048")) * 2**20)


# --- the key ---------------------------------------------------------------------

#: numgemm's modules whose code decides a kernel's machine code.
_BUILDER = ("config.py", "tiles.py", "precision.py", "primitives.py", "sass.py", "toolchain.py", "cache.py", "kernel")


@functools.cache
def sources_digest():
    """SHA-256 over ptx_asm/, baselines/ and the kernel-building modules."""
    from .toolchain import BASELINES_DIR, PTX_DIR

    here = Path(__file__).resolve().parent
    files = [p for d in (PTX_DIR, BASELINES_DIR) for p in sorted(d.iterdir()) if p.is_file()]
    for name in _BUILDER:
        p = here / name
        files += sorted(p.glob("*.py")) if p.is_dir() else [p]
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0" + (code(p.read_bytes()) if p.suffix == ".py" else p.read_bytes()) + b"\0")
    return h.hexdigest()


def code(source):
    """A Python module's code as the key reads it: its syntax tree without
    comments, docstrings or line numbers, so that editing prose leaves every
    kernel in the cache (the PTX and CUDA sources are read as they are)."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            kept = [n for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                                            and isinstance(n.value.value, str))]
            node.body = kept or [ast.Pass()]
    return ast.dump(tree).encode()


_PACKAGES = ("numba", "numba-cuda", "llvmlite", "cuda-bindings", "cuda-core", "nvidia-nvvm", "nvidia-cuda-nvrtc",
             "nvidia-nvjitlink", "nvidia-cuda-nvcc", "nvidia-cuda-nvdisasm", "nvidia-cuda-cuobjdump")


@functools.cache
def toolchain_versions():
    """The versions of everything between a config and its cubin and SASS."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    try:        # what is loaded, which may be a system CUDA rather than the wheels
        from cuda.bindings import nvjitlink
        from numba.cuda.cudadrv import nvrtc, nvvm

        versions["libnvvm"] = list(nvvm.NVVM().get_version())
        versions["libnvrtc"] = list(nvrtc._get_nvrtc_version())
        versions["libnvjitlink"] = list(nvjitlink.version())
    except Exception as e:  # noqa: BLE001 - a library that does not load cannot build either
        versions["libraries"] = f"unavailable: {type(e).__name__}"
    return versions


def key(cfg, target, argtypes, options):
    """The hex key of cfg's kernel built for target ('sm_89', 'sm_90a')."""
    doc = {"format": FORMAT, "config": {k: repr(v) for k, v in cfg.describe().items()},
           "target": target, "argtypes": [str(t) for t in argtypes], "options": options,
           "sources": sources_digest(), "versions": toolchain_versions()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


# --- entries -----------------------------------------------------------------------

def _path(k):
    return folder() / f"{k[:2]}" / f"{k}{_SUFFIX}"


def has(k):
    """Whether an entry is stored under key k (it may still fail its checks)."""
    return _path(k).is_file()


def load(k):
    """(meta, {part: bytes}) stored under key k, or None. An entry that fails
    its checks is reported, removed and counted as rejected."""
    if not enabled():
        return None
    path = _path(k)
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    try:
        if blob[:8] != _MAGIC:
            raise ValueError("not a numgemm cache entry")
        n = int.from_bytes(blob[8:12], "little")
        header = json.loads(blob[12:12 + n])
        payload = blob[12 + n:]
        if header.get("format") != FORMAT or header.get("key") != k:
            raise ValueError("its key or format differs from the one asked for")
        if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
            raise ValueError("its checksum does not match (truncated or corrupt)")
        data, parts, at = zlib.decompress(payload), {}, 0
        for name, size in header["parts"]:
            parts[name] = data[at:at + size]
            at += size
        if at != len(data):
            raise ValueError("its parts do not add up")
    except Exception as e:  # noqa: BLE001 - any damage is a miss, never a crash
        STATS["rejected"] += 1
        warnings.warn(f"numgemm cache: rebuilding {path.name}: {e}", NumgemmCacheWarning, stacklevel=3)
        path.unlink(missing_ok=True)
        return None
    try:
        os.utime(path)                      # least recently used goes first
    except OSError:
        pass
    STATS["hits"] += 1
    return header["meta"], parts


def store(k, meta, parts):
    """Write an entry atomically: a temporary file in the same folder, renamed
    into place. A cache that cannot be written is reported and skipped."""
    if not enabled():
        return
    names = list(parts)
    payload = zlib.compress(b"".join(parts[n] for n in names), 6)
    header = json.dumps({"format": FORMAT, "key": k, "sha256": hashlib.sha256(payload).hexdigest(),
                         "parts": [[n, len(parts[n])] for n in names], "meta": meta}).encode()
    path = _path(k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + len(header).to_bytes(4, "little") + header + payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as e:
        warnings.warn(f"numgemm cache: not written ({e})", NumgemmCacheWarning, stacklevel=3)
        return
    STATS["stores"] += 1
    evict(max_bytes())


def entries():
    """[(path, bytes, last use)], least recently used first."""
    found = []
    for p in folder().glob(f"*/*{_SUFFIX}"):
        if p.name.startswith(".tmp-"):
            continue
        try:
            st = p.stat()
        except OSError:                     # removed by another process meanwhile
            continue
        found.append((p, st.st_size, st.st_mtime))
    return sorted(found, key=lambda e: e[2])


def evict(limit):
    """Remove least-recently-used entries until the cache holds at most limit bytes."""
    found = entries()
    total = sum(size for _, size, _ in found)
    for p, size, _ in found:
        if total <= limit:
            break
        p.unlink(missing_ok=True)
        total -= size


def clear():
    """Remove every entry (and stray temporary files); the number removed."""
    n = 0
    for p in folder().glob(f"*/*{_SUFFIX}"):
        p.unlink(missing_ok=True)
        n += not p.name.startswith(".tmp-")
    return n


def cached(k, build, describe):
    """The parts stored under k, or build() -> (meta, parts) stored and returned
    (once among processes: see building); describe(meta, parts) turns either
    into the caller's object."""
    hit = load(k)
    if hit is None:
        with building(k):
            hit = load(k)
            if hit is None:
                STATS["builds"] += 1
                hit = build()
                store(k, *hit)
    return describe(*hit)


@contextlib.contextmanager
def building(k):
    """Held while this process builds what key k names: a process that would
    build it too waits here until the first has stored it, and then reads it
    (the caller looks again once inside). Parallel test workers, soak jobs
    and prebuilds ask for the same kernels at once, and a build takes seconds
    of a core. A lock file beside the entries, locked with flock: the
    system lets it go if its holder dies. No lock where the cache is off or
    the platform has no flock."""
    try:
        import fcntl
    except ImportError:
        fcntl = None
    if not enabled() or fcntl is None:
        yield
        return
    path = _path(k).with_suffix(".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a")
    except OSError:                 # a cache that cannot be written: store() says so
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:        # a process still waiting holds the old file, and finds the entry once it has it
            path.unlink(missing_ok=True)
            fcntl.flock(f, fcntl.LOCK_UN)


def _header(p):
    blob = p.read_bytes()[:1 << 16]
    n = int.from_bytes(blob[8:12], "little")
    return json.loads(blob[12:12 + n])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m numgemm.cache", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="every entry, least recently used first")
    ap.add_argument("--clear", action="store_true", help="remove every entry")
    args = ap.parse_args(argv)
    if args.clear:
        print(f"removed {clear()} entries from {folder()}")
        return 0
    found = entries()
    state = "on" if enabled() else "off (NUMGEMM_CACHE=0)"
    print(f"numgemm kernel cache: {folder()} ({state})")
    print(f"{len(found)} entries, {sum(s for _, s, _ in found) / 2**20:.1f} MB of {max_bytes() / 2**20:.0f} MB")
    if args.list:
        for p, size, used in found:
            try:
                meta = _header(p)["meta"]
            except (OSError, ValueError, KeyError):
                meta = {"name": "(unreadable)", "target": "?"}
            print(f"  {time.strftime('%Y-%m-%d %H:%M', time.localtime(used))}  {size / 2**10:8.0f} KB  "
                  f"{meta.get('target', '?'):7s} {meta.get('name', '?')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
