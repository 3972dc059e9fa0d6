"""The drop-in merge over a torch.distributed group of W processes, one GPU
each (W = the visible GPUs, at most 8; NCCL refuses two ranks on one GPU):
every rank's dcp_topk_merge and dcp_topk_merge_rows bit-exact against the
oracle (ref_packed_merge of all ranks' logits, which every rank can
regenerate from the seed), saturated rows included, over consecutive calls.

Both exchange backends: torch (all-gather + symmetric memory) and the
library's group runtime (skipped when the library lacks it). Skips (77) with fewer than 2 GPUs or without torch.
"""
import os
import sys
import tempfile

import harness

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    harness.skip_module("torch is not installed")
if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
    harness.skip_module("fewer than 2 CUDA devices (NCCL needs one GPU per rank)")

K, N, T, S, B, CALLS = 512, 96, 24, 3000, 16, 20


def inputs(W, call):
    import refs
    g = torch.Generator().manual_seed(1000 + call)
    fam = refs.FAMILIES[call % len(refs.FAMILIES)]
    lg = [refs.logits_bf16(T, S, fam, g) for _ in range(W)]
    for t in range(0, T, 4):
        lg[(t + call) % W][t] = torch.linspace(50, 40, S).to(torch.bfloat16)
    re = [torch.randint(S // 3, S + 1, (T,), generator=g, dtype=torch.int32) for _ in range(W)]
    return lg, re


def worker(rank, W, init_file, failures, backend):
    sys.path.insert(0, harness.HERE)
    os.environ["DCPTOPK_DIST_BACKEND"] = backend
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method=f"file://{init_file}", world_size=W, rank=rank,
                            device_id=dev)
    import dcptopk
    from dcptopk import merge as M
    try:
        group = dist.group.WORLD
        M.register_dcp_topk_merge_warmup(K, N, W, block_size=B, emit_ids=True)
        M.init_dcp_topk_rescue_workspace(T, K, N, group=group)
        cfg = dcptopk.make_config("packed", topk=K, local_topk=N, world_size=W, block_size=B)
        bt = torch.randint(0, 1000, (T, S // B + 1), generator=torch.Generator().manual_seed(5),
                           dtype=torch.int32)
        req = torch.arange(T, dtype=torch.int32)
        for call in range(CALLS):
            lg, re = inputs(W, call)
            rows_c = [dcptopk.RowsOutput(req, bt, torch.empty(T, K, dtype=torch.int32),
                                         torch.empty(T, dtype=torch.int32), B) for _ in range(W)]
            want, _, rescued = dcptopk.ref_packed_merge(cfg, lg, re, S, rows=rows_c)
            assert rescued > 0
            ids = torch.empty(T, K, dtype=torch.int32, device=dev)
            M.dcp_topk_merge(lg[rank].to(dev), re[rank].to(dev), ids, N)
            rows_out = torch.empty(T, K, dtype=torch.int32, device=dev)
            valid = torch.empty(T, dtype=torch.int32, device=dev)
            ids2 = torch.empty(T, K, dtype=torch.int32, device=dev)
            M.dcp_topk_merge_rows(logits=lg[rank].to(dev), row_ends=re[rank].to(dev),
                                  local_topk=N, topk=K, req_id=req.to(dev),
                                  block_table=bt.to(dev), block_size=B, stride_rows=B,
                                  dcp_rank=rank, rows_out=rows_out, valid_out=valid,
                                  ids_out=ids2, group=group)
            M.get_dcp_topk_rescue_workspace(K, N).check()
            assert torch.equal(ids.cpu(), want[rank]), f"rank {rank} call {call}: ids"
            assert torch.equal(ids2.cpu(), want[rank]), f"rank {rank} call {call}: ids (rows)"
            assert torch.equal(rows_out.cpu(), rows_c[rank].rows_out), f"rank {rank}: rows"
            assert torch.equal(valid.cpu(), rows_c[rank].counts_out), f"rank {rank}: counts"
    except Exception as e:
        import traceback
        traceback.print_exc()
        failures.put(f"rank {rank}: {e}")
    finally:
        dist.destroy_process_group()


def _run(backend):
    W = min(torch.cuda.device_count(), 8)
    with tempfile.TemporaryDirectory() as d:
        ctx = mp.get_context("spawn")
        failures = ctx.Queue()
        mp.start_processes(worker, args=(W, os.path.join(d, "init"), failures, backend),
                           nprocs=W, join=True, start_method="spawn")
        errs = []
        while not failures.empty():
            errs.append(failures.get())
        assert not errs, errs
    print(f"{backend}: {W} ranks, {CALLS} calls each, bit-exact")


def test_drop_in_merge_over_a_torch_group():
    """torch all-gather + symmetric memory for the rescue."""
    _run("torch")


def test_drop_in_merge_over_the_library_group():
    """The library's group runtime (one-call merge), when the library has it."""
    import dcptopk
    if not dcptopk.has_dist_runtime():
        raise harness.Skip("the library lacks the distributed runtime")
    _run("dcptopk")


if __name__ == "__main__":
    sys.exit(harness.run(globals()))
