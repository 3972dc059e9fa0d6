"""The merge across the ranks of a torch.distributed group: which backend
serves a torch group, and the runtime it gets (one per group and device).

- "dcptopk" (the default): the library's distributed runtime, a Group made
  from the torch group (dcptopk._group: the library owns the exchange path,
  NCCL or a device push, and the peer memory, and one dcptopk_group_merge
  call runs a step). When the loaded library lacks that runtime, every call
  says so with a RuntimeError.
- "torch": the exchange is torch's all_gather_into_tensor on the group and
  the rescue's receive slots and flags are torch symmetric memory, whose peer
  addresses feed dcptopk_workspace_create (the library's call for engines that
  bring their own memory).

DCPTOPK_DIST_BACKEND selects one ("dcptopk" or "torch").
"""
import os
import threading

from ._config import workspace_layout
from ._context import default_context
from ._group import Group, group_info, group_scope

_runtimes = {}
_lock = threading.Lock()


def backend_name(backend=None):
    b = backend or os.environ.get("DCPTOPK_DIST_BACKEND", "dcptopk")
    if b not in ("dcptopk", "torch"):
        raise ValueError(f"backend: got {b!r}; expected 'dcptopk' (the library's distributed "
                         "runtime) or 'torch' (torch all-gather + symmetric memory)")
    return b


def runtime(group, device, backend=None):
    """The runtime of a group of more than one rank on `device` (one per
    group): a Group on the dcptopk backend, a TorchRuntime on torch's."""
    b = backend_name(backend)
    key = (id(group), device, b)
    with _lock:
        rt = _runtimes.get(key)
    if rt is None:
        rt = Group.from_torch(group, device) if b == "dcptopk" else TorchRuntime(group, device)
        with _lock:
            rt = _runtimes.setdefault(key, rt)
    return rt


class TorchRuntime:
    """torch all-gather along dim 0 into the rank-major [W, T, words] buffer
    (read in place by the select) and torch symmetric memory for the rescue."""

    def __init__(self, group, device):
        self.group, self.device = group, device
        self.world_size, self.rank = group_info(group)
        self.scope = group_scope(group, "torch")

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
        lay = workspace_layout(cfg, max_rows)
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
        ctx = default_context(self.device)
        ws = ctx.workspace(cfg, max_rows, self.rank, ptrs[0], ptrs[1], keepalive=tuple(bufs),
                           scope=self.scope)
        # No rank may push into a peer's slots before that peer zeroed them.
        torch.cuda.current_stream(dev).synchronize()
        dist.barrier(group=self.group)
        return ws


__all__ = ["backend_name", "runtime", "TorchRuntime"]
