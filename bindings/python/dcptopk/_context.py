"""Contexts and what lives on them: Context (one CUDA device, its kernels and
their warmup), the default context of each device, warmup with progress,
Workspace (a rank's rescue workspace) and LoopbackWorld (virtual ranks on
one GPU).

torch is imported only by the calls that take or make tensors.
"""
import ctypes
import logging
import os
import sys
import threading
import time
import weakref

from . import _checks, _keys, _registry
from ._config import as_config, workspace_layout
from ._handle import Handle
from ._lib import (ContextConfig, ContextStats, Key, RowsMap, SelftestReport, WarmupStats,
                   PROGRESS_FN, check, library, new, _c_u64, _vp)

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
            for k in _keys.keys(c, ctx.arch):
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
                self.key(_keys.key_str(key.contents), origin, ms)
            except Exception as e:  # never raise through C
                self.errors.append(e)
        cb = PROGRESS_FN(on_key)
        arr = (Key * len(keys))(*keys)
        st = new(WarmupStats)
        check(library().dcptopk_warmup_keys(self.ctx._live(), arr, len(keys), cb, None,
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


class Context(Handle):
    """A dcptopk context on one CUDA device (device=-1 with arch: compile only).
    name: what the torch ops call it (default "ctx/cuda:N", "#2" for a second
    one; a graph cached across processes finds it by this name). The calls
    on tensors are dcptopk.ops' functions, ctx=this context."""

    what = "context"

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
        self.name = _registry.register(self, name or base, explicit=name is not None)
        _contexts.add(self)

    def _release(self, h):
        if h:
            if getattr(self, "name", None) is not None:
                _registry.unregister(self.name, self)
            library().dcptopk_context_destroy(h)

    @property
    def arch(self):
        return library().dcptopk_context_arch(self._live()).decode()

    def seal(self):
        check(library().dcptopk_context_seal(self._live()), self._h)

    def stats(self):
        st = new(ContextStats)
        check(library().dcptopk_context_stats_get(self._live(), ctypes.byref(st)), self._h)
        return {n: getattr(st, n) for n, _ in ContextStats._fields_[1:]}

    def warmup(self, cfgs, progress=None):
        """Compiles or loads every kernel of a config or a list of configs (a
        MergeConfig or a name each). progress: None = a bar on a terminal and
        quiet otherwise, False = none, or a callable (key_string, origin, ms).
        Returns the stats of each config as a list of dicts (one dict for a
        single config)."""
        single = not isinstance(cfgs, (list, tuple))
        cfgs = [as_config(c) for c in ([cfgs] if single else cfgs)]
        total = sum(len(_keys.keys(c, self.arch)) for c in cfgs)
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
                    report(_keys.key_str(key.contents), origin, ms)
            except Exception as e:  # never raise through C
                errors.append(e)

        cb = PROGRESS_FN(on_key)
        out = []
        try:
            for cfg in cfgs:
                st = new(WarmupStats)
                check(library().dcptopk_warmup(self._live(), ctypes.byref(cfg), cb, None,
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
        check(library().dcptopk_selftest(self._live(), ctypes.byref(as_config(cfg)), rows, seed,
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
        check(library().dcptopk_workspace_create(self._live(), ctypes.byref(cfg), max_rows, rank,
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


def current_stream(device):
    """The raw handle of the device's current stream."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:     # no Stream object per call (what Inductor's launchers use)
        return raw(device)
    return torch.cuda.current_stream(device).cuda_stream


def warmup(cfgs, device=None, progress=None, ctx=None):
    """Warm up a list of configs (MergeConfig or names) at model load on the
    default context of `device` (or on ctx), with a progress bar on a
    terminal (quiet otherwise). Returns the stats of each config."""
    if ctx is None:
        if device is None:
            import torch
            device = torch.cuda.current_device()
        ctx = default_context(device)
    return ctx.warmup(list(cfgs) if isinstance(cfgs, (list, tuple)) else [cfgs], progress)


# ------------------------------------------------------------------ workspace

class Workspace(Handle):
    """A rank's rescue workspace; lives as long as you keep it. On a CPU
    "device" (for the reference) it has no C handle."""

    what = "workspace"

    def __init__(self, ctx, cfg, max_rows, rank, handle, keepalive=(), name=None,
                 scope="peers"):
        self._ctx, self._h, self._keep = ctx, handle, keepalive
        self.cfg, self.max_rows, self.rank = cfg.copy(), int(max_rows), int(rank)
        self.topk, self.local_topk, self.world_size = cfg.topk, cfg.local_topk, cfg.world_size
        self.device_group = None
        if name is not None and (not isinstance(name, str) or not name):
            raise _checks.ArgTypeError(f"name: got {name!r}; expected a non-empty str")
        dev = "cpu" if ctx is None else f"cuda:{ctx.device}"
        self.key = _registry.register(self, name or _registry.workspace_name(scope, cfg, rank,
                                                                              dev),
                                      explicit=name is not None)

    @classmethod
    def host(cls, cfg, max_rows, rank=0, name=None):
        """A workspace for the CPU reference path (no device state)."""
        return cls(None, as_config(cfg), max_rows, rank, None, name=name, scope="host")

    def info(self):
        dev = "cpu" if self._ctx is None else f"cuda:{self._ctx.device}"
        return (self.topk, self.local_topk, self.world_size, self.rank, self.max_rows, dev)

    def _release(self, h):
        # A host workspace has no handle, but a name all the same.
        if getattr(self, "key", None) is not None:
            _registry.unregister(self.key, self)
        if h:
            library().dcptopk_workspace_destroy(h)
        self._keep = ()

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
            check(library().dcptopk_workspace_check(self._h, current_stream(self._ctx.device)),
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

class LoopbackWorld(Handle):
    """world_size virtual ranks on one GPU, each with its own workspace; the
    all-gather is a device copy (dcptopk_loopback_*). For tests and
    benchmarks of the whole exact merge on one GPU."""

    what = "loopback world"

    def __init__(self, ctx, cfg, max_rows, max_local_len):
        max_rows = _checks.c_int(max_rows, "max_rows", ctypes.c_int64)
        max_local_len = _checks.c_int(max_local_len, "max_local_len", ctypes.c_int64)
        h = _vp()
        check(library().dcptopk_loopback_create(ctx._live(), ctypes.byref(cfg), max_rows,
                                                max_local_len, ctypes.byref(h)), ctx._h)
        self._ctx, self._h, self.cfg = ctx, h, cfg.copy()
        self.max_rows, self.max_local_len = max_rows, max_local_len

    def _release(self, h):
        if h:
            library().dcptopk_loopback_destroy(h)

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
                                              current_stream(self._ctx.device)), self._ctx._h)
        return ids_out

    def check(self):
        check(library().dcptopk_loopback_check(self._h, current_stream(self._ctx.device)), self._ctx._h)




__all__ = ["Context", "Workspace", "LoopbackWorld", "Progress", "WarmupLog", "configure",
           "default_context", "warmup", "late_kernels", "compiles_after_warmup"]
