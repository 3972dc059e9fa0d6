"""Prints the JSON lines of a device run (bench/device.sh) as one compact table.

Each benchmark writes its own fields; this prints, per record, the bench name,
its shape fields and its time fields, so the tail of a device run shows every
figure. Usage: summarize.py bench.jsonl
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
        times = " ".join(f"{k}={fmt(rec.pop(k))}" for k in TIME_KEYS if k in rec)
        rest = " ".join(f"{k}={fmt(v)}" for k, v in rec.items())
        rows.append(f"{name:<22} {times:<34} {rest}")
print("\n".join(rows))
