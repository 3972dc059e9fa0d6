"""The compile cache file opened for inspection and maintenance (what
`dcptopk cache` does), and where the default file is.

Nothing here imports torch. Arguments are checked before the library is
called (ValueError / TypeError naming the argument); library failures are
DcptopkError with the library's message.
"""
import ctypes
import re

from . import _checks
from ._handle import Handle
from ._lib import (CacheClaim, CacheEntry, CacheStats, DcptopkError, as_bytes_path, check, free,
                   library, new, _vp)

BLOBS = {"cubin": 0, "ptx": 1, "source": 2}


def cache_default_path():
    """The default cache file's path (the library's choice)."""
    buf = ctypes.create_string_buffer(4096)
    library().dcptopk_cache_default_path(buf, 4096)
    return buf.value.decode()


_HEX = re.compile(r"[0-9a-f]{4,32}")


def _prefix(key_prefix):
    if not isinstance(key_prefix, str) or not _HEX.fullmatch(key_prefix):
        raise ValueError(f"key_prefix: got {key_prefix!r}; expected 4 to 32 lowercase hex digits "
                         "of a cache key (Cache.list() shows them)")
    return key_prefix.encode()


def _entry(e):
    d = {n: getattr(e, n) for n, _ in CacheEntry._fields_}
    for n in ("key", "kernel", "fields", "arch", "nvrtc_version", "lib_version"):
        d[n] = d[n].decode(errors="replace")
    return d


class Cache(Handle):
    """A compile cache file opened for inspection and maintenance
    (dcptopk_cache_open: never falls back; untrusted, damaged or foreign files
    are refused saying why). path None = the default file. Not thread-safe."""

    what = "cache"

    def __init__(self, path=None, readonly=False):
        if not isinstance(readonly, bool):
            raise TypeError(f"readonly: got {type(readonly).__name__}; expected a bool")
        p = as_bytes_path(path, "path") if path is not None else None
        h = _vp()
        check(library().dcptopk_cache_open(p, int(readonly), ctypes.byref(h)))
        self._h = h

    def _release(self, h):
        if h:
            library().dcptopk_cache_close(h)

    def _check(self, rc):
        if rc != 0:
            lib = library()
            raise DcptopkError(rc, lib.dcptopk_result_name(rc).decode(),
                               lib.dcptopk_cache_last_error(self._h).decode(errors="replace"))

    @property
    def path(self):
        return library().dcptopk_cache_path(self._live()).decode()

    @property
    def readonly(self):
        """True when the handle cannot write its file."""
        return bool(library().dcptopk_cache_readonly(self._live()))

    def last_error(self):
        return library().dcptopk_cache_last_error(self._live()).decode(errors="replace")

    def _array(self, fn, cls):
        p, n = _vp(), ctypes.c_size_t(0)
        self._check(fn(self._live(), ctypes.byref(p), ctypes.byref(n)))
        try:
            if not n.value:
                return []
            arr = ctypes.cast(p, ctypes.POINTER(cls * n.value)).contents
            return [cls.from_buffer_copy(x) for x in arr]
        finally:
            free(p)

    def list(self):
        """Every entry, most recently used first (dicts)."""
        return [_entry(e) for e in self._array(library().dcptopk_cache_list, CacheEntry)]

    def find(self, key_prefix):
        """One entry by key prefix (4..32 hex digits, unambiguous)."""
        e = CacheEntry()
        self._check(library().dcptopk_cache_find(self._live(), _prefix(key_prefix),
                                                 ctypes.byref(e)))
        return _entry(e)

    def read_blob(self, key_prefix, blob="cubin"):
        """An entry's cubin, ptx or source as bytes (checksum verified)."""
        if blob not in BLOBS:
            raise ValueError(f"blob: got {blob!r}; expected one of {', '.join(BLOBS)}")
        p, n = _vp(), ctypes.c_size_t(0)
        self._check(library().dcptopk_cache_read_blob(self._live(), _prefix(key_prefix),
                                                      BLOBS[blob], ctypes.byref(p),
                                                      ctypes.byref(n)))
        try:
            return ctypes.string_at(p.value, n.value) if n.value else b""
        finally:
            free(p)

    def stats(self):
        st = new(CacheStats)
        self._check(library().dcptopk_cache_stats_get(self._live(), ctypes.byref(st)))
        return {n: getattr(st, n) for n, _ in CacheStats._fields_[1:]}

    def verify(self):
        """Verifies every checksum, deleting bad rows unless read-only:
        (checked, bad)."""
        a, b = ctypes.c_int64(0), ctypes.c_int64(0)
        self._check(library().dcptopk_cache_verify(self._live(), ctypes.byref(a),
                                                   ctypes.byref(b)))
        return a.value, b.value

    def prune(self, max_bytes):
        """Removes least-recently-used entries until the total is <=
        max_bytes; returns how many."""
        _checks.integer(max_bytes, "max_bytes", 0, (1 << 63) - 1, "a byte count >= 0")
        n = ctypes.c_int64(0)
        self._check(library().dcptopk_cache_prune(self._live(), max_bytes, ctypes.byref(n)))
        return n.value

    def remove(self, key_prefix):
        self._check(library().dcptopk_cache_remove(self._live(), _prefix(key_prefix)))

    def clear(self):
        """Removes every entry; returns how many."""
        n = ctypes.c_int64(0)
        self._check(library().dcptopk_cache_clear(self._live(), ctypes.byref(n)))
        return n.value

    def export(self, path):
        """Copies every entry into a new file (created exclusively, 0600);
        returns how many."""
        n = ctypes.c_int64(0)
        self._check(library().dcptopk_cache_export(self._live(), as_bytes_path(path, "path"),
                                                   ctypes.byref(n)))
        return n.value

    def import_(self, path, trust=False):
        """Merges a cache file's entries, verified (trust=True: checksums and
        size only, for an operator's own files): (imported, rejected)."""
        if not isinstance(trust, bool):
            raise TypeError(f"trust: got {type(trust).__name__}; expected a bool")
        n, bad = ctypes.c_int64(0), ctypes.c_int64(0)
        # Both paths go through import_ex: plain import reports no rejected count.
        self._check(library().dcptopk_cache_import_ex(self._live(), as_bytes_path(path, "path"),
                                                      1 if trust else 0, ctypes.byref(n),
                                                      ctypes.byref(bad)))
        return n.value, bad.value

    def claims(self):
        """Compiles in progress (or left by dead processes), oldest first."""
        out = []
        for c in self._array(library().dcptopk_cache_claims, CacheClaim):
            out.append({"key": c.key.decode(), "pid": c.pid,
                        "host": c.host.decode(errors="replace"), "started": c.started,
                        "stale": bool(c.stale)})
        return out

    def clear_stale_claims(self):
        n = ctypes.c_int64(0)
        self._check(library().dcptopk_cache_clear_stale_claims(self._live(), ctypes.byref(n)))
        return n.value



__all__ = ["Cache", "cache_default_path"]
