"""The merge across the ranks of a torch.distributed group.

A group's peers are reached by one of two backends:

- "dcptopk" (the default): the library's distributed runtime (a
  dcptopk_group made from an NCCL unique id that rank 0 creates and the
  torch group broadcasts with broadcast_object_list; the library then owns
  the exchange path, NCCL or a device push, and the peer memory, and one
  dcptopk_group_merge call runs a step). When the loaded library lacks that
  runtime, every call says so with a RuntimeError.
- "torch": the exchange is torch's all_gather_into_tensor on the group and
  the rescue's receive slots and flags are torch symmetric memory, whose peer
  addresses feed dcptopk_workspace_create (the library's call for engines that
  bring their own memory).

DCPTOPK_DIST_BACKEND selects one ("dcptopk" or "torch").
"""
import ctypes
import os
import threading

from . import _core
from ._lib import (DIST_SYMBOLS, PATH_NAMES, PROGRESS_FN, DcptopkError, GroupConfig,
                   GroupMergeArgs, WarmupStats, check, has_dist_runtime, library, new, _vp)

_runtimes = {}
_lock = threading.Lock()

# DCPTOPK_GROUP_UNIQUE_ID_BYTES (NCCL's unique id).
UNIQUE_ID_BYTES = 128


def backend_name(backend=None):
    b = backend or os.environ.get("DCPTOPK_DIST_BACKEND", "dcptopk")
    if b not in ("dcptopk", "torch"):
        raise ValueError(f"backend: got {b!r}; expected 'dcptopk' (the library's distributed "
                         "runtime) or 'torch' (torch all-gather + symmetric memory)")
    return b


def group_info(group):
    """(world_size, rank) of a torch.distributed group; None = a world of 1
    (no group, or torch.distributed not initialised)."""
    if group is None:
        return 1, 0
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("group: given, but torch.distributed is not initialised "
                           "(init_process_group first, or pass group=None for a world of 1)")
    return dist.get_world_size(group), dist.get_rank(group)


def runtime(group, device, backend=None):
    """The runtime of a group of more than one rank on `device` (one per group)."""
    b = backend_name(backend)
    key = (id(group), device, b)
    with _lock:
        rt = _runtimes.get(key)
    if rt is None:
        rt = (LibraryRuntime if b == "dcptopk" else TorchRuntime)(group, device)
        with _lock:
            rt = _runtimes.setdefault(key, rt)
    return rt


class LibraryRuntime:
    """The library's group (dcptopk_group), created once per torch group from
    an NCCL unique id that rank 0 makes and the torch group broadcasts."""

    def __init__(self, group, device):
        lib = library()
        if not has_dist_runtime(lib):
            raise RuntimeError(
                f"libdcptopk ({lib._name}) lacks the distributed runtime (no "
                f"{', '.join(DIST_SYMBOLS[:3])}, ...): it cannot merge over a group of more "
                "than one rank. Build the library with its dist/ runtime, or set "
                "DCPTOPK_DIST_BACKEND=torch (torch all-gather + symmetric memory)")
        import torch.distributed as dist
        self.group, self.device = group, device
        self.world_size, self.rank = group_info(group)
        uid = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
        if self.rank == 0:
            check(lib.dcptopk_group_unique_id(uid))
        obj = [bytes(uid.raw) if self.rank == 0 else None]
        dist.broadcast_object_list(obj, src=dist.get_global_rank(group, 0), group=group)
        self._uid = ctypes.create_string_buffer(obj[0], UNIQUE_ID_BYTES)
        gc = new(GroupConfig)
        gc.version, gc.rank, gc.world_size = 1, self.rank, self.world_size
        gc.unique_id = ctypes.cast(self._uid, _vp)
        gc.path, gc.timeout_ms = 0, int(os.environ.get("DCPTOPK_PEER_TIMEOUT_MS", "0"))
        self.ctx = _core.default_context(device)
        h = _vp()
        check(lib.dcptopk_group_create(self.ctx._handle(), ctypes.byref(gc), ctypes.byref(h)),
              self.ctx._h)
        self._h = h

    def _check(self, rc):
        if rc != 0:
            lib = library()
            raise DcptopkError(rc, lib.dcptopk_result_name(rc).decode(),
                               lib.dcptopk_group_last_error(self._h).decode(errors="replace"))

    def path(self):
        """(path name, reason) of the exchange the group chose."""
        p = ctypes.c_int32(0)
        why = ctypes.create_string_buffer(512)
        self._check(library().dcptopk_group_path(self._h, ctypes.byref(p), why, 512))
        return PATH_NAMES.get(p.value, str(p.value)), why.value.decode(errors="replace")

    def workspace(self, cfg, max_rows):
        """Collective: the group's peer memory and buffers for cfg."""
        h = _vp()
        self._check(library().dcptopk_group_workspace_create(self._h, ctypes.byref(cfg), max_rows,
                                                              ctypes.byref(h)))
        return GroupWorkspace(self, cfg, max_rows, h)

    def workspaces(self, cfgs, max_rows):
        """Collective: one group workspace per config variant (block_size,
        emit_ids) of one (K, N): the library's one-call merge takes its
        config from its workspace."""
        return GroupWorkspaces(self, {(c.block_size, bool(c.emit_ids)): self.workspace(c, max_rows)
                                      for c in cfgs}, cfgs[0], max_rows)

    def all_gather(self, packed, out=None):
        raise RuntimeError("the library's group exchanges inside its one-call merge "
                           "(GroupWorkspace.merge); given packed rows need "
                           "DCPTOPK_DIST_BACKEND=torch")


class GroupWorkspaces:
    """The (K, N) entry of the drop-in registry on the library's group: a
    group workspace per (block_size, emit_ids) variant."""

    one_call = True

    def __init__(self, rt, variants, cfg, max_rows):
        self.rt, self.variants, self.max_rows = rt, variants, int(max_rows)
        self.rank, self.world_size = rt.rank, rt.world_size
        self.topk, self.local_topk = cfg.topk, cfg.local_topk
        self.device_group = rt.group

    def variant(self, block_size, emit_ids):
        gw = self.variants.get((block_size, bool(emit_ids)))
        if gw is None:
            raise RuntimeError(
                f"no group workspace for block_size={block_size}, emit_ids={bool(emit_ids)} of "
                f"(K={self.topk}, N={self.local_topk}): call register_dcp_topk_merge_warmup("
                f"{self.topk}, {self.local_topk}, {self.world_size}, block_size={block_size}, "
                f"emit_ids={bool(emit_ids)}) before init_dcp_topk_rescue_workspace")
        return gw

    def check(self):
        next(iter(self.variants.values())).check()

    def close(self):
        for gw in self.variants.values():
            gw.close()
        self.variants = {}


class GroupWorkspace:
    """A config's buffers on the library's group: dcptopk_group_merge runs the
    whole step (pack, exchange, select, rescue) in one call."""

    def __init__(self, rt, cfg, max_rows, handle):
        self.rt, self._h = rt, handle
        self.cfg, self.max_rows = cfg.copy(), int(max_rows)
        self.rank, self.world_size = rt.rank, rt.world_size
        self.topk, self.local_topk = cfg.topk, cfg.local_topk
        self.device_group = rt.group
        self.one_call = True
        self.id = _core._register(self)

    def info(self):
        return (self.topk, self.local_topk, self.world_size, self.rank, self.max_rows)

    def warmup(self, progress=None):
        st = new(WarmupStats)
        cb = PROGRESS_FN(lambda *_: None) if progress is None else PROGRESS_FN(
            lambda _u, key, origin, ms: progress(_core._key_str(key.contents), origin, ms))
        self.rt._check(library().dcptopk_group_warmup(self._h, cb, None, ctypes.byref(st)))
        return {n: getattr(st, n) for n, _ in WarmupStats._fields_[1:]}

    def merge(self, cfg, logits, row_ends, ids_out, plan, rows_tensors, local_ids=None):
        """One step (the body of torch.ops.dcptopk.group_merge)."""
        import torch
        a = new(GroupMergeArgs)
        a.rows = plan["rows"]
        a.logits, a.logits_stride = logits.data_ptr(), plan["logits_stride"]
        a.max_local_len, a.row_ends = plan["max_local_len"], row_ends.data_ptr()
        if local_ids is not None:
            a.local_ids, a.local_ids_stride = local_ids.data_ptr(), plan["local_ids_stride"]
        if ids_out is not None:
            a.ids_out, a.ids_out_stride = ids_out.data_ptr(), plan["ids_out_stride"]
        a.rows_map = _core.rows_map_struct(plan["rows_map"], *rows_tensors)
        a.stream = torch.cuda.current_stream(self.rt.device).cuda_stream
        _core.launch(library().dcptopk_group_merge, (self._h, ctypes.byref(a)),
                     lambda rc, _h: self.rt._check(rc))

    def check(self):
        """Synchronises the stream; raises DcptopkError (PEER_TIMEOUT, NCCL_ERROR)."""
        import torch
        self.rt._check(library().dcptopk_group_check(
            self.rt._h, torch.cuda.current_stream(self.rt.device).cuda_stream))

    def close(self):
        if getattr(self, "_h", None):
            _core._unregister(self.id)
            library().dcptopk_group_workspace_destroy(self._h)
            self._h = None


class TorchRuntime:
    """torch all-gather along dim 0 into the rank-major [W, T, words] buffer
    (read in place by the select) and torch symmetric memory for the rescue."""

    def __init__(self, group, device):
        self.group, self.device = group, device
        self.world_size, self.rank = group_info(group)

    def all_gather(self, packed, out=None):
        import torch
        import torch.distributed as dist
        T, words = packed.shape
        if out is None:
            out = torch.empty((self.world_size, T, words), dtype=packed.dtype,
                              device=packed.device)
        dist.all_gather_into_tensor(out.view(self.world_size * T, words), packed.contiguous(),
                                    group=self.group)
        return out

    def workspace(self, cfg, max_rows):
        """Every rank's receive slots and flags in symmetric memory; the
        library's workspace from their peer addresses. Collective."""
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem
        lay = _core.workspace_layout(cfg, max_rows)
        dev = torch.device("cuda", self.device)
        name = self.group.group_name
        if hasattr(symm_mem, "enable_symm_mem_for_group"):
            try:
                symm_mem.enable_symm_mem_for_group(name)
            except Exception:  # newer torch: enabled by default
                pass
        bufs, ptrs = [], []
        for nbytes in (lay["recv_bytes"], lay["flags_bytes"]):
            t = symm_mem.empty(max(1, (nbytes + 3) // 4), dtype=torch.int32, device=dev)
            hdl = symm_mem.rendezvous(t, name)
            bufs += [t, hdl]
            ptrs.append([int(p) for p in hdl.buffer_ptrs])
        ctx = _core.default_context(self.device)
        ws = ctx.workspace(cfg, max_rows, self.rank, ptrs[0], ptrs[1], keepalive=tuple(bufs))
        # No rank may push into a peer's slots before that peer zeroed them.
        torch.cuda.current_stream(dev).synchronize()
        dist.barrier(group=self.group)
        return ws
