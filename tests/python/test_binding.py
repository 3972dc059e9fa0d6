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
from dcptopk import _dist, _group, _lib  # noqa: E402


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
    # Other DSA models' configs reach Python through the library's table.
    for name, want in (("glm-5-dcp8", (2048, 384, 8)), ("deepseek-v4-flash-dcp8", (512, 96, 8)),
                       ("deepseek-v4-pro-dcp4", (1024, 384, 4))):
        assert name in names, names
        c = dcptopk.config(name)
        assert (c.topk, c.local_topk, c.world_size) == want, (name, c)
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


def test_warmup_all_numbers_each_key_once_and_logs_it():
    """The pass that init_dcp_topk_rescue_workspace runs: the union of the
    configs' keys, each compiled once and reported once as done/total, with
    an INFO line per key; a failing progress callable is re-raised."""
    import logging
    a = dcptopk.config("topk512-dcp8-pair")
    b = dcptopk.config("topk512-dcp8-pair", emit_ids=0)
    union = list(dict.fromkeys(dcptopk.config_keys(a) + dcptopk.config_keys(b)))
    assert len(union) < len(dcptopk.config_keys(a)) + len(dcptopk.config_keys(b)), union
    lines = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append((record.levelno, record.getMessage()))
    log = logging.getLogger("dcptopk")
    h, old = Keep(), log.level
    log.addHandler(h)
    log.setLevel(logging.INFO)
    try:
        with tempfile.TemporaryDirectory() as d, \
                dcptopk.Context(device=-1, arch="sm_90a", cache_path=os.path.join(d, "c")) as ctx:
            seen = []
            st = ctx.warmup_all([a, a, b], progress=lambda *args: seen.append(args))
            assert [s[0] for s in seen] == list(range(1, len(union) + 1)), seen
            assert {s[1] for s in seen} == {len(union)}, seen
            assert [s[2] for s in seen] == union, seen
            assert {s[3] for s in seen} == {"compiled"}, seen
            assert st["keys"] == st["compiled"] == len(union), st
            info = [m for lv, m in lines if lv == logging.INFO and "warmup" in m]
            assert len(info) == len(union), lines
            assert info[2].startswith(f"dcptopk warmup 3/{len(union)}: {union[2]} compiled in"), \
                info[2]
            # Again: every key is there already.
            again = ctx.warmup_all([b, a], progress=False)
            assert again["memory_hits"] == len(union), again

            def bad(*_):
                raise KeyError("from the callback")
            raises(KeyError, ctx.warmup_all, [a], progress=bad, match="from the callback")
            # A compile-only context launches nothing: nothing is late.
            assert dcptopk.compiles_after_warmup() == 0
            assert dcptopk.late_kernels() == {"late_compiles": 0, "late_loads": 0}
            assert ctx.stats()["late_compiles"] == 0
    finally:
        log.removeHandler(h)
        log.setLevel(old)


def test_not_warmed_errors_name_the_python_fix():
    e = dcptopk.DcptopkError(13, "DCPTOPK_NOT_WARMED", "kernel x is not loaded and its stream is "
                             "capturing a CUDA graph")
    for want in ("init_dcp_topk_rescue_workspace", "register_dcp_topk_merge_warmup",
                 "outside capture", "DCPTOPK_CAPTURE_COMPILE=1", "kernel x"):
        assert want in str(e), (want, str(e))
    # Other errors keep their message as it is.
    other = dcptopk.DcptopkError(2, "DCPTOPK_INVALID_ARGUMENT", "topk = 100")
    assert str(other) == "DCPTOPK_INVALID_ARGUMENT: topk = 100", str(other)


def test_registry_names_state_by_what_it_is():
    """The torch ops find workspaces and contexts by name: made from the
    group, config, rank and device (the same in every process that builds
    the same state), "#2" for a second live one, and a name no live object
    has is a ValueError naming it and the live ones."""
    from dcptopk import _registry
    cfg = dcptopk.make_config("packed", topk=512, local_topk=96, world_size=1)
    base = "host/K=512,N=96,W=1,rank=0/cpu"
    assert _registry.workspace_name("host", cfg, 0, "cpu") == base
    assert _registry.workspace_name("group[0,1]", dcptopk.make_config(
        "packed", topk=512, local_topk=96, world_size=2, block_size=64, emit_ids=False), 1,
        "cuda:1", variant=True) == "group[0,1]/K=512,N=96,W=2,B=64,ids=0,rank=1/cuda:1"
    a = dcptopk.Workspace.host(cfg, 8)
    b = dcptopk.Workspace.host(cfg, 8)
    assert (a.key, b.key) == (base, base + "#2"), (a.key, b.key)
    assert _registry.lookup(base, dcptopk.Workspace, "workspace") is a
    assert _registry.lookup(base + "#2", dcptopk.Workspace, "workspace") is b
    a.close()
    c = dcptopk.Workspace.host(cfg, 8)   # the freed name again
    assert c.key == base, c.key
    e = raises(ValueError, _registry.lookup, "group[0,1,2,3]/K=2048,N=384,W=4,rank=1/cuda:1",
               dcptopk.Workspace, "workspace",
               match=["'group[0,1,2,3]/K=2048,N=384,W=4,rank=1/cuda:1'", "no live Workspace",
                      "init_dcp_topk_rescue_workspace", repr(base)])
    assert "#2" in str(e), str(e)
    raises(ValueError, _registry.lookup, 3, dcptopk.Workspace, "workspace", match="expected the name")
    named = dcptopk.Workspace.host(cfg, 8, name="mine")
    assert named.key == "mine"
    raises(ValueError, dcptopk.Workspace.host, cfg, 8, name="mine", match="'mine'")
    raises(TypeError, dcptopk.Workspace.host, cfg, 8, name="", match="name")
    with tempfile.TemporaryDirectory() as d:
        with dcptopk.Context(device=-1, arch="sm_90a", cache_path=os.path.join(d, "c"),
                             name="compile-only") as ctx:
            assert _registry.lookup("compile-only", dcptopk.Context, "ctx") is ctx
            # A context is not a workspace, whatever its name.
            raises(ValueError, _registry.lookup, "compile-only", dcptopk.Workspace, "workspace",
                   match="no live Workspace")
        raises(ValueError, _registry.lookup, "compile-only", dcptopk.Context, "ctx",
               match="no live Context")
    for w in (b, c, named):
        w.close()
    assert not [n for n in _registry.registered(dcptopk.Workspace) if n.startswith("host/K=512")]


def test_missing_distributed_runtime_is_a_clear_error():
    if _lib.has_dist_runtime():
        raise harness.Skip("this library has the distributed runtime")
    raises(RuntimeError, _group.Group.from_torch, object(), 0,
           match=["lacks the distributed runtime", "DCPTOPK_DIST_BACKEND=torch"])
    raises(ValueError, _dist.backend_name, "mpi", match="backend")


def test_bootstrap_follows_where_the_ranks_run():
    """One GPU per rank: NCCL; ranks sharing a GPU on one host: the
    store-only group; sharing a GPU across hosts: a clear error."""
    a, b = ("h1", "boot1", "GPU-a"), ("h1", "boot1", "GPU-b")
    assert _group.bootstrap_kind([a, b]) == "nccl"
    assert _group.bootstrap_kind([a]) == "nccl"
    assert _group.bootstrap_kind([a, a]) == "store"
    assert _group.bootstrap_kind([a, a, b, a]) == "store"
    c = ("h2", "boot2", "GPU-c")
    assert _group.bootstrap_kind([a, b, c]) == "nccl"
    raises(RuntimeError, _group.bootstrap_kind, [a, a, c],
           match=["share a GPU (GPU-a on h1)", "2 hosts"])
    # The store folder is private to this user.
    d = _group._store_folder()
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


def test_every_c_call_is_bound():
    """Every function of include/dcptopk.h has a ctypes signature."""
    import re
    header = os.path.join(harness.HERE, "..", "..", "include", "dcptopk.h")
    if not os.path.exists(header):
        raise harness.Skip("no include/dcptopk.h next to the tests")
    with open(header) as f:
        names = re.findall(r"DCPTOPK_API[^;]*?\b(dcptopk_\w+)\s*\(", f.read(), re.S)
    assert len(names) > 80, len(names)
    bound = set(_lib._SIGS) | set(_lib._DIST_SIGS) | {"dcptopk_log_set_callback"}
    missing = [n for n in names if n not in bound]
    assert not missing, f"C calls without a binding: {missing}"
    lib = dcptopk.library()
    for n in names:
        if n in _lib._SIGS or _lib.has_dist_runtime(lib):
            assert getattr(lib, n).argtypes is not None or n.endswith("_callback"), n


def _cli_env(extra):
    env = dict(os.environ, **extra)
    if os.environ.get("DCPTOPK_TEST_INSTALLED") != "1":
        env["PYTHONPATH"] = os.path.join(harness.HERE, "..", "..", "bindings", "python")
    return env


def test_settings_table_and_env_info():
    table = dcptopk.settings()
    names = [s["name"] for s in table]
    assert len(names) == len(set(names)) > 20, names
    for n in ("DCPTOPK_CACHE_DIR", "DCPTOPK_PEER_TIMEOUT_MS", "DCPTOPK_LIBRARY", "RANK"):
        assert n in names, n
    old = {k: os.environ.get(k) for k in ("DCPTOPK_CACHE_BUSY_MS", "DCPTOPK_PEER_TIMEOUT_MS")}
    try:
        os.environ["DCPTOPK_CACHE_BUSY_MS"] = "1234"
        os.environ["DCPTOPK_PEER_TIMEOUT_MS"] = "soon"
        busy = dcptopk.setting("DCPTOPK_CACHE_BUSY_MS")
        assert (busy["value"], busy["env"], busy["source"]) == (1234, "1234", "environment"), busy
        peer = dcptopk.setting("DCPTOPK_PEER_TIMEOUT_MS")
        assert (peer["value"], peer["env"], peer["source"]) == (10000, "soon", "ignored"), peer
        del os.environ["DCPTOPK_CACHE_BUSY_MS"]
        busy = dcptopk.setting("DCPTOPK_CACHE_BUSY_MS")
        assert (busy["value"], busy["env"], busy["source"]) == (10000, None, "default"), busy
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    raises(ValueError, dcptopk.setting, "DCPTOPK_NOPE", match=["DCPTOPK_NOPE", "settings"])
    raises(TypeError, dcptopk.setting, 3, match="name")
    info = dcptopk.env_info()
    assert info["device_count"] == dcptopk.device_count(), info
    assert info["nvrtc"] and "nvrtc" in (info["nvrtc_path"] or ""), info
    assert info["cache_path"] == dcptopk.cache_default_path(), info
    assert info["cache_mode"] in ("trusted", "shared", "absent", "refused", "none"), info
    if not info["device_count"]:
        assert info["no_device"], info


def test_python_m_dcptopk_env_json():
    """`python -m dcptopk env --json` (the CLI's env) parses, lists every
    setting of the table, and shows an environment value's source."""
    import json
    r = subprocess.run([sys.executable, "-m", "dcptopk", "env", "--json"], capture_output=True,
                       text=True, env=_cli_env({"DCPTOPK_RESCUE_TIMEOUT_MS": "777"}))
    if r.returncode != 0 and "no dcptopk CLI" in r.stderr:
        raise harness.Skip("no CLI next to the library")
    assert r.returncode == 0, (r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    assert doc["library"]["version"] == dcptopk.versions()["library"], doc["library"]
    assert [s["name"] for s in doc["settings"]] == [s["name"] for s in dcptopk.settings()]
    rescue = [s for s in doc["settings"] if s["name"] == "DCPTOPK_RESCUE_TIMEOUT_MS"][0]
    assert rescue["source"] == "environment" and rescue["value"] == "777", rescue
    assert len(doc["devices"]) == dcptopk.device_count(), doc["devices"]
    assert doc["cache"]["mode"] in ("trusted", "shared", "absent", "refused", "none"), doc


def test_log_level_round_trip():
    was = dcptopk.log_level()
    try:
        for name in ("quiet", "error", "warn", "info", "debug"):
            dcptopk.set_log_level(name)
            assert dcptopk.log_level() == name
        dcptopk.set_log_level(1)
        assert dcptopk.log_level() == "error"
    finally:
        dcptopk.set_log_level(was)
    raises(ValueError, dcptopk.set_log_level, "loud", match=["level", "'loud'"])
    raises(ValueError, dcptopk.set_log_level, 7, match=["level: got 7"])


def test_keys_parse_check_render_hash():
    cfg = dcptopk.config("deepseek-v3.2-dcp8")
    for spec in dcptopk.config_keys(cfg, "sm_90a")[:3]:
        k = dcptopk.key_parse(spec)
        assert spec.startswith(k["kernel"] + "(") and k["arch"] == "sm_90a", (spec, k)
        dcptopk.key_check(spec)
        h = dcptopk.key_hash(spec)
        assert len(h) == 32 and int(h, 16) >= 0, h
        src = dcptopk.key_render(spec)
        assert "extern \"C\"" in src, src[:200]
    e = raises(dcptopk.DcptopkError, dcptopk.key_parse, "select(topk=2048)@sm_90a",
               match="local_topk")
    assert e.name == "DCPTOPK_INVALID_ARGUMENT", e.name
    raises(dcptopk.DcptopkError, dcptopk.key_hash, "nope()@sm_90a", match="nope")
    raises(TypeError, dcptopk.key_render, None, match="key")


def test_ref_scalars():
    # bf16 1.0 = 0x3f80: non-negative, so bits | 0x8000; NaN has no order.
    assert dcptopk.ref_ord16(0x3F80) == 0x3F80 | 0x8000
    assert dcptopk.ref_ord16(0x7FC0) == 0
    assert dcptopk.ref_ord32(0x3F800000) > dcptopk.ref_ord32(0xBF800000)
    assert dcptopk.ref_global_id(5, 1, 8) == 5 * 8 + 1
    assert dcptopk.ref_global_id(5, 1, 8, interleave=4) == (5 // 4) * 32 + 4 + 5 % 4
    n = 32
    row = [0] * (n + 1)
    row[0] = (0xBF80 << 16) | (0xFFFF - 7)  # ord16 0xBF80, local id 7
    c = dcptopk.ref_decode(row, n, 0, owner=2, world_size=4)
    assert c == {"ord16": 0xBF80, "local_id": 7, "global_id": 7 * 4 + 2}, c
    assert dcptopk.ref_decode(row, n, 1, 2, 4)["ord16"] == 0
    raises(ValueError, dcptopk.ref_ord16, 0x10000, match="bf16_bits")
    raises(ValueError, dcptopk.ref_global_id, 1, 8, 8, match="owner: got 8")
    raises(ValueError, dcptopk.ref_decode, row[:-1], n, 0, 0, 4, match="packed_row: got 32")
    raises(ValueError, dcptopk.ref_decode, row, n, 32, 0, 4, match="j: got 32")
    assert dcptopk.path_name(2) == "push" and dcptopk.path_name(99) == "unknown"


def test_launch_env_and_a_group_from_it():
    if not _lib.has_dist_runtime():
        raise harness.Skip("the library lacks the distributed runtime")
    keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS")
    old = {k: os.environ.pop(k, None) for k in keys}
    try:
        assert dcptopk.launch_env() is None
        os.environ.update(RANK="0", WORLD_SIZE="1")
        env = dcptopk.launch_env()
        assert env == {"rank": 0, "world_size": 1, "local_rank": -1, "local_world_size": -1,
                       "source": "torchrun"}, env
        with tempfile.TemporaryDirectory() as d:
            with dcptopk.Context(device=-1, arch="sm_90a", cache_path=os.path.join(d, "c")) as ctx:
                with dcptopk.Group(ctx, d) as g:
                    assert (g.rank, g.world_size) == (0, 1)
                    path, why = g.path()
                    assert path == "loopback", (path, why)
                    assert g.nodes == 1, g.nodes
                    g.barrier()
                raises(ValueError, lambda: g.rank, match="closed")
                raises(ValueError, dcptopk.Group, ctx, d, path=9, match="path: got 9")
        os.environ["RANK"] = "x"
        raises(dcptopk.DcptopkError, dcptopk.launch_env, match=["RANK", "x"])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_cache_file_maintenance():
    cfg = dcptopk.config("topk512-dcp8-pair")
    keys = dcptopk.config_keys(cfg, "sm_90a")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "cache.sqlite")
        e = raises(dcptopk.DcptopkError, dcptopk.Cache, path, readonly=True, match=path)
        assert e.name == "DCPTOPK_NOT_FOUND", e.name
        with dcptopk.Context(device=-1, arch="sm_90a", cache_path=path) as ctx:
            ctx.warmup(cfg, progress=False)
        with dcptopk.Cache(path) as c:
            assert c.path == path and not c.readonly
            entries = c.list()
            assert len(entries) == len(keys), entries
            hashes = {dcptopk.key_hash(k) for k in keys}
            assert {e["key"] for e in entries} == hashes
            one = entries[0]
            assert c.find(one["key"][:8]) == one
            src = c.read_blob(one["key"], "source").decode()
            assert src == dcptopk.key_render(f"{one['kernel']}({one['fields']})@{one['arch']}")
            assert len(c.read_blob(one["key"])) == one["cubin_bytes"]
            st = c.stats()
            assert st["entries"] == len(keys) and st["bytes"] > 0, st
            assert c.verify() == (len(keys), 0)
            assert c.claims() == [] and c.clear_stale_claims() == 0
            out = os.path.join(d, "export.sqlite")
            assert c.export(out) == len(keys)
            raises(dcptopk.DcptopkError, c.export, out, match="export.sqlite")
            c.remove(one["key"])
            raises(dcptopk.DcptopkError, c.find, one["key"], match=one["key"][:8])
            assert c.prune(0) == len(keys) - 1
            assert c.import_(out, trust=True) == (len(keys), 0)
            assert c.clear() == len(keys)
            raises(ValueError, c.find, "xyz", match=["key_prefix", "'xyz'"])
            raises(ValueError, c.read_blob, one["key"], "elf", match="blob")
            raises(ValueError, c.prune, -1, match="max_bytes")
            raises(TypeError, c.import_, out, trust=1, match="trust")
        raises(ValueError, c.list, match="closed")
        with dcptopk.Cache(path, readonly=True) as c:
            assert c.readonly and c.stats()["entries"] == 0
            raises(dcptopk.DcptopkError, c.clear, match="read-only")
        raises(TypeError, dcptopk.Cache, 3, match="path")
        raises(TypeError, dcptopk.Cache, path, readonly="no", match="readonly")


# ------------------------------------------------- values bound for C (#32)
# ctypes stores ints modulo 2^bits and cuts a char* at its first NUL: every
# such value must be refused with its name before C sees it.

def test_config_ints_that_would_wrap_are_refused():
    raises(ValueError, dcptopk.config, topk=2 ** 32 + 1024, local_topk=2 ** 32 + 192,
           match=("topk", str(2 ** 32 + 1024), "int32"))
    raises(ValueError, dcptopk.config, local_topk=2 ** 32 + 192, match=("local_topk", "int32"))
    raises(ValueError, dcptopk.make_config, "packed", topk=128, local_topk=32,
           world_size=2 ** 32 + 8, match=("world_size", str(2 ** 32 + 8)))
    raises(ValueError, dcptopk.config, block_size=-2 ** 31 - 1, match="block_size")
    cfg = dcptopk.config()
    before = cfg.world_size
    raises(ValueError, setattr, cfg, "world_size", 2 ** 32 + 8, match="world_size")
    assert cfg.world_size == before and cfg.as_list()[3] == before


def test_floats_and_bools_are_not_ints():
    e = raises(TypeError, dcptopk.config, topk=64.5, match=("topk", "float", "64.5"))
    assert isinstance(e, ValueError), "an argument error is also a ValueError"
    raises(TypeError, dcptopk.make_config, "pair", topk=64.0, world_size=4, match="topk")
    raises(TypeError, dcptopk.config, world_size=True, match=("world_size", "bool"))
    raises(TypeError, dcptopk.MergeConfig, topk=2048.0, match="topk")
    # The flags take a bool on purpose.
    assert dcptopk.config(emit_ids=False).emit_ids == 0
    assert dcptopk.make_config("packed", topk=128, local_topk=32, world_size=2,
                               emit_ids=True).emit_ids == 1


def test_unknown_config_fields_are_refused():
    e = raises(TypeError, dcptopk.config, top_k=1024, match=("top_k", "topk", "local_topk"))
    assert "world_size" in str(e)
    cfg = dcptopk.config()
    raises(TypeError, cfg.copy, worldsize=2, match="worldsize")
    raises(AttributeError, setattr, cfg, "top_k", 1024, match=("top_k", "topk"))


def test_config_of_none_or_a_nul_name_is_a_clear_error():
    raises(TypeError, dcptopk.config, None, match=("name", "NoneType"))
    raises(TypeError, dcptopk.config, 3, match="name")
    raises(ValueError, dcptopk.config, "deepseek-v3.2-dcp8\0junk", match=("name", "NUL"))


def test_context_arguments_are_checked_before_c():
    raises(ValueError, dcptopk.Context, device=2 ** 32 - 1, match=("device", str(2 ** 32 - 1)))
    raises(TypeError, dcptopk.Context, device=0.0, match="device")
    raises(TypeError, dcptopk.Context, device=True, match="device")
    raises(ValueError, dcptopk.Context, device=-1, arch="sm_90a\0sm_80", match=("arch", "NUL"))
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "c.sqlite") + "\0.x"
        raises(ValueError, dcptopk.Context, device=-1, arch="sm_90a", cache_path=bad,
               match=("cache_path", "NUL"))
        assert not os.listdir(d), "a truncated cache path was opened"
    raises(ValueError, dcptopk.Context, device=-1, arch="sm_90a", cache_mode=2 ** 31,
           match="cache_mode")


def test_pre_hopper_archs_are_refused_by_name():
    e = raises(dcptopk.DcptopkError, dcptopk.Context, device=-1, arch="sm_80",
               cache_mode=2, match=("sm_80", "sm_90 or later"))
    assert e.name == "DCPTOPK_UNSUPPORTED", e.name
    raises(dcptopk.DcptopkError, dcptopk.config_keys, dcptopk.config("deepseek-v3.2-dcp8"),
           "sm_89", match=("sm_89", "sm_90 or later"))
    assert dcptopk.config_keys(dcptopk.config("deepseek-v3.2-dcp8"), "sm_100a")


def test_every_int_and_string_argument_of_the_c_calls_is_checked():
    lib = dcptopk.library()
    # The binding's own calls name the argument...
    raises(ValueError, dcptopk.packed_row_words, 2 ** 32 + 64, match=("n", "int32"))
    raises(TypeError, dcptopk.rescue_slots, 2048, 384.0, match="n")
    raises(ValueError, dcptopk.workspace_layout, dcptopk.config(), 2 ** 63, match="max_rows")
    # ... and the raw signatures refuse what would wrap, for every caller.
    raises(ctypes.ArgumentError, lib.dcptopk_packed_row_words, 2 ** 32 + 64, match="int32")
    raises(ctypes.ArgumentError, lib.dcptopk_packed_row_words, 64.5)
    raises(ctypes.ArgumentError, lib.dcptopk_rescue_slots, 2048, True, match="bool")
    raises(ctypes.ArgumentError, lib.dcptopk_merge_config_name, -1, match="size_t")
    cfg = dcptopk.MergeConfig()
    raises(ctypes.ArgumentError, lib.dcptopk_merge_config_named, b"deepseek\0x",
           ctypes.byref(cfg), match="NUL")
    assert lib.dcptopk_packed_row_words(64) == 66
    raises(ValueError, dcptopk.key_parse, "select(topk=2048)\0@sm_90a", match=("key", "NUL"))
    # Every integer and char* argument type of every declared signature is a
    # checked one.
    for name, (_res, args) in list(_lib._SIGS.items()):
        fn = getattr(lib, name)
        for declared, bound in zip(args, fn.argtypes):
            if declared is ctypes.c_char_p or (declared in (ctypes.c_int32, ctypes.c_uint32,
                                                             ctypes.c_int64, ctypes.c_uint64,
                                                             ctypes.c_size_t, ctypes.c_int,
                                                             ctypes.c_uint16)):
                assert bound is not declared and hasattr(bound, "from_param"), (name, declared)


def test_every_struct_field_is_set_through_the_checked_setter():
    for name, cls in dict(dcptopk.STRUCTS, **_lib.DIST_STRUCTS).items():
        assert issubclass(cls, dcptopk._checks.Struct), name
        if cls in _lib.LAUNCH_ARGS:
            # Filled per launch from the checked plans only (no per-field cost).
            assert cls.__setattr__ is ctypes.Structure.__setattr__, name
            continue
        s = cls()
        ints = [n for n, t in cls._fields_ if t in (ctypes.c_int32, ctypes.c_uint32,
                                                     ctypes.c_int64, ctypes.c_uint64)]
        for n in ints:
            raises(ValueError, setattr, s, n, 2 ** 64, match=n)
            raises(TypeError, setattr, s, n, 1.0, match=n)
        for n in [n for n, t in cls._fields_ if t is ctypes.c_char_p]:
            raises(ValueError, setattr, s, n, b"a\0b", match=(n, "NUL"))
        raises(AttributeError, setattr, s, "no_such_field", 1, match=("no_such_field", cls.__name__))


def test_cache_import_reports_a_rejected_entry():
    # One real entry moved under a key that is not its hash: the verified
    # import refuses it and Cache.import_ says so (the CLI exits 3 on it).
    import sqlite3
    cfg = dcptopk.config("topk512-dcp8-pair")
    with tempfile.TemporaryDirectory() as d:
        src, forged = os.path.join(d, "src.sqlite"), os.path.join(d, "forged.sqlite")
        with dcptopk.Context(device=-1, arch="sm_90a", cache_path=src) as ctx:
            ctx.warmup(cfg, progress=False)
        with dcptopk.Cache(src) as c:
            c.export(forged)
        db = sqlite3.connect(forged)
        db.execute("DELETE FROM entries WHERE key <> (SELECT min(key) FROM entries)")
        db.execute("UPDATE entries SET key='00112233445566778899aabbccddeeff'")
        db.commit()
        db.close()
        with dcptopk.Cache(os.path.join(d, "dst.sqlite")) as c:
            assert c.import_(forged) == (0, 1)
            assert c.stats()["entries"] == 0


if __name__ == "__main__":
    sys.exit(harness.run(globals()))
