#!/usr/bin/env python3
"""torch_topn.py - torch.topk on the shapes and input families of
bench_topn.c (the baseline of the fused local top-N + pack), in the same run.

bf16 [T, S] rows, k = N, sorted=False, along the last dim. CUDA events around
each call, 5 warm-up calls, the median and min of `iters` timed calls; the
inputs rotate over enough copies to exceed torch_cold.cold_bytes() (4 x the
device's L2, at least 256 MiB), as bench_topn's do. Prints a table and
one `JSON {...}` line per measurement (bench "torch_topk", keyed like
bench_topn's records by T, S, N and family). Usage: torch_topn.py [iters]."""
import json
import sys

import torch

from torch_cold import cold_copies, env_fields

SHAPES = [(64, 131072, 384), (8, 131072, 384), (64, 16384, 384), (6710, 16384, 384)]
FAMILIES = ["normal", "normal+100", "integer0..3", "-inf-masked"]


def make(fam, t, s, gen):
    x = torch.randn(t, s, device="cuda", generator=gen, dtype=torch.float32)
    if fam == "normal+100":
        x += 100.0
    elif fam == "integer0..3":
        x = torch.randint(0, 4, (t, s), device="cuda", generator=gen).float()
    elif fam == "-inf-masked":
        cut = s // 4 + (torch.rand(t, 1, device="cuda", generator=gen) * (s - s // 4)).long()
        cols = torch.arange(s, device="cuda").unsqueeze(0)
        x = torch.where(cols >= cut, torch.full_like(x, float("-inf")), x)
    return x.to(torch.bfloat16)


def main():
    iters = max(20, int(sys.argv[1]) if len(sys.argv) > 1 else 30)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    env = env_fields()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, L2 "
          f"{env['l2_bytes'] / 2**20:.1f} MiB, inputs rotated over more than "
          f"{env['cold_bytes'] / 2**20:.1f} MiB")
    print("JSON " + json.dumps({"bench": "torch_env", "torch": torch.__version__,
                                "gpu": torch.cuda.get_device_name(), **env}))
    print(f"{'T':<6} {'S':<7} {'N':<5} {'family':<12} {'median_us':>10} {'min_us':>10}")
    for t, s, n in SHAPES:
        nbytes = t * s * 2
        nbuf = max(2, cold_copies(nbytes))  # 2: never one buffer twice in a row
        for fam in FAMILIES:
            x = make(fam, t, s, gen)
            bufs = [x.clone() for _ in range(nbuf)]
            times = []
            for i in range(5 + iters):
                a = torch.cuda.Event(enable_timing=True)
                b = torch.cuda.Event(enable_timing=True)
                a.record()
                torch.topk(bufs[i % nbuf], n, dim=-1, sorted=False)
                b.record()
                b.synchronize()
                if i >= 5:
                    times.append(a.elapsed_time(b) * 1000.0)
            times.sort()
            med, mn = times[len(times) // 2], times[0]
            print(f"{t:<6} {s:<7} {n:<5} {fam:<12} {med:>10.1f} {mn:>10.1f}")
            print("JSON " + json.dumps({"bench": "torch_topk", "T": t, "S": s, "N": n,
                                        "family": fam, "median_us": round(med, 2),
                                        "min_us": round(mn, 2), "iters": iters,
                                        "buffers": nbuf, "torch": torch.__version__}))
            del bufs, x
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
