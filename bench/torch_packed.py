"""torch_packed.py - torch.topk on the packed merge's shapes, in the same run
as bench_packed (CUDA events, 5 warm-ups, median of 25, inputs rotated over
at least 3 copies and more than torch_cold.cold_bytes(), never zeros).
Prints a table and `JSON {...}` lines (bench "torch_packed_topk"; `role`
names the bench_packed figure it stands beside: the select's candidates, or
the loopback merge's decode / prefill top-N, of which the torch figure is one
rank's top-N step only)."""
import json

import torch

from torch_cold import cold_copies, env_fields


def median_us(fn, inputs, warmup=5, iters=25):
    times = []
    for i in range(warmup + iters):
        x = inputs[i % len(inputs)]
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn(x)
        b.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(a.elapsed_time(b) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def copies(make, nbytes):
    """At least the 3 copies that bench_packed rotates over, more where 3 do
    not exceed the cold bound (as bench_packed's rotated_copies)."""
    return [make() for _ in range(max(3, cold_copies(nbytes)))]


def main():
    dev = torch.device("cuda")
    rows = []
    # The select's candidates: W=8 x N=384 = 3072 int32 keys per row, k=2048.
    ints = copies(lambda: torch.randint(1, 2**31 - 1, (6710, 3072), dtype=torch.int32, device=dev),
                  6710 * 3072 * 4)
    rows.append(("select", "int32 [6710, 3072] k=2048", median_us(lambda x: torch.topk(x, 2048, dim=1, sorted=False), ints)))
    # The whole merge's local top-N: bf16 rows.
    dec = copies(lambda: torch.randn(64 * 8, 16384, device=dev).to(torch.bfloat16),
                 64 * 8 * 16384 * 2)
    rows.append(("decode top-N", "bf16 [512, 16384] k=384", median_us(lambda x: torch.topk(x, 384, dim=1, sorted=False), dec)))
    pre = copies(lambda: torch.randn(6710, 4096, device=dev).to(torch.bfloat16),
                 6710 * 4096 * 2)
    rows.append(("prefill top-N", "bf16 [6710, 4096] k=384", median_us(lambda x: torch.topk(x, 384, dim=1, sorted=False), pre)))
    env = env_fields()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, L2 "
          f"{env['l2_bytes'] / 2**20:.1f} MiB, inputs rotated over more than "
          f"{env['cold_bytes'] / 2**20:.1f} MiB")
    print("JSON " + json.dumps({"bench": "torch_env", "torch": torch.__version__,
                                "gpu": torch.cuda.get_device_name(), **env}))
    print(f"{'torch.topk for':34s} {'shape':36s} {'median':>12s}")
    for role, what, us in rows:
        print(f"{role:34s} {what:36s} {us:9.1f} us")
        print("JSON " + json.dumps({"bench": "torch_packed_topk", "role": role, "what": what,
                                    "median_us": round(us, 2)}))


if __name__ == "__main__":
    main()
