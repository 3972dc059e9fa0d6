"""torch_host.py - the host overhead of one drop-in merge call from Python
(dcptopk.merge.dcp_topk_merge, eager, a world of one rank: pack + select +
push + rescue), the issue's goal being at most 5 us beyond the launches, and
of the replay of a captured one (goal: no Python at all).

Per shape it measures, each as the median of 7 batches:
- host_us: host time of one call, calls issued back to back without a
  synchronisation (the launch queue never fills: each batch is short), so
  it is the Python + ctypes + launch cost alone;
- launches_us: the same for the library calls that call made (the ctypes
  calls merge.py memoises per argument set), replayed from a bare loop, and
  beyond_us = host_us - launches_us, the drop-in call's own cost (the
  issue's goal is beyond_us <= 5);
- kernels_us: the device time of one call (CUDA events around it);
- replay_host_us: host time of one CUDA graph replay of a captured call;
- unmemoised_us and dispatch_us: host time of one call that runs every
  check and resolves its workspace by name (the ops' str arguments) in
  this process's registry, without the memo, and the same through
  torch.ops.dcptopk.* (the dispatcher, as a compiled graph calls it).
Prints a table and `JSON {...}` lines (bench "torch_host_overhead").

Needs the package and the library: PYTHONPATH=bindings/python and
DCPTOPK_LIBRARY=<build>/libdcptopk.so (bench/device.sh sets both).
"""
import json
import statistics
import time

import torch

from dcptopk import merge as M

SHAPES = [(1, 2048, 384, 65536), (64, 2048, 384, 65536)]  # (T, K, N, S)
BATCH, BATCHES = 50, 7


def host_per_call(fn):
    out = []
    for _ in range(BATCHES):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(BATCH):
            fn()
        out.append((time.perf_counter() - t0) / BATCH * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)


def kernels_per_call(fn):
    out = []
    for _ in range(BATCHES):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) * 1000.0)
    return statistics.median(out)


def main():
    dev = torch.device("cuda", torch.cuda.current_device())
    print("JSON " + json.dumps({"bench": "torch_env", "torch": torch.__version__,
                                "gpu": torch.cuda.get_device_name()}))
    print(f"{'call':16s} {'shape':28s} {'host/call':>10s} {'launches':>10s} {'beyond':>10s} "
          f"{'kernels':>10s} {'replay host':>12s}")
    for T, K, N, S in SHAPES:
        M.init_dcp_topk_rescue_workspace(max(T, 64), K, N)
        g = torch.Generator(device=dev).manual_seed(T)
        lg = torch.randn(T, S, device=dev, generator=g).to(torch.bfloat16)
        re = torch.full((T,), S, dtype=torch.int32, device=dev)
        ids = torch.empty(T, K, dtype=torch.int32, device=dev)

        def call():
            M.dcp_topk_merge(lg, re, ids, N)
        if hasattr(M.ops, "memo_clear"):
            M.ops.memo_clear()
        for _ in range(5):  # compile or load, then warm
            call()
        torch.cuda.synchronize()
        host = host_per_call(call)
        launches = None
        memo = getattr(M.ops, "_MEMO", None)
        if memo and len(memo) == 1:
            calls = next(iter(memo.values()))[0]

            def bare():
                for fn, args, _e, _h in calls:
                    fn(*args)
            launches = host_per_call(bare)
        kern = kernels_per_call(call)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            call()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        replay = host_per_call(graph.replay)
        # Without the memo: the checks and the by-name workspace lookup of
        # every call; then through the dispatcher.
        memo_key, dispatch = M.ops.memo_key, M.ops.DISPATCH
        M.ops.memo_key = lambda *_a: None
        try:
            unmemo = host_per_call(call)
            M.ops.DISPATCH = True
            disp = host_per_call(call)
        finally:
            M.ops.memo_key, M.ops.DISPATCH = memo_key, dispatch
        shape = f"T={T} K={K} N={N} S={S}"
        beyond = None if launches is None else host - launches
        print(f"{'dcp_topk_merge':16s} {shape:28s} {host:7.1f} us "
              f"{'-' if launches is None else f'{launches:.1f}':>7s} us "
              f"{'-' if beyond is None else f'{beyond:.1f}':>7s} us {kern:7.1f} us "
              f"{replay:9.1f} us")
        print(f"{'':16s} {'':28s} without the memo {unmemo:.1f} us, through the dispatcher "
              f"{disp:.1f} us (workspace by name)")
        rec = {"bench": "torch_host_overhead", "call": "dcp_topk_merge", "T": T, "K": K, "N": N,
               "S": S, "host_us": round(host, 2), "kernels_us": round(kern, 2),
               "replay_host_us": round(replay, 2), "unmemoised_us": round(unmemo, 2),
               "dispatch_us": round(disp, 2), "goal_us": 5}
        if launches is not None:
            rec.update(launches_us=round(launches, 2), beyond_us=round(beyond, 2))
        print("JSON " + json.dumps(rec))


if __name__ == "__main__":
    main()
