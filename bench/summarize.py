"""Prints the JSON lines of a device run (bench/device.sh) as one compact table.

Each benchmark writes its own fields; this prints the run's header record
(date, GPU, commit) first, then per record the bench name, its time fields and
its other fields, so the tail of a device run shows every figure. The tables
of docs/BENCHMARKS.md come from bench/tables.py instead. Usage: summarize.py
bench.jsonl
"""
import json
import sys

TIME_KEYS = ("us", "median_us", "min_us", "ms", "median_ms", "wall_ms", "total_ms")


def fmt(v):
    return f"{v:.4g}" if isinstance(v, float) else str(v)


rows = []
with open(sys.argv[1]) as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        name = rec.pop("bench", rec.pop("name", "?"))
        if name == "run":  # device.sh's header record: the run itself
            rows.insert(0, "run: " + ", ".join(f"{k}={v}" for k, v in rec.items()))
            continue
        times = " ".join(f"{k}={fmt(rec.pop(k))}" for k in TIME_KEYS if k in rec)
        rest = " ".join(f"{k}={fmt(v)}" for k, v in rec.items())
        rows.append(f"{name:<22} {times:<34} {rest}")
print("\n".join(rows))
