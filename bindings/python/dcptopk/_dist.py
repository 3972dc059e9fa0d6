"""The merge across the ranks of a torch.distributed group.

A group's peers are reached by one of two backends:

- "dcptopk" (the default): the library's distributed runtime (a
  dcptopk_group; the library owns the exchange path, NCCL or a device push,
  and the peer memory, and one dcptopk_group_merge call runs a step). How
  the group is made is decided per torch group from where its ranks run
  (gathered over the torch group): one GPU per rank gives an NCCL
  communicator from a unique id that rank 0 creates and the torch group
  broadcasts; ranks that share a GPU (which NCCL refuses) on one host give a
  store-only group: rank 0 makes a private (0700) folder for the library's
  file store and broadcasts its path, and the group exchanges through CUDA
  IPC peer memory. When the loaded library lacks that runtime, every call
  says so with a RuntimeError.
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


def group_scope(group, backend):
    """The stable part of a group's workspace names: its ranks in the
    default group, which every process of a deployment builds alike (a
    group's creation-order name is not), e.g. "group[0,1,2,3]"
    ("torch-group[...]" on the torch backend)."""
    import torch.distributed as dist
    try:
        ranks = dist.get_process_group_ranks(group)
    except Exception:   # a group torch cannot list: its name
        return f"{'torch-' if backend == 'torch' else ''}group-{getattr(group, 'group_name', '?')}"
    return f"{'torch-' if backend == 'torch' else ''}group[{','.join(map(str, ranks))}]"


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


def placements(group, device):
    """Where every rank of the torch group runs: (host, boot id, GPU UUID) per
    rank, gathered over the group (collective)."""
    import socket

    import torch
    import torch.distributed as dist
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    props = torch.cuda.get_device_properties(device)
    # The UUID names the GPU whatever CUDA_VISIBLE_DEVICES each rank has.
    gpu = str(getattr(props, "uuid", "") or "")
    if not gpu:
        gpu = (f"pci:{getattr(props, 'pci_domain_id', 0)}:{getattr(props, 'pci_bus_id', -1)}:"
               f"{getattr(props, 'pci_device_id', -1)}")
    mine = "\n".join((socket.gethostname(), boot, gpu)).encode()
    return [tuple(b.decode().split("\n")) for b in all_gather_bytes(mine, group)]


# Bytes over a torch group through plain tensor collectives: the *_object
# collectives pickle through numpy, which a torch install may lack.

def _wire_device(group):
    """Where the group's collectives take tensors: the CPU when it has gloo
    (also "cpu:gloo,cuda:nccl"), else the current GPU."""
    import torch
    import torch.distributed as dist
    if "gloo" in str(dist.get_backend(group)).lower():
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())


def _frame(data, cap):
    import torch
    if len(data) > cap:
        raise ValueError(f"{len(data)} bytes to send over the group: at most {cap}")
    t = torch.zeros(cap + 4, dtype=torch.uint8)
    t[:4] = torch.tensor(list(len(data).to_bytes(4, "little")), dtype=torch.uint8)
    if data:
        t[4:4 + len(data)] = torch.tensor(list(data), dtype=torch.uint8)
    return t


def _unframe(t):
    b = bytes(t.cpu().tolist())
    return b[4:4 + int.from_bytes(b[:4], "little")]


def all_gather_bytes(data, group, cap=1024):
    """Every rank's `data` (bytes, at most cap), in rank order. Collective."""
    import torch.distributed as dist
    dev = _wire_device(group)
    t = _frame(data, cap).to(dev)
    out = [t.new_empty(t.shape) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, t, group=group)
    return [_unframe(x) for x in out]


def broadcast_bytes(data, group, cap=4096):
    """Group rank 0's `data` (bytes, at most cap; ignored elsewhere) on every
    rank. Collective."""
    import torch.distributed as dist
    t = _frame(data if dist.get_rank(group) == 0 else b"", cap).to(_wire_device(group))
    dist.broadcast(t, src=dist.get_global_rank(group, 0), group=group)
    return _unframe(t)


def bootstrap_kind(places):
    """"nccl" when every rank has its own GPU, "store" when ranks share a GPU
    and all run on one host (NCCL refuses two ranks on one GPU; the
    library's store-only group then exchanges through CUDA IPC); a
    RuntimeError when ranks share a GPU across hosts."""
    if len(set(places)) == len(places):
        return "nccl"
    hosts = {p[:2] for p in places}
    if len(hosts) == 1:
        return "store"
    shared = sorted({p for p in places if places.count(p) > 1})
    raise RuntimeError(
        f"group: ranks share a GPU ({shared[0][2]} on {shared[0][0]}), which NCCL refuses, and "
        f"the group spans {len(hosts)} hosts, which a store-only group cannot reach: give each "
        "rank its own GPU, or keep the ranks that share a GPU on one host")


_store_folders = []


def _store_folder():
    """A private (0700) folder for a store-only group's files, removed when
    this process exits (rank 0 makes it; the ranks use it while they run)."""
    import atexit
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="dcptopk-store-")
    if not _store_folders:
        atexit.register(lambda: [shutil.rmtree(x, ignore_errors=True) for x in _store_folders])
    _store_folders.append(d)
    return d


class LibraryRuntime:
    """The library's group (dcptopk_group), created once per torch group:
    from an NCCL unique id that rank 0 makes and the torch group broadcasts
    when every rank has its own GPU, else (ranks sharing a GPU on one host)
    store-only, in a private folder whose path rank 0 broadcasts."""

    def __init__(self, group, device):
        lib = library()
        if not has_dist_runtime(lib):
            raise RuntimeError(
                f"libdcptopk ({lib._name}) lacks the distributed runtime (no "
                f"{', '.join(DIST_SYMBOLS[:3])}, ...): it cannot merge over a group of more "
                "than one rank. Build the library with its group/ runtime, or set "
                "DCPTOPK_DIST_BACKEND=torch (torch all-gather + symmetric memory)")
        self.group, self.device = group, device
        self.world_size, self.rank = group_info(group)
        self.scope = group_scope(group, "dcptopk")
        self.store_dir = None
        gc = new(GroupConfig)
        gc.version, gc.rank, gc.world_size = 1, self.rank, self.world_size
        # 0: the library reads DCPTOPK_PEER_TIMEOUT_MS through its settings
        # table (one parser; an invalid value warns and keeps the default).
        gc.path, gc.timeout_ms = 0, 0
        self.bootstrap = bootstrap_kind(placements(group, device))
        if self.bootstrap == "store":
            # Ranks share a GPU: no NCCL. The library's file store in a
            # private folder of rank 0's, named to the others over the group.
            self._store = broadcast_bytes(_store_folder().encode() if self.rank == 0 else b"",
                                          group)
            self.store_dir = self._store.decode()
            gc.store_dir = self._store
        else:
            uid = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
            failed = None
            if self.rank == 0:
                try:
                    check(lib.dcptopk_group_unique_id(uid))
                except DcptopkError as e:
                    failed = e  # raised after the broadcast: the others must not hang
            got = broadcast_bytes(bytes(uid.raw) if self.rank == 0 and not failed else b"", group)
            if failed:
                raise failed
            if len(got) != UNIQUE_ID_BYTES:
                raise RuntimeError("group: rank 0 could not make the NCCL unique id (its error "
                                   "says why: NCCL missing?)")
            self._uid = ctypes.create_string_buffer(got, UNIQUE_ID_BYTES)
            gc.unique_id = ctypes.cast(self._uid, _vp)
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

    @property
    def nodes(self):
        """Nodes an exact packed merge runs over: 1 flat, D > 1 the
        hierarchical merge, 0 neither (see path())."""
        return library().dcptopk_group_nodes(self._h)

    def path(self):
        """(path name, reason) of the exchange the group chose."""
        p = ctypes.c_int32(0)
        why = ctypes.create_string_buffer(640)
        self._check(library().dcptopk_group_path(self._h, ctypes.byref(p), why, 640))
        return PATH_NAMES.get(p.value, str(p.value)), why.value.decode(errors="replace")

    def workspace(self, cfg, max_rows):
        """Collective: the group's peer memory and buffers for cfg."""
        h = _vp()
        self._check(library().dcptopk_group_workspace_create(self._h, ctypes.byref(cfg), max_rows,
                                                              ctypes.byref(h)))
        return GroupWorkspace(self, cfg, max_rows, h)

    def workspaces(self, cfgs, max_rows, progress=None):
        """Collective: one group workspace per config variant (block_size,
        emit_ids) of one (K, N): the library's one-call merge takes its
        config from its workspace. progress: as GroupWorkspace.warmup's."""
        ws = GroupWorkspaces(self, {(c.block_size, bool(c.emit_ids)): self.workspace(c, max_rows)
                                    for c in cfgs}, cfgs[0], max_rows)
        # Every kernel of a step is loaded now (not collective): a step that
        # compiles holds its peers' waits, possibly past the group's bound.
        for gw in ws.variants.values():
            gw.warmup(progress)
        return ws

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
        self.key = _core._register(self, _core.workspace_name(
            rt.scope, cfg, self.rank, f"cuda:{rt.device}", variant=True))

    def info(self):
        return (self.topk, self.local_topk, self.world_size, self.rank, self.max_rows,
                f"cuda:{self.rt.device}")

    def warmup(self, progress=None):
        st = new(WarmupStats)
        cb = PROGRESS_FN(lambda *_: None) if progress is None else PROGRESS_FN(
            lambda _u, key, origin, ms: progress(_core._key_str(key.contents), origin, ms))
        self.rt._check(library().dcptopk_group_warmup(self._h, cb, None, ctypes.byref(st)))
        return {n: getattr(st, n) for n, _ in WarmupStats._fields_[1:]}

    def merge(self, cfg, logits, row_ends, ids_out, plan, rows_tensors, local_ids=None,
              packed=None, indptr_out=None):
        """One step (the body of torch.ops.dcptopk.group_merge)."""
        import torch
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
            _core._unregister(self.key, self)
            library().dcptopk_group_workspace_destroy(self._h)
            self._h = None


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
        ws = ctx.workspace(cfg, max_rows, self.rank, ptrs[0], ptrs[1], keepalive=tuple(bufs),
                           scope=self.scope)
        # No rank may push into a peer's slots before that peer zeroed them.
        torch.cuda.current_stream(dev).synchronize()
        dist.barrier(group=self.group)
        return ws
