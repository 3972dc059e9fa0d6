"""The seed's DCP top-k merge API, drop-in, on dcptopk.

Same names, signatures and semantics as the indexer's dcp_topk_merge module:
the packed format (N + N/32 int32 words per row), the exact two-round merge
(the rescue workspace is built once per (K, N) by
init_dcp_topk_rescue_workspace; the entry points refuse to run without it),
ids and physical rows outputs, the contract checker and the warmup hook.

group=None means the DCP group, as in the seed: the group given once to
set_dcp_group(), else vLLM's get_dcp_group() when vLLM runs and its DCP group
is initialised, else a world of one rank when torch.distributed is absent,
not initialised or has one rank; with more ranks and no DCP group known it is
a ValueError (a merge of this rank alone would return its local top K, a
different answer on every rank). A torch.distributed group of more than one
rank goes through dcptopk._dist (the library's runtime, or torch all-gather +
symmetric memory with DCPTOPK_DIST_BACKEND=torch).

Every tensor of a call must be on the device of its rescue workspace (a CPU
tensor into a GPU workspace is refused before any launch).

Differences, all explicit:
- The local top-N of dcp_topk_pack is the library's fused top-N + pack (same
  contract: a top-N by (bf16 score desc, local id asc), ids < min(row_end,
  S, 2^17), NaN dropped).
- register_dcp_topk_merge_warmup records the configs; init_dcp_topk_rescue_workspace
  compiles or loads those of its (K, N) (and the call's own) with progress,
  so warmup cannot be forgotten; warmup_dcp_topk_merge() warms them all
  (every (K, N)). A kernel that a step had to compile after that counts in
  compiles_after_warmup() (an engine's JIT monitor) and is logged at warn
  level; one that would compile inside CUDA graph capture is an error
  (DCPTOPK_NOT_WARMED) naming the registration that warms it.
- On CPU tensors every call runs the library's CPU reference (the oracle).
"""
import dataclasses
import warnings
from typing import Any

import torch

from . import _checks, _dist, _keys, ops
from ._config import as_config, config_check
from ._context import WarmupLog, Workspace, compiles_after_warmup, default_context
from ._group import Group, group_info
from ._lib import DcptopkError
from ._reference import check_contract
from ._rows import RowsOutput as _RowsMapOutput

__all__ = ["compiles_after_warmup", "set_dcp_group", "get_dcp_group", "dcp_topk_merge", "dcp_topk_merge_rows", "dcp_topk_pack", "dcp_topk_pack_indices",
           "dcp_topk_select", "init_dcp_topk_rescue_workspace", "get_dcp_topk_rescue_workspace",
           "register_dcp_topk_merge_warmup", "warmup_dcp_topk_merge",
           "assert_packed_merge_contract", "packed_row_words", "rescue_slots",
           "DcpRowsOutput", "ExactArgs"]

WARP = 32
LOCAL_INDEX_BITS = 17


def packed_row_words(local_topk: int) -> int:
    """int32 words of a packed row: N candidate words + N/32 bit-plane words."""
    return local_topk + local_topk // WARP


def rescue_slots(topk: int, local_topk: int) -> int:
    """Pushed local top-K lists a rank can receive per row: (K - 1) // N."""
    return (topk - 1) // local_topk


# ------------------------------------------------------------------- configs

def _check_kn(topk, local_topk):
    _checks.integer(local_topk, "local_topk", 32, 4064, "a multiple of 32 in 32..4064")
    if local_topk % WARP:
        raise ValueError(f"local_topk: got {local_topk}; expected a multiple of 32")
    if topk is not None:
        _checks.integer(topk, "topk", 64, 4096, "a multiple of 32 in 64..4096")
        if topk % WARP or topk <= local_topk:
            raise ValueError(f"topk: got {topk}; expected a multiple of 32 above local_topk = "
                             f"{local_topk} (the packed merge sends N < K candidates per rank)")


def _cfg(topk, local_topk, world_size, block_size=0, emit_ids=True, exact=True):
    """The packed config (as the ops' int list) of one call."""
    _check_kn(topk, local_topk)
    _checks.integer(world_size, "world_size", 1, 16, "an int in 1..16 (DCP ranks)")
    return [0, topk, local_topk, world_size, block_size, 1, int(bool(emit_ids)), int(bool(exact))]


def _pack_cfg(local_topk):
    # The pack's kernels depend on N only; K is any valid value above it.
    _check_kn(None, local_topk)
    return _cfg(local_topk + WARP, local_topk, 1, exact=False)


def _bound(logits, max_local_len):
    """The seed cuts the logits to max_local_len columns: here it is the
    columns-considered bound of the library call (no copy, no view)."""
    if max_local_len is None:
        return None
    return _checks.integer(max_local_len, "max_local_len", 0, 1 << 62, "a non-negative int")


# ------------------------------------------------------------ the DCP group

_DCP_GROUP = None


def set_dcp_group(group):
    """The DCP group that group=None means from now on (a torch.distributed
    ProcessGroup, or an object with .device_group such as vLLM's
    GroupCoordinator). Call it once at model load, on every rank, before
    init_dcp_topk_rescue_workspace; None forgets it."""
    global _DCP_GROUP
    if group is not None and isinstance(group, (bool, int, float, str, bytes)):
        raise _checks.ArgTypeError(f"group: got {type(group).__name__} {group!r}; expected a "
                                   "torch.distributed ProcessGroup (or an object with "
                                   ".device_group), or None")
    _DCP_GROUP = group


def get_dcp_group():
    """The group given to set_dcp_group(), or None."""
    return _DCP_GROUP


def _torch_world_size():
    """Ranks of torch.distributed's default group; 1 when it is absent or not
    initialised."""
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return 1
    return dist.get_world_size()


def _vllm_dcp_group():
    """vLLM's DCP group (its GroupCoordinator) when vLLM runs in this process
    and the group is initialised, else None. Only a vLLM already imported is
    asked: one that is not imported has no initialised group, and importing
    it here would be slow and have side effects. Any failure (a vLLM without
    parallel_state or get_dcp_group, an uninitialised group) falls through."""
    import sys
    if "vllm" not in sys.modules:
        return None
    try:
        import importlib
        ps = importlib.import_module("vllm.distributed.parallel_state")
        getter = getattr(ps, "get_dcp_group", None)
        if getter is None or getattr(ps, "_DCP", True) is None:
            return None
        group = getter()
    except Exception:   # vLLM asserts when the group is not initialised
        return None
    if group is None or getattr(group, "device_group", None) is None:
        return None
    return group


def _resolve_group(group):
    """The group group=None stands for (see the module docstring); a given
    group is returned as it is."""
    if group is not None:
        return group
    if _DCP_GROUP is not None:
        return _DCP_GROUP
    world = _torch_world_size()
    if world <= 1:
        return None
    vg = _vllm_dcp_group()
    if vg is not None:
        return vg
    raise ValueError(
        f"group: None, while torch.distributed runs {world} ranks, and no DCP group is known. "
        "group=None means the DCP group (not this rank alone: that merge would return this "
        "rank's local top K). Pass group= (the DCP group's ProcessGroup, or an object with "
        ".device_group), or call dcptopk.merge.set_dcp_group(group) once at model load "
        "(vLLM's get_dcp_group() is used when vLLM's DCP group is initialised). For a merge "
        "of this rank alone, pass a group of one rank (torch.distributed.new_group([rank]))")


# ------------------------------------------------------------- workspaces

_RESCUE_WORKSPACES: dict = {}


def get_dcp_topk_rescue_workspace(topk: int, local_topk: int):
    """The rescue workspace of (K, N), or None."""
    return _RESCUE_WORKSPACES.get((topk, local_topk))


def _device():
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _warm_configs(topk, local_topk, world):
    """What a workspace of (K, N) over `world` ranks warms: the config of
    dcp_topk_merge (global ids, no rows; its pack too) and every variant of
    (K, N) registered with register_dcp_topk_merge_warmup."""
    out = [as_config(_cfg(topk, local_topk, world))]
    for c in _WARMUP_CONFIGS:
        if (c.topk, c.local_topk) == (topk, local_topk) and c not in out:
            out.append(c)
    return out


def init_dcp_topk_rescue_workspace(max_rows: int, topk: int, local_topk: int, group: Any = None,
                                   *, device=None, backend=None, progress=None):
    """Allocate (once) the exact merge's rescue workspace for (K, N) on the
    DCP group, and compile or load every kernel its calls can take: the
    config of dcp_topk_merge and every variant of (K, N) registered with
    register_dcp_topk_merge_warmup before this call (dcp_topk_merge_rows'
    block_size / emit_ids). So a process that never calls
    warmup_dcp_topk_merge() compiles here, at model load, and never in a
    step or a CUDA graph capture. Must run on every DCP rank, outside
    CUDA-graph capture.

    group=None: the DCP group (set_dcp_group, vLLM's, or a world of one
    rank when torch.distributed has one rank or none; see the module
    docstring). A torch.distributed group: its ranks (collective). device:
    the CUDA device (default: the current one; CPU when CUDA is absent, for
    the reference path). progress: each kernel is logged at INFO on the
    `dcptopk` logger ("dcptopk warmup 3/11: KEY compiled in 812 ms"); None
    also draws a bar on a terminal, False draws none, a callable gets
    (done, total, key, origin, ms) per kernel. The workspace's
    .warmup_stats says what was compiled, loaded or already there."""
    _check_kn(topk, local_topk)
    _checks.integer(max_rows, "max_rows", 1, _checks.MAX_ROWS, "a positive int")
    key = (topk, local_topk)
    ws = _RESCUE_WORKSPACES.get(key)
    group = _resolve_group(group)
    device_group = getattr(group, "device_group", group)
    if ws is not None and ws.max_rows >= max_rows and ws.device_group is device_group:
        cfgs = _warm_configs(topk, local_topk, ws.world_size)
        if not getattr(ws, "one_call", False):
            if ws.device.type == "cuda":
                ws.warmup_stats = default_context(ws.device.index).warmup_all(
                    cfgs, progress, f"dcptopk warmup (K={topk}, N={local_topk})")
            return ws
        if all((c.block_size, bool(c.emit_ids)) in ws.variants for c in cfgs
               if c.world_size == ws.world_size):
            return ws
        # A variant registered since: its group workspace is made below.
    dev = torch.device(device) if device is not None else _device()
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    world, rank = group_info(device_group)
    cfg = as_config(_cfg(topk, local_topk, world))
    cfgs = _warm_configs(topk, local_topk, world)
    # The old workspace goes first: its successor takes its name (what the
    # ops call it), the name a fresh process gives its first one.
    old = _RESCUE_WORKSPACES.pop(key, None)
    if old is not None:
        old.close()
    label = f"dcptopk warmup (K={topk}, N={local_topk})"
    stats = None
    if dev.type == "cpu":
        if world != 1:
            raise ValueError("device: the CPU reference path serves a world of 1 rank only")
        ws = Workspace.host(cfg, max_rows, rank)
    elif world == 1:
        ctx = default_context(dev.index)
        ws = ctx.local_workspace(cfg, max_rows)
        stats = ctx.warmup_all(cfgs, progress, label)
    else:
        rt = _dist.runtime(device_group, dev.index, backend)
        ctx = default_context(dev.index)
        rep = WarmupLog(ctx, cfgs, progress, label)
        try:
            if isinstance(rt, Group):
                # The library's one-call merge takes its config (block_size,
                # emit_ids) from its workspace: one per registered variant,
                # each warmed by the group (its exchange kernels too).
                mine = [c for c in cfgs if c.world_size == world]
                ws = rt.workspaces(mine, max_rows, progress=rep.key)
                rest = [c for c in cfgs if c.world_size != world]
                if rest:
                    rep.run([k for c in rest for k in _keys.keys(c, ctx.arch)])
            else:
                ws = rt.workspace(cfg, max_rows)
                rep.run()
        finally:
            rep.close()
        rep.check()
        stats = rep.stats()
    ws.device_group = device_group
    ws.device = dev
    ws.warmup_stats = stats
    _RESCUE_WORKSPACES[key] = ws
    return ws


@dataclasses.dataclass(frozen=True)
class ExactArgs:
    """Rescue state for one exact merge call (the seed's _ExactArgs)."""
    workspace: Any
    logits: torch.Tensor
    row_ends: torch.Tensor
    max_local_len: Any = None

    @property
    def rank(self):
        return self.workspace.rank


@dataclasses.dataclass(frozen=True)
class DcpRowsOutput:
    """This rank's physical KV rows output (the seed's _RowsOutput), with its
    DCP rank and block size; dcptopk.RowsOutput is the lower layer's, which
    a select takes."""
    req_id: torch.Tensor
    block_table: torch.Tensor
    rows_out: torch.Tensor
    valid_out: torch.Tensor
    dcp_rank: int
    block_size: int
    stride_rows: int


def _no_workspace(topk, local_topk, topk_from):
    """The error for a (K, N) without a rescue workspace: when others exist,
    it names the argument that does not match them (topk_from says where K
    came from: ("topk_indices", the tensor) or ("topk", None))."""
    built = sorted(_RESCUE_WORKSPACES)
    if not built:
        return RuntimeError(
            f"DCP top-k merge (K={topk}, N={local_topk}) has no rescue workspace; call "
            "init_dcp_topk_rescue_workspace at model construction")
    have = ", ".join(f"(K={k}, N={n})" for k, n in built)
    name, t = topk_from
    got_k = (f"{name}: got {_checks._desc(t)}, so K={topk}" if t is not None
             else f"{name}: got K={topk}")
    if any(n == local_topk for _, n in built):
        hint = " (topk_indices must be int32 [T, K])" if t is not None else ""
        return ValueError(f"{got_k}; the rescue workspace of N={local_topk} holds {have}{hint}")
    if any(k == topk for k, _ in built):
        return ValueError(f"local_topk: got {local_topk}; the rescue workspace of K={topk} "
                          f"holds {have}")
    return ValueError(f"{got_k}, and local_topk: got {local_topk}; no rescue workspace has "
                      f"(K={topk}, N={local_topk}): the workspaces hold {have}")


def _check_devices(ws, **tensors):
    """Every tensor on the workspace's device: a host tensor into a GPU
    workspace would reach the kernels as a device address."""
    dev = getattr(ws, "device", None)
    if dev is None:
        return
    for name, t in tensors.items():
        if isinstance(t, torch.Tensor) and t.device != dev and t.device.type != "meta":
            raise ValueError(
                f"{name}: got a tensor on {t.device}; the rescue workspace (K={ws.topk}, "
                f"N={ws.local_topk}) is on {dev}: every tensor of the call must be there")


def _exact_args_for(topk, local_topk, logits, row_ends, group=None, max_local_len=None,
                    topk_from=("topk", None)):
    ws = get_dcp_topk_rescue_workspace(topk, local_topk)
    if ws is None:
        raise _no_workspace(topk, local_topk, topk_from)
    if logits is None or row_ends is None:
        raise ValueError("the exact DCP top-k merge needs this rank's bf16 logits and row_ends "
                         "(a saturated rank re-reads its row)")
    device_group = getattr(group, "device_group", group)
    if device_group is not None and device_group is not ws.device_group:
        raise ValueError("the DCP top-k merge's group is not the one its rescue workspace was "
                         "built on")
    _check_devices(ws, logits=logits, row_ends=row_ends)
    return ExactArgs(ws, logits, row_ends, max_local_len)


def _all_gather_packed(packed, ws):
    """The rank-major [W, T, N + N/32] rows of every rank (a view for one rank)."""
    if ws.world_size == 1:
        return packed.unsqueeze(0)
    return _dist.runtime(ws.device_group, ws.device.index).all_gather(packed)


def _memoisable(ws):
    return ws.world_size == 1 or getattr(ws, "one_call", False)


# ---------------------------------------------------------------- the API

def dcp_topk_pack_indices(logits: torch.Tensor, local_idx: torch.Tensor, out: torch.Tensor,
                          row_ends: torch.Tensor | None = None) -> torch.Tensor:
    """Pack a local top-N (local_idx [T, N] int32, -1 padded, N a multiple of
    32) of the bf16 logits [T, S] into out [T, N + N/32] int32. Indices at or
    past row_ends ([T] int32, optional) or S and NaN scores become empty slots."""
    ops._tensor(local_idx, "local_idx")
    if local_idx.dim() != 2:
        _checks.fail("local_idx", local_idx, "int32 [T, N]")
    return ops.pack_indices(_pack_cfg(local_idx.shape[1]), logits, local_idx, out, row_ends)


def dcp_topk_pack(logits: torch.Tensor, row_ends: torch.Tensor, local_topk: int,
                  out: torch.Tensor | None = None,
                  max_local_len: int | None = None) -> torch.Tensor:
    """Local top-N of the bf16 logits as packed [T, N + N/32] rows (into out
    when given). max_local_len bounds every row_ends entry (the columns
    considered)."""
    return ops.pack(_pack_cfg(local_topk), logits, row_ends, out, _bound(logits, max_local_len))


def dcp_topk_select(gathered: torch.Tensor, local_topk: int,
                    topk_indices: torch.Tensor | None, *, topk: int | None = None,
                    rows: DcpRowsOutput | None = None, exact: ExactArgs | None = None) -> None:
    """Exact global top-K of the gathered [W, T, N + N/32] rows: the select,
    then the rescue (second round) of saturated rows."""
    if topk is None:
        if topk_indices is None:
            raise ValueError("topk: got None with topk_indices None; pass topk=")
        topk = topk_indices.shape[1]
    if exact is None and local_topk < topk:
        raise ValueError("the DCP top-k select needs its rescue state (exact)")
    _check_kn(topk, local_topk)
    ops._tensor(gathered, "gathered")
    if gathered.dim() != 3:
        _checks.fail("gathered", gathered, "int32 [W, T, N + N/32]")
    ws = exact.workspace
    _check_devices(ws, gathered=gathered, topk_indices=topk_indices, logits=exact.logits,
                   row_ends=exact.row_ends)
    if rows is not None:
        _check_devices(ws, req_id=rows.req_id, block_table=rows.block_table,
                       rows_out=rows.rows_out, valid_out=rows.valid_out)
    if rows is not None and rows.dcp_rank != ws.rank:
        raise ValueError(f"dcp_rank {rows.dcp_rank} is not the rescue workspace's rank {ws.rank}")
    cfg = _cfg(topk, local_topk, gathered.shape[0],
               block_size=rows.block_size if rows is not None else 0,
               emit_ids=topk_indices is not None)
    out_rows = None
    if rows is not None:
        _checks.integer(rows.block_size, "block_size", 1, 1 << 20, "a positive int")
        out_rows = _RowsMapOutput(rows.req_id, rows.block_table, rows.rows_out, rows.valid_out,
                                    rows.stride_rows)
    ops.select(cfg, gathered, rank=ws.rank, ids_out=topk_indices, workspace=ws,
               logits=exact.logits, row_ends=exact.row_ends, max_local_len=exact.max_local_len,
               rows=out_rows, ctx=None)


def dcp_topk_merge(logits: torch.Tensor, row_ends: torch.Tensor, topk_indices: torch.Tensor,
                   local_topk: int, max_local_len: int | None = None) -> None:
    """Exact global top-K ids over the DCP group from this rank's bf16 logits
    (the stock indexer hook). Collective over the group of the (K, N) rescue
    workspace. topk_indices: the [T, K] int32 output (global ids, -1 padded)."""
    if torch.compiler.is_compiling():
        # Traced: no memo, and no exception handling for dynamo to trace.
        _merge(logits, row_ends, topk_indices, local_topk, max_local_len)
        return
    try:
        ops.memo_run(ops.memo_key("merge", (logits, row_ends, topk_indices, local_topk,
                                            max_local_len)),
                     lambda: _merge(logits, row_ends, topk_indices, local_topk, max_local_len))
    except DcptopkError as e:
        if e.name != "DCPTOPK_NOT_WARMED":
            raise
        raise _not_warmed(e, topk_indices.shape[1], local_topk, 0, True) from None


def _merge(logits, row_ends, topk_indices, local_topk, max_local_len):
    ops._tensor(topk_indices, "topk_indices")
    if topk_indices.dim() != 2 or topk_indices.dtype != torch.int32:
        _checks.fail("topk_indices", topk_indices, "int32 [T, K]")
    topk = topk_indices.shape[1]
    _check_kn(topk, local_topk)
    mll = _bound(logits, max_local_len)
    exact = _exact_args_for(topk, local_topk, logits, row_ends, max_local_len=mll,
                            topk_from=("topk_indices", topk_indices))
    _check_devices(exact.workspace, topk_indices=topk_indices)
    if getattr(exact.workspace, "one_call", False):
        ops.group_merge(logits, row_ends, workspace=exact.workspace.variant(0, True),
                        ids_out=topk_indices, max_local_len=mll)
        return ()
    packed = dcp_topk_pack(logits, row_ends, local_topk, max_local_len=mll)
    dcp_topk_select(_all_gather_packed(packed, exact.workspace), local_topk, topk_indices,
                    exact=exact)
    return (packed,) if _memoisable(exact.workspace) else None


def dcp_topk_merge_rows(*, logits: torch.Tensor | None = None,
                        row_ends: torch.Tensor | None = None,
                        packed: torch.Tensor | None = None, local_topk: int, topk: int,
                        req_id: torch.Tensor, block_table: torch.Tensor, block_size: int,
                        stride_rows: int, dcp_rank: int, rows_out: torch.Tensor,
                        valid_out: torch.Tensor, ids_out: torch.Tensor | None = None,
                        group: Any = None, max_local_len: int | None = None,
                        indptr_out: torch.Tensor | None = None) -> None:
    """Exact DCP top-K merge straight to this rank's physical KV rows.

    logits [T, S] bf16 and row_ends [T] int32, plus optionally packed
    [T, N + N/32] int32 (this rank's local top-N already packed; the contract
    of assert_packed_merge_contract). Outputs (caller buffers): rows_out
    [T, >= topk] int32 owned physical rows (compacted, -1 after), valid_out
    [T] their count, ids_out [T, topk] the global ids (optional), indptr_out
    [T + 1] int32 the counts' exclusive prefix sum (optional: the owned rows
    as CSR offsets, written with them)."""
    args = (logits, row_ends, packed, local_topk, topk, req_id, block_table, block_size,
            stride_rows, dcp_rank, rows_out, valid_out, ids_out, group, max_local_len,
            indptr_out)
    if torch.compiler.is_compiling():
        _merge_rows(*args)
        return
    try:
        ops.memo_run(ops.memo_key("merge_rows", args), lambda: _merge_rows(*args))
    except DcptopkError as e:
        if e.name != "DCPTOPK_NOT_WARMED":
            raise
        raise _not_warmed(e, topk, local_topk, block_size, ids_out is not None) from None


def _not_warmed(e, topk, local_topk, block_size, emit_ids):
    """A kernel the call needs was not warmed (refused inside capture): the
    error names the registration that warms it."""
    ws = _RESCUE_WORKSPACES.get((topk, local_topk))
    world = ws.world_size if ws is not None else "W"
    msg = str(e)[len(e.name) + 2:]
    return DcptopkError(
        e.code, e.name,
        f"this drop-in call's kernels were not warmed: call register_dcp_topk_merge_warmup("
        f"{topk}, {local_topk}, {world}, block_size={block_size}, emit_ids={bool(emit_ids)}) "
        f"before init_dcp_topk_rescue_workspace(max_rows, {topk}, {local_topk}) at model "
        f"load, outside capture (or warmup_dcp_topk_merge() after registering it). {msg}")


def _merge_rows(logits, row_ends, packed, local_topk, topk, req_id, block_table, block_size,
                stride_rows, dcp_rank, rows_out, valid_out, ids_out, group, max_local_len,
                indptr_out=None):
    if logits is None or row_ends is None:
        raise ValueError("dcp_topk_merge_rows needs logits= and row_ends= (also with packed=)")
    _check_kn(topk, local_topk)
    mll = _bound(logits, max_local_len)
    ws = get_dcp_topk_rescue_workspace(topk, local_topk)
    if ws is None:
        raise _no_workspace(topk, local_topk, ("topk", None))
    _check_devices(ws, logits=logits, row_ends=row_ends, packed=packed, req_id=req_id,
                   block_table=block_table, rows_out=rows_out, valid_out=valid_out,
                   ids_out=ids_out, indptr_out=indptr_out)
    if getattr(ws, "one_call", False):
        exact = _exact_args_for(topk, local_topk, logits, row_ends, group, mll)
        if dcp_rank != ws.rank:
            raise ValueError(f"dcp_rank {dcp_rank} is not the rescue workspace's rank {ws.rank}")
        # The caller's packed rows replace the fused local top-N inside the
        # one call (logits and row_ends still feed the rescue round).
        ops.group_merge(logits, row_ends, workspace=ws.variant(block_size, ids_out is not None),
                        ids_out=ids_out, max_local_len=mll, packed=packed,
                        indptr_out=indptr_out,
                        rows=_RowsMapOutput(req_id, block_table, rows_out, valid_out,
                                            stride_rows))
        return ()
    given = packed is not None
    if packed is None:
        packed = dcp_topk_pack(logits, row_ends, local_topk, max_local_len=mll)
    else:
        words = packed_row_words(local_topk)
        if not isinstance(packed, torch.Tensor) or packed.dtype != torch.int32 or \
                packed.dim() != 2 or packed.shape[1] != words:
            raise ValueError(f"packed must be int32 [T, {words}], got "
                             f"{getattr(packed, 'dtype', type(packed).__name__)} "
                             f"{tuple(getattr(packed, 'shape', ()))}")
        if packed.shape[0] > 1 and packed.stride() != (words, 1):
            _checks.fail("packed", packed, f"int32 [T, {words}] with contiguous rows")
    num_rows = packed.shape[0]
    exact = _exact_args_for(topk, local_topk, logits, row_ends, group, mll)
    for name, t in (("rows_out", rows_out), ("valid_out", valid_out), ("req_id", req_id)):
        ops._tensor(t, name)
    if rows_out.dim() != 2 or rows_out.shape[0] != num_rows or rows_out.shape[1] < topk:
        raise ValueError(f"rows_out must be [{num_rows}, >= {topk}], got "
                         f"{tuple(rows_out.shape)}")
    if valid_out.dim() != 1 or valid_out.shape[0] != num_rows or req_id.dim() != 1 or \
            req_id.shape[0] < num_rows:
        raise ValueError(f"valid_out must have T = {num_rows} rows and req_id at least T, got "
                         f"valid_out {tuple(valid_out.shape)}, req_id {tuple(req_id.shape)}")
    if ids_out is not None and tuple(ids_out.shape) != (num_rows, topk):
        raise ValueError(f"ids_out must be [{num_rows}, {topk}], got {tuple(ids_out.shape)}")
    if block_table.dim() != 2 or (block_table.shape[1] > 1 and block_table.stride(1) != 1):
        raise ValueError("block_table rows must be contiguous")
    rows = DcpRowsOutput(req_id=req_id, block_table=block_table, rows_out=rows_out,
                      valid_out=valid_out, dcp_rank=dcp_rank, block_size=block_size,
                      stride_rows=stride_rows)
    if indptr_out is not None:
        _checks.indptr(as_config(_cfg(topk, local_topk, 1)), indptr_out, num_rows,
                       rows_out.device, True)
    dcp_topk_select(_all_gather_packed(packed, exact.workspace), local_topk, ids_out, topk=topk,
                    rows=rows, exact=exact)
    if indptr_out is not None:
        # This path's select has no indptr: torch's scan after it (two more
        # launches, not memoised: the memo replays library launches only).
        torch.cumsum(valid_out, 0, dtype=torch.int32, out=indptr_out[1:])
        indptr_out[:1].zero_()
        return None
    if not _memoisable(exact.workspace):
        return None
    return () if given else (packed,)


def assert_packed_merge_contract(packed: torch.Tensor, logits: torch.Tensor,
                                 row_ends: torch.Tensor, local_topk: int) -> None:
    """Check a packed-mode producer against the contract of
    dcp_topk_merge_rows (raises AssertionError; synchronises, for tests and
    debugging): per row, exactly min(N, v) words (v the non-NaN tokens below
    row_ends) of distinct local ids below row_ends, each word's score the
    logit's bf16 bits, and no unsent non-NaN token scoring above the lowest
    sent one. The library's checker decides."""
    assert packed.dtype == torch.int32, packed.dtype
    assert packed.dim() == 2 and packed.shape[1] == packed_row_words(local_topk), packed.shape
    T, S = packed.shape[0], logits.shape[1]
    host = logits[:T].detach().to("cpu")
    pad = (-S) % 8
    if pad or host.stride(-1) != 1 or (T > 1 and host.stride(0) != S):
        # The checker reads 16-byte rows: a padded copy (the pad is never read).
        padded = torch.zeros((T, S + pad), dtype=torch.bfloat16)
        padded[:, :S] = host
        host = padded
    try:
        check_contract(as_config(_pack_cfg(local_topk)), packed, host,
                             row_ends[:T], min(S, 1 << LOCAL_INDEX_BITS))
    except DcptopkError as e:
        if e.name == "DCPTOPK_CONTRACT_VIOLATION":
            raise AssertionError(str(e)) from None
        raise


# ------------------------------------------------------------------ warmup

_WARMUP_CONFIGS: list = []


def register_dcp_topk_merge_warmup(topk: int, local_topk: int, world_size: int, *,
                                   emit_ids: bool = True, block_size: int = 0,
                                   exact: bool = True) -> None:
    """Record the pack kernel and one select (+ rescue) variant for the warmup
    at model load (warmup_dcp_topk_merge). The stock indexer uses the
    defaults (global ids); a caller of dcp_topk_merge_rows passes its
    block_size and whether it also wants the global ids."""
    cfg = as_config(_cfg(topk, local_topk, world_size, block_size, emit_ids, exact))
    config_check(cfg)
    if cfg not in _WARMUP_CONFIGS:
        _WARMUP_CONFIGS.append(cfg)


def warmup_dcp_topk_merge(device=None, progress=None):
    """Compile or load every registered config's kernels (a bar on a
    terminal, quiet otherwise). Returns their stats."""
    if not _WARMUP_CONFIGS:
        return []
    dev = torch.device(device) if device is not None else _device()
    if dev.type == "cpu":
        return []
    return default_context(dev.index).warmup(list(_WARMUP_CONFIGS), progress)


# Old names kept importable, with a DeprecationWarning on use.
_DEPRECATED = {"RowsOutput": ("DcpRowsOutput", DcpRowsOutput)}


def __getattr__(name):
    if name in _DEPRECATED:
        new_name, obj = _DEPRECATED[name]
        warnings.warn(f"dcptopk.merge.{name} is deprecated: it is dcptopk.merge.{new_name} "
                      f"(dcptopk.{name} is the lower layer's rows output, another class)",
                      DeprecationWarning, stacklevel=2)
        return obj
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
