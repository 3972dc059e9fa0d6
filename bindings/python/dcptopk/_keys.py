"""Compile keys: the keys a config needs, and a key's text parsed, checked,
rendered to its CUDA source and hashed to its cache key.

Nothing here imports torch.
"""
import ctypes

from . import _checks
from ._config import as_config
from ._lib import Key, check, free, library, _vp


def key_str(k):
    """A Key as its text ("select(topk=2048,...)@sm_90a")."""
    buf = ctypes.create_string_buffer(512)
    library().dcptopk_key_format(ctypes.byref(k), buf, 512)
    return buf.value.decode()


def keys(cfg, arch):
    """The Keys a MergeConfig needs on arch (None: the library's default)."""
    lib, n = library(), ctypes.c_size_t(0)
    a = _checks.c_str(arch, "arch") if arch else None
    check(lib.dcptopk_config_keys(ctypes.byref(cfg), a, None, 0, ctypes.byref(n)))
    out = (Key * n.value)()
    check(lib.dcptopk_config_keys(ctypes.byref(cfg), a, out, n.value, ctypes.byref(n)))
    return out


def config_keys(cfg, arch="sm_90a"):
    """The compile keys a config needs on any GPU of arch, as formatted
    strings (warmup on a device loads only the ones that device launches)."""
    return [key_str(k) for k in keys(as_config(cfg), arch)]


def _key(spec):
    """A Key from its text ("select(topk=2048,...)@sm_90a", as config_keys
    prints it)."""
    if not isinstance(spec, str):
        raise TypeError(f"key: got {type(spec).__name__}; expected a key spec (str) such as "
                        "dcptopk.config_keys() prints")
    k = Key()
    check(library().dcptopk_key_parse(_checks.c_str(spec, "key"), ctypes.byref(k)))
    return k


def key_parse(spec):
    """The fields of a key spec as a dict (kernel name, its fields, arch);
    DcptopkError naming the bad part when it does not parse."""
    k = _key(spec)
    out = {"kernel": library().dcptopk_kernel_name(k.kernel).decode()}
    out.update({n: getattr(k, n) for n, _ in Key._fields_[1:-1]})
    out["arch"] = k.arch.decode()
    return out


def key_check(spec):
    """Validates a key's fields for its kernel (raises DcptopkError)."""
    check(library().dcptopk_key_check(ctypes.byref(_key(spec))))


def key_render(spec):
    """The CUDA source NVRTC compiles for a key."""
    p = _vp()
    check(library().dcptopk_key_render(ctypes.byref(_key(spec)), ctypes.byref(p)))
    try:
        return ctypes.string_at(p.value).decode()
    finally:
        free(p)


def key_hash(spec):
    """The 128-bit cache key of a key, 32 hex digits (what `cache ls` shows)."""
    buf = ctypes.create_string_buffer(33)
    check(library().dcptopk_key_hash(ctypes.byref(_key(spec)), buf))
    return buf.value.decode()


__all__ = ["config_keys", "key_parse", "key_check", "key_render", "key_hash"]
