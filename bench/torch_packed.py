"""torch_packed.py - torch.topk on the packed merge's shapes, in the same run
as bench_packed (CUDA events, 5 warm-ups, median of 25, rotating inputs larger
than L2, never zeros). Prints a table and `JSON {...}` lines (bench
"torch_packed_topk"; `role` names the bench_packed figure it stands beside:
the select's candidates, or the loopback merge's decode / prefill top-N, of
which the torch figure is one rank's top-N step only)."""
import json

import torch


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


def main():
    dev = torch.device("cuda")
    rows = []
    # The select's candidates: W=8 x N=384 = 3072 int32 keys per row, k=2048.
    ints = [torch.randint(1, 2**31 - 1, (6710, 3072), dtype=torch.int32, device=dev) for _ in range(3)]
    rows.append(("select", "int32 [6710, 3072] k=2048", median_us(lambda x: torch.topk(x, 2048, dim=1, sorted=False), ints)))
    # The whole merge's local top-N: bf16 rows.
    dec = [torch.randn(64 * 8, 16384, device=dev).to(torch.bfloat16) for _ in range(3)]
    rows.append(("decode top-N", "bf16 [512, 16384] k=384", median_us(lambda x: torch.topk(x, 384, dim=1, sorted=False), dec)))
    pre = [torch.randn(6710, 4096, device=dev).to(torch.bfloat16) for _ in range(3)]
    rows.append(("prefill top-N", "bf16 [6710, 4096] k=384", median_us(lambda x: torch.topk(x, 384, dim=1, sorted=False), pre)))
    print("JSON " + json.dumps({"bench": "torch_env", "torch": torch.__version__,
                                "gpu": torch.cuda.get_device_name()}))
    print(f"{'torch.topk for':34s} {'shape':36s} {'median':>12s}")
    for role, what, us in rows:
        print(f"{role:34s} {what:36s} {us:9.1f} us")
        print("JSON " + json.dumps({"bench": "torch_packed_topk", "role": role, "what": what,
                                    "median_us": round(us, 2)}))


if __name__ == "__main__":
    main()
