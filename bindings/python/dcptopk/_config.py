"""Merge configs: the named ones, one made from its fields, their checks, and
the sizes that follow from them (packed row words, rescue slots, the rescue
workspace's layout).

Nothing here imports torch.
"""
import ctypes

from . import _checks
from ._lib import MergeConfig, WorkspaceLayout, check, library, new


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
    if not isinstance(name, str):
        raise _checks.ArgTypeError(f"name: got {type(name).__name__} {name!r}; expected a "
                                   f"config name (str), one of {', '.join(config_names())}")
    cfg = MergeConfig()
    check(library().dcptopk_merge_config_named(_checks.c_str(name, "name"), ctypes.byref(cfg)))
    return cfg.copy(**overrides)


def make_config(kind="packed", *, topk, local_topk=0, world_size, block_size=0, interleave=1,
                emit_ids=True, exact=None):
    """A config from its fields, validated by the library (DcptopkError names
    the field). kind: "packed" or "pair"; exact defaults to True for packed."""
    kinds = {"packed": MergeConfig.PACKED, "pair": MergeConfig.PAIR}
    if isinstance(kind, str) and kind not in kinds:
        raise ValueError(f"kind: got {kind!r}; expected 'packed' or 'pair'")
    k = kinds.get(kind, kind) if isinstance(kind, str) else _checks.c_int(kind, "kind",
                                                                          ctypes.c_int32)
    if exact is None:
        exact = k == MergeConfig.PACKED
    cfg = MergeConfig(kind=k, topk=topk, local_topk=local_topk if k == 0 else topk,
                      world_size=world_size, block_size=block_size, interleave=interleave,
                      emit_ids=int(bool(emit_ids)), exact=int(bool(exact) and k == 0))
    config_check(cfg)
    return cfg


def config_check(cfg):
    """Raises DcptopkError naming the first invalid field of cfg."""
    check(library().dcptopk_merge_config_check(ctypes.byref(cfg)))


def as_config(cfg):
    """A MergeConfig from a MergeConfig, a config name or its int list."""
    if isinstance(cfg, MergeConfig):
        return cfg
    if isinstance(cfg, str):
        return config(cfg)
    if isinstance(cfg, (list, tuple)):
        return MergeConfig.from_list(cfg)
    raise TypeError(f"cfg: got {type(cfg).__name__}; expected a MergeConfig, a config name or "
                    "its int list")


def packed_row_words(n):
    """int32 words of a packed row of n candidates: n + n/32 (the library's)."""
    return library().dcptopk_packed_row_words(_checks.c_int(n, "n", ctypes.c_int32))


def rescue_slots(k, n):
    """Local top-K lists a rank can receive per row: (K - 1) // N (the library's)."""
    return library().dcptopk_rescue_slots(_checks.c_int(k, "k", ctypes.c_int32),
                                          _checks.c_int(n, "n", ctypes.c_int32))


def workspace_layout(cfg, max_rows):
    """Bytes each rank must allocate, in peer-shareable memory, for the rescue
    round of an exact packed config: {"recv_bytes": ..., "flags_bytes": ...}."""
    lay = new(WorkspaceLayout)
    max_rows = _checks.c_int(max_rows, "max_rows", ctypes.c_int64)
    check(library().dcptopk_workspace_layout_get(ctypes.byref(as_config(cfg)), max_rows,
                                                 ctypes.byref(lay)))
    return {"recv_bytes": lay.recv_bytes, "flags_bytes": lay.flags_bytes}


__all__ = ["config_names", "config", "make_config", "config_check", "as_config",
           "packed_row_words", "rescue_slots", "workspace_layout"]
