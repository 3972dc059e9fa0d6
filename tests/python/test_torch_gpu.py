"""The torch ops and the drop-in API on a GPU, bit-exact against the library's
CPU reference (the same ops on host tensors) and the torch reference: eager,
under CUDA graph replay and under torch.compile(fullgraph=True); the loopback
world against ref_packed_merge; warmup, strict mode, errors; the host overhead
of one drop-in merge call. Skips (77) without torch or a GPU.
"""
import os
import sys
import time

import harness
from harness import raises

try:
    import torch
except ImportError:
    harness.skip_module("torch is not installed")
if not torch.cuda.is_available():
    harness.skip_module("no CUDA device")

import dcptopk  # noqa: E402
import dcptopk.ops as ops  # noqa: E402
from dcptopk import merge as M  # noqa: E402
import refs  # noqa: E402

DEV = torch.device("cuda", 0)
torch.cuda.set_device(DEV)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def packed_cfg(K=256, N=64, W=1, B=0, emit_ids=1, exact=1):
    return dcptopk.make_config("packed", topk=K, local_topk=N, world_size=W, block_size=B,
                               emit_ids=emit_ids, exact=exact)


def pair_cfg(K=128, W=4, B=0, emit_ids=1):
    return dcptopk.make_config("pair", topk=K, world_size=W, block_size=B, emit_ids=emit_ids)


def cuda(*ts):
    return [t.to(DEV) if t is not None else None for t in ts]


def eq(gpu, cpu, what):
    assert torch.equal(gpu.cpu(), cpu), f"{what}: GPU differs from the CPU reference"


def rows_pair(T, K, req, bt, stride_rows, device):
    ro = torch.full((T, K), -9, dtype=torch.int32, device=device)
    cnt = torch.full((T,), -9, dtype=torch.int32, device=device)
    return dcptopk.RowsOutput(req.to(device), bt.to(device), ro, cnt, stride_rows)


# ---------------------------------------------------------------- eager

def test_packs_match_the_reference():
    N = 64
    cfg = packed_cfg(N=N)
    for fam in refs.FAMILIES:
        g = gen(1)
        T, S = 33, 3000
        lg = refs.logits_bf16(T, S, fam, g)
        re = torch.randint(0, S + 100, (T,), generator=g, dtype=torch.int32)
        for mll in (None, 2000):
            got = ops.pack(cfg, *cuda(lg, re), max_local_len=mll)
            eq(got, ops.pack(cfg, lg, re, max_local_len=mll), f"pack {fam} {mll}")
        ids = torch.randint(-3, S + 9, (T, N), generator=g, dtype=torch.int32)
        for row_ends in (None, re):
            got = ops.pack_indices(cfg, *cuda(lg, ids), row_ends=cuda(row_ends)[0])
            eq(got, ops.pack_indices(cfg, lg, ids, row_ends=row_ends), f"pack_indices {fam}")
    # A small case against the independent torch reference too.
    lg = refs.logits_bf16(4, 200, "ties", gen(2))
    re = torch.full((4,), 200, dtype=torch.int32)
    eq(ops.pack(cfg, *cuda(lg, re)), refs.pack(lg, re, N), "pack vs torch reference")


def test_select_matches_the_reference_with_rows_and_strides():
    K, N, W, B = 256, 64, 4, 16
    cfg = packed_cfg(K=K, N=N, W=W, B=B, exact=0)
    for fam in refs.FAMILIES:
        g = gen(3)
        T, T_alloc, S = 17, 20, 2000
        buf = torch.zeros(W, T_alloc, N + N // 32, dtype=torch.int32)
        for r in range(W):
            buf[r, :T] = ops.pack(cfg, refs.logits_bf16(T, S, fam, g),
                                  torch.full((T,), S, dtype=torch.int32))
        req = torch.randint(-1, 6, (T,), generator=g, dtype=torch.int32)
        bt = torch.randint(0, 1000, (5, 40), generator=g, dtype=torch.int32)
        for rank in range(W):
            ids_pad = torch.full((T, K + 32), -5, dtype=torch.int32)
            rows_c = rows_pair(T, K, req, bt, 64, "cpu")
            ops.select(cfg, buf[:, :T], rank=rank, ids_out=ids_pad[:, :K], rows=rows_c)
            ids_pad_g = torch.full((T, K + 32), -5, dtype=torch.int32, device=DEV)
            rows_g = rows_pair(T, K, req, bt, 64, DEV)
            ops.select(cfg, buf.to(DEV)[:, :T], rank=rank, ids_out=ids_pad_g[:, :K], rows=rows_g)
            eq(ids_pad_g, ids_pad, f"select ids {fam} rank {rank}")
            eq(rows_g.rows_out, rows_c.rows_out, f"select rows {fam} rank {rank}")
            eq(rows_g.counts_out, rows_c.counts_out, f"select counts {fam} rank {rank}")


def test_exact_select_of_one_rank():
    K, N = 256, 64
    cfg = packed_cfg(K=K, N=N)
    ctx = dcptopk.default_context(0)
    ws = ctx.local_workspace(cfg, 64)
    host_ws = dcptopk.Workspace.host(cfg, 64)
    for fam in refs.FAMILIES:
        g = gen(4)
        T, S = 40, 4096
        lg = refs.logits_bf16(T, S, fam, g)
        re = torch.randint(0, S, (T,), generator=g, dtype=torch.int32)
        want = ops.select(cfg, ops.pack(cfg, lg, re).unsqueeze(0), rank=0, workspace=host_ws,
                          logits=lg, row_ends=re)
        lg_g, re_g = cuda(lg, re)
        got = ops.select(cfg, ops.pack(cfg, lg_g, re_g).unsqueeze(0), rank=0, workspace=ws,
                         logits=lg_g, row_ends=re_g)
        ws.check()
        eq(got, want, f"exact select {fam}")


def test_pair_ops_both_layouts_and_float_ids():
    K, W, B = 128, 4, 16
    cfg = pair_cfg(K=K, W=W, B=B)
    for fam in refs.FAMILIES:
        g = gen(5)
        T, T_alloc, S = 19, 24, 700
        buf = torch.zeros(W, T_alloc, K, 2, dtype=torch.int32)
        buf_g = torch.zeros(W, T_alloc, K, 2, dtype=torch.int32, device=DEV)
        starts = torch.randint(0, 30, (T,), generator=g, dtype=torch.int32)
        ends = torch.randint(0, S, (T,), generator=g, dtype=torch.int32)
        for r in range(W):
            lg = refs.logits_bf16(T, S, fam, g).float()
            ids = torch.randint(-1, S, (T, K), generator=g, dtype=torch.int32)
            buf[r, :T] = ops.pair_pack(cfg, lg, ids, rank=r, row_starts=starts, row_ends=ends)
            ops.pair_pack(cfg, *cuda(lg, ids), rank=r, row_starts=cuda(starts)[0],
                          row_ends=cuda(ends)[0], out=buf_g[r, :T])
        eq(buf_g, buf, f"pair_pack {fam}")
        req = torch.randint(0, 3, (T,), generator=g, dtype=torch.int32)
        bt = torch.randint(0, 99, (3, 20), generator=g, dtype=torch.int32)
        row_major = buf[:, :T].permute(1, 0, 2, 3).reshape(T, W * K, 2).contiguous()
        for rank in range(W):
            rows_c = rows_pair(T, K, req, bt, 16, "cpu")
            want = ops.pair_select(cfg, buf[:, :T], rank=rank,
                                   ids_out=torch.empty(T, K, dtype=torch.int32), rows=rows_c)
            for cands in (buf_g[:, :T], row_major.to(DEV)):
                rows_g = rows_pair(T, K, req, bt, 16, DEV)
                got = ops.pair_select(cfg, cands, rank=rank,
                                      ids_out=torch.empty(T, K, dtype=torch.int32, device=DEV),
                                      rows=rows_g)
                eq(got, want, f"pair_select ids {fam}")
                eq(rows_g.rows_out, rows_c.rows_out, f"pair_select rows {fam}")
                eq(rows_g.counts_out, rows_c.counts_out, f"pair_select counts {fam}")
        f = torch.stack((buf_g[:, :T, :, 0].view(torch.float32), buf_g[:, :T, :, 1].float()), -1)
        got = ops.pair_select(pair_cfg(K=K, W=W), f, rank=0, ids_as_float=True)
        eq(got, ops.pair_select(pair_cfg(K=K, W=W), buf[:, :T], rank=0), f"float ids {fam}")


def test_loopback_world_matches_the_oracle():
    for K, N, W in ((256, 64, 4), (512, 96, 8)):
        B = 16
        cfg = packed_cfg(K=K, N=N, W=W, B=B)
        g = gen(6)
        T, S = 24, 3000
        ctx = dcptopk.default_context(0)
        world = ctx.loopback(cfg, 32, S)
        for fam in refs.FAMILIES:
            lg = [refs.logits_bf16(T, S, fam, g) for _ in range(W)]
            for t in range(0, T, 3):  # saturate rank t % W on every third row
                lg[t % W][t] = torch.linspace(50, 40, S).to(torch.bfloat16)
            re = [torch.randint(S // 3, S + 1, (T,), generator=g, dtype=torch.int32)
                  for _ in range(W)]
            req = torch.randint(0, 4, (T,), generator=g, dtype=torch.int32)
            bt = torch.randint(0, 500, (4, 200), generator=g, dtype=torch.int32)
            rows_c = [rows_pair(T, K, req, bt, B, "cpu") for _ in range(W)]
            want, sats, rescued = dcptopk.ref_packed_merge(cfg, lg, re, S, rows=rows_c)
            assert rescued > 0
            rows_g = [rows_pair(T, K, req, bt, B, DEV) for _ in range(W)]
            got = world.merge([x.to(DEV) for x in lg], [x.to(DEV) for x in re], rows=rows_g)
            world.check()
            for r in range(W):
                eq(got[r], want[r], f"loopback ids K={K} W={W} {fam} rank {r}")
                eq(rows_g[r].rows_out, rows_c[r].rows_out, f"loopback rows {fam} rank {r}")
                eq(rows_g[r].counts_out, rows_c[r].counts_out, f"loopback counts {fam} rank {r}")
        world.close()


def test_shape_and_device_errors_on_cuda():
    cfg = pair_cfg(K=128, W=8)
    raises(ValueError, ops.pair_select, cfg,
           torch.zeros(8, 3, 64, 2, dtype=torch.int32, device=DEV), rank=0,
           match=["candidates", "K = 128"])
    raises(ValueError, ops.pair_select, cfg,
           torch.zeros(4, 3, 128, 2, dtype=torch.int32, device=DEV), rank=0,
           match=["candidates", "W = 8"])
    raises(ValueError, ops.pair_select, cfg,
           torch.zeros(8, 3, 128, 2, dtype=torch.int32, device=DEV), rank=0,
           ids_out=torch.zeros(3, 128, dtype=torch.int32), match=["ids_out", "cuda:0"])
    pc = packed_cfg()
    raises(ValueError, ops.pack, pc, torch.zeros(4, 256, dtype=torch.bfloat16, device=DEV),
           torch.zeros(4, dtype=torch.int32), match=["row_ends", "cpu"])
    # A misaligned logits view (16-byte rows needed).
    lg = torch.zeros(4 * 256 + 1, dtype=torch.bfloat16, device=DEV)[1:].view(4, 256)
    raises(ValueError, ops.pack, pc, lg, torch.zeros(4, dtype=torch.int32, device=DEV),
           match=["logits", "aligned"])


# -------------------------------------------------------- graphs, compile

def _capture(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def test_cuda_graph_capture_and_replay():
    # Pair: pack + a stand-in all-gather + in-place select.
    K, W = 128, 4
    cfg = pair_cfg(K=K, W=W)
    T, S = 16, 600
    lg = torch.zeros(T, S, device=DEV)
    ids = torch.zeros(T, K, dtype=torch.int32, device=DEV)
    gathered = torch.zeros(W, T, K, 2, dtype=torch.int32, device=DEV)

    def pair_step():
        for r in range(W):
            ops.pair_pack(cfg, lg, ids, rank=r, out=gathered[r])
        return ops.pair_select(cfg, gathered, rank=1)
    graph, out = _capture(pair_step)
    # Exact packed merge of one rank, with its workspace.
    pc = packed_cfg(K=256, N=64)
    ws = dcptopk.default_context(0).local_workspace(pc, T)
    blg = torch.zeros(T, 4096, dtype=torch.bfloat16, device=DEV)
    bre = torch.zeros(T, dtype=torch.int32, device=DEV)

    def packed_step():
        packed = ops.pack(pc, blg, bre)
        return ops.select(pc, packed.unsqueeze(0), rank=0, workspace=ws, logits=blg,
                          row_ends=bre)
    pgraph, pout = _capture(packed_step)
    host_ws = dcptopk.Workspace.host(pc, T)
    for fam in refs.FAMILIES:
        g = gen(7)
        new_lg = refs.logits_bf16(T, S, fam, g).float()
        new_ids = torch.randint(-1, S, (T, K), generator=g, dtype=torch.int32)
        lg.copy_(new_lg)
        ids.copy_(new_ids)
        graph.replay()
        want_g = torch.stack([ops.pair_pack(cfg, new_lg, new_ids, rank=r) for r in range(W)])
        torch.cuda.synchronize()
        eq(out, ops.pair_select(cfg, want_g, rank=1), f"pair graph replay {fam}")
        new_blg = refs.logits_bf16(T, 4096, fam, g)
        new_bre = torch.randint(0, 4096, (T,), generator=g, dtype=torch.int32)
        blg.copy_(new_blg)
        bre.copy_(new_bre)
        pgraph.replay()
        torch.cuda.synchronize()
        ws.check()
        want = ops.select(pc, ops.pack(pc, new_blg, new_bre).unsqueeze(0), rank=0,
                          workspace=host_ws, logits=new_blg, row_ends=new_bre)
        eq(pout, want, f"packed graph replay {fam}")


def test_torch_compile_fullgraph_on_cuda():
    import torch._dynamo
    K, N = 256, 64
    pc = packed_cfg(K=K, N=N)
    ws = dcptopk.default_context(0).local_workspace(pc, 64)
    cfg = pair_cfg(K=128, W=2)

    def step(blg, bre, lg, ids):
        packed = ops.pack(pc, blg, bre)
        a = ops.select(pc, packed.unsqueeze(0), rank=0, workspace=ws, logits=blg, row_ends=bre)
        c = ops.pair_pack(cfg, lg, ids, rank=0)
        b = ops.pair_select(cfg, torch.stack((c, c)), rank=0)
        return a, b
    g = gen(8)
    args = cuda(refs.logits_bf16(32, 4096, "random", g),
                torch.randint(1, 4096, (32,), generator=g, dtype=torch.int32),
                torch.randn(32, 500, generator=g),
                torch.randint(-1, 500, (32, 128), generator=g, dtype=torch.int32))
    want = step(*args)
    for backend in ("aot_eager", "inductor"):
        torch._dynamo.reset()
        got = torch.compile(step, fullgraph=True, backend=backend)(*args)
        for x, y in zip(got, want):
            assert torch.equal(x, y), backend


def test_torch_compile_reduce_overhead():
    """Compiled and graph-captured together (cudagraph trees)."""
    import torch._dynamo
    pc = packed_cfg(K=256, N=64)
    ws = dcptopk.default_context(0).local_workspace(pc, 64)

    def step(blg, bre):
        packed = ops.pack(pc, blg, bre)
        return ops.select(pc, packed.unsqueeze(0), rank=0, workspace=ws, logits=blg,
                          row_ends=bre)
    g = gen(10)
    args = cuda(refs.logits_bf16(32, 4096, "ties", g),
                torch.randint(1, 4096, (32,), generator=g, dtype=torch.int32))
    want = step(*args).clone()
    torch._dynamo.reset()
    f = torch.compile(step, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):
        got = f(*args)
    assert torch.equal(got, want), "reduce-overhead"


# ------------------------------------------------------------ drop-in API

def test_drop_in_merge_eager_graph_compiled():
    K, N = 512, 96
    M._RESCUE_WORKSPACES.clear()
    M.register_dcp_topk_merge_warmup(K, N, 1)
    stats = M.warmup_dcp_topk_merge(progress=False)
    assert stats and stats[0]["keys"] > 0, stats
    T, S = 48, 8192
    M.init_dcp_topk_rescue_workspace(T, K, N)
    g = gen(9)
    lg = refs.logits_bf16(T, S, "random", g)
    re = torch.randint(0, S, (T,), generator=g, dtype=torch.int32)
    lg_g, re_g = cuda(lg, re)
    ids = torch.empty(T, K, dtype=torch.int32, device=DEV)
    M.dcp_topk_merge(lg_g, re_g, ids, N)
    want = ops.select(packed_cfg(K=K, N=N), ops.pack(packed_cfg(K=K, N=N), lg, re).unsqueeze(0),
                      rank=0, workspace=dcptopk.Workspace.host(packed_cfg(K=K, N=N), T),
                      logits=lg, row_ends=re)
    eq(ids, want, "dcp_topk_merge")
    sets = refs.global_topk_sets([lg[:4]], [re[:4]], K)
    for t in range(4):
        assert sorted(i for i in ids[t].tolist() if i >= 0) == sets[t], t

    def step():
        out = torch.empty(T, K, dtype=torch.int32, device=DEV)
        M.dcp_topk_merge(lg_g, re_g, out, N)
        return out
    graph, out = _capture(step)
    graph.replay()
    torch.cuda.synchronize()
    eq(out, want, "dcp_topk_merge graph replay")
    # Bound as a name of its own: `import torch._dynamo` would make torch a
    # local of this function and break its earlier uses.
    import torch._dynamo as dynamo
    dynamo.reset()
    eq(torch.compile(step, fullgraph=True, backend="aot_eager")(), want, "dcp_topk_merge compiled")
    # Rows.
    B = 64
    bt = torch.randint(0, 10000, (T, S // B), generator=g, dtype=torch.int32)
    req = torch.arange(T, dtype=torch.int32)
    rows_out = torch.empty(T, K, dtype=torch.int32, device=DEV)
    valid = torch.empty(T, dtype=torch.int32, device=DEV)
    M.dcp_topk_merge_rows(logits=lg_g, row_ends=re_g, local_topk=N, topk=K, req_id=req.to(DEV),
                          block_table=bt.to(DEV), block_size=B, stride_rows=B, dcp_rank=0,
                          rows_out=rows_out, valid_out=valid)
    for t in range(T):
        sel = [i for i in want[t].tolist() if i >= 0]
        exp = [int(bt[t, l // B]) * B + l % B for l in sel]
        assert rows_out[t, :int(valid[t])].tolist() == exp, t
    # The contract checker accepts the library's own pack.
    M.assert_packed_merge_contract(M.dcp_topk_pack(lg_g, re_g, N), lg_g, re_g, N)


def test_warmup_progress_and_strict_mode():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        ctx = dcptopk.Context(device=0, cache_path=os.path.join(d, "c.sqlite"), strict=True)
        seen = []
        cfgs = [pair_cfg(K=128, W=4), packed_cfg(K=256, N=64, W=2)]
        st = ctx.warmup(cfgs, progress=lambda k, o, ms: seen.append(k))
        assert len(st) == 2 and len(seen) == sum(s["keys"] for s in st), (st, seen)
        # Sealed: a kernel that warmup did not load is an error, never a compile.
        other = pair_cfg(K=64, W=4)
        e = raises(dcptopk.DcptopkError, ops.pair_select, other,
                   torch.zeros(4, 2, 64, 2, dtype=torch.int32, device=DEV), rank=0, ctx=ctx)
        assert e.name == "DCPTOPK_NOT_WARMED", e.name
        ctx.close()


def _host_merge_ref(K, N, lg, re):
    """The CPU reference of one rank's drop-in merge (ids [T, K])."""
    pc = packed_cfg(K=K, N=N)
    return ops.select(pc, ops.pack(pc, lg, re).unsqueeze(0), rank=0,
                      workspace=dcptopk.Workspace.host(pc, lg.shape[0]), logits=lg, row_ends=re)


def test_workspace_init_warms_so_capture_compiles_nothing():
    """A process that never calls warmup_dcp_topk_merge(): the workspace's
    creation compiles or loads every kernel of its (K, N), with progress,
    and a CUDA graph capture of the merge and of a registered rows variant
    compiles nothing; the replays are exact."""
    K, N, T, S, B = 512, 96, 32, 8192, 64
    M._RESCUE_WORKSPACES.clear()
    M.register_dcp_topk_merge_warmup(K, N, 1, block_size=B, emit_ids=False)
    seen = []
    ws = M.init_dcp_topk_rescue_workspace(T, K, N, progress=lambda *a: seen.append(a))
    assert seen and [a[0] for a in seen] == list(range(1, len(seen) + 1)), seen
    assert seen[-1][1] == len(seen), seen
    assert ws.warmup_stats["keys"] == len(seen), ws.warmup_stats
    assert any("select(" in a[2] and "block_size=64" in a[2] for a in seen), seen
    ctx = dcptopk.default_context(0)
    before = ctx.stats()
    g = gen(31)
    lg = refs.logits_bf16(T, S, "ties", g)
    re = torch.randint(1, S, (T,), generator=g, dtype=torch.int32)
    bt = torch.randint(0, 10000, (T, S // B), generator=g, dtype=torch.int32)
    req = torch.arange(T, dtype=torch.int32)
    lg_g, re_g, bt_g, req_g = cuda(lg, re, bt, req)
    ids = torch.full((T, K), -9, dtype=torch.int32, device=DEV)
    rows_out = torch.full((T, K), -9, dtype=torch.int32, device=DEV)
    valid = torch.full((T,), -9, dtype=torch.int32, device=DEV)
    # Straight into capture: no eager call first, which would load kernels.
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.cuda.graph(graph):
        M.dcp_topk_merge(lg_g, re_g, ids, N)
        M.dcp_topk_merge_rows(logits=lg_g, row_ends=re_g, local_topk=N, topk=K, req_id=req_g,
                              block_table=bt_g, block_size=B, stride_rows=B, dcp_rank=0,
                              rows_out=rows_out, valid_out=valid)
    torch.cuda.current_stream().wait_stream(side)
    after = ctx.stats()
    assert after["compiles"] == before["compiles"], (before, after)
    assert after["modules"] == before["modules"], (before, after)
    assert after["late_compiles"] == 0 and after["late_loads"] == 0, after
    assert M.compiles_after_warmup() == 0
    graph.replay()
    torch.cuda.synchronize()
    want = _host_merge_ref(K, N, lg, re)
    eq(ids, want, "captured dcp_topk_merge")
    for t in range(T):
        exp = [int(bt[t, i // B]) * B + i % B for i in want[t].tolist() if i >= 0]
        assert rows_out[t, :int(valid[t])].tolist() == exp, t
    M._WARMUP_CONFIGS.clear()


def test_compile_after_warmup_is_counted_and_refused_in_capture():
    """After the workspace's warmup, a call that needs a kernel nobody
    registered compiles (eager), moves compiles_after_warmup() and logs a
    warning; inside capture the same miss is an error naming the
    registration that warms it."""
    import logging
    K, N, T, S = 512, 96, 16, 4096
    M._RESCUE_WORKSPACES.clear()
    M._WARMUP_CONFIGS.clear()
    M.init_dcp_topk_rescue_workspace(T, K, N, progress=False)
    assert M.compiles_after_warmup() == 0
    g = gen(32)
    lg = refs.logits_bf16(T, S, "random", g)
    re = torch.randint(1, S, (T,), generator=g, dtype=torch.int32)
    lg_g, re_g = cuda(lg, re)
    ids = torch.empty(T, K, dtype=torch.int32, device=DEV)
    M.dcp_topk_merge(lg_g, re_g, ids, N)
    torch.cuda.synchronize()
    assert M.compiles_after_warmup() == 0, dcptopk.late_kernels()
    lines = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append((record.levelno, record.getMessage()))
    log = logging.getLogger("dcptopk")
    h = Keep()
    log.addHandler(h)

    def rows_call(B):
        bt = torch.zeros((1, S // B + 1), dtype=torch.int32, device=DEV)
        req = torch.zeros(T, dtype=torch.int32, device=DEV)
        ro = torch.empty(T, K, dtype=torch.int32, device=DEV)
        va = torch.empty(T, dtype=torch.int32, device=DEV)
        M.dcp_topk_merge_rows(logits=lg_g, row_ends=re_g, local_topk=N, topk=K, req_id=req,
                              block_table=bt, block_size=B, stride_rows=B, dcp_rank=0,
                              rows_out=ro, valid_out=va)
    try:
        rows_call(128)  # a select variant no one registered: compiled now, late
        torch.cuda.synchronize()
        late = dcptopk.late_kernels()
        assert late["late_compiles"] + late["late_loads"] >= 1, late
        assert M.compiles_after_warmup() == late["late_compiles"] + late["late_loads"]
        if dcptopk.log_routed():
            warns = [m for lv, m in lines if lv == logging.WARNING and "after warmup" in m]
            assert warns and "block_size=128" in warns[0], lines
        moved = M.compiles_after_warmup()
        rows_call(128)  # loaded now: not late again
        assert M.compiles_after_warmup() == moved
        os.environ.pop("DCPTOPK_CAPTURE_COMPILE", None)
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            try:
                with torch.cuda.graph(graph):
                    rows_call(16)
            except dcptopk.DcptopkError as e:
                err = e
            else:
                err = None
        torch.cuda.current_stream().wait_stream(side)
        assert err is not None, "a compile inside capture was not refused"
        assert err.name == "DCPTOPK_NOT_WARMED", err
        for want in (f"register_dcp_topk_merge_warmup({K}, {N}, 1, block_size=16, "
                     "emit_ids=False)", "init_dcp_topk_rescue_workspace",
                     "DCPTOPK_CAPTURE_COMPILE=1", "capturing a CUDA graph"):
            assert want in str(err), (want, str(err))
        assert M.compiles_after_warmup() == moved
    finally:
        log.removeHandler(h)


def test_compiled_drop_in_survives_a_new_process():
    """Process A compiles two drop-in merges with torch.compile (inductor,
    FX graph cache on disk); process B makes its workspaces in the other
    order (and an unrelated one first), loads the cached graph and gets the
    CPU reference's ids: the ops name their workspaces by group, config,
    rank and device, not by process-local handles."""
    import json
    import subprocess
    import tempfile
    case = os.path.join(harness.HERE, "compile_cache_case.py")
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(d, "inductor"),
                   TORCHINDUCTOR_FX_GRAPH_CACHE="1", TORCHINDUCTOR_AUTOGRAD_CACHE="1")
        env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
        out = {}
        for order in ("ab", "ba"):
            r = subprocess.run([sys.executable, case, order], capture_output=True, text=True,
                               env=env, timeout=600)
            print(r.stdout[-2000:])
            assert r.returncode == 0, r.stderr[-4000:]
            line = [x for x in r.stdout.splitlines() if x.startswith("JSON ")][-1]
            out[order] = json.loads(line[5:])
    a, b = out["ab"], out["ba"]
    assert a["exact"] and b["exact"], out
    assert a["names"] == b["names"], out
    assert a["fx_miss"] >= 1 and a["fx_hit"] == 0, a
    assert b["fx_hit"] + b["aot_hit"] >= 1 and b["fx_miss"] == 0, b


def test_drop_in_memo_follows_data_shapes_and_handles():
    """The memoised fast path of the drop-in merge: the second call with the
    same tensors replays the first's launches, so new values in them must
    give new, exact results; a new shape, stream or workspace must not reuse
    a memoised call; bad arguments are never memoised."""
    K, N, T, S = 512, 96, 32, 8192
    ops.memo_clear()
    M.init_dcp_topk_rescue_workspace(T, K, N)
    lg_g = torch.empty(T, S, dtype=torch.bfloat16, device=DEV)
    re_g = torch.empty(T, dtype=torch.int32, device=DEV)
    ids = torch.empty(T, K, dtype=torch.int32, device=DEV)
    host_ws = dcptopk.Workspace.host(packed_cfg(K=K, N=N), T)

    def want(lg, re, rows=T):
        return ops.select(packed_cfg(K=K, N=N), ops.pack(packed_cfg(K=K, N=N), lg[:rows],
                                                         re[:rows]).unsqueeze(0),
                          rank=0, workspace=host_ws, logits=lg[:rows], row_ends=re[:rows])

    for i, fam in enumerate(("random", "ties", "masked", "nan", "random")):
        g = gen(100 + i)
        lg = refs.logits_bf16(T, S, fam, g)
        re = torch.randint(0, S + 1, (T,), generator=g, dtype=torch.int32)
        lg_g.copy_(lg)
        re_g.copy_(re)
        M.dcp_topk_merge(lg_g, re_g, ids, N)
        eq(ids, want(lg, re), f"memoised dcp_topk_merge, call {i} ({fam})")
    assert len(ops._MEMO) == 1, f"{len(ops._MEMO)} memoised calls for one set of tensors"
    # A view of fewer rows is another call.
    half = torch.empty(T // 2, K, dtype=torch.int32, device=DEV)
    M.dcp_topk_merge(lg_g[:T // 2], re_g[:T // 2], half, N)
    eq(half, want(lg, re, T // 2), "dcp_topk_merge on a view of half the rows")
    assert len(ops._MEMO) == 2, len(ops._MEMO)
    # Another stream is another call (the memo keeps a scratch per stream).
    s2 = torch.cuda.Stream()
    with torch.cuda.stream(s2):
        M.dcp_topk_merge(lg_g, re_g, ids, N)
    s2.synchronize()
    eq(ids, want(lg, re), "dcp_topk_merge on a second stream")
    assert len(ops._MEMO) == 3, len(ops._MEMO)
    # A rebuilt workspace retires the memoised calls.
    old_gen = dcptopk._registry.generation
    M._RESCUE_WORKSPACES[(K, N)].close()
    M._RESCUE_WORKSPACES.clear()
    assert dcptopk._registry.generation != old_gen
    raises(RuntimeError, lambda: M.dcp_topk_merge(lg_g, re_g, ids, N), match="no rescue workspace")
    M.init_dcp_topk_rescue_workspace(T, K, N)
    M.dcp_topk_merge(lg_g, re_g, ids, N)
    eq(ids, want(lg, re), "dcp_topk_merge after the workspace was rebuilt")
    # Bad arguments raise on every call.
    bad = torch.empty(T, K, dtype=torch.int64, device=DEV)
    for _ in range(2):
        raises(ValueError, lambda: M.dcp_topk_merge(lg_g, re_g, bad, N), match="topk_indices")
    # The rows variant: values change, the memo follows.
    B = 64
    bt = torch.randint(0, 10000, (T, S // B), generator=gen(7), dtype=torch.int32).to(DEV)
    req = torch.arange(T, dtype=torch.int32, device=DEV)
    rows_out = torch.empty(T, K, dtype=torch.int32, device=DEV)
    valid = torch.empty(T, dtype=torch.int32, device=DEV)
    for i in range(3):
        g = gen(200 + i)
        lg = refs.logits_bf16(T, S, "random", g)
        lg_g.copy_(lg)
        bt.random_(0, 10000)
        M.dcp_topk_merge_rows(logits=lg_g, row_ends=re_g, local_topk=N, topk=K, req_id=req,
                              block_table=bt, block_size=B, stride_rows=B, dcp_rank=0,
                              rows_out=rows_out, valid_out=valid)
        ids_ref = want(lg, re)
        bt_h = bt.cpu()
        for t in range(0, T, 5):
            got = rows_out[t, :int(valid[t])].cpu().tolist()
            exp = [int(bt_h[t, i // B]) * B + i % B for i in ids_ref[t].tolist() if i >= 0]
            assert got == exp, f"dcp_topk_merge_rows call {i} row {t}"


def test_host_overhead_of_one_drop_in_merge():
    """Prints the host time of one dcp_topk_merge call (eager, and the replay
    of a captured one) for docs/BENCHMARKS.md."""
    K, N, T, S = 2048, 384, 64, 65536
    M.init_dcp_topk_rescue_workspace(T, K, N)
    lg = torch.randn(T, S, device=DEV).to(torch.bfloat16)
    re = torch.full((T,), S, dtype=torch.int32, device=DEV)
    ids = torch.empty(T, K, dtype=torch.int32, device=DEV)
    ops.memo_clear()
    for _ in range(3):
        M.dcp_topk_merge(lg, re, ids, N)
    torch.cuda.synchronize()
    n = 200
    # The launches alone: the library calls the memo recorded, made from a
    # bare loop. The drop-in call's own cost is the difference.
    assert len(ops._MEMO) == 1, len(ops._MEMO)
    calls = next(iter(ops._MEMO.values()))[0]
    t0 = time.perf_counter()
    for _ in range(n):
        for fn, args, _e, _h in calls:
            fn(*args)
    bare = (time.perf_counter() - t0) / n
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        M.dcp_topk_merge(lg, re, ids, N)
    host = (time.perf_counter() - t0) / n
    torch.cuda.synchronize()
    dev_total = (time.perf_counter() - t0) / n
    pcfg = packed_cfg(K=K, N=N)
    t0 = time.perf_counter()
    for _ in range(n):
        ops.pack(pcfg, lg, re)
    pack_host = (time.perf_counter() - t0) / n
    torch.cuda.synchronize()
    print(f"HOST dcp_topk_merge T={T} K={K} N={N} S={S}: {host * 1e6:.1f} us host per call "
          f"(its {len(calls)} library calls alone {bare * 1e6:.1f} us, so "
          f"{(host - bare) * 1e6:.1f} us beyond the launches; pack op alone "
          f"{pack_host * 1e6:.1f} us), {dev_total * 1e6:.1f} us per call with the kernels "
          "(back to back)")
    g, _ = _capture(lambda: M.dcp_topk_merge(lg, re, ids, N))
    t0 = time.perf_counter()
    for _ in range(n):
        g.replay()
    replay_host = (time.perf_counter() - t0) / n
    torch.cuda.synchronize()
    print(f"HOST graph replay of one merge: {replay_host * 1e6:.1f} us host per replay")


def test_example_indexer_step_runs():
    import subprocess
    path = os.path.join(harness.HERE, "..", "..", "examples", "python", "indexer_step.py")
    env = dict(os.environ, PYTHONPATH=os.path.join(harness.HERE, "..", "..", "bindings", "python"))
    r = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env,
                       timeout=600)
    print(r.stdout)
    assert r.returncode == 0, r.stderr
    assert "graph replay equals eager: True" in r.stdout, r.stdout
    assert "compiled equals eager: True" in r.stdout, r.stdout


if __name__ == "__main__":
    sys.exit(harness.run(globals()))
