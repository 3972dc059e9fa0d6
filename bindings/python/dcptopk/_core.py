"""Configs, keys, contexts, workspaces, the loopback world and the launches
behind the torch ops (the C calls on CUDA tensors, the CPU reference on host
tensors). torch is imported only by the calls that take tensors.
"""
import ctypes
import os
import sys
import threading
import time
import weakref

from . import _checks
from ._lib import (ContextConfig, ContextStats, DcptopkError, Key, MergeConfig, PackArgs,
                   PairPackArgs, PairSelectArgs, RowsMap, SelectArgs, SelftestReport, WarmupStats,
                   WorkspaceLayout, PROGRESS_FN, check, library, new, _c_i64, _c_u32, _c_u64, _vp)

# ------------------------------------------------------------ configs, keys


def config_names():
    """Names of the built-in configs (the first is the default)."""
    lib, out, i = library(), [], 0
    while True:
        n = lib.dcptopk_merge_config_name(i)
        if n is None:
            return out
        out.append(n.decode())
        i += 1


def config(name="deepseek-v3.2-dcp8", **overrides):
    """A named config, with fields overridden (topk=..., world_size=...)."""
    if not isinstance(name, str):
        raise _checks.ArgTypeError(f"name: got {type(name).__name__} {name!r}; expected a "
                                   f"config name (str), one of {', '.join(config_names())}")
    cfg = MergeConfig()
    check(library().dcptopk_merge_config_named(_checks.c_str(name, "name"), ctypes.byref(cfg)))
    return cfg.copy(**overrides)


def make_config(kind="packed", *, topk, local_topk=0, world_size, block_size=0, interleave=1,
                emit_ids=True, exact=None):
    """A config from its fields, validated by the library (DcptopkError names
    the field). kind: "packed" or "pair"; exact defaults to True for packed."""
    kinds = {"packed": MergeConfig.PACKED, "pair": MergeConfig.PAIR}
    if isinstance(kind, str) and kind not in kinds:
        raise ValueError(f"kind: got {kind!r}; expected 'packed' or 'pair'")
    k = kinds.get(kind, kind) if isinstance(kind, str) else _checks.c_int(kind, "kind",
                                                                          ctypes.c_int32)
    if exact is None:
        exact = k == MergeConfig.PACKED
    cfg = MergeConfig(kind=k, topk=topk, local_topk=local_topk if k == 0 else topk,
                      world_size=world_size, block_size=block_size, interleave=interleave,
                      emit_ids=int(bool(emit_ids)), exact=int(bool(exact) and k == 0))
    config_check(cfg)
    return cfg


def config_check(cfg):
    """Raises DcptopkError naming the first invalid field of cfg."""
    check(library().dcptopk_merge_config_check(ctypes.byref(cfg)))


def as_config(cfg):
    if isinstance(cfg, MergeConfig):
        return cfg
    if isinstance(cfg, str):
        return config(cfg)
    if isinstance(cfg, (list, tuple)):
        return MergeConfig.from_list(cfg)
    raise TypeError(f"cfg: got {type(cfg).__name__}; expected a MergeConfig, a config name or "
                    "its int list")


def packed_row_words(n):
    """int32 words of a packed row of n candidates: n + n/32 (the library's)."""
    return library().dcptopk_packed_row_words(_checks.c_int(n, "n", ctypes.c_int32))


def rescue_slots(k, n):
    """Local top-K lists a rank can receive per row: (K - 1) // N (the library's)."""
    return library().dcptopk_rescue_slots(_checks.c_int(k, "k", ctypes.c_int32),
                                          _checks.c_int(n, "n", ctypes.c_int32))


def _key_str(k):
    buf = ctypes.create_string_buffer(512)
    library().dcptopk_key_format(ctypes.byref(k), buf, 512)
    return buf.value.decode()


def _keys(cfg, arch):
    lib, n = library(), ctypes.c_size_t(0)
    a = _checks.c_str(arch, "arch") if arch else None
    check(lib.dcptopk_config_keys(ctypes.byref(cfg), a, None, 0, ctypes.byref(n)))
    keys = (Key * n.value)()
    check(lib.dcptopk_config_keys(ctypes.byref(cfg), a, keys, n.value, ctypes.byref(n)))
    return keys


def config_keys(cfg, arch="sm_90a"):
    """The compile keys a config needs, as formatted strings."""
    return [_key_str(k) for k in _keys(as_config(cfg), arch)]


def workspace_layout(cfg, max_rows):
    """Bytes each rank must allocate, in peer-shareable memory, for the rescue
    round of an exact packed config: {"recv_bytes": ..., "flags_bytes": ...}."""
    lay = new(WorkspaceLayout)
    max_rows = _checks.c_int(max_rows, "max_rows", ctypes.c_int64)
    check(library().dcptopk_workspace_layout_get(ctypes.byref(as_config(cfg)), max_rows,
                                                 ctypes.byref(lay)))
    return {"recv_bytes": lay.recv_bytes, "flags_bytes": lay.flags_bytes}


def versions():
    lib = library()
    return {"library": lib.dcptopk_version_string().decode(),
            "library_number": lib.dcptopk_version_number(),
            "binding": _lib_version()}


def _lib_version():
    from ._lib import __version__
    return __version__


def cache_default_path():
    buf = ctypes.create_string_buffer(4096)
    library().dcptopk_cache_default_path(buf, 4096)
    return buf.value.decode()


def device_count():
    return library().dcptopk_device_count()


# ------------------------------------------------------------ the registry
# The torch ops name contexts and workspaces by strings that another process
# can rebuild (op schemas carry no Python objects): a graph that torch.compile
# saved to its on-disk cache in one process, and loads in another, carries
# these names as constants and finds the same state by them there, whatever
# order the process made its workspaces in. A name says what the object is:
# its group (or "local", "host", "peers"), config, rank and device, e.g.
# "group[0,1,2,3]/K=2048,N=384,W=4,rank=1/cuda:1". A second live object of
# one name is "NAME#2", "#3", ... in creation order (give it a name of its
# own when graphs cached across processes use it). "" is the default
# context of the tensors' device (ctx) or no workspace.

_named = {}
_lock = threading.Lock()


def _register(obj, base, explicit=False):
    """Registers obj under base (or base#n when base is taken); an explicit
    name must be free."""
    with _lock:
        name, n = base, 1
        while name in _named:
            if explicit:
                raise ValueError(f"name: {base!r} names a live {type(_named[base]).__name__} "
                                 "already; close it or pick another name")
            n += 1
            name = f"{base}#{n}"
        _named[name] = obj
    return name


def _unregister(name, obj):
    global generation
    with _lock:
        if _named.get(name) is obj:
            del _named[name]
        generation += 1


def registered(cls=None):
    """The names of the live registered objects (of class cls), sorted."""
    with _lock:
        return sorted(n for n, o in _named.items() if cls is None or isinstance(o, cls))


def workspace_name(scope, cfg, rank, device, variant=False):
    """The name a workspace is registered under: scope (its group), the
    config (with block_size and emit_ids for a group workspace, whose merge
    takes its config from it), the rank and the device."""
    s = f"{scope}/K={cfg.topk},N={cfg.local_topk},W={cfg.world_size}"
    if variant:
        s += f",B={cfg.block_size},ids={int(bool(cfg.emit_ids))}"
    return f"{s},rank={rank}/{device}"


# ------------------------------------------------------- recorded launches
# The drop-in calls (merge.py) memoise their launches: while this thread's
# `recorder.calls` is a list, launch() appends each C call to it, and a later
# call with the same arguments replays the list without rebuilding anything.
# `generation` moves whenever a handle closes, which retires every memoised
# call.

recorder = threading.local()
generation = 0


def launch(fn, args, on_error, ctx_h=None):
    """fn(*args), a C call that launches on a stream; a nonzero result goes to
    on_error(rc, ctx_h), which raises."""
    calls = getattr(recorder, "calls", None)
    if calls is not None:
        calls.append((fn, args, on_error, ctx_h))
    rc = fn(*args)
    if rc:
        on_error(rc, ctx_h)


def lookup(name, cls, what):
    """The live cls registered as `name` (a torch op's argument)."""
    obj = _named.get(name)
    if isinstance(obj, cls):
        return obj
    if not isinstance(name, str):
        raise ValueError(f"{what}: got {type(name).__name__} {name!r}; expected the name of a "
                         f"{cls.__name__} (a str)")
    live = registered(cls)
    raise ValueError(
        f"{what}: no live {cls.__name__} named {name!r} in this process (closed, or made in "
        "another process: a graph compiled there, e.g. loaded from torch.compile's cache, finds "
        "its state by name, so create the same workspaces here before running it; for the "
        "drop-in, init_dcp_topk_rescue_workspace(max_rows, K, N, group) on the same group and "
        f"device). Live: {', '.join(repr(n) for n in live) if live else 'none'}")


# ------------------------------------------------------------------ progress

_ORIGINS = ("memory", "cache", "compiled")


class Progress:
    """Warmup progress: a bar on a terminal (stderr), quiet otherwise. Each key
    is also logged at DEBUG on the `dcptopk` logger. While no key is ready
    (the library compiles missing keys side by side before it reports them in
    order) a ticker redraws the bar with the elapsed time every half second."""

    TICK_S = 0.5

    def __init__(self, total, stream=None, enabled=None, label="dcptopk warmup"):
        self.total, self.done, self.label = total, 0, label
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = hasattr(self.stream, "isatty") and self.stream.isatty() and \
                os.environ.get("DCPTOPK_PROGRESS", "1") != "0"
        self.enabled = enabled
        self.counts = {o: 0 for o in _ORIGINS}
        self.last = ""
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = None
        if self.enabled:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    def _draw(self):
        width = 30
        fill = width * self.done // max(self.total, 1)
        self.stream.write(f"\r{self.label} [{'#' * fill}{'.' * (width - fill)}] "
                          f"{self.done}/{self.total} {time.monotonic() - self._t0:.1f} s "
                          f"{self.last}\033[K")
        self.stream.flush()

    def _tick(self):
        while not self._stop.wait(self.TICK_S):
            with self._lock:
                self._draw()

    def key_ready(self, key, origin, ms):
        import logging
        name = _ORIGINS[origin] if 0 <= origin < 3 else str(origin)
        logging.getLogger("dcptopk").debug("warmup %d/%d %s: %s in %.1f ms", self.done + 1,
                                           self.total, key, name, ms)
        with self._lock:
            self.done += 1
            self.counts[name] = self.counts.get(name, 0) + 1
            short = key if len(key) <= 60 else key[:57] + "..."
            self.last = f"{short} ({name}, {ms:.0f} ms)"
            if self.enabled:
                self._draw()

    def close(self):
        self._stop.set()
        if self._ticker:
            self._ticker.join()
        if self.enabled:
            c = self.counts
            self.stream.write(f"\r{self.label}: {self.done} kernels in "
                              f"{time.monotonic() - self._t0:.1f} s ({c['compiled']} compiled, "
                              f"{c['cache']} from the cache, {c['memory']} already loaded)\033[K\n")
            self.stream.flush()


# ------------------------------------------------------------------- context

# Every live Context (compiles_after_warmup sums their counters).
_contexts = weakref.WeakSet()


def late_kernels():
    """Kernels that launches had to compile (late_compiles) or load from the
    cache file (late_loads) after their context's first warmup or seal,
    summed over this process's live contexts: each is a config missing from
    the warmup (the library also logs each at warn level, on the `dcptopk`
    logger when its log is routed to Python)."""
    out = {"late_compiles": 0, "late_loads": 0}
    for ctx in list(_contexts):
        if getattr(ctx, "_h", None):
            st = ctx.stats()
            out["late_compiles"] += st["late_compiles"]
            out["late_loads"] += st["late_loads"]
    return out


def compiles_after_warmup():
    """For an engine's JIT monitor: the kernels that launches had to compile
    or load after warmup, in all contexts of this process (late_kernels()
    splits them). It stays 0 after model load when every config was warmed;
    init_dcp_topk_rescue_workspace warms the drop-in's."""
    late = late_kernels()
    return late["late_compiles"] + late["late_loads"]


class WarmupLog:
    """One warmup pass over several configs: the union of their keys, each
    reported once with its number, as `dcptopk warmup 3/11: KEY compiled in
    812 ms` at INFO on the `dcptopk` logger (a model load that compiles for
    seconds says what it does). progress: None = also a bar on a terminal,
    False = the log lines only, or a callable (done, total, key, origin, ms)
    with origin "memory", "cache" or "compiled". `key` is the (key, origin,
    ms) callback the library's warmups take; keys warmed elsewhere (a group's
    exchange kernels) add to the total as they come."""

    def __init__(self, ctx, cfgs, progress=None, label="dcptopk warmup"):
        self.ctx, self.label = ctx, label
        self.cfgs = [as_config(c) for c in cfgs]
        keys, seen = [], set()
        for c in self.cfgs:
            for k in _keys(c, ctx.arch):
                b = bytes(k)
                if b not in seen:
                    seen.add(b)
                    keys.append(k)
        self.keys = keys
        self.total, self.done = len(keys), 0
        self.counts = {o: 0 for o in _ORIGINS}
        self.ms = 0.0
        self._seen = set()
        self._user = progress if callable(progress) else None
        self._bar = Progress(self.total) if progress is None else None
        self.errors = []

    def key(self, key, origin, ms):
        if key in self._seen:
            return
        self._seen.add(key)
        self.done += 1
        self.total = max(self.total, self.done)
        name = _ORIGINS[origin] if 0 <= origin < 3 else str(origin)
        self.counts[name] = self.counts.get(name, 0) + 1
        self.ms += ms
        how = {"compiled": "compiled", "cache": "loaded from the cache",
               "memory": "already loaded"}.get(name, name)
        import logging
        logging.getLogger("dcptopk").info("%s %d/%d: %s %s in %.0f ms", self.label, self.done,
                                          self.total, key, how, ms)
        if self._bar:
            self._bar.total = self.total
            self._bar.key_ready(key, origin, ms)
        if self._user:
            try:
                self._user(self.done, self.total, key, name, ms)
            except Exception as e:  # raised by run() or check(), never through C
                self.errors.append(e)

    def check(self):
        """Raises the first exception of the progress callable."""
        if self.errors:
            raise self.errors[0]

    def run(self, keys=None):
        """Warms `keys` (default: every key of the configs) on the context."""
        keys = self.keys if keys is None else keys
        if not keys:
            return

        def on_key(_user, key, origin, ms):
            try:
                self.key(_key_str(key.contents), origin, ms)
            except Exception as e:  # never raise through C
                self.errors.append(e)
        cb = PROGRESS_FN(on_key)
        arr = (Key * len(keys))(*keys)
        st = new(WarmupStats)
        check(library().dcptopk_warmup_keys(self.ctx._handle(), arr, len(keys), cb, None,
                                            ctypes.byref(st)), self.ctx._h)
        self.check()

    def close(self):
        if self._bar:
            self._bar.close()
            self._bar = None

    def stats(self):
        return {"keys": self.done, "compiled": self.counts["compiled"],
                "cache_hits": self.counts["cache"], "memory_hits": self.counts["memory"],
                "ms": self.ms}


class Context:
    """A dcptopk context on one CUDA device (device=-1 with arch: compile only).
    name: what the torch ops call it (default "ctx/cuda:N", "#2" for a second
    one; a graph cached across processes finds it by this name)."""

    def __init__(self, device=0, arch=None, cache_path=None, strict=False, cache_mode=0,
                 name=None):
        if name is not None and (not isinstance(name, str) or not name):
            raise _checks.ArgTypeError(f"name: got {name!r}; expected a non-empty str")
        lib = library()
        cc = new(ContextConfig)
        cc.version = 1
        # Each through the checked struct setter: an int32 device, no NUL in
        # the strings (C would read a shorter path).
        cc.device, cc.cache_mode = device, cache_mode
        cc.arch = arch if arch else None
        cc.cache_path = os.fsencode(cache_path) if cache_path else None
        cc.strict = bool(strict)
        h = _vp()
        check(lib.dcptopk_context_create(ctypes.byref(cc), ctypes.byref(h)))
        self._h, self.device, self.strict = h, device, bool(strict)
        base = f"ctx/cuda:{device}" if device >= 0 else f"ctx/{arch or 'compile'}"
        self.name = _register(self, name or base, explicit=name is not None)
        _contexts.add(self)

    def close(self):
        if getattr(self, "_h", None):
            _unregister(self.name, self)
            library().dcptopk_context_destroy(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _handle(self):
        if not self._h:
            raise ValueError("context: closed")
        return self._h

    @property
    def arch(self):
        return library().dcptopk_context_arch(self._handle()).decode()

    def seal(self):
        check(library().dcptopk_context_seal(self._handle()), self._h)

    def stats(self):
        st = new(ContextStats)
        check(library().dcptopk_context_stats_get(self._handle(), ctypes.byref(st)), self._h)
        return {n: getattr(st, n) for n, _ in ContextStats._fields_[1:]}

    def warmup(self, cfgs, progress=None):
        """Compiles or loads every kernel of a config or a list of configs (a
        MergeConfig or a name each). progress: None = a bar on a terminal and
        quiet otherwise, False = none, or a callable (key_string, origin, ms).
        Returns the stats of each config as a list of dicts (one dict for a
        single config)."""
        single = not isinstance(cfgs, (list, tuple))
        cfgs = [as_config(c) for c in ([cfgs] if single else cfgs)]
        total = sum(len(_keys(c, self.arch)) for c in cfgs)
        if progress is None or progress is True:
            bar = Progress(total, enabled=None if progress is None else True)
            report = bar.key_ready
        elif progress is False:
            bar, report = None, None
        else:
            bar, report = None, progress
        errors = []

        def on_key(_user, key, origin, ms):
            try:
                if report:
                    report(_key_str(key.contents), origin, ms)
            except Exception as e:  # never raise through C
                errors.append(e)

        cb = PROGRESS_FN(on_key)
        out = []
        try:
            for cfg in cfgs:
                st = new(WarmupStats)
                check(library().dcptopk_warmup(self._handle(), ctypes.byref(cfg), cb, None,
                                               ctypes.byref(st)), self._h)
                out.append({n: getattr(st, n) for n, _ in WarmupStats._fields_[1:]})
        finally:
            if bar:
                bar.close()
        if errors:
            raise errors[0]
        return out[0] if single else out

    def warmup_all(self, cfgs, progress=None, label="dcptopk warmup"):
        """Compiles or loads the union of the keys of several configs, each
        key once, numbered over the whole pass (see WarmupLog for progress).
        Returns {"keys", "compiled", "cache_hits", "memory_hits", "ms"}."""
        rep = WarmupLog(self, cfgs if isinstance(cfgs, (list, tuple)) else [cfgs], progress,
                        label)
        try:
            rep.run()
        finally:
            rep.close()
        return rep.stats()

    def selftest(self, cfg, rows=64, seed=1):
        """Runs the library's deployment check of cfg (dcptopk_selftest)."""
        rep = new(SelftestReport)
        rows = _checks.c_int(rows, "rows", ctypes.c_int64)
        seed = _checks.c_int(seed, "seed", ctypes.c_uint64)
        check(library().dcptopk_selftest(self._handle(), ctypes.byref(as_config(cfg)), rows, seed,
                                         ctypes.byref(rep)), self._h)
        return {"on_gpu": bool(rep.on_gpu), "rows_checked": rep.rows_checked,
                "rows_rescued": rep.rows_rescued, "mismatches": rep.mismatches,
                "gpu_ms": rep.gpu_ms, "summary": rep.summary.decode(errors="replace")}

    # -- workspaces

    def workspace(self, cfg, max_rows, rank, peer_recv, peer_flags, keepalive=(), name=None,
                  scope="peers"):
        """The rescue workspace of `rank` for an exact packed config.

        peer_recv / peer_flags: world_size device addresses (ints) of every
        rank's receive slots and flags as mapped on this device (sizes from
        workspace_layout(); entry `rank` is this rank's own, zeroed here).
        Create it once per group, before any CUDA graph capture. keepalive:
        objects (the buffers) the workspace keeps alive. name: what the torch
        ops call it (default workspace_name(scope, cfg, rank, device))."""
        cfg = as_config(cfg)
        W = cfg.world_size
        if rank is None:
            raise ValueError(f"rank: got None; expected an int in [0, world_size = {W})")
        if len(peer_recv) != W or len(peer_flags) != W:
            raise ValueError(f"peer_recv / peer_flags: got {len(peer_recv)} / {len(peer_flags)} "
                             f"addresses; expected world_size = {W}")
        max_rows = _checks.c_int(max_rows, "max_rows", ctypes.c_int64)
        rank = _checks.c_int(rank, "rank", ctypes.c_int32)
        recv = (_c_u64 * W)(*[_checks.c_int(a, f"peer_recv[{i}]", _c_u64)
                              for i, a in enumerate(peer_recv)])
        flags = (_c_u64 * W)(*[_checks.c_int(a, f"peer_flags[{i}]", _c_u64)
                               for i, a in enumerate(peer_flags)])
        h = _vp()
        check(library().dcptopk_workspace_create(self._handle(), ctypes.byref(cfg), max_rows, rank,
                                                 recv, flags, ctypes.byref(h)), self._h)
        return Workspace(self, cfg, max_rows, rank, h, keepalive, name, scope)

    def local_workspace(self, cfg, max_rows, name=None):
        """The workspace of a world of one rank (world_size 1): its own buffers,
        allocated with torch on this context's device."""
        import torch
        cfg = as_config(cfg)
        if cfg.world_size != 1:
            raise ValueError(f"cfg: world_size = {cfg.world_size}; a local workspace is for a "
                             "world of 1 (use the distributed runtime or Context.workspace)")
        lay = workspace_layout(cfg, max_rows)
        dev = torch.device("cuda", self.device)
        recv = torch.zeros(max(1, (lay["recv_bytes"] + 3) // 4), dtype=torch.int32, device=dev)
        flags = torch.zeros(max(1, (lay["flags_bytes"] + 3) // 4), dtype=torch.int32, device=dev)
        return self.workspace(cfg, max_rows, 0, [recv.data_ptr()], [flags.data_ptr()],
                              keepalive=(recv, flags), name=name, scope="local")

    def loopback(self, cfg, max_rows, max_local_len):
        """A loopback world: world_size virtual ranks on this GPU (tests, benchmarks)."""
        return LoopbackWorld(self, as_config(cfg), max_rows, max_local_len)

    # -- the calls (each a torch op: see dcptopk.ops)

    def pack(self, cfg, logits, row_ends, out=None, max_local_len=None):
        """bf16 logits [T, S] + int32 row ends [T] -> packed rows int32 [T, N + N/32]."""
        from . import ops
        return ops.pack(cfg, logits, row_ends, out, max_local_len, ctx=self)

    def pack_indices(self, cfg, logits, local_ids, out=None, row_ends=None, max_local_len=None):
        """bf16 logits [T, S] + the caller's local ids int32 [T, N] -> packed rows."""
        from . import ops
        return ops.pack_indices(cfg, logits, local_ids, out, row_ends, max_local_len, ctx=self)

    def select(self, cfg, gathered, *, rank, ids_out=None, workspace=None, logits=None,
               row_ends=None, max_local_len=None, rows=None):
        """Gathered packed rows int32 [W, T, N + N/32] (read in place; a
        [W, T_alloc, ..][:, :T] view sets rank_stride_rows) -> ids [T, K]
        and/or physical rows (rows=RowsOutput). Exact configs also need the
        workspace and this rank's logits and row ends."""
        from . import ops
        return ops.select(cfg, gathered, rank=rank, ids_out=ids_out, workspace=workspace,
                          logits=logits, row_ends=row_ends, max_local_len=max_local_len,
                          rows=rows, ctx=self)

    def pair_pack(self, cfg, logits, local_ids, *, rank, row_starts=None, row_ends=None,
                  out=None):
        """fp32 logits [T, S] + int32 local ids [T, K] -> int32 candidates [T, K, 2]."""
        from . import ops
        return ops.pair_pack(cfg, logits, local_ids, rank=rank, row_starts=row_starts,
                             row_ends=row_ends, out=out, ctx=self)

    def pair_select(self, cfg, candidates, *, rank, ids_out=None, rows=None, ids_as_float=False):
        """int32 [W, T, K, 2] (rank-major, read in place) or [T, W*K, 2] -> ids [T, K]
        and/or physical rows (rows=RowsOutput)."""
        from . import ops
        return ops.pair_select(cfg, candidates, rank=rank, ids_out=ids_out, rows=rows,
                               ids_as_float=ids_as_float, ctx=self)


_default_ctx = {}
_default_opts = {"arch": None, "cache_path": None, "strict": False, "cache_mode": 0}


def configure(**opts):
    """Options of the default contexts the torch ops use (created on first use
    per device): arch, cache_path, strict, cache_mode. Call before first use."""
    bad = set(opts) - set(_default_opts)
    if bad:
        raise TypeError(f"configure: unknown option(s) {', '.join(sorted(bad))}")
    if _default_ctx:
        raise RuntimeError("configure: the default contexts exist already; configure first")
    _default_opts.update(opts)


def default_context(device):
    """The default context of a CUDA device index (created on first use)."""
    ctx = _default_ctx.get(device)
    if ctx is None:
        with _default_lock:
            ctx = _default_ctx.get(device)
            if ctx is None:
                # A name of its own: the same in every process, whatever
                # contexts the process made before it.
                ctx = Context(device=device, name=f"default/cuda:{device}", **_default_opts)
                _default_ctx[device] = ctx
    return ctx


_default_lock = threading.Lock()


def _host_call(ctx_name, name, tensor):
    """True for host tensors (the CPU reference); with a context given (a
    Context's method), host tensors are refused: the context is on a GPU."""
    if tensor.device.type != "cpu":
        return False
    if ctx_name:
        ctx = lookup(ctx_name, Context, "ctx")
        raise ValueError(f"{name}: got a tensor on cpu; the context is on cuda:{ctx.device} "
                         "(a Context's calls take its device's tensors; the CPU reference is "
                         "dcptopk.ops.* without ctx)")
    return True


def _context_for(ctx_name, tensor):
    dev = tensor.device.index
    if dev is None:
        import torch
        dev = torch.cuda.current_device()
    if not ctx_name:
        return default_context(dev)
    ctx = lookup(ctx_name, Context, "ctx")
    if ctx.device != dev:
        raise ValueError(f"ctx: the context is on cuda:{ctx.device}; the tensors are on "
                         f"cuda:{dev}")
    return ctx


def _stream(device):
    """The raw handle of the device's current stream."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:     # no Stream object per call (what Inductor's launchers use)
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


# ------------------------------------------------------------------ workspace

class Workspace:
    """A rank's rescue workspace; lives as long as you keep it. On a CPU
    "device" (for the reference) it has no C handle."""

    def __init__(self, ctx, cfg, max_rows, rank, handle, keepalive=(), name=None,
                 scope="peers"):
        self._ctx, self._h, self._keep = ctx, handle, keepalive
        self.cfg, self.max_rows, self.rank = cfg.copy(), int(max_rows), int(rank)
        self.topk, self.local_topk, self.world_size = cfg.topk, cfg.local_topk, cfg.world_size
        self.device_group = None
        if name is not None and (not isinstance(name, str) or not name):
            raise _checks.ArgTypeError(f"name: got {name!r}; expected a non-empty str")
        dev = "cpu" if ctx is None else f"cuda:{ctx.device}"
        self.key = _register(self, name or workspace_name(scope, cfg, rank, dev),
                             explicit=name is not None)

    @classmethod
    def host(cls, cfg, max_rows, rank=0, name=None):
        """A workspace for the CPU reference path (no device state)."""
        return cls(None, as_config(cfg), max_rows, rank, None, name=name, scope="host")

    def info(self):
        dev = "cpu" if self._ctx is None else f"cuda:{self._ctx.device}"
        return (self.topk, self.local_topk, self.world_size, self.rank, self.max_rows, dev)

    def close(self):
        if getattr(self, "key", None) is not None:
            _unregister(self.key, self)
        if getattr(self, "_h", None):
            library().dcptopk_workspace_destroy(self._h)
            self._h = None
        self._keep = ()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def saturation_ptr(self):
        """Device address of the saturation words (uint32 [max_rows])."""
        return library().dcptopk_workspace_saturation(self._h) if self._h else 0

    def saturation(self, rows=None):
        """The saturation words as an int32 tensor view [max_rows] (or [rows])."""
        import torch
        n = self.max_rows if rows is None else rows
        if not self._h:
            raise ValueError("workspace: a host workspace has no device saturation words")
        return _device_view(self.saturation_ptr, n, torch.int32, self._ctx.device)

    def check(self):
        """Synchronises the current stream and raises DcptopkError
        (DCPTOPK_RESCUE_TIMEOUT) if a rescue wait timed out since the last check."""
        if self._h:
            check(library().dcptopk_workspace_check(self._h, _stream(self._ctx.device)),
                  self._ctx._h)


def _device_view(addr, n, dtype, device):
    """A torch tensor over n elements of library-owned device memory (no copy)."""
    import torch
    if not addr:
        raise ValueError("address: NULL")
    nbytes = n * torch.empty((), dtype=dtype).element_size()
    iface = {"shape": (n,), "typestr": {torch.int32: "<i4", torch.int64: "<i8"}[dtype],
             "data": (addr, False), "version": 3, "strides": None}

    class _Holder:
        __cuda_array_interface__ = iface
    t = torch.as_tensor(_Holder(), device=torch.device("cuda", device))
    assert t.numel() * t.element_size() == nbytes
    return t


# ------------------------------------------------------------- loopback world

class LoopbackWorld:
    """world_size virtual ranks on one GPU, each with its own workspace; the
    all-gather is a device copy (dcptopk_loopback_*). For tests and
    benchmarks of the whole exact merge on one GPU."""

    def __init__(self, ctx, cfg, max_rows, max_local_len):
        max_rows = _checks.c_int(max_rows, "max_rows", ctypes.c_int64)
        max_local_len = _checks.c_int(max_local_len, "max_local_len", ctypes.c_int64)
        h = _vp()
        check(library().dcptopk_loopback_create(ctx._handle(), ctypes.byref(cfg), max_rows,
                                                max_local_len, ctypes.byref(h)), ctx._h)
        self._ctx, self._h, self.cfg = ctx, h, cfg.copy()
        self.max_rows, self.max_local_len = max_rows, max_local_len

    def close(self):
        if getattr(self, "_h", None):
            library().dcptopk_loopback_destroy(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def merge(self, logits, row_ends, ids_out=None, rows=None):
        """logits: W bf16 [T, S] tensors (one stride), row_ends: W int32 [T];
        ids_out: W int32 [T, K] (allocated when None and emit_ids); rows: W
        RowsOutput or None. Returns ids_out."""
        import torch
        cfg, W = self.cfg, self.cfg.world_size
        if len(logits) != W or len(row_ends) != W:
            raise ValueError(f"logits, row_ends: got {len(logits)} / {len(row_ends)} tensors; "
                             f"expected world_size = {W}")
        T = logits[0].shape[0]
        dev = logits[0].device
        if T > self.max_rows:
            raise ValueError(f"logits[0]: {T} rows; the loopback world holds {self.max_rows}")
        stride = None
        for r in range(W):
            s, _ = _checks.bf16_logits(logits[r], T, dev, self.max_local_len, f"logits[{r}]")
            if logits[r].shape[0] != T:
                _checks.fail(f"logits[{r}]", logits[r], f"{T} rows like logits[0]")
            if stride is not None and s != stride:
                _checks.fail(f"logits[{r}]", logits[r], f"the row stride {stride} of logits[0]")
            stride = s
            _checks.row_ends(row_ends[r], T, dev, f"row_ends[{r}]")
        if ids_out is None and cfg.emit_ids:
            ids_out = [torch.empty((T, cfg.topk), dtype=torch.int32, device=dev) for _ in range(W)]
        ids_p = None
        if ids_out is not None:
            for r in range(W):
                st = _checks.ids_out(cfg, ids_out[r], T, dev)
                if st != cfg.topk:
                    _checks.fail(f"ids_out[{r}]", ids_out[r], f"int32 [{T}, {cfg.topk}] contiguous")
            ids_p = (_vp * W)(*[t.data_ptr() for t in ids_out])
        maps = None
        if rows is not None:
            maps = (RowsMap * W)()
            for r in range(W):
                maps[r] = rows[r]._rows_map(cfg, T, dev)
        lp = (_vp * W)(*[t.data_ptr() for t in logits])
        rp = (_vp * W)(*[t.data_ptr() for t in row_ends])
        check(library().dcptopk_loopback_merge(self._h, lp, stride, rp, T, ids_p, maps,
                                              _stream(self._ctx.device)), self._ctx._h)
        return ids_out

    def check(self):
        check(library().dcptopk_loopback_check(self._h, _stream(self._ctx.device)), self._ctx._h)


# ------------------------------------------------------ physical rows output

class RowsOutput:
    """The physical-rows output of a select (the rows map): for row t, the
    selected tokens this rank owns as block_table[req_id[t], l // B] *
    stride_rows + l % B, compacted into rows_out[t] (-1 after), their number
    in counts_out[t]. B is the config's block_size."""

    def __init__(self, req_id, block_table, rows_out, counts_out, stride_rows):
        self.req_id, self.block_table = req_id, block_table
        self.rows_out, self.counts_out, self.stride_rows = rows_out, counts_out, stride_rows

    def tensors(self):
        return self.req_id, self.block_table, self.rows_out, self.counts_out

    def _rows_map(self, cfg, rows, dev):
        p = _checks.rows_map(cfg, rows, dev, self.req_id, self.block_table, self.rows_out,
                             self.counts_out, self.stride_rows)
        return rows_map_struct(p, self.req_id, self.block_table, self.rows_out, self.counts_out)


def rows_map_struct(plan, req_id, block_table, rows_out, counts_out):
    m = RowsMap()
    if plan is None:
        return m
    m.req_id, m.block_table = req_id.data_ptr(), block_table.data_ptr()
    m.block_table_stride = plan["block_table_stride"]
    m.block_table_cols, m.num_reqs = plan["block_table_cols"], plan["num_reqs"]
    m.stride_rows = plan["stride_rows"]
    m.rows_out, m.rows_out_stride = rows_out.data_ptr(), plan["rows_out_stride"]
    m.counts_out = counts_out.data_ptr()
    return m


def _p(t):
    return t.data_ptr() if t is not None else None


# ------------------------------------------------ launches (the ops' bodies)

def run_pack(ctx_name, cfg, logits, row_ends, out, plan, local_ids=None, indices=False):
    a = new(PackArgs)
    a.logits, a.logits_stride = _p(logits), plan["logits_stride"]
    a.max_local_len, a.row_ends = plan["max_local_len"], _p(row_ends)
    a.local_ids, a.local_ids_stride = _p(local_ids), plan["local_ids_stride"]
    a.rows, a.out = plan["rows"], _p(out)
    lib = library()
    if _host_call(ctx_name, "logits", logits):
        fn = lib.dcptopk_ref_pack_indices if indices else lib.dcptopk_ref_pack
        check(fn(ctypes.byref(cfg), ctypes.byref(a)))
        return
    ctx = _context_for(ctx_name, logits)
    a.stream = _stream(ctx.device)
    fn = lib.dcptopk_pack_indices if indices else lib.dcptopk_pack
    launch(fn, (ctx._handle(), ctypes.byref(cfg), ctypes.byref(a)), check, ctx._h)


def run_select(ctx_name, ws_name, cfg, gathered, ids_out, logits, row_ends, plan, rows_tensors):
    a = new(SelectArgs)
    a.gathered, a.rank_stride_rows = _p(gathered), plan["rank_stride_rows"]
    a.rows, a.rank = plan["rows"], plan["rank"]
    a.ids_out, a.ids_out_stride = _p(ids_out), plan["ids_out_stride"]
    a.rows_map = rows_map_struct(plan["rows_map"], *rows_tensors)
    if cfg.exact:
        a.logits, a.logits_stride = _p(logits), plan["logits_stride"]
        a.max_local_len, a.row_ends = plan["max_local_len"], _p(row_ends)
    lib = library()
    if _host_call(ctx_name, "gathered", gathered):
        _ref_select(cfg, a, logits, plan)
        return
    ctx = _context_for(ctx_name, gathered)
    ws = None
    if cfg.exact:
        ws = lookup(ws_name, Workspace, "workspace")
        if not ws._h:
            raise ValueError("workspace: a host workspace cannot serve a CUDA select")
        ws = ws._h
    a.stream = _stream(ctx.device)
    launch(lib.dcptopk_select, (ctx._handle(), ctypes.byref(cfg), ws, ctypes.byref(a)), check,
           ctx._h)


def _ref_select(cfg, a, logits, plan):
    """The CPU reference of one rank's select; in exact mode also the rescue of
    rows whose only saturated rank is this one (always so with one rank)."""
    import torch
    lib = library()
    T = plan["rows"]
    sat = torch.zeros(max(T, 1), dtype=torch.int32) if cfg.exact else None
    check(lib.dcptopk_ref_select(ctypes.byref(cfg), ctypes.byref(a),
                                 sat.data_ptr() if sat is not None else None))
    if not cfg.exact or T == 0:
        return
    K, me = cfg.topk, plan["rank"]
    push = torch.empty(packed_row_words(K), dtype=torch.int32)
    row_ends = ctypes.cast(a.row_ends, ctypes.POINTER(ctypes.c_int32))
    for t in torch.nonzero(sat[:T] >> 16).flatten().tolist():
        word = int(sat[t]) & 0xFFFFFFFF
        mask = word >> 16
        if mask & ~(1 << me):
            raise RuntimeError(
                f"row {t}: ranks {[r for r in range(cfg.world_size) if mask >> r & 1]} are "
                "saturated; the CPU reference of one rank's select cannot see other ranks' "
                "pushes (use ref_packed_merge for a whole simulated world)")
        row_ptr = a.logits + t * a.logits_stride * 2
        check(lib.dcptopk_ref_push_list(ctypes.byref(cfg), row_ptr, a.max_local_len,
                                        row_ends[t], push.data_ptr()))
        lists = (_vp * 1)(push.data_ptr())
        check(lib.dcptopk_ref_rescue_row(ctypes.byref(cfg), ctypes.byref(a), t, word, lists))


def run_pair_pack(ctx_name, cfg, logits, local_ids, row_starts, row_ends, out, plan):
    a = new(PairPackArgs)
    a.logits, a.logits_stride = _p(logits), plan["logits_stride"]
    a.local_ids, a.local_ids_stride = _p(local_ids), plan["local_ids_stride"]
    a.row_starts, a.row_ends = _p(row_starts), _p(row_ends)
    a.rows, a.rank, a.out = plan["rows"], plan["rank"], _p(out)
    lib = library()
    if _host_call(ctx_name, "local_ids", local_ids):
        check(lib.dcptopk_ref_pair_pack(ctypes.byref(cfg), ctypes.byref(a)))
        return
    ctx = _context_for(ctx_name, local_ids)
    a.stream = _stream(ctx.device)
    launch(lib.dcptopk_pair_pack, (ctx._handle(), ctypes.byref(cfg), ctypes.byref(a)), check,
           ctx._h)


def run_pair_select(ctx_name, cfg, candidates, ids_out, plan, rows_tensors):
    a = new(PairSelectArgs)
    a.candidates, a.layout = _p(candidates), plan["layout"]
    a.rows, a.rank_stride_rows, a.rank = plan["rows"], plan["rank_stride_rows"], plan["rank"]
    a.ids_out, a.ids_out_stride = _p(ids_out), plan["ids_out_stride"]
    a.rows_map = rows_map_struct(plan["rows_map"], *rows_tensors)
    lib = library()
    if _host_call(ctx_name, "candidates", candidates):
        check(lib.dcptopk_ref_pair_select(ctypes.byref(cfg), ctypes.byref(a)))
        return
    ctx = _context_for(ctx_name, candidates)
    a.stream = _stream(ctx.device)
    launch(lib.dcptopk_pair_select, (ctx._handle(), ctypes.byref(cfg), ctypes.byref(a)), check,
           ctx._h)


# ------------------------------------------------------ the reference, whole

def ref_packed_merge(cfg, logits, row_ends, max_local_len=None, rows=None):
    """The whole two-round exact packed merge of W simulated ranks on the CPU
    (the oracle): logits W bf16 [T, S] host tensors (one stride), row_ends W
    int32 [T]. Returns (ids per rank, saturation words per rank, rescued rows);
    ids are None without emit_ids. rows: W RowsOutput (host) or None."""
    import torch
    cfg = as_config(cfg)
    W, T = cfg.world_size, logits[0].shape[0]
    dev = torch.device("cpu")
    if len(logits) != W or len(row_ends) != W:
        raise ValueError(f"logits, row_ends: got {len(logits)} / {len(row_ends)}; expected "
                         f"world_size = {W}")
    stride, mll = _checks.bf16_logits(logits[0], T, dev, max_local_len, "logits[0]")
    for r in range(W):
        s, _ = _checks.bf16_logits(logits[r], T, dev, mll, f"logits[{r}]")
        if s != stride or logits[r].shape[0] != T:
            _checks.fail(f"logits[{r}]", logits[r], f"[{T}, ..] with row stride {stride}")
        _checks.row_ends(row_ends[r], T, dev, f"row_ends[{r}]")
    ids = [torch.full((T, cfg.topk), -7, dtype=torch.int32) for _ in range(W)] \
        if cfg.emit_ids else None
    sats = [torch.zeros(max(T, 1), dtype=torch.int32) for _ in range(W)]
    maps = None
    if rows is not None:
        maps = (RowsMap * W)()
        for r in range(W):
            maps[r] = rows[r]._rows_map(cfg, T, dev)
    rescued = _c_i64(0)
    check(library().dcptopk_ref_packed_merge(
        ctypes.byref(cfg), (_vp * W)(*[t.data_ptr() for t in logits]), stride, mll,
        (_vp * W)(*[t.data_ptr() for t in row_ends]), T,
        (_vp * W)(*[t.data_ptr() for t in ids]) if ids else None, maps,
        (_vp * W)(*[t.data_ptr() for t in sats]), ctypes.byref(rescued)))
    return ids, [s[:T] for s in sats], rescued.value


def check_contract(cfg, packed, logits, row_ends, max_local_len=None):
    """Checks packed rows [T, N + N/32] made elsewhere against the merge
    contract with the library's checker (host tensors; CUDA tensors are copied
    to the host: this synchronises). Raises DcptopkError
    (DCPTOPK_CONTRACT_VIOLATION) naming the row and the reason."""
    import torch
    cfg = as_config(cfg)
    packed, logits, row_ends = (t.detach().cpu() if t.device.type != "cpu" else t
                                for t in (packed, logits, row_ends))
    T = packed.shape[0]
    words = packed_row_words(cfg.local_topk)
    dev = torch.device("cpu")
    _checks.tensor(packed, "packed", torch.int32, (T, words),
                   f"int32 [T, N + N/32 = {words}]")
    packed = packed.contiguous()
    stride, mll = _checks.bf16_logits(logits, T, dev, max_local_len)
    _checks.row_ends(row_ends, T, dev)
    bad = _c_i64(-1)
    check(library().dcptopk_ref_check_contract(ctypes.byref(cfg), packed.data_ptr(),
                                               logits.data_ptr(), stride, mll,
                                               row_ends.data_ptr(), T, ctypes.byref(bad)))


__all__ = ["config_names", "config", "make_config", "config_check", "config_keys",
           "packed_row_words", "rescue_slots", "workspace_layout", "versions", "Context",
           "Workspace", "LoopbackWorld", "RowsOutput", "Progress", "configure", "default_context",
           "ref_packed_merge", "check_contract", "cache_default_path", "device_count",
           "DcptopkError", "WarmupLog", "compiles_after_warmup", "late_kernels", "registered",
           "workspace_name"]
