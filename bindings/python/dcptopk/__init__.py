"""dcptopk: a thin ctypes binding of libdcptopk for Python engines.

Tensors are torch tensors (imported lazily: the config, key and cache calls
work without torch). Every call checks dtype, device, shape and contiguity on
the Python side where it is cheap, then passes raw device pointers and the
current CUDA stream to the C library, which validates again and raises
DcptopkError with the library's detailed message on failure.

    import dcptopk
    ctx = dcptopk.Context(device=0)
    cfg = dcptopk.config("deepseek-v3.2-dcp8-pair")
    ctx.warmup(cfg)                       # at model load: compiles or loads every kernel
    ids = ctx.pair_select(cfg, gathered)  # gathered: int32 [W, T, K, 2] (the all-gather output)
"""
import ctypes
import ctypes.util
import os

__all__ = ["DcptopkError", "MergeConfig", "Context", "Workspace", "config", "config_names",
           "config_keys", "workspace_layout", "library"]

_c_i32, _c_u32, _c_i64, _c_u64 = ctypes.c_int32, ctypes.c_uint32, ctypes.c_int64, ctypes.c_uint64
_vp = ctypes.c_void_p


def _find_library():
    env = os.environ.get("DCPTOPK_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "libdcptopk.so"),
                 os.path.join(here, "..", "..", "..", "build", "libdcptopk.so")):
        if os.path.exists(cand):
            return cand
    found = ctypes.util.find_library("dcptopk")
    if found:
        return found
    raise OSError("libdcptopk.so not found: set DCPTOPK_LIBRARY to its path")


_lib = None


def library():
    """The loaded libdcptopk (ctypes.CDLL), loaded on first use."""
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL(_find_library())
        _declare(_lib)
    return _lib


class DcptopkError(RuntimeError):
    """A dcptopk call failed: .code (int), .name (e.g. DCPTOPK_INVALID_ARGUMENT), message."""

    def __init__(self, code, name, message):
        super().__init__(f"{name}: {message}")
        self.code, self.name = code, name


# ---------------------------------------------------------------- structs
# They mirror include/dcptopk.h field for field; struct_size lets the library
# tell versions apart.

class MergeConfig(ctypes.Structure):
    _fields_ = [("struct_size", _c_u32), ("version", _c_u32), ("kind", _c_i32),
                ("topk", _c_i32), ("local_topk", _c_i32), ("world_size", _c_i32),
                ("block_size", _c_i32), ("interleave", _c_i32), ("emit_ids", _c_i32),
                ("exact", _c_i32)]

    PACKED, PAIR = 0, 1

    def __init__(self, **fields):
        super().__init__(ctypes.sizeof(MergeConfig), 1, 0, 2048, 384, 8, 64, 1, 1, 1)
        for k, v in fields.items():
            setattr(self, k, v)

    def __repr__(self):
        return "MergeConfig(" + ", ".join(f"{n}={getattr(self, n)}" for n, _ in self._fields_[2:]) + ")"


class ContextConfig(ctypes.Structure):
    _fields_ = [("struct_size", _c_u32), ("version", _c_u32), ("device", _c_i32),
                ("arch", ctypes.c_char_p), ("cache_path", ctypes.c_char_p),
                ("cache_mode", _c_i32), ("strict", _c_i32), ("warmup_threads", _c_i32)]


class Key(ctypes.Structure):
    _fields_ = [(n, _c_i32) for n in ("kernel", "topk", "local_topk", "world_size", "block_size",
                                      "interleave", "emit_ids", "exact", "layout", "variant")] + \
               [("arch", ctypes.c_char * 16)]


class WarmupStats(ctypes.Structure):
    _fields_ = [("struct_size", _c_u32), ("keys", _c_u32), ("memory_hits", _c_u32),
                ("cache_hits", _c_u32), ("compiled", _c_u32), ("compile_ms", ctypes.c_double),
                ("load_ms", ctypes.c_double), ("total_ms", ctypes.c_double)]


class RowsMap(ctypes.Structure):
    _fields_ = [("req_id", _vp), ("block_table", _vp), ("block_table_stride", _c_i64),
                ("block_table_cols", _c_i32), ("num_reqs", _c_i32), ("stride_rows", _c_i32),
                ("rows_out", _vp), ("rows_out_stride", _c_i64), ("counts_out", _vp)]


class PairSelectArgs(ctypes.Structure):
    _fields_ = [("struct_size", _c_u32), ("candidates", _vp), ("layout", _c_i32),
                ("rows", _c_i64), ("rank_stride_rows", _c_i64), ("rank", _c_i32),
                ("ids_out", _vp), ("ids_out_stride", _c_i64), ("rows_map", RowsMap),
                ("stream", _vp)]


class PairPackArgs(ctypes.Structure):
    _fields_ = [("struct_size", _c_u32), ("logits", _vp), ("logits_stride", _c_i64),
                ("local_ids", _vp), ("local_ids_stride", _c_i64), ("row_starts", _vp),
                ("row_ends", _vp), ("rows", _c_i64), ("rank", _c_i32), ("out", _vp),
                ("stream", _vp)]


class PackArgs(ctypes.Structure):
    _fields_ = [("struct_size", _c_u32), ("logits", _vp), ("logits_stride", _c_i64),
                ("max_local_len", _c_i64), ("row_ends", _vp), ("local_ids", _vp),
                ("local_ids_stride", _c_i64), ("rows", _c_i64), ("out", _vp), ("stream", _vp)]


class SelectArgs(ctypes.Structure):
    _fields_ = [("struct_size", _c_u32), ("gathered", _vp), ("rank_stride_rows", _c_i64),
                ("rows", _c_i64), ("rank", _c_i32), ("ids_out", _vp), ("ids_out_stride", _c_i64),
                ("rows_map", RowsMap), ("logits", _vp), ("logits_stride", _c_i64),
                ("max_local_len", _c_i64), ("row_ends", _vp), ("stream", _vp)]


class WorkspaceLayout(ctypes.Structure):
    _fields_ = [("struct_size", _c_u32), ("recv_bytes", _c_u64), ("flags_bytes", _c_u64)]


STRUCTS = {"dcptopk_merge_config": MergeConfig, "dcptopk_context_config": ContextConfig,
           "dcptopk_key": Key, "dcptopk_warmup_stats": WarmupStats, "dcptopk_rows_map": RowsMap,
           "dcptopk_pair_select_args": PairSelectArgs, "dcptopk_pair_pack_args": PairPackArgs,
           "dcptopk_pack_args": PackArgs, "dcptopk_select_args": SelectArgs,
           "dcptopk_workspace_layout": WorkspaceLayout}


def _declare(lib):
    R = _c_i32
    sigs = {
        "dcptopk_result_name": (ctypes.c_char_p, [R]),
        "dcptopk_last_error": (ctypes.c_char_p, [_vp]),
        "dcptopk_version_string": (ctypes.c_char_p, []),
        "dcptopk_device_count": (ctypes.c_int, []),
        "dcptopk_context_create": (R, [ctypes.POINTER(ContextConfig), ctypes.POINTER(_vp)]),
        "dcptopk_context_destroy": (None, [_vp]),
        "dcptopk_context_arch": (ctypes.c_char_p, [_vp]),
        "dcptopk_merge_config_named": (R, [ctypes.c_char_p, ctypes.POINTER(MergeConfig)]),
        "dcptopk_merge_config_name": (ctypes.c_char_p, [ctypes.c_size_t]),
        "dcptopk_config_keys": (R, [ctypes.POINTER(MergeConfig), ctypes.c_char_p,
                                    ctypes.POINTER(Key), ctypes.c_size_t,
                                    ctypes.POINTER(ctypes.c_size_t)]),
        "dcptopk_key_format": (ctypes.c_int, [ctypes.POINTER(Key), ctypes.c_char_p, ctypes.c_size_t]),
        "dcptopk_warmup": (R, [_vp, ctypes.POINTER(MergeConfig), _vp, _vp,
                               ctypes.POINTER(WarmupStats)]),
        "dcptopk_pair_select": (R, [_vp, ctypes.POINTER(MergeConfig), ctypes.POINTER(PairSelectArgs)]),
        "dcptopk_pair_pack": (R, [_vp, ctypes.POINTER(MergeConfig), ctypes.POINTER(PairPackArgs)]),
        "dcptopk_pack": (R, [_vp, ctypes.POINTER(MergeConfig), ctypes.POINTER(PackArgs)]),
        "dcptopk_pack_indices": (R, [_vp, ctypes.POINTER(MergeConfig), ctypes.POINTER(PackArgs)]),
        "dcptopk_select": (R, [_vp, ctypes.POINTER(MergeConfig), _vp, ctypes.POINTER(SelectArgs)]),
        "dcptopk_workspace_layout_get": (R, [ctypes.POINTER(MergeConfig), _c_i64,
                                             ctypes.POINTER(WorkspaceLayout)]),
        "dcptopk_workspace_create": (R, [_vp, ctypes.POINTER(MergeConfig), _c_i64, _c_i32,
                                         ctypes.POINTER(_c_u64), ctypes.POINTER(_c_u64),
                                         ctypes.POINTER(_vp)]),
        "dcptopk_workspace_destroy": (None, [_vp]),
        "dcptopk_workspace_saturation": (_c_u64, [_vp]),
        "dcptopk_workspace_check": (R, [_vp, _vp]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def _check(rc, ctx=None):
    if rc != 0:
        lib = library()
        raise DcptopkError(rc, lib.dcptopk_result_name(rc).decode(),
                           lib.dcptopk_last_error(ctx).decode(errors="replace"))


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
    cfg = MergeConfig()
    _check(library().dcptopk_merge_config_named(name.encode(), ctypes.byref(cfg)))
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


def config_keys(cfg, arch="sm_90a"):
    """The compile keys a config needs, as formatted strings."""
    lib, n = library(), ctypes.c_size_t(0)
    _check(lib.dcptopk_config_keys(ctypes.byref(cfg), arch.encode(), None, 0, ctypes.byref(n)))
    keys = (Key * n.value)()
    _check(lib.dcptopk_config_keys(ctypes.byref(cfg), arch.encode(), keys, n.value, ctypes.byref(n)))
    out = []
    for k in keys:
        buf = ctypes.create_string_buffer(512)
        lib.dcptopk_key_format(ctypes.byref(k), buf, 512)
        out.append(buf.value.decode())
    return out


def workspace_layout(cfg, max_rows):
    """Bytes each rank must allocate, in peer-shareable memory, for the rescue
    round of an exact packed config: {"recv_bytes": ..., "flags_bytes": ...}."""
    lay = WorkspaceLayout()
    lay.struct_size = ctypes.sizeof(WorkspaceLayout)
    _check(library().dcptopk_workspace_layout_get(ctypes.byref(cfg), max_rows, ctypes.byref(lay)))
    return {"recv_bytes": lay.recv_bytes, "flags_bytes": lay.flags_bytes}


# ------------------------------------------------------------------ tensors

def _ptr(t, dtype, name, ndim=None, device=None):
    import torch
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{name}: dtype {t.dtype}, expected {dtype}")
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{name}: {t.dim()} dimensions (shape {tuple(t.shape)}), expected {ndim}")
    if not t.is_cuda:
        raise ValueError(f"{name}: on {t.device}, expected a CUDA tensor")
    if device is not None and t.device.index != device:
        raise ValueError(f"{name}: on cuda:{t.device.index}, the context is on cuda:{device}")
    if t.stride(-1) != 1:
        raise ValueError(f"{name}: the last dimension must be contiguous (stride {t.stride()})")
    return t.data_ptr()


def _stream(device):
    import torch
    return torch.cuda.current_stream(device).cuda_stream


class Context:
    """A dcptopk context on one CUDA device (device=-1 with arch: compile only)."""

    def __init__(self, device=0, arch=None, cache_path=None, strict=False, cache_mode=0):
        lib = library()
        cc = ContextConfig(ctypes.sizeof(ContextConfig), 1, device,
                           arch.encode() if arch else None,
                           cache_path.encode() if cache_path else None, cache_mode, int(strict), 0)
        h = _vp()
        _check(lib.dcptopk_context_create(ctypes.byref(cc), ctypes.byref(h)))
        self._h, self.device = h, device

    def close(self):
        if self._h:
            library().dcptopk_context_destroy(self._h)
            self._h = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def arch(self):
        return library().dcptopk_context_arch(self._h).decode()

    def warmup(self, cfg):
        """Compiles or loads every kernel of cfg; returns the stats as a dict."""
        st = WarmupStats()
        st.struct_size = ctypes.sizeof(WarmupStats)
        _check(library().dcptopk_warmup(self._h, ctypes.byref(cfg), None, None, ctypes.byref(st)), self._h)
        return {n: getattr(st, n) for n, _ in WarmupStats._fields_[1:]}

    def pair_pack(self, cfg, logits, local_ids, rank, row_starts=None, row_ends=None, out=None):
        """fp32 logits [T, S] + int32 local ids [T, K] -> int32 candidates [T, K, 2]."""
        import torch
        T, K = local_ids.shape
        if out is None:
            out = torch.empty((T, K, 2), dtype=torch.int32, device=local_ids.device)
        a = PairPackArgs(ctypes.sizeof(PairPackArgs), _ptr(logits, torch.float32, "logits", 2, self.device),
                         logits.stride(0), _ptr(local_ids, torch.int32, "local_ids", 2, self.device),
                         local_ids.stride(0), _ptr(row_starts, torch.int32, "row_starts", 1, self.device),
                         _ptr(row_ends, torch.int32, "row_ends", 1, self.device), T, rank,
                         _ptr(out, torch.int32, "out", 3, self.device), _stream(self.device))
        _check(library().dcptopk_pair_pack(self._h, ctypes.byref(cfg), ctypes.byref(a)), self._h)
        return out

    def pair_select(self, cfg, candidates, rank=0, ids_out=None):
        """int32 [W, T, K, 2] (rank-major, read in place) or [T, W*K, 2] -> int32 ids [T, K]."""
        import torch
        if candidates.dim() == 4:
            layout, T = 0, candidates.shape[1]
            if not candidates.is_contiguous():
                raise ValueError("candidates: a rank-major [W, T, K, 2] buffer must be contiguous")
        elif candidates.dim() == 3:
            layout, T = 1, candidates.shape[0]
        else:
            raise ValueError(f"candidates: shape {tuple(candidates.shape)}, expected [W, T, K, 2] or [T, W*K, 2]")
        if ids_out is None:
            ids_out = torch.empty((T, cfg.topk), dtype=torch.int32, device=candidates.device)
        a = PairSelectArgs()
        a.struct_size = ctypes.sizeof(PairSelectArgs)
        a.candidates = _ptr(candidates, torch.int32, "candidates", None, self.device)
        a.layout, a.rows, a.rank_stride_rows, a.rank = layout, T, T, rank
        a.ids_out = _ptr(ids_out, torch.int32, "ids_out", 2, self.device)
        a.ids_out_stride = ids_out.stride(0)
        a.stream = _stream(self.device)
        _check(library().dcptopk_pair_select(self._h, ctypes.byref(cfg), ctypes.byref(a)), self._h)
        return ids_out

    def _pack_args(self, cfg, logits, row_ends, out, max_local_len):
        """The arguments both packs share, and the output (allocated when None)."""
        import torch
        T = row_ends.shape[0]
        words = cfg.local_topk + cfg.local_topk // 32
        if out is None:
            out = torch.empty((T, words), dtype=torch.int32, device=logits.device)
        a = PackArgs()
        a.struct_size = ctypes.sizeof(PackArgs)
        a.logits = _ptr(logits, torch.bfloat16, "logits", 2, self.device)
        a.logits_stride = logits.stride(0)
        a.max_local_len = max_local_len if max_local_len is not None else logits.shape[1]
        a.row_ends = _ptr(row_ends, torch.int32, "row_ends", 1, self.device)
        a.rows, a.out, a.stream = T, _ptr(out, torch.int32, "out", 2, self.device), _stream(self.device)
        return a, out

    def pack(self, cfg, logits, row_ends, out=None, max_local_len=None):
        """bf16 logits [T, S] + int32 row ends [T] -> packed rows int32 [T, N + N/32]."""
        a, out = self._pack_args(cfg, logits, row_ends, out, max_local_len)
        _check(library().dcptopk_pack(self._h, ctypes.byref(cfg), ctypes.byref(a)), self._h)
        return out

    def pack_indices(self, cfg, logits, row_ends, local_ids, out=None, max_local_len=None):
        """bf16 logits [T, S] + the caller's local ids int32 [T, N] -> packed rows [T, N + N/32]."""
        import torch
        a, out = self._pack_args(cfg, logits, row_ends, out, max_local_len)
        a.local_ids = _ptr(local_ids, torch.int32, "local_ids", 2, self.device)
        a.local_ids_stride = local_ids.stride(0)
        _check(library().dcptopk_pack_indices(self._h, ctypes.byref(cfg), ctypes.byref(a)), self._h)
        return out

    def workspace(self, cfg, max_rows, rank, peer_recv, peer_flags):
        """The rescue workspace of `rank` for an exact packed config.

        peer_recv / peer_flags: world_size device addresses (ints) of every
        rank's receive slots and flags as mapped on this device (sizes from
        workspace_layout(); entry `rank` is this rank's own, zeroed here).
        Create it once per group, before any CUDA graph capture."""
        W = cfg.world_size
        if len(peer_recv) != W or len(peer_flags) != W:
            raise ValueError(f"peer_recv / peer_flags: {len(peer_recv)} / {len(peer_flags)} "
                             f"addresses, expected world_size = {W}")
        recv = (_c_u64 * W)(*peer_recv)
        flags = (_c_u64 * W)(*peer_flags)
        h = _vp()
        _check(library().dcptopk_workspace_create(self._h, ctypes.byref(cfg), max_rows, rank,
                                                  recv, flags, ctypes.byref(h)), self._h)
        return Workspace(self, h)

    def select(self, cfg, gathered, rank=0, ids_out=None, workspace=None, logits=None,
               row_ends=None, max_local_len=None):
        """Gathered packed rows int32 [W, T, N + N/32] (read in place) -> ids [T, K].

        Exact configs also need the workspace and this rank's logits and row
        ends (a saturated rank pushes its local top K from them)."""
        import torch
        if gathered.dim() != 3 or not gathered.is_contiguous():
            raise ValueError(f"gathered: shape {tuple(gathered.shape)}, expected a contiguous "
                             "[W, T, N + N/32] buffer")
        W, T, _ = gathered.shape
        if cfg.exact and (workspace is None or logits is None or row_ends is None):
            raise ValueError("select: an exact config needs workspace, logits and row_ends")
        if ids_out is None:
            ids_out = torch.empty((T, cfg.topk), dtype=torch.int32, device=gathered.device)
        a = SelectArgs()
        a.struct_size = ctypes.sizeof(SelectArgs)
        a.gathered = _ptr(gathered, torch.int32, "gathered", 3, self.device)
        a.rank_stride_rows, a.rows, a.rank = T, T, rank
        a.ids_out, a.ids_out_stride = _ptr(ids_out, torch.int32, "ids_out", 2, self.device), ids_out.stride(0)
        if logits is not None:
            a.logits = _ptr(logits, torch.bfloat16, "logits", 2, self.device)
            a.logits_stride = logits.stride(0)
            a.max_local_len = max_local_len if max_local_len is not None else logits.shape[1]
        a.row_ends = _ptr(row_ends, torch.int32, "row_ends", 1, self.device)
        a.stream = _stream(self.device)
        ws = workspace._h if workspace is not None else None
        _check(library().dcptopk_select(self._h, ctypes.byref(cfg), ws, ctypes.byref(a)), self._h)
        return ids_out


class Workspace:
    """A rank's rescue workspace (Context.workspace); lives as long as you keep it."""

    def __init__(self, ctx, handle):
        self._ctx, self._h = ctx, handle

    def close(self):
        if self._h:
            library().dcptopk_workspace_destroy(self._h)
            self._h = None

    __del__ = close

    @property
    def saturation_ptr(self):
        """Device address of the saturation words (uint32 [max_rows])."""
        return library().dcptopk_workspace_saturation(self._h)

    def check(self):
        """Synchronises the current stream and raises DcptopkError (DCPTOPK_RESCUE_TIMEOUT)
        if a rescue wait timed out since the last check."""
        _check(library().dcptopk_workspace_check(self._h, _stream(self._ctx.device)), self._ctx._h)
