"""dcptopk: the exact DCP top-K merge of the DSA sparse indexer, for Python engines.

Three layers:

- ``dcptopk`` (this module, no torch needed to import it): configs, compile
  keys, contexts, warmup with progress, workspaces, the loopback world, the
  CPU reference, versions; and the rest of the C API for tools: the
  settings table and environment (``settings``, ``env_info``), the log
  level, key parse/check/render/hash, the compile cache file (``Cache``),
  the library's group of ranks (``Group``: from a launcher's environment,
  or ``Group.from_torch`` over a torch.distributed group). Tensors are
  torch tensors, imported lazily.
- ``dcptopk.ops``: ``torch.ops.dcptopk.{pack, pack_indices, select,
  pair_pack, pair_select, group_merge}``, custom ops with fake
  implementations (torch.compile(fullgraph=True)) that launch on the
  current stream (CUDA graphs), and the functions that call them (on a
  given context with ctx=).
- ``dcptopk.merge``: the seed's drop-in API (``dcp_topk_merge``,
  ``dcp_topk_pack``, ``init_dcp_topk_rescue_workspace``, ...).

    import dcptopk, dcptopk.ops
    ctx = dcptopk.Context(device=0)
    cfg = dcptopk.config("deepseek-v3.2-dcp8-pair")
    ctx.warmup([cfg])                                 # at model load: a bar on a terminal
    ids = dcptopk.ops.pair_select(cfg, gathered, rank=rank)   # int32 [W, T, K, 2] in place

Every tensor is checked against the config (dtype, device, shape, strides,
alignment) before the library is called; a mismatch is a ValueError naming the
tensor, what it got and what was expected. Errors of the library itself are
DcptopkError with the library's message.
"""
from ._lib import (BINDING_VERSION, STRUCTS, DcptopkError, MergeConfig, __version__,
                   has_dist_runtime, library, log_routed)
from ._cache import Cache, cache_default_path
from ._config import (config, config_check, config_names, make_config, packed_row_words,
                      rescue_slots, workspace_layout)
from ._context import (Context, LoopbackWorld, Progress, WarmupLog, Workspace,
                       compiles_after_warmup, configure, default_context, late_kernels, warmup)
from ._group import Group, launch_env, path_name
from ._keys import config_keys, key_check, key_hash, key_parse, key_render
from ._reference import (check_contract, ref_decode, ref_global_id, ref_ord16, ref_ord32,
                         ref_packed_merge)
from ._rows import RowsOutput
from ._settings import (device_count, env_info, log_level, set_log_level, setting, settings,
                        versions)

__all__ = ["DcptopkError", "MergeConfig", "Context", "Workspace", "LoopbackWorld", "RowsOutput",
           "Progress", "WarmupLog", "compiles_after_warmup", "late_kernels", "config", "config_names", "config_keys", "config_check", "make_config",
           "configure", "default_context", "workspace_layout", "packed_row_words",
           "rescue_slots", "ref_packed_merge", "check_contract", "versions",
           "cache_default_path", "device_count", "library", "has_dist_runtime", "log_routed",
           "warmup", "STRUCTS", "BINDING_VERSION", "__version__",
           "settings", "setting", "env_info", "log_level", "set_log_level", "key_parse",
           "key_check", "key_render", "key_hash", "ref_ord16", "ref_ord32", "ref_global_id",
           "ref_decode", "path_name", "launch_env", "Group", "Cache"]


def _moved_call(name):
    """Context.NAME(cfg, ...) as it was: dcptopk.ops.NAME(cfg, ..., ctx=self),
    deprecated. The call imports ops (and torch) only when made."""
    def call(self, *args, **kwargs):
        import warnings
        warnings.warn(f"Context.{name} is deprecated: call dcptopk.ops.{name}(..., ctx=ctx)",
                      DeprecationWarning, stacklevel=2)
        from . import ops
        return getattr(ops, name)(*args, ctx=self, **kwargs)
    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"Deprecated: dcptopk.ops.{name}(..., ctx=ctx)."
    return call


# The calls on tensors were Context's methods; they live in dcptopk.ops
# (torch), which the context module cannot import (ops imports it).
for _name in ("pack", "pack_indices", "select", "pair_pack", "pair_select"):
    setattr(Context, _name, _moved_call(_name))

# The library is loaded, version-checked and its log routed at import when it
# can be found; otherwise the first call says how to point at it.
try:
    library()
except OSError:
    pass
