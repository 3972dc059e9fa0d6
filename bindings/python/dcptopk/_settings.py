"""The process's view of the library: its settings table (the variables it
reads and the values in effect), the run-time environment (what `dcptopk
env` prints), versions, devices and the log level.

Nothing here imports torch. Arguments are checked before the library is
called (ValueError / TypeError naming the argument).
"""
import ctypes

from . import _checks
from ._lib import EnvInfo, Setting, __version__, check, library, new

SOURCES = {0: "default", 1: "environment", 2: "ignored"}
LOG_LEVELS = {"quiet": 0, "error": 1, "warn": 2, "info": 3, "debug": 4}


def settings():
    """Every variable of the library's settings table, in table order: dicts
    of name, kind, doc, env (the environment's text or None), value (in
    effect: an int or float for numbers and flags, else the text or None)
    and source ("default", "environment" or "ignored": set but invalid, the
    default is in effect)."""
    lib, out = library(), []
    s = new(Setting)
    i = 0
    while lib.dcptopk_setting_get(i, ctypes.byref(s)) == 0:
        kind = s.kind.decode()
        env = s.env.decode(errors="replace") if s.env is not None else None
        if kind in ("int", "bytes", "flag"):
            value = int(s.value.decode())
        elif kind == "seconds":
            value = float(s.value.decode())
        else:
            value = env
        out.append({"name": s.name.decode(), "kind": kind, "doc": s.doc.decode(),
                    "env": env, "value": value, "source": SOURCES.get(s.source, str(s.source))})
        i += 1
    return out


def setting(name):
    """One setting of the table by its variable name (see settings())."""
    if not isinstance(name, str):
        raise TypeError(f"name: got {type(name).__name__}; expected a variable name (str)")
    for s in settings():
        if s["name"] == name:
            return s
    raise ValueError(f"name: got {name!r}; not a variable of the library's settings table "
                     "(dcptopk.settings() lists them)")


def env_info():
    """What `dcptopk env` reports: build, NVRTC version, file and archs (or
    where it looked), driver
    version (or why none), device count, and the default cache file with the
    mode a context would use it in (trusted, shared, absent, refused, none)
    and why."""
    e = new(EnvInfo)
    check(library().dcptopk_env_info_get(ctypes.byref(e)))
    d = lambda b: b.decode(errors="replace")  # noqa: E731
    return {"build": d(e.build),
            "nvrtc": None if e.nvrtc_major < 0 else f"{e.nvrtc_major}.{e.nvrtc_minor}",
            "nvrtc_path": d(e.nvrtc_path) or None,
            "nvrtc_archs": d(e.nvrtc_archs).split(),
            "nvrtc_error": d(e.nvrtc_error) or None,
            "driver_version": e.driver_version or None,
            "device_count": e.device_count,
            "no_device": d(e.no_device) or None,
            "cache_path": d(e.cache_path) or None, "cache_mode": d(e.cache_mode),
            "cache_why": d(e.cache_why) or None}


def versions():
    lib = library()
    return {"library": lib.dcptopk_version_string().decode(),
            "library_number": lib.dcptopk_version_number(),
            "binding": __version__}


def device_count():
    return library().dcptopk_device_count()


def log_level():
    """The library's log level as a name: quiet, error, warn, info, debug."""
    v = library().dcptopk_log_get_level()
    return {n: k for k, n in LOG_LEVELS.items()}.get(v, str(v))


def set_log_level(level):
    """Sets the library's log level (process-wide): a name (quiet, error,
    warn, info, debug) or its number 0..4."""
    if isinstance(level, str):
        if level not in LOG_LEVELS:
            raise ValueError(f"level: got {level!r}; expected one of {', '.join(LOG_LEVELS)}")
        level = LOG_LEVELS[level]
    else:
        _checks.integer(level, "level", 0, 4, "0..4 or a name (quiet, error, warn, info, debug)")
    library().dcptopk_log_set_level(int(level))


__all__ = ["settings", "setting", "env_info", "versions", "device_count", "log_level",
           "set_log_level"]
