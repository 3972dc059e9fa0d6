"""torch.ops.dcptopk.*: the merge calls as torch custom ops.

Every op writes caller-provided outputs (declared as mutated arguments) and
returns nothing, so it is capturable in a CUDA graph (it launches on
torch.cuda.current_stream(), allocates nothing, never synchronises) and
traceable by torch.compile(fullgraph=True): each op has a fake (meta)
implementation that runs the same argument checks as the real one, so a shape
error is a ValueError while tracing too.

The config travels as its int list (MergeConfig.as_list()), a context and a
rescue workspace by name (a str, see dcptopk._registry: the
workspace's group, config, rank and device, such as
"group[0,1]/K=2048,N=384,W=2,rank=0/cuda:0"; "" = the default context of the
tensors' device, or no workspace). Names, unlike handles, are the same in
every process that builds the same state, so a graph that torch.compile
cached in one process is right in another; a name no live object has is a
ValueError naming it. On CPU tensors the ops run the library's CPU reference (the oracle),
on CUDA tensors the kernels.

The functions below (pack, pack_indices, select, pair_pack, pair_select)
allocate missing outputs and call the ops; they are plain torch code, so
torch.compile traces through them. An eager call on plain tensors runs the
op's body directly (see _direct): the dispatcher adds tens of microseconds to
a call whose kernels take a few.

Also here, in one place: the ops' bodies (run_*: the C call on CUDA
tensors, the library's CPU reference on host tensors) and the memo that
replays a drop-in call's launches (memo_run).
"""
import ctypes
import os
import threading
import warnings
from typing import Optional

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode

from . import _checks, _registry
from ._config import as_config, config_check, packed_row_words
from ._context import Context, Workspace, current_stream, default_context
from ._group import GroupWorkspace
from ._lib import (GroupMergeArgs, MergeConfig, PackArgs, PairPackArgs, PairSelectArgs,
                   SelectArgs, check, library, new, _vp)
from ._rows import rows_map_struct

# While this thread's `recorder.calls` is a list, launch() appends each C
# call to it: memo_run() records a call's launches that way and replays them
# for a later call with the same arguments, without rebuilding anything.
# The registry's generation moves whenever a handle closes, which retires
# every memoised call.

recorder = threading.local()


def launch(fn, args, on_error, ctx_h=None):
    """fn(*args), a C call that launches on a stream; a nonzero result goes to
    on_error(rc, ctx_h), which raises."""
    calls = getattr(recorder, "calls", None)
    if calls is not None:
        calls.append((fn, args, on_error, ctx_h))
    rc = fn(*args)
    if rc:
        on_error(rc, ctx_h)


# ------------------------------------------------------------------ the memo
# An eager drop-in merge (dcptopk.merge) spends tens of microseconds in Python (argument
# checks, ctypes structs) around launches of a few. Engines call it with the
# same tensors step after step (persistent buffers, fixed decode batches), so
# a call's launches are memoised under everything they were built from: every
# tensor's address, shape, strides and dtype, the other arguments, the stream
# and the handle generation. A hit replays the launches without the checks,
# which would see the same values and pass again. Only CUDA tensors of the
# plain Tensor type, outside tracing, dispatch modes and graph capture, and
# only on paths whose every device step is a library launch (one rank, or the
# library's one-call group merge; torch's all-gather is not recorded).

_MEMO: dict = {}
_MEMO_ENTRIES = 64
# Bytes of temporaries (the packed rows) one memoised call may keep alive.
_MEMO_SCRATCH = 8 << 20


def memo_key(name, args):
    # Its callers are not tracing (they checked torch.compiler.is_compiling()).
    if DISPATCH:
        return None
    key = [name, _registry.generation]
    dev = -1
    for v in args:
        if type(v) is torch.Tensor:
            if not v.is_cuda:
                return None
            dev = v.get_device()
            key.append((v.data_ptr(), v.dtype, v.shape, v.stride()))
        elif v is None or type(v) in (int, bool):
            key.append(v)
        elif type(v).__hash__ is not None and not isinstance(v, torch.Tensor):
            key.append(v)   # a group: by identity, kept alive by the key
        else:
            return None
    if dev < 0 or _get_current_dispatch_mode() is not None or _capturing():
        return None
    key.append(current_stream(dev))
    return tuple(key)


# torch.cuda.is_current_stream_capturing without its Python layers, when
# torch has the binding it wraps.
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing",
                     torch.cuda.is_current_stream_capturing)


def memo_run(key, body):
    """Replays the launches memoised under key, or runs body() and records its
    launches. body returns the temporaries its launches use (kept alive by
    the memo), or None when its path may not be memoised."""
    hit = _MEMO.get(key) if key is not None else None
    if hit is not None:
        for fn, args, on_error, ctx_h in hit[0]:
            rc = fn(*args)
            if rc:
                on_error(rc, ctx_h)
        return
    rec = recorder
    if key is None or getattr(rec, "calls", None) is not None:
        body()
        return
    rec.calls = calls = []
    try:
        keep = body()
    finally:
        rec.calls = None
    if keep is None or key[1] != _registry.generation:
        return
    if sum(t.numel() * t.element_size() for t in keep) > _MEMO_SCRATCH:
        return
    if len(_MEMO) >= _MEMO_ENTRIES:
        _MEMO.pop(next(iter(_MEMO)))
    _MEMO[key] = (calls, keep)


def memo_clear():
    """Forget every memoised call (the next call of each runs its checks)."""
    _MEMO.clear()


# ------------------------------------------------------------ the ops' bodies

def _host_call(ctx_name, name, tensor):
    """True for host tensors (the CPU reference); with a context given (a
    Context's method), host tensors are refused: the context is on a GPU."""
    if tensor.device.type != "cpu":
        return False
    if ctx_name:
        ctx = _registry.lookup(ctx_name, Context, "ctx")
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
    ctx = _registry.lookup(ctx_name, Context, "ctx")
    if ctx.device != dev:
        raise ValueError(f"ctx: the context is on cuda:{ctx.device}; the tensors are on "
                         f"cuda:{dev}")
    return ctx


def _p(t):
    return t.data_ptr() if t is not None else None


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
    a.stream = current_stream(ctx.device)
    fn = lib.dcptopk_pack_indices if indices else lib.dcptopk_pack
    launch(fn, (ctx._live(), ctypes.byref(cfg), ctypes.byref(a)), check, ctx._h)


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
        ws = _registry.lookup(ws_name, Workspace, "workspace")
        if not ws._h:
            raise ValueError("workspace: a host workspace cannot serve a CUDA select")
        ws = ws._h
    a.stream = current_stream(ctx.device)
    launch(lib.dcptopk_select, (ctx._live(), ctypes.byref(cfg), ws, ctypes.byref(a)), check,
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
    a.stream = current_stream(ctx.device)
    launch(lib.dcptopk_pair_pack, (ctx._live(), ctypes.byref(cfg), ctypes.byref(a)), check,
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
    a.stream = current_stream(ctx.device)
    launch(lib.dcptopk_pair_select, (ctx._live(), ctypes.byref(cfg), ctypes.byref(a)), check,
           ctx._h)


def run_group_merge(ws, cfg, logits, row_ends, ids_out, plan, rows_tensors, local_ids=None,
                    packed=None, indptr_out=None):
    """One step of a group workspace's one-call merge (dcptopk_group_merge)."""
    a = new(GroupMergeArgs)
    a.rows = plan["rows"]
    a.logits, a.logits_stride = logits.data_ptr(), plan["logits_stride"]
    a.max_local_len, a.row_ends = plan["max_local_len"], row_ends.data_ptr()
    if local_ids is not None:
        a.local_ids, a.local_ids_stride = local_ids.data_ptr(), plan["local_ids_stride"]
    if packed is not None:
        a.packed, a.packed_stride = packed.data_ptr(), plan["packed_stride"]
    if indptr_out is not None:
        a.indptr_out = indptr_out.data_ptr()
    if ids_out is not None:
        a.ids_out, a.ids_out_stride = ids_out.data_ptr(), plan["ids_out_stride"]
    a.rows_map = rows_map_struct(plan["rows_map"], *rows_tensors)
    a.stream = torch.cuda.current_stream(ws.rt.device).cuda_stream
    launch(library().dcptopk_group_merge, (ws._h, ctypes.byref(a)),
           lambda rc, _h: ws.rt._check(rc))


LIB = "dcptopk"

_cfg_cache = {}


def _config(cfg):
    """The MergeConfig of an op's int list (cached: one per distinct config)."""
    key = tuple(cfg)
    c = _cfg_cache.get(key)
    if c is None:
        c = MergeConfig.from_list(list(key))
        config_check(c)
        _cfg_cache[key] = c
    return c


def _ws_info(ws_name):
    if not ws_name:
        return None
    return _registry.lookup(ws_name, Workspace, "workspace").info()


# ---------------------------------------------------------------- the ops

def _pack_impl(cfg: list[int], logits: Tensor, row_ends: Tensor, out: Tensor,
          max_local_len: Optional[int], ctx: str) -> None:
    c = _config(cfg)
    plan = _checks.plan_pack(c, logits, row_ends, out, max_local_len)
    run_pack(ctx, c, logits, row_ends, out, plan)


_pack = torch.library.custom_op(f"{LIB}::pack", _pack_impl, mutates_args=("out",))


@_pack.register_fake
def _pack_fake(cfg, logits, row_ends, out, max_local_len, ctx):
    _checks.plan_pack(_config(cfg), logits, row_ends, out, max_local_len)


def _pack_indices_impl(cfg: list[int], logits: Tensor, local_ids: Tensor, row_ends: Tensor,
                  out: Tensor, max_local_len: Optional[int], ctx: str) -> None:
    c = _config(cfg)
    plan = _checks.plan_pack(c, logits, row_ends, out, max_local_len, local_ids, indices=True)
    run_pack(ctx, c, logits, row_ends, out, plan, local_ids, indices=True)


_pack_indices = torch.library.custom_op(f"{LIB}::pack_indices", _pack_indices_impl,
                                        mutates_args=("out",))


@_pack_indices.register_fake
def _pack_indices_fake(cfg, logits, local_ids, row_ends, out, max_local_len, ctx):
    _checks.plan_pack(_config(cfg), logits, row_ends, out, max_local_len, local_ids, indices=True)


def _select_impl(cfg: list[int], gathered: Tensor, rank: int, ids_out: Optional[Tensor],
            logits: Optional[Tensor], row_ends: Optional[Tensor], max_local_len: Optional[int],
            req_id: Optional[Tensor], block_table: Optional[Tensor], rows_out: Optional[Tensor],
            counts_out: Optional[Tensor], stride_rows: int, workspace: str, ctx: str) -> None:
    c = _config(cfg)
    plan = _checks.plan_select(c, gathered, rank, ids_out, logits, row_ends, max_local_len,
                               _ws_info(workspace), req_id, block_table, rows_out, counts_out,
                               stride_rows)
    run_select(ctx, workspace, c, gathered, ids_out, logits, row_ends, plan,
               (req_id, block_table, rows_out, counts_out))


_select = torch.library.custom_op(f"{LIB}::select", _select_impl,
                                  mutates_args=("ids_out", "rows_out", "counts_out"))


@_select.register_fake
def _select_fake(cfg, gathered, rank, ids_out, logits, row_ends, max_local_len, req_id,
                 block_table, rows_out, counts_out, stride_rows, workspace, ctx):
    _checks.plan_select(_config(cfg), gathered, rank, ids_out, logits, row_ends, max_local_len,
                        _ws_info(workspace), req_id, block_table, rows_out, counts_out,
                        stride_rows)


def _pair_pack_impl(cfg: list[int], logits: Tensor, local_ids: Tensor, rank: int,
               row_starts: Optional[Tensor], row_ends: Optional[Tensor], out: Tensor,
               ctx: str) -> None:
    c = _config(cfg)
    plan = _checks.plan_pair_pack(c, logits, local_ids, rank, row_starts, row_ends, out)
    run_pair_pack(ctx, c, logits, local_ids, row_starts, row_ends, out, plan)


_pair_pack = torch.library.custom_op(f"{LIB}::pair_pack", _pair_pack_impl,
                                     mutates_args=("out",))


@_pair_pack.register_fake
def _pair_pack_fake(cfg, logits, local_ids, rank, row_starts, row_ends, out, ctx):
    _checks.plan_pair_pack(_config(cfg), logits, local_ids, rank, row_starts, row_ends, out)


def _pair_select_impl(cfg: list[int], candidates: Tensor, rank: int, ids_out: Optional[Tensor],
                 req_id: Optional[Tensor], block_table: Optional[Tensor],
                 rows_out: Optional[Tensor], counts_out: Optional[Tensor], stride_rows: int,
                 ctx: str) -> None:
    c = _config(cfg)
    plan = _checks.plan_pair_select(c, candidates, rank, ids_out, req_id, block_table, rows_out,
                                    counts_out, stride_rows)
    run_pair_select(ctx, c, candidates, ids_out, plan,
                    (req_id, block_table, rows_out, counts_out))


_pair_select = torch.library.custom_op(f"{LIB}::pair_select", _pair_select_impl,
                                       mutates_args=("ids_out", "rows_out", "counts_out"))


@_pair_select.register_fake
def _pair_select_fake(cfg, candidates, rank, ids_out, req_id, block_table, rows_out, counts_out,
                      stride_rows, ctx):
    _checks.plan_pair_select(_config(cfg), candidates, rank, ids_out, req_id, block_table,
                             rows_out, counts_out, stride_rows)


def _group_ws(ws_name):
    return _registry.lookup(ws_name, GroupWorkspace, "workspace")


def _group_merge_impl(cfg: list[int], logits: Tensor, row_ends: Tensor,
                      local_ids: Optional[Tensor], ids_out: Optional[Tensor],
                      req_id: Optional[Tensor], block_table: Optional[Tensor],
                      rows_out: Optional[Tensor], counts_out: Optional[Tensor], stride_rows: int,
                      max_local_len: Optional[int], workspace: str,
                      packed: Optional[Tensor] = None,
                      indptr_out: Optional[Tensor] = None) -> None:
    c = _config(cfg)
    ws = _group_ws(workspace)
    plan = _checks.plan_group_merge(c, logits, row_ends, local_ids, ids_out, max_local_len,
                                    ws.info(), req_id, block_table, rows_out, counts_out,
                                    stride_rows, packed, indptr_out)
    run_group_merge(ws, c, logits, row_ends, ids_out, plan,
                    (req_id, block_table, rows_out, counts_out), local_ids, packed, indptr_out)


_group_merge = torch.library.custom_op(f"{LIB}::group_merge", _group_merge_impl,
                                       mutates_args=("ids_out", "rows_out", "counts_out",
                                                     "indptr_out"))


@_group_merge.register_fake
def _group_merge_fake(cfg, logits, row_ends, local_ids, ids_out, req_id, block_table, rows_out,
                      counts_out, stride_rows, max_local_len, workspace, packed=None,
                      indptr_out=None):
    _checks.plan_group_merge(_config(cfg), logits, row_ends, local_ids, ids_out, max_local_len,
                             _group_ws(workspace).info(), req_id, block_table, rows_out,
                             counts_out, stride_rows, packed, indptr_out)


# ------------------------------------------------------------ the functions

DISPATCH = os.environ.get("DCPTOPK_OPS_DISPATCH") == "1"


def _direct(*tensors):
    """True for an eager call on plain tensors: it runs the op's body without
    the dispatcher (same checks, same launch, tens of microseconds less).
    Traced calls (torch.compile), fake or meta tensors, tensor subclasses and
    active dispatch modes go through torch.ops.dcptopk.*. DCPTOPK_OPS_DISPATCH=1
    always takes the op."""
    if DISPATCH or torch.compiler.is_compiling():
        return False
    for t in tensors:
        if t is not None and (type(t) is not Tensor or t.is_meta):
            return False
    return _get_current_dispatch_mode() is None


def cfg_list(cfg):
    """A config as the int list the ops take (a MergeConfig, a name, a list)."""
    if isinstance(cfg, (list, tuple)):
        return list(cfg)
    return as_config(cfg).as_list()


def _ctx_name(ctx):
    return "" if ctx is None else ctx.name


def _ws_name(ws):
    return "" if ws is None else ws.key


def _tensor(t, name):
    if not isinstance(t, Tensor):
        raise ValueError(f"{name}: got {type(t).__name__}; expected a torch.Tensor")
    return t


def _rank_arg(rank, cfg):
    """rank is required: a None never reaches the op's schema check."""
    if rank is None:
        _checks.rank(None, _config(cfg))
    return rank


def _rows_args(rows):
    if rows is None:
        return None, None, None, None, 0
    return rows.req_id, rows.block_table, rows.rows_out, rows.counts_out, rows.stride_rows


def pack(cfg, logits, row_ends, out=None, max_local_len=None, *, ctx=None):
    """Fused local top-N + pack: bf16 logits [T, S] + int32 row_ends [T] ->
    packed rows int32 [T, N + N/32] (into out when given)."""
    c = cfg_list(cfg)
    _tensor(logits, "logits")
    if out is None:
        out = torch.empty((logits.shape[0], _checks.packed_row_words(c[2])), dtype=torch.int32,
                          device=logits.device)
    args = (c, logits, row_ends, out, max_local_len, _ctx_name(ctx))
    if _direct(logits, row_ends, out):
        _pack_impl(*args)
    else:
        torch.ops.dcptopk.pack(*args)
    return out


def pack_indices(cfg, logits, local_ids, out=None, row_ends=None, max_local_len=None, *,
                 ctx=None):
    """Pack given local ids int32 [T, N] (-1 = empty) of bf16 logits [T, S] into
    out [T, N + N/32]; ids at or past row_ends (optional) or S, and NaN scores,
    become empty slots."""
    c = cfg_list(cfg)
    _tensor(logits, "logits")
    T = logits.shape[0]
    if out is None:
        out = torch.empty((T, _checks.packed_row_words(c[2])), dtype=torch.int32,
                          device=logits.device)
    if row_ends is None:
        # The library bounds every row by row_ends; no row_ends = the whole row.
        end = min(logits.shape[1], _checks.MAX_LOCAL_LEN) if max_local_len is None \
            else max_local_len
        row_ends = torch.full((T,), end, dtype=torch.int32, device=logits.device)
    args = (c, logits, local_ids, row_ends, out, max_local_len, _ctx_name(ctx))
    if _direct(logits, local_ids, row_ends, out):
        _pack_indices_impl(*args)
    else:
        torch.ops.dcptopk.pack_indices(*args)
    return out


def select(cfg, gathered, *, rank, ids_out=None, workspace=None, logits=None, row_ends=None,
           max_local_len=None, rows=None, ctx=None):
    """Gathered packed rows int32 [W, T, N + N/32] -> global ids [T, K] (ids_out,
    allocated when None and the config emits ids and no rows output is asked)
    and/or this rank's physical rows (rows=RowsOutput). Returns ids_out."""
    c = cfg_list(cfg)
    _tensor(gathered, "gathered")
    if ids_out is None and c[6] and rows is None:
        if gathered.dim() != 3:
            _checks.fail("gathered", gathered, "int32 [W, T, N + N/32]")
        ids_out = torch.empty((gathered.shape[1], c[1]), dtype=torch.int32,
                              device=gathered.device)
    req_id, bt, rows_out, counts_out, stride_rows = _rows_args(rows)
    args = (c, gathered, _rank_arg(rank, c), ids_out, logits, row_ends, max_local_len, req_id,
            bt, rows_out, counts_out, stride_rows, _ws_name(workspace), _ctx_name(ctx))
    if _direct(gathered, ids_out, logits, row_ends, req_id, bt, rows_out, counts_out):
        _select_impl(*args)
    else:
        torch.ops.dcptopk.select(*args)
    return ids_out


def pair_pack(cfg, logits, local_ids, *, rank, row_starts=None, row_ends=None, out=None,
              ctx=None):
    """fp32 logits [T, S] + int32 local ids [T, K] -> int32 candidates [T, K, 2]
    (fp32 score bits, int32 global id)."""
    c = cfg_list(cfg)
    _tensor(local_ids, "local_ids")
    if out is None:
        out = torch.empty((local_ids.shape[0], c[1], 2), dtype=torch.int32,
                          device=local_ids.device)
    args = (c, logits, local_ids, _rank_arg(rank, c), row_starts, row_ends, out, _ctx_name(ctx))
    if _direct(logits, local_ids, row_starts, row_ends, out):
        _pair_pack_impl(*args)
    else:
        torch.ops.dcptopk.pair_pack(*args)
    return out


def float_pairs_to_int(candidates):
    """float32 (score, global id as a float value) pairs -> int32 (score bits,
    global id) pairs, same shape (a copy). Ids must be exact in float32 (below
    2^24); an id that is NaN, negative or not below 2^31 becomes -1, the rule
    of the float-id layouts (dcptopk_pair_gid)."""
    _checks.pair_candidates_dtype(candidates, True)
    score_bits = candidates[..., 0].view(torch.int32)
    ids = candidates[..., 1]
    ok = (ids >= 0) & (ids < 2.0 ** 31)  # False for NaN
    ids = torch.where(ok, ids, torch.full_like(ids, -1.0)).to(torch.int32)
    return torch.stack((score_bits, ids), dim=-1)


def pair_select(cfg, candidates, *, rank, ids_out=None, rows=None, ids_as_float=False,
                ctx=None):
    """int32 [W, T, K, 2] (rank-major, read in place) or [T, W*K, 2] (row-major)
    candidates -> global ids [T, K] (ids_out, allocated when None and the
    config emits ids and no rows output is asked) and/or physical rows.
    ids_as_float=True reads float32 pairs whose id is a float value (vLLM's
    pair pack) in place (the float-id layouts: an id f is valid when
    0 <= f < 2^31 and truncates to the gid); float32 without it is refused."""
    c = cfg_list(cfg)
    _checks.pair_candidates_dtype(_tensor(candidates, "candidates"), ids_as_float)
    if ids_out is None and c[6] and rows is None:
        T = candidates.shape[1] if candidates.dim() == 4 else candidates.shape[0]
        ids_out = torch.empty((T, c[1]), dtype=torch.int32, device=candidates.device)
    req_id, bt, rows_out, counts_out, stride_rows = _rows_args(rows)
    args = (c, candidates, _rank_arg(rank, c), ids_out, req_id, bt, rows_out, counts_out,
            stride_rows, _ctx_name(ctx))
    if _direct(candidates, ids_out, req_id, bt, rows_out, counts_out):
        _pair_select_impl(*args)
    else:
        torch.ops.dcptopk.pair_select(*args)
    return ids_out


def group_merge(logits, row_ends, *, workspace, ids_out=None, rows=None, local_ids=None,
                max_local_len=None, packed=None, indptr_out=None):
    """One step of the library's one-call merge (local top-N or the given
    local_ids, pack, exchange, select, rescue) on a group workspace
    (dcptopk._group.GroupWorkspace, whose config it is). Collective. packed:
    this rank's rows int32 [T, N + N/32] from the caller's own producer (the
    contract of assert_packed_merge_contract), sent instead of the fused
    local top-N; logits and row_ends are still read (the rescue round).
    indptr_out: int32 [T + 1], the owned rows' CSR offsets (with rows)."""
    c = workspace.cfg.as_list()
    _tensor(logits, "logits")
    if packed is not None:
        _tensor(packed, "packed")
    if ids_out is None and c[6] and rows is None:
        T = packed.shape[0] if packed is not None and packed.dim() == 2 else logits.shape[0]
        ids_out = torch.empty((T, c[1]), dtype=torch.int32, device=logits.device)
    req_id, bt, rows_out, counts_out, stride_rows = _rows_args(rows)
    args = (c, logits, row_ends, local_ids, ids_out, req_id, bt, rows_out, counts_out,
            stride_rows, max_local_len, workspace.key, packed, indptr_out)
    if _direct(logits, row_ends, local_ids, ids_out, req_id, bt, rows_out, counts_out, packed,
               indptr_out):
        _group_merge_impl(*args)
    else:
        torch.ops.dcptopk.group_merge(*args)
    return ids_out


OPS = ("pack", "pack_indices", "select", "pair_pack", "pair_select", "group_merge")


__all__ = ["pack", "pack_indices", "select", "pair_pack", "pair_select", "group_merge",
           "float_pairs_to_int", "cfg_list", "OPS", "DISPATCH", "LIB"]
