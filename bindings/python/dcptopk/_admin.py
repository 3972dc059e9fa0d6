"""The rest of the C API, for tools and tests: the settings table and the
run-time environment (what `dcptopk env` prints), the log level, compile
keys (parse, check, render, hash), the packed format's scalar helpers, the
launcher's view of the process, groups from the environment, and the compile
cache file (what `dcptopk cache` does).

Nothing here imports torch. Arguments are checked before the library is
called (ValueError / TypeError naming the argument); library failures are
DcptopkError with the library's message.
"""
import ctypes
import re

from . import _checks
from ._lib import (CacheClaim, CacheEntry, CacheStats, DcptopkError, EnvInfo, GroupConfig, Key,
                   LaunchEnv, PATH_NAMES, SelftestReport, Setting, as_bytes_path, check,
                   has_dist_runtime, library, new, _vp)

_libc = ctypes.CDLL(None)
_libc.free.restype, _libc.free.argtypes = None, [_vp]

SOURCES = {0: "default", 1: "environment", 2: "ignored"}
LOG_LEVELS = {"quiet": 0, "error": 1, "warn": 2, "info": 3, "debug": 4}
BLOBS = {"cubin": 0, "ptx": 1, "source": 2}


# ---------------------------------------------------------------- settings

def settings():
    """Every variable of the library's settings table, in table order: dicts
    of name, kind, doc, env (the environment's text or None), value (in
    effect: an int or float for numbers and flags, else the text or None)
    and source ("default", "environment" or "ignored": set but invalid, the
    default is in effect)."""
    lib, out = library(), []
    s = new(Setting)
    i = 0
    while lib.dcptopk_setting_get(i, ctypes.byref(s)) == 0:
        kind = s.kind.decode()
        env = s.env.decode(errors="replace") if s.env is not None else None
        if kind in ("int", "bytes", "flag"):
            value = int(s.value.decode())
        elif kind == "seconds":
            value = float(s.value.decode())
        else:
            value = env
        out.append({"name": s.name.decode(), "kind": kind, "doc": s.doc.decode(),
                    "env": env, "value": value, "source": SOURCES.get(s.source, str(s.source))})
        i += 1
    return out


def setting(name):
    """One setting of the table by its variable name (see settings())."""
    if not isinstance(name, str):
        raise TypeError(f"name: got {type(name).__name__}; expected a variable name (str)")
    for s in settings():
        if s["name"] == name:
            return s
    raise ValueError(f"name: got {name!r}; not a variable of the library's settings table "
                     "(dcptopk.settings() lists them)")


def env_info():
    """What `dcptopk env` reports: build, NVRTC version, file and archs (or
    where it looked), driver
    version (or why none), device count, and the default cache file with the
    mode a context would use it in (trusted, shared, absent, refused, none)
    and why."""
    e = new(EnvInfo)
    check(library().dcptopk_env_info_get(ctypes.byref(e)))
    d = lambda b: b.decode(errors="replace")  # noqa: E731
    return {"build": d(e.build),
            "nvrtc": None if e.nvrtc_major < 0 else f"{e.nvrtc_major}.{e.nvrtc_minor}",
            "nvrtc_path": d(e.nvrtc_path) or None,
            "nvrtc_archs": d(e.nvrtc_archs).split(),
            "nvrtc_error": d(e.nvrtc_error) or None,
            "driver_version": e.driver_version or None,
            "device_count": e.device_count,
            "no_device": d(e.no_device) or None,
            "cache_path": d(e.cache_path) or None, "cache_mode": d(e.cache_mode),
            "cache_why": d(e.cache_why) or None}


# --------------------------------------------------------------------- log

def log_level():
    """The library's log level as a name: quiet, error, warn, info, debug."""
    v = library().dcptopk_log_get_level()
    return {n: k for k, n in LOG_LEVELS.items()}.get(v, str(v))


def set_log_level(level):
    """Sets the library's log level (process-wide): a name (quiet, error,
    warn, info, debug) or its number 0..4."""
    if isinstance(level, str):
        if level not in LOG_LEVELS:
            raise ValueError(f"level: got {level!r}; expected one of {', '.join(LOG_LEVELS)}")
        level = LOG_LEVELS[level]
    else:
        _checks.integer(level, "level", 0, 4, "0..4 or a name (quiet, error, warn, info, debug)")
    library().dcptopk_log_set_level(int(level))


# -------------------------------------------------------------------- keys

def _key(spec):
    """A Key from its text ("select(topk=2048,...)@sm_90a", as config_keys
    prints it)."""
    if not isinstance(spec, str):
        raise TypeError(f"key: got {type(spec).__name__}; expected a key spec (str) such as "
                        "dcptopk.config_keys() prints")
    k = Key()
    check(library().dcptopk_key_parse(_checks.c_str(spec, "key"), ctypes.byref(k)))
    return k


def key_parse(spec):
    """The fields of a key spec as a dict (kernel name, its fields, arch);
    DcptopkError naming the bad part when it does not parse."""
    k = _key(spec)
    out = {"kernel": library().dcptopk_kernel_name(k.kernel).decode()}
    out.update({n: getattr(k, n) for n, _ in Key._fields_[1:-1]})
    out["arch"] = k.arch.decode()
    return out


def key_check(spec):
    """Validates a key's fields for its kernel (raises DcptopkError)."""
    check(library().dcptopk_key_check(ctypes.byref(_key(spec))))


def key_render(spec):
    """The CUDA source NVRTC compiles for a key."""
    p = _vp()
    check(library().dcptopk_key_render(ctypes.byref(_key(spec)), ctypes.byref(p)))
    try:
        return ctypes.string_at(p.value).decode()
    finally:
        _libc.free(p)


def key_hash(spec):
    """The 128-bit cache key of a key, 32 hex digits (what `cache ls` shows)."""
    buf = ctypes.create_string_buffer(33)
    check(library().dcptopk_key_hash(ctypes.byref(_key(spec)), buf))
    return buf.value.decode()


# ---------------------------------------------- the packed format, scalars

def ref_ord16(bf16_bits):
    """The order-preserving 16-bit key of bf16 bits (0 for NaN)."""
    _checks.integer(bf16_bits, "bf16_bits", 0, 0xFFFF, "a 16-bit pattern in 0..0xFFFF")
    return library().dcptopk_ref_ord16(bf16_bits)


def ref_ord32(f32_bits):
    """The order-preserving key of fp32 bits (0 for NaN)."""
    _checks.integer(f32_bits, "f32_bits", 0, 0xFFFFFFFF, "a 32-bit pattern")
    return library().dcptopk_ref_ord32(f32_bits)


def ref_global_id(local_id, owner, world_size, interleave=1):
    """The global id of local id `local_id` on rank `owner`."""
    _checks.integer(world_size, "world_size", 1, 16, "an int in 1..16")
    _checks.integer(owner, "owner", 0, world_size - 1, f"a rank in 0..{world_size - 1}")
    _checks.integer(local_id, "local_id", 0, (1 << 17) - 1, "a local id in 0..2^17-1")
    _checks.integer(interleave, "interleave", 1, 1 << 17, "a positive int")
    return library().dcptopk_ref_global_id(local_id, owner, world_size, interleave)


def ref_decode(packed_row, n, j, owner, world_size, interleave=1):
    """Slot j of a packed row (a sequence of N + N/32 int32 words, or a
    ctypes int32 array) sent by `owner`: dict of ord16 (0 = empty), local_id,
    global_id."""
    _checks.integer(n, "n", 32, 4064, "a multiple of 32 (N)")
    if n % 32:
        raise ValueError(f"n: got {n}; expected a multiple of 32")
    _checks.integer(j, "j", 0, n - 1, f"a slot in 0..{n - 1}")
    _checks.integer(world_size, "world_size", 1, 16, "an int in 1..16")
    _checks.integer(owner, "owner", 0, world_size - 1, f"a rank in 0..{world_size - 1}")
    _checks.integer(interleave, "interleave", 1, 1 << 17, "a positive int")
    words = n + n // 32
    if len(packed_row) != words:
        raise ValueError(f"packed_row: got {len(packed_row)} words; expected N + N/32 = {words}")
    arr = packed_row if isinstance(packed_row, ctypes.Array) else \
        (ctypes.c_int32 * words)(*[int(w) for w in packed_row])
    c = library().dcptopk_ref_decode(arr, n, j, owner, world_size, interleave)
    return {"ord16": c.ord16, "local_id": c.local_id, "global_id": c.global_id}


# ------------------------------------------------------ launcher and groups

def path_name(path):
    """"nccl", "push", "loopback", "staged", "store", "auto" for a dcptopk_path number."""
    lib = library()
    if has_dist_runtime(lib):
        return lib.dcptopk_path_name(int(path)).decode()
    return PATH_NAMES.get(int(path), "unknown")


def _need_dist(what):
    lib = library()
    if not has_dist_runtime(lib):
        raise RuntimeError(f"{what}: libdcptopk ({lib._name}) lacks the distributed runtime")
    return lib


def launch_env():
    """The launcher's view of this process (torchrun, Open MPI or Slurm
    variables): dict of rank, world_size, local_rank, local_world_size (-1
    when the launcher does not say) and source; None when no launcher
    variable is set. A malformed variable is a DcptopkError naming it."""
    lib = _need_dist("launch_env")
    e = new(LaunchEnv)
    rc = lib.dcptopk_launch_env_get(ctypes.byref(e))
    if rc == 11:  # DCPTOPK_NOT_FOUND
        return None
    check(rc)
    return {"rank": e.rank, "world_size": e.world_size, "local_rank": e.local_rank,
            "local_world_size": e.local_world_size, "source": e.source.decode()}


class Group:
    """A dcptopk_group made from the launcher's environment
    (dcptopk_group_create_from_env; collective): for scripts and tests.
    Engines over torch.distributed use dcptopk.merge instead."""

    def __init__(self, ctx, store_dir=None, *, path=0, timeout_ms=0, store_prefix=None):
        lib = _need_dist("Group")
        _checks.integer(path, "path", 0, 5, "a dcptopk_path number 0..5 (0 = auto)")
        _checks.integer(timeout_ms, "timeout_ms", 0, 86400000,
                        "milliseconds, 0 = $DCPTOPK_PEER_TIMEOUT_MS or 10000")
        gc = new(GroupConfig)
        gc.version, gc.rank, gc.world_size = 1, -1, -1
        gc.path, gc.timeout_ms = path, timeout_ms
        self._prefix = _checks.c_str(store_prefix, "store_prefix")
        gc.store_prefix = self._prefix
        d = as_bytes_path(store_dir, "store_dir") if store_dir is not None else None
        self.ctx, h = ctx, _vp()
        check(lib.dcptopk_group_create_from_env(ctx._handle(), d, ctypes.byref(gc),
                                                ctypes.byref(h)))
        self._h = h

    def _check(self, rc):
        if rc != 0:
            lib = library()
            raise DcptopkError(rc, lib.dcptopk_result_name(rc).decode(),
                               lib.dcptopk_group_last_error(self._h).decode(errors="replace"))

    def _live(self):
        if not getattr(self, "_h", None):
            raise ValueError("group: closed")
        return self._h

    @property
    def rank(self):
        return library().dcptopk_group_rank(self._live())

    @property
    def world_size(self):
        return library().dcptopk_group_world_size(self._live())

    @property
    def nodes(self):
        """Nodes an exact packed merge runs over: 1 flat, D > 1 the
        hierarchical merge, 0 neither (see path())."""
        return library().dcptopk_group_nodes(self._live())

    def path(self):
        """(path name, reason) of the exchange the group chose."""
        p, why = ctypes.c_int32(0), ctypes.create_string_buffer(640)
        self._check(library().dcptopk_group_path(self._live(), ctypes.byref(p), why, 640))
        return path_name(p.value), why.value.decode(errors="replace")

    def barrier(self):
        """Collective host barrier, bounded by the group's timeout."""
        self._check(library().dcptopk_group_barrier(self._live()))

    def selftest(self, cfg, rows=64, steps=3, seed=1):
        """Collective: dcptopk_selftest_group (every rank checks its own
        outputs bit for bit); returns the report as a dict."""
        from ._core import as_config
        _checks.integer(rows, "rows", 1, 1 << 20, "a positive int")
        _checks.integer(steps, "steps", 1, 1 << 20, "a positive int")
        _checks.integer(seed, "seed", 0, (1 << 64) - 1, "a non-negative int")
        rep = new(SelftestReport)
        self._check(library().dcptopk_selftest_group(self._live(), ctypes.byref(as_config(cfg)),
                                                     rows, steps, seed, ctypes.byref(rep)))
        return {"on_gpu": bool(rep.on_gpu), "rows_checked": rep.rows_checked,
                "rows_rescued": rep.rows_rescued, "mismatches": rep.mismatches,
                "gpu_ms": rep.gpu_ms, "summary": rep.summary.decode(errors="replace")}

    def close(self):
        if getattr(self, "_h", None):
            library().dcptopk_group_destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# ------------------------------------------------------------------- cache

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


class Cache:
    """A compile cache file opened for inspection and maintenance
    (dcptopk_cache_open: never falls back; untrusted, damaged or foreign files
    are refused saying why). path None = the default file. Not thread-safe."""

    def __init__(self, path=None, readonly=False):
        if not isinstance(readonly, bool):
            raise TypeError(f"readonly: got {type(readonly).__name__}; expected a bool")
        p = as_bytes_path(path, "path") if path is not None else None
        h = _vp()
        check(library().dcptopk_cache_open(p, int(readonly), ctypes.byref(h)))
        self._h = h

    def _live(self):
        if not getattr(self, "_h", None):
            raise ValueError("cache: closed")
        return self._h

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
            _libc.free(p)

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
            _libc.free(p)

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

    def close(self):
        if getattr(self, "_h", None):
            library().dcptopk_cache_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
