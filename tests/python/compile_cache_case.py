"""One process of test_torch_gpu's compile-cache test: creates the drop-in's
workspaces in the order given, compiles a step that merges on two of them
with torch.compile (inductor; TORCHINDUCTOR_CACHE_DIR and
TORCHINDUCTOR_FX_GRAPH_CACHE come from the caller), runs it and prints one
`JSON {...}` line: whether the ids equal the CPU reference, inductor's FX
graph cache and AOTAutograd cache counters, and the workspaces' names.

Usage: compile_cache_case.py ORDER, ORDER "ab" or "ba" ("ba" also makes an
unrelated workspace first, so every process-local handle differs).
"""
import json
import sys

import harness  # noqa: F401  (puts the source tree's package on sys.path)
import torch

import dcptopk
import dcptopk.ops as ops
from dcptopk import merge as M
import refs

DEV = torch.device("cuda", 0)
SHAPES = {"a": (512, 96), "b": (1024, 192)}   # (K, N)
T, S = 24, 8192


def main(order):
    torch.cuda.set_device(DEV)
    if order == "ba":
        dcptopk.default_context(0).local_workspace(
            dcptopk.make_config("packed", topk=256, local_topk=64, world_size=1), 8)
    for w in order:
        K, N = SHAPES[w]
        M.init_dcp_topk_rescue_workspace(T, K, N, progress=False)
    g = torch.Generator().manual_seed(5)
    lg = refs.logits_bf16(T, S, "ties", g)
    re = torch.randint(1, S, (T,), generator=g, dtype=torch.int32)
    lg_g, re_g = lg.to(DEV), re.to(DEV)
    (Ka, Na), (Kb, Nb) = SHAPES["a"], SHAPES["b"]

    def step(lg, re):
        a = torch.empty(T, Ka, dtype=torch.int32, device=lg.device)
        b = torch.empty(T, Kb, dtype=torch.int32, device=lg.device)
        M.dcp_topk_merge(lg, re, a, Na)
        M.dcp_topk_merge(lg, re, b, Nb)
        return a, b

    from torch._dynamo.utils import counters
    got_a, got_b = torch.compile(step, fullgraph=True)(lg_g, re_g)
    torch.cuda.synchronize()
    exact = True
    for (K, N), got in (((Ka, Na), got_a), ((Kb, Nb), got_b)):
        pc = dcptopk.make_config("packed", topk=K, local_topk=N, world_size=1)
        want = ops.select(pc, ops.pack(pc, lg, re).unsqueeze(0), rank=0,
                          workspace=dcptopk.Workspace.host(pc, T), logits=lg, row_ends=re)
        exact = exact and torch.equal(got.cpu(), want)
    print("JSON " + json.dumps({
        "order": order, "exact": exact,
        "fx_hit": counters["inductor"]["fxgraph_cache_hit"],
        "fx_miss": counters["inductor"]["fxgraph_cache_miss"],
        "fx_bypass": counters["inductor"]["fxgraph_cache_bypass"],
        "aot_hit": counters["aot_autograd"]["autograd_cache_hit"],
        "names": [M.get_dcp_topk_rescue_workspace(*SHAPES[w]).key for w in "ab"]}))


if __name__ == "__main__":
    main(sys.argv[1])
