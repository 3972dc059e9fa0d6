"""The Python binding mirrors the C structs exactly and reaches the library.

Runs without torch and without a GPU: struct layouts against the C compiler's
(struct_sizes prints them), named configs, key expansion and error mapping.
Usage: test_binding.py STRUCT_SIZES_EXE (DCPTOPK_LIBRARY names the library).
"""
import ctypes
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bindings", "python"))
import dcptopk  # noqa: E402

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


out = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
for line in out.splitlines():
    name, size, last_off = line.split()
    cls = dcptopk.STRUCTS[name]
    check(ctypes.sizeof(cls) == int(size), f"{name}: python {ctypes.sizeof(cls)} bytes, C {size}")
    last = cls._fields_[-1][0]
    check(getattr(cls, last).offset == int(last_off),
          f"{name}.{last}: python offset {getattr(cls, last).offset}, C {last_off}")

names = dcptopk.config_names()
check(names and names[0] == "deepseek-v3.2-dcp8", f"config names {names}")
cfg = dcptopk.config("deepseek-v3.2-dcp8")
check((cfg.topk, cfg.local_topk, cfg.world_size) == (2048, 384, 8), repr(cfg))
keys = dcptopk.config_keys(cfg, "sm_90a")
check(len(keys) >= 3 and all(k.endswith("@sm_90a") for k in keys), f"keys {keys}")
try:
    dcptopk.config("no-such-model")
    check(False, "unknown config accepted")
except dcptopk.DcptopkError as e:
    check(e.name == "DCPTOPK_NOT_FOUND" and "no-such-model" in str(e), str(e))
try:
    dcptopk.config_keys(dcptopk.config(topk=100))
    check(False, "topk=100 accepted")
except dcptopk.DcptopkError as e:
    check(e.name == "DCPTOPK_INVALID_ARGUMENT" and "topk = 100" in str(e), str(e))

lay = dcptopk.workspace_layout(dcptopk.config("deepseek-v3.2-dcp8"), 64)
# Receive slots [T_max, (K-1)/N, K + K/32] int32 and flags [W, T_max] uint32, at least.
check(lay["recv_bytes"] >= 64 * 5 * (2048 + 64) * 4, f"recv_bytes {lay}")
check(lay["flags_bytes"] >= 8 * 64 * 4, f"flags_bytes {lay}")
try:
    dcptopk.workspace_layout(dcptopk.config("deepseek-v3.2-dcp8"), -1)
    check(False, "max_rows = -1 accepted")
except dcptopk.DcptopkError as e:
    check(e.name == "DCPTOPK_INVALID_ARGUMENT" and "max_rows" in str(e), str(e))

print(f"{'1 passed, 0 failed' if failures == 0 else f'0 passed, {failures} failed'}")
sys.exit(1 if failures else 0)
