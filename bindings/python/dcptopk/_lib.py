"""The ctypes layer: finding and loading libdcptopk, the C structs, the call
signatures, the version check and the routing of the library's log.

Nothing here imports torch.
"""
import ctypes
import ctypes.util
import logging
import os

from ._checks import Struct, arg_types

# The C API this binding was written against: the library must have the same
# major and minor version (the patch level may differ).
BINDING_VERSION = (0, 1, 0)
__version__ = ".".join(map(str, BINDING_VERSION))

_c_i32, _c_u32, _c_i64, _c_u64 = ctypes.c_int32, ctypes.c_uint32, ctypes.c_int64, ctypes.c_uint64
_vp = ctypes.c_void_p

log = logging.getLogger("dcptopk")


class DcptopkError(RuntimeError):
    """A dcptopk call failed: .code (int), .name (e.g. DCPTOPK_INVALID_ARGUMENT), message."""

    def __init__(self, code, name, message):
        if name == "DCPTOPK_NOT_WARMED" and NOT_WARMED_HINT not in message:
            message = f"{message}. {NOT_WARMED_HINT}"
        super().__init__(f"{name}: {message}")
        self.code, self.name = code, name


# The library's DCPTOPK_NOT_WARMED message names its C calls; from Python the
# fix is one of these.
NOT_WARMED_HINT = (
    "From Python: create the drop-in's workspaces with "
    "dcptopk.merge.init_dcp_topk_rescue_workspace at model load, outside capture (it warms "
    "every variant registered for its (K, N) with register_dcp_topk_merge_warmup before it), "
    "or warm a config with dcptopk.warmup(cfg) / Context.warmup(cfg); "
    "DCPTOPK_CAPTURE_COMPILE=1 allows a compile inside capture")


# ---------------------------------------------------------------- structs
# They mirror include/dcptopk.h field for field (tests/python/struct_sizes.c
# prints the C sizes and offsets; test_binding.py compares).

class MergeConfig(Struct):
    _fields_ = [("struct_size", _c_u32), ("version", _c_u32), ("kind", _c_i32),
                ("topk", _c_i32), ("local_topk", _c_i32), ("world_size", _c_i32),
                ("block_size", _c_i32), ("interleave", _c_i32), ("emit_ids", _c_i32),
                ("exact", _c_i32)]

    PACKED, PAIR = 0, 1
    # The fields a torch op carries (as an int list) to rebuild the config.
    FIELDS = ("kind", "topk", "local_topk", "world_size", "block_size", "interleave",
              "emit_ids", "exact")
    _flags_ = ("emit_ids", "exact")   # True / False allowed; other fields refuse a bool

    def __init__(self, **fields):
        # DCPTOPK_MERGE_CONFIG_INIT
        super().__init__(ctypes.sizeof(MergeConfig), 1, 0, 2048, 384, 8, 64, 1, 1, 1)
        self._set(fields)

    def _set(self, fields):
        bad = [k for k in fields if k not in self.FIELDS]
        if bad:
            raise TypeError(f"MergeConfig: no field {', '.join(map(repr, bad))} (fields: "
                            f"{', '.join(self.FIELDS)})")
        for k, v in fields.items():
            setattr(self, k, v)   # Struct.__setattr__ checks the value
        self._sync_list()

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in MergeConfig.FIELDS:
            self._sync_list()

    def _sync_list(self):
        # torch.compile cannot read ctypes fields (CField); it can read a
        # plain attribute, so the op arguments are kept beside the fields.
        self._dc_list = tuple(int(getattr(self, n)) for n in MergeConfig.FIELDS)

    def as_list(self):
        """The config as the int list the torch ops take."""
        return list(self._dc_list)

    @classmethod
    def from_list(cls, values):
        if len(values) != len(cls.FIELDS):
            raise ValueError(f"cfg: {len(values)} ints, expected {len(cls.FIELDS)} "
                             f"({', '.join(cls.FIELDS)})")
        return cls(**dict(zip(cls.FIELDS, values)))

    def copy(self, **overrides):
        c = MergeConfig(**{n: getattr(self, n) for n in self.FIELDS})
        c._set(overrides)
        return c

    def __eq__(self, other):
        return isinstance(other, MergeConfig) and self.as_list() == other.as_list()

    def __hash__(self):
        return hash(tuple(self.as_list()))

    def __repr__(self):
        return "MergeConfig(" + ", ".join(f"{n}={getattr(self, n)}" for n in self.FIELDS) + ")"


class ContextConfig(Struct):
    _fields_ = [("struct_size", _c_u32), ("version", _c_u32), ("device", _c_i32),
                ("arch", ctypes.c_char_p), ("cache_path", ctypes.c_char_p),
                ("cache_mode", _c_i32), ("strict", _c_i32), ("warmup_threads", _c_i32)]
    _flags_ = ("strict",)


class Key(Struct):
    _fields_ = [(n, _c_i32) for n in ("kernel", "topk", "local_topk", "world_size", "block_size",
                                      "interleave", "emit_ids", "exact", "layout", "variant")] + \
               [("arch", ctypes.c_char * 16)]


class WarmupStats(Struct):
    _fields_ = [("struct_size", _c_u32), ("keys", _c_u32), ("memory_hits", _c_u32),
                ("cache_hits", _c_u32), ("compiled", _c_u32), ("compile_ms", ctypes.c_double),
                ("load_ms", ctypes.c_double), ("total_ms", ctypes.c_double)]


class ContextStats(Struct):
    _fields_ = [("struct_size", _c_u32), ("launches", _c_u64), ("compiles", _c_u64),
                ("cache_hits", _c_u64), ("modules", _c_u64),
                ("late_compiles", _c_u64), ("late_loads", _c_u64)]


class RowsMap(Struct):
    _fields_ = [("req_id", _vp), ("block_table", _vp), ("block_table_stride", _c_i64),
                ("block_table_cols", _c_i32), ("num_reqs", _c_i32), ("stride_rows", _c_i32),
                ("rows_out", _vp), ("rows_out_stride", _c_i64), ("counts_out", _vp)]
    _unchecked_ = True   # a launch's arguments: see _checks.Struct


class PairSelectArgs(Struct):
    _fields_ = [("struct_size", _c_u32), ("candidates", _vp), ("layout", _c_i32),
                ("rows", _c_i64), ("rank_stride_rows", _c_i64), ("rank", _c_i32),
                ("ids_out", _vp), ("ids_out_stride", _c_i64), ("rows_map", RowsMap),
                ("stream", _vp), ("indptr_out", _vp)]
    _unchecked_ = True   # a launch's arguments: see _checks.Struct


class PairPackArgs(Struct):
    _fields_ = [("struct_size", _c_u32), ("logits", _vp), ("logits_stride", _c_i64),
                ("local_ids", _vp), ("local_ids_stride", _c_i64), ("row_starts", _vp),
                ("row_ends", _vp), ("rows", _c_i64), ("rank", _c_i32), ("out", _vp),
                ("stream", _vp)]
    _unchecked_ = True   # a launch's arguments: see _checks.Struct


class PackArgs(Struct):
    _fields_ = [("struct_size", _c_u32), ("logits", _vp), ("logits_stride", _c_i64),
                ("max_local_len", _c_i64), ("row_ends", _vp), ("local_ids", _vp),
                ("local_ids_stride", _c_i64), ("rows", _c_i64), ("out", _vp), ("stream", _vp)]
    _unchecked_ = True   # a launch's arguments: see _checks.Struct


class SelectArgs(Struct):
    _fields_ = [("struct_size", _c_u32), ("gathered", _vp), ("rank_stride_rows", _c_i64),
                ("rows", _c_i64), ("rank", _c_i32), ("ids_out", _vp), ("ids_out_stride", _c_i64),
                ("rows_map", RowsMap), ("logits", _vp), ("logits_stride", _c_i64),
                ("max_local_len", _c_i64), ("row_ends", _vp), ("stream", _vp),
                ("indptr_out", _vp)]
    _unchecked_ = True   # a launch's arguments: see _checks.Struct


class NodePairsArgs(Struct):
    _fields_ = [("struct_size", _c_u32), ("gathered", _vp), ("rank_stride_rows", _c_i64),
                ("rows", _c_i64), ("ids", _vp), ("ids_stride", _c_i64), ("sorted", _c_i32),
                ("first_rank", _c_i32), ("world_size", _c_i32), ("pairs_out", _vp),
                ("stream", _vp)]
    _unchecked_ = True   # a launch's arguments: see _checks.Struct


class WorkspaceLayout(Struct):
    _fields_ = [("struct_size", _c_u32), ("recv_bytes", _c_u64), ("flags_bytes", _c_u64)]


class SelftestReport(Struct):
    _fields_ = [("struct_size", _c_u32), ("on_gpu", _c_i32), ("rows_checked", _c_i64),
                ("rows_rescued", _c_i64), ("mismatches", _c_i64), ("gpu_ms", ctypes.c_double),
                ("summary", ctypes.c_char * 512)]


class Setting(Struct):
    _fields_ = [("struct_size", _c_u32), ("name", ctypes.c_char_p), ("kind", ctypes.c_char_p),
                ("doc", ctypes.c_char_p), ("env", ctypes.c_char_p), ("value", ctypes.c_char * 32),
                ("source", _c_i32)]


class EnvInfo(Struct):
    _fields_ = [("struct_size", _c_u32), ("build", ctypes.c_char * 128),
                ("nvrtc_major", _c_i32), ("nvrtc_minor", _c_i32),
                ("nvrtc_path", ctypes.c_char * 512), ("driver_version", _c_i32),
                ("device_count", _c_i32), ("no_device", ctypes.c_char * 512),
                ("cache_path", ctypes.c_char * 4096), ("cache_mode", ctypes.c_char * 16),
                ("cache_why", ctypes.c_char * 1024), ("nvrtc_archs", ctypes.c_char * 512),
                ("nvrtc_error", ctypes.c_char * 2048)]


class RefCandidate(Struct):
    _fields_ = [("ord16", _c_u32), ("local_id", _c_i32), ("global_id", _c_i32)]


class CacheEntry(Struct):
    _fields_ = [("key", ctypes.c_char * 33), ("kernel", ctypes.c_char * 32),
                ("fields", ctypes.c_char * 256), ("arch", ctypes.c_char * 16),
                ("nvrtc_version", ctypes.c_char * 16), ("lib_version", ctypes.c_char * 16),
                ("cubin_bytes", _c_i64), ("ptx_bytes", _c_i64), ("source_bytes", _c_i64),
                ("compile_ms", ctypes.c_double), ("created", _c_i64), ("last_used", _c_i64),
                ("hits", _c_i64)]


class CacheStats(Struct):
    _fields_ = [("struct_size", _c_u32), ("entries", _c_i64), ("bytes", _c_i64),
                ("file_bytes", _c_i64), ("hits", _c_i64), ("compile_ms", ctypes.c_double),
                ("claims", _c_i64)]


class CacheClaim(Struct):
    _fields_ = [("key", ctypes.c_char * 33), ("pid", _c_i64), ("host", ctypes.c_char * 64),
                ("started", _c_i64), ("stale", _c_i32)]


class LaunchEnv(Struct):
    _fields_ = [("struct_size", _c_u32), ("rank", _c_i32), ("world_size", _c_i32),
                ("local_rank", _c_i32), ("local_world_size", _c_i32),
                ("source", ctypes.c_char * 32)]


# The distributed runtime (group/ in the library: dcptopk_group_*). Used only
# when the loaded library exports every symbol of DIST_SYMBOLS.

class GroupConfig(Struct):
    _fields_ = [("struct_size", _c_u32), ("version", _c_u32), ("rank", _c_i32),
                ("world_size", _c_i32), ("nccl_comm", _vp), ("unique_id", _vp),
                ("store_dir", ctypes.c_char_p), ("store_prefix", ctypes.c_char_p),
                ("path", _c_i32), ("timeout_ms", _c_i32)]


class GroupMergeArgs(Struct):
    _fields_ = [("struct_size", _c_u32), ("rows", _c_i64), ("logits", _vp),
                ("logits_stride", _c_i64), ("max_local_len", _c_i64), ("row_ends", _vp),
                ("local_ids", _vp), ("local_ids_stride", _c_i64), ("candidates", _vp),
                ("pair_logits", _vp), ("pair_logits_stride", _c_i64), ("row_starts", _vp),
                ("ids_out", _vp), ("ids_out_stride", _c_i64), ("rows_map", RowsMap),
                ("stream", _vp), ("packed", _vp), ("packed_stride", _c_i64),
                ("indptr_out", _vp)]
    _unchecked_ = True   # a launch's arguments: see _checks.Struct


GROUP_UNIQUE_ID_BYTES = 128
PATH_NAMES = {0: "auto", 1: "nccl", 2: "push", 3: "loopback", 4: "staged",
              5: "store"}


def new(cls):
    """An args struct as its C _INIT macro makes it: zeroed, struct_size set."""
    s = cls()
    if cls._fields_[0][0] == "struct_size":
        s.struct_size = ctypes.sizeof(cls)
    return s


# Filled on every launch from _checks' plans (see _checks.Struct).
LAUNCH_ARGS = (RowsMap, PairSelectArgs, PairPackArgs, PackArgs, SelectArgs, NodePairsArgs,
               GroupMergeArgs)

STRUCTS = {"dcptopk_merge_config": MergeConfig, "dcptopk_context_config": ContextConfig,
           "dcptopk_key": Key, "dcptopk_warmup_stats": WarmupStats,
           "dcptopk_context_stats": ContextStats, "dcptopk_rows_map": RowsMap,
           "dcptopk_pair_select_args": PairSelectArgs, "dcptopk_pair_pack_args": PairPackArgs,
           "dcptopk_pack_args": PackArgs, "dcptopk_select_args": SelectArgs,
           "dcptopk_node_pairs_args": NodePairsArgs,
           "dcptopk_workspace_layout": WorkspaceLayout,
           "dcptopk_selftest_report": SelftestReport, "dcptopk_setting": Setting,
           "dcptopk_env_info": EnvInfo, "dcptopk_ref_candidate": RefCandidate,
           "dcptopk_cache_entry": CacheEntry, "dcptopk_cache_stats": CacheStats,
           "dcptopk_cache_claim": CacheClaim}
# Checked when the header has them (struct_sizes.c prints them then).
DIST_STRUCTS = {"dcptopk_group_config": GroupConfig,
                "dcptopk_group_merge_args": GroupMergeArgs, "dcptopk_launch_env": LaunchEnv}

PROGRESS_FN = ctypes.CFUNCTYPE(None, _vp, ctypes.POINTER(Key), _c_i32, ctypes.c_double)
# The library's log callback (dcptopk_log_fn): (user, dcptopk_log_level, one
# whole line without a newline). Used only when the library has
# dcptopk_log_set_callback.
LOG_FN = ctypes.CFUNCTYPE(None, _vp, _c_i32, ctypes.c_char_p)

_P = ctypes.POINTER
_R = _c_i32
_MC = _P(MergeConfig)
_SIGS = {
    "dcptopk_version_number": (ctypes.c_uint, []),
    "dcptopk_version_string": (ctypes.c_char_p, []),
    "dcptopk_result_name": (ctypes.c_char_p, [_R]),
    "dcptopk_result_message": (ctypes.c_char_p, [_R]),
    "dcptopk_last_error": (ctypes.c_char_p, [_vp]),
    "dcptopk_device_count": (ctypes.c_int, []),
    "dcptopk_context_create": (_R, [_P(ContextConfig), _P(_vp)]),
    "dcptopk_context_destroy": (None, [_vp]),
    "dcptopk_context_arch": (ctypes.c_char_p, [_vp]),
    "dcptopk_context_seal": (_R, [_vp]),
    "dcptopk_context_stats_get": (_R, [_vp, _P(ContextStats)]),
    "dcptopk_merge_config_named": (_R, [ctypes.c_char_p, _MC]),
    "dcptopk_merge_config_name": (ctypes.c_char_p, [ctypes.c_size_t]),
    "dcptopk_merge_config_check": (_R, [_MC]),
    "dcptopk_packed_row_words": (_c_i32, [_c_i32]),
    "dcptopk_rescue_slots": (_c_i32, [_c_i32, _c_i32]),
    "dcptopk_kernel_name": (ctypes.c_char_p, [_c_i32]),
    "dcptopk_config_keys": (_R, [_MC, ctypes.c_char_p, _P(Key), ctypes.c_size_t,
                                 _P(ctypes.c_size_t)]),
    "dcptopk_config_keys_nodes": (_R, [_MC, _c_i32, ctypes.c_char_p, _P(Key), ctypes.c_size_t,
                                       _P(ctypes.c_size_t)]),
    "dcptopk_key_format": (ctypes.c_int, [_P(Key), ctypes.c_char_p, ctypes.c_size_t]),
    "dcptopk_warmup": (_R, [_vp, _MC, PROGRESS_FN, _vp, _P(WarmupStats)]),
    "dcptopk_warmup_keys": (_R, [_vp, _P(Key), ctypes.c_size_t, PROGRESS_FN, _vp,
                                 _P(WarmupStats)]),
    "dcptopk_pair_select": (_R, [_vp, _MC, _P(PairSelectArgs)]),
    "dcptopk_pair_gid": (_c_i32, [_c_i32, _c_i32]),
    "dcptopk_pair_pack": (_R, [_vp, _MC, _P(PairPackArgs)]),
    "dcptopk_pack": (_R, [_vp, _MC, _P(PackArgs)]),
    "dcptopk_pack_indices": (_R, [_vp, _MC, _P(PackArgs)]),
    "dcptopk_select": (_R, [_vp, _MC, _vp, _P(SelectArgs)]),
    "dcptopk_node_pairs": (_R, [_vp, _MC, _vp, _P(NodePairsArgs)]),
    "dcptopk_pair_select_nodes": (_R, [_vp, _MC, _c_i32, _P(PairSelectArgs)]),
    "dcptopk_workspace_layout_get": (_R, [_MC, _c_i64, _P(WorkspaceLayout)]),
    "dcptopk_workspace_create": (_R, [_vp, _MC, _c_i64, _c_i32, _P(_c_u64), _P(_c_u64),
                                      _P(_vp)]),
    "dcptopk_workspace_destroy": (None, [_vp]),
    "dcptopk_workspace_saturation": (_c_u64, [_vp]),
    "dcptopk_workspace_check": (_R, [_vp, _vp]),
    "dcptopk_loopback_create": (_R, [_vp, _MC, _c_i64, _c_i64, _P(_vp)]),
    "dcptopk_loopback_destroy": (None, [_vp]),
    "dcptopk_loopback_merge": (_R, [_vp, _P(_vp), _c_i64, _P(_vp), _c_i64, _P(_vp),
                                    _P(RowsMap), _vp]),
    "dcptopk_loopback_gathered": (_c_u64, [_vp, _c_i32]),
    "dcptopk_loopback_saturation": (_c_u64, [_vp, _c_i32]),
    "dcptopk_loopback_check": (_R, [_vp, _vp]),
    "dcptopk_loopback_workspace": (_vp, [_vp, _c_i32]),
    "dcptopk_selftest": (_R, [_vp, _MC, _c_i64, _c_u64, _P(SelftestReport)]),
    "dcptopk_ref_pack": (_R, [_MC, _P(PackArgs)]),
    "dcptopk_ref_pack_indices": (_R, [_MC, _P(PackArgs)]),
    "dcptopk_ref_select": (_R, [_MC, _P(SelectArgs), _vp]),
    "dcptopk_ref_push_list": (_R, [_MC, _vp, _c_i64, _c_i32, _vp]),
    "dcptopk_ref_rescue_row": (_R, [_MC, _P(SelectArgs), _c_i64, _c_u32, _P(_vp)]),
    "dcptopk_ref_packed_merge": (_R, [_MC, _P(_vp), _c_i64, _c_i64, _P(_vp), _c_i64, _P(_vp),
                                      _P(RowsMap), _P(_vp), _P(_c_i64)]),
    "dcptopk_ref_hier_merge": (_R, [_MC, _c_i32, _P(_vp), _c_i64, _c_i64, _P(_vp), _c_i64,
                                    _P(_vp), _P(RowsMap), _P(_vp), _P(_c_i64)]),
    "dcptopk_ref_pair_select": (_R, [_MC, _P(PairSelectArgs)]),
    "dcptopk_ref_pair_pack": (_R, [_MC, _P(PairPackArgs)]),
    "dcptopk_ref_check_contract": (_R, [_MC, _vp, _vp, _c_i64, _c_i64, _vp, _c_i64,
                                        _P(_c_i64)]),
    "dcptopk_cache_default_path": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t]),
    "dcptopk_log_set_level": (None, [ctypes.c_int]),
    "dcptopk_log_get_level": (ctypes.c_int, []),
    "dcptopk_setting_get": (_R, [ctypes.c_size_t, _P(Setting)]),
    "dcptopk_env_info_get": (_R, [_P(EnvInfo)]),
    "dcptopk_key_parse": (_R, [ctypes.c_char_p, _P(Key)]),
    "dcptopk_key_check": (_R, [_P(Key)]),
    "dcptopk_key_render": (_R, [_P(Key), _P(_vp)]),
    "dcptopk_key_hash": (_R, [_P(Key), ctypes.c_char_p]),
    "dcptopk_ref_ord16": (_c_u32, [ctypes.c_uint16]),
    "dcptopk_ref_ord32": (_c_u32, [_c_u32]),
    "dcptopk_ref_decode": (RefCandidate, [_vp, _c_i32, _c_i32, _c_i32, _c_i32, _c_i32]),
    "dcptopk_ref_global_id": (_c_i32, [_c_i32, _c_i32, _c_i32, _c_i32]),
    "dcptopk_cache_open": (_R, [ctypes.c_char_p, ctypes.c_int, _P(_vp)]),
    "dcptopk_cache_readonly": (ctypes.c_int, [_vp]),
    "dcptopk_cache_close": (None, [_vp]),
    "dcptopk_cache_path": (ctypes.c_char_p, [_vp]),
    "dcptopk_cache_last_error": (ctypes.c_char_p, [_vp]),
    "dcptopk_cache_list": (_R, [_vp, _P(_vp), _P(ctypes.c_size_t)]),
    "dcptopk_cache_find": (_R, [_vp, ctypes.c_char_p, _P(CacheEntry)]),
    "dcptopk_cache_read_blob": (_R, [_vp, ctypes.c_char_p, _c_i32, _P(_vp),
                                     _P(ctypes.c_size_t)]),
    "dcptopk_cache_stats_get": (_R, [_vp, _P(CacheStats)]),
    "dcptopk_cache_verify": (_R, [_vp, _P(_c_i64), _P(_c_i64)]),
    "dcptopk_cache_prune": (_R, [_vp, _c_i64, _P(_c_i64)]),
    "dcptopk_cache_remove": (_R, [_vp, ctypes.c_char_p]),
    "dcptopk_cache_clear": (_R, [_vp, _P(_c_i64)]),
    "dcptopk_cache_export": (_R, [_vp, ctypes.c_char_p, _P(_c_i64)]),
    "dcptopk_cache_import": (_R, [_vp, ctypes.c_char_p, _P(_c_i64)]),
    "dcptopk_cache_import_ex": (_R, [_vp, ctypes.c_char_p, _c_u32, _P(_c_i64), _P(_c_i64)]),
    "dcptopk_cache_claims": (_R, [_vp, _P(_vp), _P(ctypes.c_size_t)]),
    "dcptopk_cache_clear_stale_claims": (_R, [_vp, _P(_c_i64)]),
}

# Symbols of the multi-rank runtime (include/dcptopk.h, the group API).
_DIST_SIGS = {
    "dcptopk_group_unique_id": (_R, [_vp]),
    "dcptopk_group_create": (_R, [_vp, _P(GroupConfig), _P(_vp)]),
    "dcptopk_group_destroy": (None, [_vp]),
    "dcptopk_group_rank": (_c_i32, [_vp]),
    "dcptopk_group_world_size": (_c_i32, [_vp]),
    "dcptopk_group_nodes": (_c_i32, [_vp]),
    "dcptopk_group_path": (_R, [_vp, _P(_c_i32), ctypes.c_char_p, ctypes.c_size_t]),
    "dcptopk_group_check": (_R, [_vp, _vp]),
    "dcptopk_group_status": (_R, [_vp]),
    "dcptopk_group_last_error": (ctypes.c_char_p, [_vp]),
    "dcptopk_group_workspace_create": (_R, [_vp, _MC, _c_i64, _P(_vp)]),
    "dcptopk_group_workspace_destroy": (None, [_vp]),
    "dcptopk_group_warmup": (_R, [_vp, PROGRESS_FN, _vp, _P(WarmupStats)]),
    "dcptopk_group_workspace_saturation": (_c_u64, [_vp]),
    "dcptopk_group_merge": (_R, [_vp, _P(GroupMergeArgs)]),
    "dcptopk_path_name": (ctypes.c_char_p, [_c_i32]),
    "dcptopk_launch_env_get": (_R, [_P(LaunchEnv)]),
    "dcptopk_group_create_from_env": (_R, [_vp, ctypes.c_char_p, _P(GroupConfig), _P(_vp)]),
    "dcptopk_group_barrier": (_R, [_vp]),
    "dcptopk_selftest_group": (_R, [_vp, _MC, _c_i64, _c_i32, _c_u64, _P(SelftestReport)]),
}
DIST_SYMBOLS = tuple(_DIST_SIGS)


def _find_library():
    env = os.environ.get("DCPTOPK_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    # In a wheel the library sits next to this file; in a source tree, in build/.
    for cand in (os.path.join(here, "libdcptopk.so"),
                 os.path.join(here, "lib", "libdcptopk.so"),
                 os.path.join(here, "..", "..", "..", "build", "libdcptopk.so")):
        if os.path.exists(cand):
            return cand
    found = ctypes.util.find_library("dcptopk")
    if found:
        return found
    raise OSError("libdcptopk.so not found: set DCPTOPK_LIBRARY to its path, or install the "
                  "dcptopk wheel (pip install .)")


_lib = None


def nvrtc_candidates(soname):
    """Where a pip wheel puts NVRTC: nvidia/cu13/lib (CUDA 13 wheels),
    nvidia/cuda_nvrtc/lib (CUDA 12), in every sys.path entry."""
    import glob
    import sys
    out = []
    for base in sys.path:
        if base and os.path.isdir(os.path.join(base, "nvidia")):
            out += sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib", soname)))
    return out


def _load(path):
    """Loads the library. NVRTC is not a link dependency: the library looks
    for it at run time (DCPTOPK_NVRTC_PATH, the nvidia-cuda-nvrtc wheels
    beside this package, the CUDA toolkit; `python -m dcptopk env` says which
    one it took or where it looked)."""
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise OSError(f"cannot load the dcptopk library {path}: {e}") from None


def _declare(lib):
    for name, (res, args) in _SIGS.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, arg_types(args)
    if hasattr(lib, "dcptopk_log_set_callback"):
        lib.dcptopk_log_set_callback.restype = None
        lib.dcptopk_log_set_callback.argtypes = arg_types([LOG_FN, _vp])
    if all(hasattr(lib, n) for n in _DIST_SIGS):
        for name, (res, args) in _DIST_SIGS.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, arg_types(args)


def check_version(number, binding=BINDING_VERSION):
    """Raises ImportError unless a library of version `number` (major * 10000 +
    minor * 100 + patch) serves this binding: same major and minor."""
    major, minor, patch = number // 10000, number // 100 % 100, number % 100
    if (major, minor) != tuple(binding[:2]):
        raise ImportError(
            f"libdcptopk version {major}.{minor}.{patch} does not match the dcptopk Python "
            f"binding {'.'.join(map(str, binding))} (major and minor must be equal): install "
            "the binding and the library from the same source, or set DCPTOPK_LIBRARY")
    return major, minor, patch


def library():
    """The loaded libdcptopk (ctypes.CDLL), loaded and version-checked on first use."""
    global _lib
    if _lib is None:
        path = _find_library()
        lib = _load(path)
        missing = [n for n in _SIGS if not hasattr(lib, n)]
        if missing:
            raise ImportError(f"{path}: not a libdcptopk this binding can use (missing "
                              f"{', '.join(missing[:4])}{'...' if len(missing) > 4 else ''})")
        _declare(lib)
        check_version(lib.dcptopk_version_number())
        _lib = lib
        _route_log(lib)
    return _lib


def has_dist_runtime(lib=None):
    lib = lib or library()
    return all(hasattr(lib, n) for n in DIST_SYMBOLS)


# ---------------------------------------------------------------- the log

# dcptopk_log_level: 1 error, 2 warn, 3 info, 4 debug.
_LOG_LEVELS = {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG}
_log_cb = None  # kept alive as long as the library may call it


@LOG_FN
def _log_line(_user, level, line):
    try:
        log.log(_LOG_LEVELS.get(level, logging.WARNING),
                (line or b"").decode(errors="replace").rstrip("\n"))
    except Exception:  # a callback must never raise into C
        pass


def _route_log(lib):
    """Sends the library's log to the `dcptopk` logger when the library offers
    a log callback (DCPTOPK_PYTHON_LOG=0 keeps the library's own output)."""
    global _log_cb
    if not hasattr(lib, "dcptopk_log_set_callback") or os.environ.get("DCPTOPK_PYTHON_LOG") == "0":
        return False
    _log_cb = _log_line
    lib.dcptopk_log_set_callback(_log_cb, None)
    return True


def log_routed():
    """True when the library's log goes to Python logging."""
    return _log_cb is not None


# What the library allocates for its caller (rendered sources, listings,
# blobs) is freed with the C library's free.
_libc = ctypes.CDLL(None)
_libc.free.restype, _libc.free.argtypes = None, [_vp]
free = _libc.free


def as_bytes_path(path, name):
    """A file system path argument (str, bytes or os.PathLike) as bytes."""
    try:
        p = os.fsencode(path)
    except TypeError:
        raise TypeError(f"{name}: got {type(path).__name__}; expected a path (str, bytes or "
                        "os.PathLike)") from None
    if not p or b"\0" in p:
        raise ValueError(f"{name}: got {path!r}; expected a non-empty path without NUL bytes")
    return p


# ------------------------------------------------------------ error mapping

def check(rc, ctx=None):
    """Raises DcptopkError for a failed call (the message of `ctx`, or the
    calling thread's when ctx is None)."""
    if rc != 0:
        lib = library()
        raise DcptopkError(rc, lib.dcptopk_result_name(rc).decode(),
                           lib.dcptopk_last_error(ctx).decode(errors="replace"))
