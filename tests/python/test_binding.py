"""The Python binding without torch and without a GPU: struct layouts against
the C compiler's, the version check, named configs and keys, errors, a warmup
with an explicit arch into a temporary cache with its progress, the missing
distributed runtime.

Usage: test_binding.py STRUCT_SIZES_EXE [test names] (DCPTOPK_LIBRARY names
the library).
"""
import ctypes
import io
import os
import subprocess
import sys
import tempfile

import harness
from harness import raises

STRUCT_SIZES = sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith("test_") \
    else None

import dcptopk  # noqa: E402
from dcptopk import _dist, _lib  # noqa: E402


def test_import_needs_no_torch():
    assert "torch" not in sys.modules, "import dcptopk imported torch"


def test_struct_layouts_match_the_header():
    if not STRUCT_SIZES:
        raise harness.Skip("no struct_sizes executable given")
    out = subprocess.run([STRUCT_SIZES], check=True, capture_output=True, text=True).stdout
    seen = set()
    structs = dict(dcptopk.STRUCTS, **_lib.DIST_STRUCTS)
    for line in out.splitlines():
        name, what, value = line.split()
        if what == "size":
            cls = structs[name]
            size = ctypes.sizeof(cls)
            if cls._fields_[0][0] == "struct_size" and int(value) > size:
                # A versioned struct grew in the header: the binding passes its
                # smaller struct_size and the library fills the new fields'
                # defaults; the binding should catch up.
                print(f"note: {name} is {value} bytes in the header, {size} in the binding")
            else:
                assert size == int(value), f"{name}: python {size}, C {value}"
            seen.add(name)
        else:
            sname, field = name.split(".")
            off = getattr(structs[sname], field).offset
            assert off == int(value), f"{name}: python offset {off}, C {value}"
    missing = set(dcptopk.STRUCTS) - seen
    assert not missing, f"structs not printed: {missing}"
    # The distributed runtime's structs, when the header has them.
    for name, cls in _lib.DIST_STRUCTS.items():
        if name in seen:
            assert all(f"{name}.{f}" in out for f, _ in cls._fields_), name


def test_version_check():
    v = dcptopk.versions()
    assert v["library_number"] // 100 == _lib.BINDING_VERSION[0] * 100 + _lib.BINDING_VERSION[1]
    assert v["binding"] == dcptopk.__version__
    _lib.check_version(v["library_number"])
    raises(ImportError, _lib.check_version, v["library_number"] + 100, match=["does not match"])
    raises(ImportError, _lib.check_version, 10000, match=["1.0.0", "binding"])


def test_configs_and_keys():
    names = dcptopk.config_names()
    assert names and names[0] == "deepseek-v3.2-dcp8", names
    cfg = dcptopk.config("deepseek-v3.2-dcp8")
    assert (cfg.topk, cfg.local_topk, cfg.world_size) == (2048, 384, 8), cfg
    assert dcptopk.MergeConfig.from_list(cfg.as_list()) == cfg
    keys = dcptopk.config_keys(cfg, "sm_90a")
    assert len(keys) >= 3 and all(k.endswith("@sm_90a") for k in keys), keys
    e = raises(dcptopk.DcptopkError, dcptopk.config, "no-such-model", match="no-such-model")
    assert e.name == "DCPTOPK_NOT_FOUND", e.name
    e = raises(dcptopk.DcptopkError, dcptopk.config_keys, dcptopk.config(topk=100),
               match="topk = 100")
    assert e.name == "DCPTOPK_INVALID_ARGUMENT"
    raises(TypeError, dcptopk.MergeConfig, topkk=3, match="topkk")
    raises(dcptopk.DcptopkError, dcptopk.make_config, "packed", topk=2048, local_topk=2048,
           world_size=8, match="local_topk")
    pair = dcptopk.make_config("pair", topk=512, world_size=4)
    assert (pair.kind, pair.local_topk, pair.exact) == (1, 512, 0), pair


def test_packed_arithmetic():
    assert dcptopk.packed_row_words(384) == 396
    assert dcptopk.rescue_slots(2048, 384) == 5


def test_workspace_layout():
    lay = dcptopk.workspace_layout(dcptopk.config("deepseek-v3.2-dcp8"), 64)
    # Receive slots [T_max, (K-1)/N, K + K/32] int32 and flags [W, T_max] uint32, at least.
    assert lay["recv_bytes"] >= 64 * 5 * (2048 + 64) * 4, lay
    assert lay["flags_bytes"] >= 8 * 64 * 4, lay
    e = raises(dcptopk.DcptopkError, dcptopk.workspace_layout,
               dcptopk.config("deepseek-v3.2-dcp8"), -1, match="max_rows")
    assert e.name == "DCPTOPK_INVALID_ARGUMENT"


def test_warmup_explicit_arch_into_a_temporary_cache():
    cfg = dcptopk.config("topk512-dcp8-pair")
    keys = dcptopk.config_keys(cfg, "sm_90a")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "cache.sqlite")
        seen = []
        with dcptopk.Context(device=-1, arch="sm_90a", cache_path=path) as ctx:
            st = ctx.warmup([cfg], progress=lambda k, origin, ms: seen.append((k, origin)))
            assert st[0]["keys"] == len(keys) and st[0]["compiled"] == len(keys), st
            assert [k for k, _ in seen] == keys, seen          # live, key by key, in order
            assert all(o == 2 for _, o in seen), seen          # compiled
            again = ctx.warmup(cfg, progress=False)
            assert again["memory_hits"] == len(keys), again
        assert os.path.getsize(path) > 0
        # A fresh context reads the file: cache hits, and the bar on a terminal.
        tty = io.StringIO()
        tty.isatty = lambda: True
        with dcptopk.Context(device=-1, arch="sm_90a", cache_path=path) as ctx:
            bar = dcptopk.Progress(len(keys), stream=tty)
            st = ctx.warmup(cfg, progress=bar.key_ready)
            bar.close()
            assert st["cache_hits"] == len(keys), st
        text = tty.getvalue()
        assert f"{len(keys)}/{len(keys)}" in text and "from the cache" in text, text
        quiet = io.StringIO()  # not a terminal: nothing written
        p = dcptopk.Progress(3, stream=quiet)
        p.key_ready("k", 0, 1.0)
        p.close()
        assert quiet.getvalue() == "", quiet.getvalue()


def test_warmup_errors_name_the_argument():
    with tempfile.TemporaryDirectory() as d:
        with dcptopk.Context(device=-1, arch="sm_90a", cache_path=os.path.join(d, "c")) as ctx:
            raises(dcptopk.DcptopkError, ctx.warmup, dcptopk.config(topk=100), match="topk = 100")
            raises(TypeError, ctx.warmup, 3.5, match="cfg")

            def bad(*_):
                raise KeyError("from the callback")
            # An exception of the progress callback never crosses C; it is re-raised.
            raises(KeyError, ctx.warmup, dcptopk.config("topk512-dcp8-pair"), progress=bad,
                   match="from the callback")


def test_missing_distributed_runtime_is_a_clear_error():
    if _lib.has_dist_runtime():
        raise harness.Skip("this library has the distributed runtime")
    raises(RuntimeError, _dist.LibraryRuntime, object(), 0,
           match=["lacks the distributed runtime", "DCPTOPK_DIST_BACKEND=torch"])
    raises(ValueError, _dist.backend_name, "mpi", match="backend")


def test_bootstrap_follows_where_the_ranks_run():
    """One GPU per rank: NCCL; ranks sharing a GPU on one host: the
    store-only group; sharing a GPU across hosts: a clear error."""
    a, b = ("h1", "boot1", "GPU-a"), ("h1", "boot1", "GPU-b")
    assert _dist.bootstrap_kind([a, b]) == "nccl"
    assert _dist.bootstrap_kind([a]) == "nccl"
    assert _dist.bootstrap_kind([a, a]) == "store"
    assert _dist.bootstrap_kind([a, a, b, a]) == "store"
    c = ("h2", "boot2", "GPU-c")
    assert _dist.bootstrap_kind([a, b, c]) == "nccl"
    raises(RuntimeError, _dist.bootstrap_kind, [a, a, c],
           match=["share a GPU (GPU-a on h1)", "2 hosts"])
    # The store folder is private to this user.
    d = _dist._store_folder()
    assert os.path.isdir(d) and os.stat(d).st_mode & 0o777 == 0o700, oct(os.stat(d).st_mode)


def test_log_routing_follows_the_library():
    lib = dcptopk.library()
    assert dcptopk.log_routed() == (hasattr(lib, "dcptopk_log_set_callback") and
                                    os.environ.get("DCPTOPK_PYTHON_LOG") != "0")


def test_log_lines_reach_python_logging():
    lib = dcptopk.library()
    if not (hasattr(lib, "dcptopk_log_set_callback") and hasattr(lib, "dcptopk_log_get_level")):
        raise harness.Skip("the library has no log callback")
    # A bad DCPTOPK_LOG is reported through the log itself, on the first level query.
    code = ("import logging, ctypes\n"
            "logging.basicConfig(level=logging.DEBUG, format='PY %(name)s %(levelname)s "
            "%(message)s')\n"
            "import dcptopk\n"
            "dcptopk.library().dcptopk_log_get_level()\n")
    env = dict(os.environ, DCPTOPK_LOG="bogus")
    if os.environ.get("DCPTOPK_TEST_INSTALLED") != "1":
        env["PYTHONPATH"] = os.path.join(harness.HERE, "..", "..", "bindings", "python")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "PY dcptopk WARNING ignoring DCPTOPK_LOG" in r.stderr, r.stderr
    assert "dcptopk: warning:" not in r.stderr, r.stderr  # not the library's own stderr line


def test_cli_module_help():
    env = dict(os.environ)
    if os.environ.get("DCPTOPK_TEST_INSTALLED") != "1":
        env["PYTHONPATH"] = os.path.join(harness.HERE, "..", "..", "bindings", "python")
    r = subprocess.run([sys.executable, "-m", "dcptopk", "--version"], capture_output=True,
                       text=True, env=env)
    if r.returncode != 0 and "no dcptopk CLI" in r.stderr:
        raise harness.Skip("no CLI next to the library")
    assert r.returncode == 0 and dcptopk.versions()["library"] in r.stdout, (r.stdout, r.stderr)


def test_pyproject_version_is_the_binding_version():
    path = os.path.join(harness.HERE, "..", "..", "pyproject.toml")
    if not os.path.exists(path):
        raise harness.Skip("no pyproject.toml")
    with open(path) as f:
        lines = [ln for ln in f if ln.startswith("version = ")]
    assert lines and lines[0].split('"')[1] == dcptopk.__version__, (lines, dcptopk.__version__)


if __name__ == "__main__":
    sys.exit(harness.run(globals()))
