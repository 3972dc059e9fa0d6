"""The names of the live contexts and workspaces, which the torch ops take.

The torch ops name contexts and workspaces by strings that another process
can rebuild (op schemas carry no Python objects): a graph that torch.compile
saved to its on-disk cache in one process, and loads in another, carries
these names as constants and finds the same state by them there, whatever
order the process made its workspaces in. A name says what the object is:
its group (or "local", "host", "peers"), config, rank and device, e.g.
"group[0,1,2,3]/K=2048,N=384,W=4,rank=1/cuda:1". A second live object of
one name is "NAME#2", "#3", ... in creation order (give it a name of its
own when graphs cached across processes use it). "" is the default context
of the tensors' device (ctx) or no workspace.

`generation` moves whenever a registered object goes away: the memoised
launches of dcptopk.ops are valid for one generation only.

Nothing here imports torch or loads the library.
"""
import threading

_named = {}
_lock = threading.Lock()
generation = 0


def register(obj, base, explicit=False):
    """Registers obj under base (or base#n when base is taken) and returns
    the name; an explicit name must be free."""
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


def unregister(name, obj):
    global generation
    with _lock:
        if _named.get(name) is obj:
            del _named[name]
        generation += 1


def registered(cls=None):
    """The names of the live registered objects (of class cls), sorted."""
    with _lock:
        return sorted(n for n, o in _named.items() if cls is None or isinstance(o, cls))


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


def workspace_name(scope, cfg, rank, device, variant=False):
    """The name a workspace is registered under: scope (its group), the
    config (with block_size and emit_ids for a group workspace, whose merge
    takes its config from it), the rank and the device."""
    s = f"{scope}/K={cfg.topk},N={cfg.local_topk},W={cfg.world_size}"
    if variant:
        s += f",B={cfg.block_size},ids={int(bool(cfg.emit_ids))}"
    return f"{s},rank={rank}/{device}"
