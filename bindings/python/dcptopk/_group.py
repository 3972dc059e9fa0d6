"""The library's group of ranks (dcptopk_group) and what lives on it.

One Group class, made either from a launcher's environment (torchrun, Open
MPI or Slurm variables: Group(ctx, ...), for scripts and tests) or from a
torch.distributed group (Group.from_torch, what the drop-in's "dcptopk"
backend makes once per torch group). From a torch group, where the ranks run
(gathered over the torch group) decides how it forms: one GPU per rank gives
an NCCL communicator from a unique id that rank 0 creates and the torch
group broadcasts; ranks that share a GPU (which NCCL refuses) on one host
give a store-only group: rank 0 makes a private (0700) folder for the
library's file store and broadcasts its path, and the group exchanges
through CUDA IPC peer memory. GroupWorkspace is a config's buffers on a
group (one dcptopk_group_merge call runs a step; its body is in
dcptopk.ops), GroupWorkspaces the drop-in's variants of one (K, N).

torch is imported only by the calls that use a torch group. Arguments are
checked before the library is called (ValueError / TypeError naming the
argument); library failures are DcptopkError with the library's message.
"""
import ctypes

from . import _checks, _keys, _registry
from ._config import as_config
from ._context import default_context
from ._handle import Handle
from ._lib import (DIST_SYMBOLS, PATH_NAMES, PROGRESS_FN, DcptopkError, GroupConfig, LaunchEnv,
                   SelftestReport, WarmupStats, as_bytes_path, check, has_dist_runtime, library,
                   new, _vp)

# DCPTOPK_GROUP_UNIQUE_ID_BYTES (NCCL's unique id).
UNIQUE_ID_BYTES = 128


# ------------------------------------------------------------- the launcher

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


# --------------------------------------------------- a torch group's ranks

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


def placements(group, device):
    """Where every rank of the torch group runs: (host, boot id, GPU UUID) per
    rank, gathered over the group (collective)."""
    import socket

    import torch
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


# ---------------------------------------------------------------- the group

class Group(Handle):
    """A dcptopk_group. Group(ctx, store_dir, ...) makes it from the
    launcher's environment (dcptopk_group_create_from_env; collective): for
    scripts and tests. Group.from_torch(group, device) makes it over a
    torch.distributed group (collective); engines over torch.distributed use
    dcptopk.merge, which does that once per group."""

    what = "group"

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
        check(lib.dcptopk_group_create_from_env(ctx._live(), d, ctypes.byref(gc),
                                                ctypes.byref(h)))
        self._h = h
        # No torch group behind it: the launcher's variables made it.
        self.group, self.device, self.scope = None, ctx.device, None
        self.bootstrap, self.store_dir = "env", store_dir

    @classmethod
    def from_torch(cls, group, device, ctx=None):
        """The group of a torch.distributed group's ranks on CUDA device
        `device` (collective), on ctx (default: the device's default
        context): from an NCCL unique id that rank 0 makes and the torch
        group broadcasts when every rank has its own GPU, else (ranks
        sharing a GPU on one host) store-only, in a private folder whose
        path rank 0 broadcasts. It lives as long as the process: a peer may
        still reach its memory until every rank has left."""
        lib = library()
        if not has_dist_runtime(lib):
            raise RuntimeError(
                f"libdcptopk ({lib._name}) lacks the distributed runtime (no "
                f"{', '.join(DIST_SYMBOLS[:3])}, ...): it cannot merge over a group of more "
                "than one rank. Build the library with its group/ runtime, or set "
                "DCPTOPK_DIST_BACKEND=torch (torch all-gather + symmetric memory)")
        self = cls.__new__(cls)
        self._free_on_gc = False
        self.group, self.device = group, device
        world_size, rank = group_info(group)
        self.scope = group_scope(group, "dcptopk")
        self.store_dir = None
        gc = new(GroupConfig)
        gc.version, gc.rank, gc.world_size = 1, rank, world_size
        # 0: the library reads DCPTOPK_PEER_TIMEOUT_MS through its settings
        # table (one parser; an invalid value warns and keeps the default).
        gc.path, gc.timeout_ms = 0, 0
        self.bootstrap = bootstrap_kind(placements(group, device))
        if self.bootstrap == "store":
            # Ranks share a GPU: no NCCL. The library's file store in a
            # private folder of rank 0's, named to the others over the group.
            self._store = broadcast_bytes(_store_folder().encode() if rank == 0 else b"",
                                          group)
            self.store_dir = self._store.decode()
            gc.store_dir = self._store
        else:
            uid = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
            failed = None
            if rank == 0:
                try:
                    check(lib.dcptopk_group_unique_id(uid))
                except DcptopkError as e:
                    failed = e  # raised after the broadcast: the others must not hang
            got = broadcast_bytes(bytes(uid.raw) if rank == 0 and not failed else b"", group)
            if failed:
                raise failed
            if len(got) != UNIQUE_ID_BYTES:
                raise RuntimeError("group: rank 0 could not make the NCCL unique id (its error "
                                   "says why: NCCL missing?)")
            self._uid = ctypes.create_string_buffer(got, UNIQUE_ID_BYTES)
            gc.unique_id = ctypes.cast(self._uid, _vp)
        self.ctx = default_context(device) if ctx is None else ctx
        h = _vp()
        check(lib.dcptopk_group_create(self.ctx._live(), ctypes.byref(gc), ctypes.byref(h)),
              self.ctx._h)
        self._h = h
        return self

    def _release(self, h):
        if h:
            library().dcptopk_group_destroy(h)

    def _check(self, rc):
        if rc != 0:
            lib = library()
            raise DcptopkError(rc, lib.dcptopk_result_name(rc).decode(),
                               lib.dcptopk_group_last_error(self._h).decode(errors="replace"))

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
        _checks.integer(rows, "rows", 1, 1 << 20, "a positive int")
        _checks.integer(steps, "steps", 1, 1 << 20, "a positive int")
        _checks.integer(seed, "seed", 0, (1 << 64) - 1, "a non-negative int")
        rep = new(SelftestReport)
        self._check(library().dcptopk_selftest_group(self._live(), ctypes.byref(as_config(cfg)),
                                                     rows, steps, seed, ctypes.byref(rep)))
        return {"on_gpu": bool(rep.on_gpu), "rows_checked": rep.rows_checked,
                "rows_rescued": rep.rows_rescued, "mismatches": rep.mismatches,
                "gpu_ms": rep.gpu_ms, "summary": rep.summary.decode(errors="replace")}

    def workspace(self, cfg, max_rows):
        """Collective: the group's peer memory and buffers for cfg."""
        h = _vp()
        self._check(library().dcptopk_group_workspace_create(self._live(), ctypes.byref(cfg),
                                                              max_rows, ctypes.byref(h)))
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
                           "(torch.ops.dcptopk.group_merge); given packed rows need "
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


class GroupWorkspace(Handle):
    """A config's buffers on the library's group: dcptopk_group_merge runs the
    whole step (pack, exchange, select, rescue) in one call
    (torch.ops.dcptopk.group_merge). Freed by close() only: peers may reach
    its memory until every rank has finished its last step."""

    what = "group workspace"
    _free_on_gc = False

    def __init__(self, rt, cfg, max_rows, handle):
        self.rt, self._h = rt, handle
        self.cfg, self.max_rows = cfg.copy(), int(max_rows)
        self.rank, self.world_size = rt.rank, rt.world_size
        self.topk, self.local_topk = cfg.topk, cfg.local_topk
        self.device_group = rt.group
        self.one_call = True
        self.key = _registry.register(self, _registry.workspace_name(
            rt.scope, cfg, self.rank, f"cuda:{rt.device}", variant=True))

    def info(self):
        return (self.topk, self.local_topk, self.world_size, self.rank, self.max_rows,
                f"cuda:{self.rt.device}")

    def warmup(self, progress=None):
        st = new(WarmupStats)
        cb = PROGRESS_FN(lambda *_: None) if progress is None else PROGRESS_FN(
            lambda _u, key, origin, ms: progress(_keys.key_str(key.contents), origin, ms))
        self.rt._check(library().dcptopk_group_warmup(self._h, cb, None, ctypes.byref(st)))
        return {n: getattr(st, n) for n, _ in WarmupStats._fields_[1:]}

    def check(self):
        """Synchronises the stream; raises DcptopkError (PEER_TIMEOUT, NCCL_ERROR)."""
        import torch
        self.rt._check(library().dcptopk_group_check(
            self.rt._h, torch.cuda.current_stream(self.rt.device).cuda_stream))

    def _release(self, h):
        if h:
            _registry.unregister(self.key, self)
            library().dcptopk_group_workspace_destroy(h)


__all__ = ["Group", "GroupWorkspace", "GroupWorkspaces", "launch_env", "path_name"]
