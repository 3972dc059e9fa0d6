"""The merge across the ranks of a torch.distributed group.

A group's peers are reached by one of two backends:

- "dcptopk" (the default): the library's distributed runtime (a
  dcptopk_group made from an NCCL unique id that rank 0 creates and the
  torch group broadcasts with broadcast_object_list; the library then owns
  the exchange and the peer memory of the rescue). When the loaded library
  lacks that runtime, every call says so with a RuntimeError.
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
from ._lib import DIST_SYMBOLS, check, has_dist_runtime, library, _vp

_runtimes = {}
_lock = threading.Lock()

# NCCL's unique id is 128 bytes (NCCL_UNIQUE_ID_BYTES).
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
    """The library's group: created once per torch group from an NCCL unique
    id broadcast over it."""

    def __init__(self, group, device):
        lib = library()
        if not has_dist_runtime(lib):
            raise RuntimeError(
                f"libdcptopk ({lib._name}) lacks the distributed runtime (no "
                f"{', '.join(DIST_SYMBOLS)}): it cannot merge over a group of more than one "
                "rank. Build the library with its dist/ runtime, or set "
                "DCPTOPK_DIST_BACKEND=torch (torch all-gather + symmetric memory)")
        import torch.distributed as dist
        self.group, self.device = group, device
        self.world_size, self.rank = group_info(group)
        uid = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
        if self.rank == 0:
            check(lib.dcptopk_nccl_unique_id(uid))
        obj = [bytes(uid.raw) if self.rank == 0 else None]
        dist.broadcast_object_list(obj, src=dist.get_global_rank(group, 0), group=group)
        ctx = _core.default_context(device)
        h = _vp()
        lib.dcptopk_group_create.restype = ctypes.c_int32
        check(lib.dcptopk_group_create(ctx._handle(), obj[0], self.world_size, self.rank,
                                       ctypes.byref(h)), ctx._h)
        self._h, self.ctx = h, ctx

    def workspace(self, cfg, max_rows):
        raise RuntimeError("the library's group workspace is not bound yet: the dist/ runtime's "
                           "workspace call is pending (use DCPTOPK_DIST_BACKEND=torch)")

    def all_gather(self, packed, out=None):
        raise RuntimeError("the library's group exchange is not bound yet: the dist/ runtime's "
                           "exchange call is pending (use DCPTOPK_DIST_BACKEND=torch)")


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
