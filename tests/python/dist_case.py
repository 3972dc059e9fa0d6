"""The drop-in merge checked over a torch.distributed group, one worker per
rank (shared by test_dist_gpu.py, one GPU per rank over NCCL, and
test_dist_one_gpu.py, every rank on one GPU over gloo): each rank's
dcp_topk_merge and dcp_topk_merge_rows bit-exact against the oracle
(ref_packed_merge of all ranks' logits, which every rank regenerates from the
seed), saturated rows in every call, over consecutive calls."""
import os
import sys

import harness
import torch
import torch.distributed as dist

K, N, T, S, B, CALLS = 512, 96, 24, 3000, 16, 20
N_PRODUCER = 320


def inputs(W, call):
    import refs
    g = torch.Generator().manual_seed(1000 + call)
    fam = refs.FAMILIES[call % len(refs.FAMILIES)]
    lg = [refs.logits_bf16(T, S, fam, g) for _ in range(W)]
    # Every 4th row: one rank holds the row's top scores, so it saturates.
    for t in range(0, T, 4):
        lg[(t + call) % W][t] = torch.linspace(50, 40, S).to(torch.bfloat16)
    re = [torch.randint(S // 3, S + 1, (T,), generator=g, dtype=torch.int32) for _ in range(W)]
    return lg, re


def bad_arguments(rank, W, dev, M):
    """Calls an engine may get wrong, on every rank before the first step:
    each is refused on this rank before any launch or exchange, so the group
    stays usable (the steps that follow check that)."""
    from harness import raises
    lg, re = inputs(W, 0)
    ids = torch.full((T, K), -7, dtype=torch.int32, device=dev)
    # Host tensors into a GPU group's workspace (once an illegal address on
    # every rank, and a dead context).
    raises(ValueError, M.dcp_topk_merge, lg[rank], re[rank], ids.cpu(), N,
           match=("logits", "cpu", str(dev), f"K={K}", f"N={N}"))
    raises(ValueError, M.dcp_topk_merge, lg[rank].to(dev), re[rank], ids, N,
           match=("row_ends", "cpu", str(dev)))
    raises(ValueError, M.dcp_topk_merge, lg[rank].to(dev), re[rank].to(dev), ids.cpu(), N,
           match=("topk_indices", "cpu", str(dev)))
    assert (ids == -7).all().item(), f"rank {rank}: a refused call wrote its output"
    # A K or N other than the workspace's names the argument and its (K, N).
    raises(ValueError, M.dcp_topk_merge, lg[rank].to(dev), re[rank].to(dev),
           torch.empty(T, K - 32, dtype=torch.int32, device=dev), N,
           match=("topk_indices", f"(K={K}, N={N})"))
    raises(ValueError, M.dcp_topk_merge, lg[rank].to(dev), re[rank].to(dev), ids, N + 32,
           match=("local_topk", f"(K={K}, N={N})"))
    # group=None with W ranks and no DCP group set is not a world of one.
    raises(ValueError, M.init_dcp_topk_rescue_workspace, T, K + 32, N,
           match=("group", "set_dcp_group"))


def reverse_slots(packed, n):
    """A producer of the test's own: packed rows [T, N + N/32] with their N
    slots reversed (word and plane bit), the same rows as a set, so still
    within the contract, in another slot order than the library's pack."""
    T = packed.shape[0]
    words = packed[:, :n].flip(1)
    j = torch.arange(n)
    plane = packed[:, n:].cpu().long() & 0xFFFFFFFF
    bits = ((plane[:, j // 32] >> (j % 32)) & 1).flip(1)
    weights = torch.ones(32, dtype=torch.long) << torch.arange(32)
    planes = (bits.view(T, n // 32, 32) * weights).sum(-1)
    planes = torch.where(planes >= 2**31, planes - 2**32, planes).to(torch.int32)
    return torch.cat([words, planes.to(packed.device)], 1)


def reversed_expectation(ids, rows, counts, sats, rank, W):
    """The oracle's outputs (from the library's own pack order) reordered for
    reverse_slots' rows: outputs come in gathered position order (rank, then
    slot), so in each row every rank's run of ids is reversed, except a
    saturated rank's in a rescued row (its pushed local top K keeps its
    order). rows/counts: this rank's owned rows, which follow its ids."""
    ids, rows = ids.clone(), rows.clone()
    for t in range(ids.shape[0]):
        mask = (int(sats[t]) >> 16) & 0xFFFF
        row = ids[t].tolist()
        out, i = [], 0
        while i < len(row) and row[i] >= 0:
            owner = row[i] % W
            j = i
            while j < len(row) and row[j] >= 0 and row[j] % W == owner:
                j += 1
            seg = row[i:j]
            out += seg if mask >> owner & 1 else seg[::-1]
            i = j
        ids[t, :len(out)] = torch.tensor(out, dtype=torch.int32)
        c = int(counts[t])
        if not mask >> rank & 1 and c:
            rows[t, :c] = rows[t, :c].flip(0)
    return ids, rows


def worker(rank, W, init_file, failures, backend, pg_backend="nccl", device=None, expect=None,
           probe=False, producer=False):
    """One rank. device: its GPU (default: the rank's own); expect: (bootstrap,
    path) the library's group must choose, or None; probe: run bad_arguments
    before the steps; producer: dcp_topk_merge_rows takes packed= rows from
    reverse_slots (contiguous and strided by turns), checked by
    assert_packed_merge_contract first."""
    sys.path.insert(0, harness.HERE)
    # With W * N < K every full rank saturates (its unsent tokens may beat
    # the K-th), so every rescued row keeps the pushed order and reversed
    # slots would change nothing: the producer run sends more a rank.
    n = N_PRODUCER if producer else N
    os.environ["DCPTOPK_DIST_BACKEND"] = backend
    dev_index = rank if device is None else device
    torch.cuda.set_device(dev_index)
    dev = torch.device("cuda", dev_index)
    kw = {"device_id": dev} if pg_backend == "nccl" else {}
    dist.init_process_group(pg_backend, init_method=f"file://{init_file}", world_size=W,
                            rank=rank, **kw)
    import dcptopk
    from dcptopk import _dist
    from dcptopk import merge as M
    try:
        group = dist.group.WORLD
        M.register_dcp_topk_merge_warmup(K, n, W, block_size=B, emit_ids=True)
        M.init_dcp_topk_rescue_workspace(T, K, n, group=group)
        if expect is not None:
            rt = _dist.runtime(group, dev_index)
            path, why = rt.path()
            assert (rt.bootstrap, path) == expect, \
                f"rank {rank}: bootstrap {rt.bootstrap}, path {path} ({why}); expected {expect}"
        if probe:
            bad_arguments(rank, W, dev, M)
        cfg = dcptopk.make_config("packed", topk=K, local_topk=n, world_size=W, block_size=B)
        bt = torch.randint(0, 1000, (T, S // B + 1), generator=torch.Generator().manual_seed(5),
                           dtype=torch.int32)
        req = torch.arange(T, dtype=torch.int32)
        for call in range(CALLS):
            lg, re = inputs(W, call)
            rows_c = [dcptopk.RowsOutput(req, bt, torch.empty(T, K, dtype=torch.int32),
                                         torch.empty(T, dtype=torch.int32), B) for _ in range(W)]
            want, sats, rescued = dcptopk.ref_packed_merge(cfg, lg, re, S, rows=rows_c)
            assert rescued > 0, f"call {call}: no saturated row"
            want_rows = rows_c[rank].rows_out
            want_rows_ids = want[rank]
            packed = None
            if producer:
                packed = reverse_slots(M.dcp_topk_pack(lg[rank].to(dev), re[rank].to(dev), n), n)
                M.assert_packed_merge_contract(packed, lg[rank].to(dev), re[rank].to(dev), n)
                if call % 2:
                    buf = torch.full((T, packed.shape[1] + 8), 0x7F7F0001, dtype=torch.int32,
                                     device=dev)
                    buf[:, :packed.shape[1]] = packed
                    packed = buf[:, :packed.shape[1]]
                want_rows_ids, want_rows = reversed_expectation(
                    want[rank], want_rows, rows_c[rank].counts_out, sats[rank], rank, W)
                assert not torch.equal(want_rows_ids, want[rank]), \
                    f"call {call}: the reversed rows must change the expected order"
            ids = torch.full((T, K), -7, dtype=torch.int32, device=dev)
            M.dcp_topk_merge(lg[rank].to(dev), re[rank].to(dev), ids, n)
            rows_out = torch.full((T, K), -7, dtype=torch.int32, device=dev)
            valid = torch.full((T,), -7, dtype=torch.int32, device=dev)
            ids2 = torch.full((T, K), -7, dtype=torch.int32, device=dev)
            indptr = torch.full((T + 1,), -7, dtype=torch.int32, device=dev)
            M.dcp_topk_merge_rows(logits=lg[rank].to(dev), row_ends=re[rank].to(dev),
                                  local_topk=n, topk=K, req_id=req.to(dev),
                                  block_table=bt.to(dev), block_size=B, stride_rows=B,
                                  dcp_rank=rank, rows_out=rows_out, valid_out=valid,
                                  ids_out=ids2, group=group, packed=packed,
                                  indptr_out=indptr)
            M.get_dcp_topk_rescue_workspace(K, n).check()
            assert torch.equal(ids.cpu(), want[rank]), f"rank {rank} call {call}: ids"
            assert torch.equal(ids2.cpu(), want_rows_ids), f"rank {rank} call {call}: ids (rows)"
            assert torch.equal(rows_out.cpu(), want_rows), \
                f"rank {rank} call {call}: rows"
            assert torch.equal(valid.cpu(), rows_c[rank].counts_out), \
                f"rank {rank} call {call}: counts"
            # The offsets against this test's own prefix sum of the counts.
            own = [0]
            for v in rows_c[rank].counts_out.tolist():
                own.append(own[-1] + v)
            assert indptr.cpu().tolist() == own, f"rank {rank} call {call}: indptr_out"
        # Teardown: no rank frees memory a peer may still reach (CUDA IPC
        # leaves that undefined) before every rank's last step finished.
        torch.cuda.synchronize()
        dist.barrier()
        M.get_dcp_topk_rescue_workspace(K, n).close()
    except Exception as e:
        import traceback
        traceback.print_exc()
        failures.put(f"rank {rank}: {e}")
    finally:
        dist.destroy_process_group()


def run(W, backend, **kw):
    """Spawns W ranks of worker; raises with every rank's failure."""
    import tempfile

    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as d:
        ctx = mp.get_context("spawn")
        failures = ctx.Queue()
        args = (W, os.path.join(d, "init"), failures, backend, kw.get("pg_backend", "nccl"),
                kw.get("device"), kw.get("expect"), kw.get("probe", False),
                kw.get("producer", False))
        mp.start_processes(worker, args=args, nprocs=W, join=True, start_method="spawn")
        errs = []
        while not failures.empty():
            errs.append(failures.get())
        assert not errs, errs
    print(f"{backend}: {W} ranks, {CALLS} calls each, bit-exact")
