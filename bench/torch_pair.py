#!/usr/bin/env python3
"""torch_pair.py - the torch baseline of the pair merge, on the shapes of
bench_pair.c, measured the same way (CUDA events, L2 flushed before each
timed call by a fill of torch_cold.cold_bytes(): 4 x the L2, at least 256 MiB;
3 warm-up calls, median of `runs`):

- reorder: the rank-major all-gather output [W*T, K, 2] int32 copied to the
  row-major [T, W*K, 2] (what engines do before selecting);
- topk: torch.topk(scores [T, W*K] fp32, k=K, sorted=False) (values + indices);
- route: reorder + topk on the reordered scores + gather of the gids (the
  whole row-major route that dcptopk_pair_select replaces);
- float_copy (W=8, K=2048): the float32 pairs whose id is a float value
  (vLLM's layout) turned into int32 (score bits, gid) pairs, the copy that
  `dcptopk.ops.float_pairs_to_int` (ids_as_float=True) makes and that the
  float-id layouts read in place instead.

Prints a table and one `JSON {...}` line per measurement (bench
"torch_pair_reorder", "torch_pair_topk", "torch_pair_route"; bench/tables.py
puts them beside bench_pair's figures of the same run).
Usage: python3 bench/torch_pair.py [runs (default 30)]
"""
import json
import sys

import torch

from torch_cold import cold_bytes, env_fields

SHAPES = [(8, 2048, 6710), (4, 2048, 6710), (2, 2048, 6710), (16, 2048, 6710),
          (8, 1024, 6710), (8, 4096, 6710), (8, 512, 6710),
          (8, 2048, 64), (4, 2048, 64), (2, 2048, 64)]


def time_it(fn, runs, flush):
    for _ in range(3):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(runs):
        flush.fill_(i & 0xFF)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    times.sort()
    n = len(times)
    med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    return med, times[0]


def report(what, w, k, t, nbytes, med, mn):
    print(f"{what:<14} W={w:<2} K={k:<4} T={t:<5} {med:9.1f} us  (min {mn:8.1f})"
          f"  {nbytes / med / 1e3:7.0f} GB/s", flush=True)
    print("JSON " + json.dumps({"bench": "torch_pair_" + what, "W": w, "K": k, "T": t,
                                "median_us": round(med, 2), "min_us": round(mn, 2),
                                "bytes": nbytes,
                                "GBps": round(nbytes / med / 1e3, 1)}), flush=True)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    dev = torch.device("cuda")
    torch.manual_seed(0)
    env = env_fields()
    flush = torch.empty(cold_bytes(), dtype=torch.uint8, device=dev)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, "
          f"median of {runs} runs, L2 ({env['l2_bytes'] / 2**20:.1f} MiB) flushed before each "
          f"by a {env['cold_bytes'] / 2**20:.1f} MiB fill")
    print("JSON " + json.dumps({"bench": "torch_env", "torch": torch.__version__,
                                "gpu": torch.cuda.get_device_name(), **env}), flush=True)
    for w, k, t in SHAPES:
        scores = torch.randn(w * t, k, device=dev, dtype=torch.float32)
        gids = (torch.arange(k, device=dev, dtype=torch.int32) * 3).repeat(w * t, 1)
        gids = gids * w + torch.arange(w, device=dev, dtype=torch.int32) \
            .repeat_interleave(t).unsqueeze(1)
        gathered = torch.stack([scores.view(torch.int32), gids], dim=-1)  # [W*T, K, 2]
        del scores, gids

        def reorder():
            return gathered.view(w, t, k, 2).movedim(0, 1).reshape(t, w * k, 2)

        rowmajor = reorder().contiguous()
        row_scores = rowmajor[..., 0].view(torch.float32).contiguous()  # [T, W*K]

        def topk():
            return torch.topk(row_scores, k, dim=1, sorted=False)

        def route():
            rm = reorder()
            sc = rm[..., 0].view(torch.float32)
            _, idx = torch.topk(sc, k, dim=1, sorted=False)
            return torch.gather(rm[..., 1], 1, idx)

        cand_bytes = w * t * k * 8
        if w == 8 and k == 2048:
            fpairs = torch.stack([gathered[..., 0].view(torch.float32),
                                  gathered[..., 1].to(torch.float32)], dim=-1)

            def float_copy():
                # The conversion of dcptopk.ops.float_pairs_to_int.
                ids = fpairs[..., 1]
                ok = (ids >= 0) & (ids < 2.0 ** 31)
                ids = torch.where(ok, ids, torch.full_like(ids, -1.0)).to(torch.int32)
                return torch.stack((fpairs[..., 0].view(torch.int32), ids), dim=-1)

            med, mn = time_it(float_copy, runs, flush)
            report("float_copy", w, k, t, 2 * cand_bytes, med, mn)
            del fpairs
        med, mn = time_it(reorder, runs, flush)
        report("reorder", w, k, t, 2 * cand_bytes, med, mn)
        med_t, mn_t = time_it(topk, runs, flush)
        report("topk", w, k, t, w * t * k * 4, med_t, mn_t)
        med_r, mn_r = time_it(route, runs, flush)
        report("route", w, k, t, cand_bytes, med_r, mn_r)
        del gathered, rowmajor, row_scores
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
