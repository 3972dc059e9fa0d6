"""The torch ops and the drop-in API on the CPU (no GPU needed): op schemas,
every argument error, the ops on host tensors (the library's CPU reference)
against the independent torch reference (refs.py), and tracing with fake
tensors and torch.compile(fullgraph=True). Skips (77) when torch is missing.
"""
import os
import sys

import harness
from harness import raises

try:
    import torch
except ImportError:
    harness.skip_module("torch is not installed")

import dcptopk  # noqa: E402
import dcptopk.ops as ops  # noqa: E402
from dcptopk import merge as M  # noqa: E402
import refs  # noqa: E402

torch.manual_seed(0)


def gen(seed=1):
    return torch.Generator().manual_seed(seed)


def packed_cfg(K=128, N=32, W=1, B=0, emit_ids=1, exact=1):
    return dcptopk.make_config("packed", topk=K, local_topk=N, world_size=W, block_size=B,
                               emit_ids=emit_ids, exact=exact)


def pair_cfg(K=64, W=4, B=0, emit_ids=1):
    return dcptopk.make_config("pair", topk=K, world_size=W, block_size=B, emit_ids=emit_ids)


# ------------------------------------------------------------------ schemas

def test_op_schemas_declare_mutated_outputs():
    want = {"pack": ["Tensor(a3!) out"],
            "pack_indices": ["Tensor(a4!) out"],
            "select": ["Tensor(a3!)? ids_out", "Tensor(a9!)? rows_out", "Tensor(a10!)? counts_out"],
            "pair_pack": ["Tensor(a6!) out"],
            "pair_select": ["Tensor(a3!)? ids_out", "Tensor(a6!)? rows_out",
                            "Tensor(a7!)? counts_out"],
            "group_merge": ["Tensor(a4!)? ids_out", "Tensor(a7!)? rows_out",
                            "Tensor(a8!)? counts_out", "Tensor(a13!)? indptr_out=None"]}
    for name, muts in want.items():
        schema = str(getattr(torch.ops.dcptopk, name).default._schema)
        assert schema.startswith(f"dcptopk::{name}("), schema
        assert schema.endswith("-> ()"), schema
        for m in muts:
            assert m in schema, (name, m, schema)
        # Exactly the listed outputs are mutated.
        assert schema.count("!") == len(muts), schema


# ---------------------------------------------------------- argument errors

def test_pair_select_shape_errors_name_the_tensor():
    cfg = pair_cfg(K=64, W=8)
    # The cases: K of the buffer != the config's; 4 ranks with W = 8.
    raises(ValueError, ops.pair_select, cfg, torch.zeros(8, 3, 32, 2, dtype=torch.int32), rank=0,
           match=["candidates", "[8, 3, 32, 2]", "K = 64"])
    raises(ValueError, ops.pair_select, cfg, torch.zeros(4, 3, 64, 2, dtype=torch.int32), rank=0,
           match=["candidates", "[4, 3, 64, 2]", "W = 8"])
    raises(ValueError, ops.pair_select, cfg, torch.zeros(3, 4 * 64, 2, dtype=torch.int32), rank=0,
           match=["candidates", "W*K = 512"])
    raises(ValueError, ops.pair_select, cfg, torch.zeros(8, 3, 64, dtype=torch.int32), rank=0,
           match="candidates")
    raises(ValueError, ops.pair_select, cfg, torch.zeros(8, 3, 64, 2, dtype=torch.int64), rank=0,
           match=["candidates", "int64"])
    # Non-contiguous pairs (a transposed buffer).
    c = torch.zeros(8, 64, 3, 2, dtype=torch.int32).transpose(1, 2)
    raises(ValueError, ops.pair_select, cfg, c, rank=0, match=["candidates", "strides"])
    ok = torch.zeros(8, 3, 64, 2, dtype=torch.int32)
    raises(ValueError, ops.pair_select, cfg, ok, rank=None, match=["rank", "no default"])
    raises(ValueError, ops.pair_select, cfg, ok, rank=8, match=["rank", "world_size = 8"])
    raises(ValueError, ops.pair_select, cfg, ok, rank=0,
           ids_out=torch.zeros(3, 32, dtype=torch.int32), match=["ids_out", "[3, 64]"])
    raises(ValueError, ops.pair_select, cfg, ok, rank=0,
           ids_out=torch.zeros(3, 64, dtype=torch.int64), match=["ids_out", "int64"])
    raises(ValueError, ops.pair_select, pair_cfg(K=64, W=8, B=0), ok, rank=0,
           rows=dcptopk.RowsOutput(torch.zeros(3, dtype=torch.int32),
                                   torch.zeros(2, 4, dtype=torch.int32),
                                   torch.zeros(3, 64, dtype=torch.int32),
                                   torch.zeros(3, dtype=torch.int32), 64),
           match=["rows_out", "block_size = 0"])
    raises(ValueError, ops.pair_select, dcptopk.config("deepseek-v3.2-dcp8"), ok, rank=0,
           match=["cfg", "pair"])


def test_float_pairs_are_refused_or_converted_explicitly():
    cfg = pair_cfg(K=64, W=2)
    f = torch.zeros(2, 3, 64, 2)
    raises(ValueError, ops.pair_select, cfg, f, rank=0,
           match=["candidates", "float32", "ids_as_float=True", "1084227584"])
    raises(ValueError, ops.pair_select, cfg, torch.zeros(2, 3, 64, 2, dtype=torch.int32), rank=0,
           ids_as_float=True, match=["candidates", "ids_as_float=True"])


def test_packed_shape_errors_name_the_tensor():
    cfg = packed_cfg(K=128, N=32, W=4)
    words = 33
    ws = dcptopk.Workspace.host(cfg, 16, rank=1)
    g = torch.zeros(4, 5, words, dtype=torch.int32)
    lg = torch.zeros(5, 64, dtype=torch.bfloat16)
    re = torch.zeros(5, dtype=torch.int32)
    kw = dict(rank=1, workspace=ws, logits=lg, row_ends=re)
    raises(ValueError, ops.select, cfg, torch.zeros(8, 5, words, dtype=torch.int32), **kw,
           match=["gathered", "[8, 5, 33]", "W = 4"])
    raises(ValueError, ops.select, cfg, torch.zeros(4, 5, 66, dtype=torch.int32), **kw,
           match=["gathered", "N + N/32 = 33"])
    raises(ValueError, ops.select, cfg, g, **dict(kw, rank=0), match=["rank", "workspace"])
    raises(ValueError, ops.select, cfg, g, **dict(kw, logits=None), match="logits")
    raises(RuntimeError, ops.select, cfg, g, **dict(kw, workspace=None), match="workspace")
    raises(ValueError, ops.select, cfg, g, **dict(kw, workspace=dcptopk.Workspace.host(cfg, 4, 1)),
           match=["rows", "at most 4"])
    raises(ValueError, ops.select, cfg, g,
           **dict(kw, workspace=dcptopk.Workspace.host(packed_cfg(K=256, N=32, W=4), 16, 1)),
           match=["workspace", "K=256"])
    raises(ValueError, ops.select, cfg, g, **dict(kw, logits=lg.float()), match=["logits", "bf16"])
    raises(ValueError, ops.select, cfg, g, **dict(kw, logits=lg[:3]), match=["logits", ">= 5"])
    raises(ValueError, ops.select, cfg, g, **dict(kw, row_ends=re[:2]), match=["row_ends", ">= 5"])
    raises(ValueError, ops.select, cfg, g, **dict(kw, row_ends=re.long()), match="row_ends")
    # Row-major candidates passed as gathered (a transposed buffer): refused.
    raises(ValueError, ops.select, cfg, torch.zeros(5, 4, words, dtype=torch.int32).transpose(0, 1),
           **kw, match=["gathered", "contiguous rows"])
    raises(ValueError, ops.select, cfg, g, **dict(kw, ids_out=torch.zeros(5, 64, dtype=torch.int32)),
           match=["ids_out", "[5, 128]"])
    raises(ValueError, ops.select, packed_cfg(K=128, N=32, W=4, emit_ids=0, B=64), g, **kw,
           ids_out=torch.zeros(5, 128, dtype=torch.int32), match=["ids_out", "emit_ids = 0"])
    raises(ValueError, ops.select, packed_cfg(K=128, N=32, W=4, emit_ids=0, B=64), g, **kw,
           match=["output nothing"])
    # The packs.
    pcfg = packed_cfg(K=128, N=32, W=1)
    raises(ValueError, ops.pack, pcfg, torch.zeros(5, 60, dtype=torch.bfloat16), re,
           match=["logits", "multiple of 8"])
    raises(ValueError, ops.pack, pcfg, lg, re, out=torch.zeros(5, 32, dtype=torch.int32),
           match=["out", "[5, 33]"])
    raises(ValueError, ops.pack, pcfg, lg, re, max_local_len=65, match=["max_local_len", "65"])
    raises(ValueError, ops.pack, pcfg, lg[:, ::2], re, match="logits")
    raises(ValueError, ops.pack_indices, pcfg, lg, torch.zeros(5, 64, dtype=torch.int32),
           match=["local_idx", "local_topk = 32"])
    raises(ValueError, ops.pack, pair_cfg(), lg, re, match=["cfg", "packed"])


def test_pair_pack_errors():
    cfg = pair_cfg(K=64, W=4)
    lg = torch.zeros(3, 100)
    ids = torch.zeros(3, 64, dtype=torch.int32)
    raises(ValueError, ops.pair_pack, cfg, lg, ids, rank=None, match="rank")
    raises(ValueError, ops.pair_pack, cfg, lg, torch.zeros(3, 32, dtype=torch.int32), rank=0,
           match=["local_ids", "K = topk = 64"])
    raises(ValueError, ops.pair_pack, cfg, lg.to(torch.bfloat16), ids, rank=0,
           match=["logits", "float32"])
    raises(ValueError, ops.pair_pack, cfg, lg, ids, rank=0,
           out=torch.zeros(3, 64, 2, dtype=torch.float32), match=["out", "int32"])
    raises(ValueError, ops.pair_pack, cfg, lg, ids, rank=0,
           row_ends=torch.zeros(2, dtype=torch.int32), match=["row_ends", ">= 3"])


# ------------------------------------------- the ops vs the torch reference

def test_pack_and_pack_indices_match_the_torch_reference():
    N = 32
    cfg = packed_cfg(K=128, N=N, W=1)
    for fam in refs.FAMILIES:
        g = gen(hash(fam) % 1000)
        T, S = 6, 200
        lg = refs.logits_bf16(T, S, fam, g)
        re = torch.randint(0, S + 20, (T,), generator=g, dtype=torch.int32)
        re[0] = -3  # a negative end counts as 0
        for mll in (None, 150):
            got = ops.pack(cfg, lg, re, max_local_len=mll)
            assert torch.equal(got, refs.pack(lg, re, N, mll)), (fam, mll)
        ids = torch.randint(-2, S + 5, (T, N), generator=g, dtype=torch.int32)
        ids[1, 3] = 1 << 16  # the bit plane
        for row_ends in (None, re):
            got = ops.pack_indices(cfg, lg, ids, row_ends=row_ends)
            assert torch.equal(got, refs.pack_indices(lg, ids, N, row_ends)), fam


def test_select_matches_the_torch_reference_with_rows():
    K, N, W, B = 128, 32, 4, 16
    cfg = packed_cfg(K=K, N=N, W=W, B=B, exact=0)
    g = gen(3)
    T, S = 5, 160
    lg = [refs.logits_bf16(T, S, "ties", g) for _ in range(W)]
    re = [torch.full((T,), S, dtype=torch.int32) for _ in range(W)]
    gathered = torch.stack([ops.pack(cfg, lg[r], re[r]) for r in range(W)])
    req = torch.tensor([0, 1, 2, -1, 7], dtype=torch.int32)
    bt = torch.randint(0, 50, (3, 6), generator=g, dtype=torch.int32)  # 6 blocks of 16: l < 96
    for rank in range(W):
        rows_out = torch.full((T, K), -9, dtype=torch.int32)
        counts = torch.full((T,), -9, dtype=torch.int32)
        ids = ops.select(cfg, gathered, rank=rank, ids_out=torch.empty(T, K, dtype=torch.int32),
                         rows=dcptopk.RowsOutput(req, bt, rows_out, counts, 64))
        want_ids, want_rows, want_counts = refs.select(gathered, N, K, W, rank,
                                                       (req, bt, B, 64))
        assert torch.equal(ids, want_ids), rank
        assert torch.equal(rows_out, want_rows), rank
        assert torch.equal(counts, want_counts), rank


def test_select_reads_a_rank_strided_buffer_and_writes_padded_outputs():
    K, N, W = 128, 32, 3
    cfg = packed_cfg(K=K, N=N, W=W, exact=0)
    g = gen(4)
    T, T_alloc, S = 4, 9, 96
    buf = torch.zeros(W, T_alloc, 33, dtype=torch.int32)
    for r in range(W):
        buf[r, :T] = ops.pack(cfg, refs.logits_bf16(T, S, "random", g),
                              torch.full((T,), S, dtype=torch.int32))
    ids_buf = torch.full((T, K + 32), -5, dtype=torch.int32)
    ops.select(cfg, buf[:, :T], rank=0, ids_out=ids_buf[:, :K])
    assert torch.equal(ids_buf[:, :K], refs.select(buf[:, :T].contiguous(), N, K, W))
    assert bool((ids_buf[:, K:] == -5).all()), "wrote past the ids view"


def test_exact_merge_of_one_rank_equals_the_global_topk():
    K, N = 128, 32
    cfg = packed_cfg(K=K, N=N, W=1)
    ws = dcptopk.Workspace.host(cfg, 16)
    for fam in refs.FAMILIES:
        g = gen(7)
        T, S = 6, 240
        lg = refs.logits_bf16(T, S, fam, g)
        re = torch.randint(0, S, (T,), generator=g, dtype=torch.int32)
        packed = ops.pack(cfg, lg, re)
        ids = ops.select(cfg, packed.unsqueeze(0), rank=0, workspace=ws, logits=lg, row_ends=re)
        want = refs.global_topk_sets([lg], [re], K)
        for t in range(T):
            assert [i for i in ids[t].tolist() if i >= 0] == want[t], (fam, t)


def test_ref_packed_merge_of_a_world_equals_the_global_topk():
    K, N, W = 128, 32, 4
    cfg = packed_cfg(K=K, N=N, W=W)
    for fam in refs.FAMILIES:
        g = gen(11)
        T, S = 6, 120
        lg = [refs.logits_bf16(T, S, fam, g) for _ in range(W)]
        # Row 0: every top token on rank 2 (saturated: the rescue round runs).
        lg[2][0] = torch.linspace(100, 50, S).to(torch.bfloat16)
        re = [torch.randint(S // 2, S, (T,), generator=g, dtype=torch.int32) for _ in range(W)]
        ids, sats, rescued = dcptopk.ref_packed_merge(cfg, lg, re)
        want = refs.global_topk_scores(lg, re, K)
        assert rescued >= 1 and int(sats[0][0]) >> 16 & (1 << 2), (fam, sats[0])
        for r in range(W):
            assert torch.equal(ids[r], ids[0]), "ranks disagree"
        for t in range(T):
            # Exact: the selected scores are the union's top K (equal scores may
            # resolve to either token).
            assert refs.scores_of(ids[0][t], lg, t) == want[t], (fam, t)


def test_pair_pack_matches_the_torch_reference():
    K, W = 64, 4
    cfg = pair_cfg(K=K, W=W)
    g = gen(5)
    T, S = 5, 120
    lg = torch.randn(T, S, generator=g)
    lg[0, 3] = float("nan")
    ids = torch.randint(-1, S, (T, K), generator=g, dtype=torch.int32)
    ids[0, 0] = 3
    starts = torch.randint(0, 10, (T,), generator=g, dtype=torch.int32)
    ends = torch.randint(0, S, (T,), generator=g, dtype=torch.int32)
    for rank in (0, 3):
        for rs, rend in ((None, None), (starts, ends)):
            got = ops.pair_pack(cfg, lg, ids, rank=rank, row_starts=rs, row_ends=rend)
            assert torch.equal(got, refs.pair_pack(lg, ids, W, rank, rs, rend)), rank


def test_pair_select_both_layouts_rows_and_float_ids():
    K, W, B = 64, 4, 8
    cfg = pair_cfg(K=K, W=W, B=B)
    for fam in refs.FAMILIES:
        g = gen(6)
        T, T_alloc, S = 5, 7, 90
        buf = torch.zeros(W, T_alloc, K, 2, dtype=torch.int32)
        for r in range(W):
            lg = refs.logits_bf16(T, S, fam, g).float()
            ids = torch.randint(-1, S, (T, K), generator=g, dtype=torch.int32)
            buf[r, :T] = ops.pair_pack(cfg, lg, ids, rank=r)
        rank_major = buf[:, :T]                                    # rank stride T_alloc
        row_major = rank_major.permute(1, 0, 2, 3).reshape(T, W * K, 2).contiguous()
        req = torch.tensor([1, 0, 1, 5, 0], dtype=torch.int32)
        bt = torch.randint(0, 9, (2, 4), generator=g, dtype=torch.int32)
        for rank in range(W):
            outs = []
            for cands in (rank_major, row_major):
                ro = torch.empty(T, K, dtype=torch.int32)
                cnt = torch.empty(T, dtype=torch.int32)
                ids = ops.pair_select(cfg, cands, rank=rank,
                                      ids_out=torch.empty(T, K, dtype=torch.int32),
                                      rows=dcptopk.RowsOutput(req, bt, ro, cnt, 32))
                outs.append((ids, ro, cnt))
            want = refs.pair_select(row_major, K, W, rank, (req, bt, B, 32))
            for got in outs:
                for a, b in zip(got, want):
                    assert torch.equal(a, b), (fam, rank)
        # vLLM's encoding: the id as a float value, converted explicitly.
        f = torch.stack((rank_major[..., 0].view(torch.float32), rank_major[..., 1].float()), -1)
        ids_f = ops.pair_select(pair_cfg(K=K, W=W), f, rank=0, ids_as_float=True)
        assert torch.equal(ids_f, refs.pair_select(row_major, K, W)), fam


def test_direct_and_dispatched_calls_agree():
    """An eager call on plain tensors skips the dispatcher; the op itself must
    give the same result."""
    K, W = 64, 2
    cfg = pair_cfg(K=K, W=W)
    g = gen(15)
    lg = torch.randn(4, 100, generator=g)
    ids = torch.randint(-1, 100, (4, K), generator=g, dtype=torch.int32)
    assert ops._direct(lg, ids) and not ops._direct(lg.to("meta"))
    direct = ops.pair_pack(cfg, lg, ids, rank=1)
    via_op = torch.empty_like(direct)
    torch.ops.dcptopk.pair_pack(cfg.as_list(), lg, ids, 1, None, None, via_op, "")
    assert torch.equal(direct, via_op)
    cands = torch.stack((direct, direct))
    a = ops.pair_select(cfg, cands, rank=0)
    b = torch.empty_like(a)
    torch.ops.dcptopk.pair_select(cfg.as_list(), cands, 0, b, None, None, None, None, 0, "")
    assert torch.equal(a, b)


# ----------------------------------------------- tracing: fake and compile

def _pair_step(cfg, W):
    def step(logits, local_ids):
        cands = ops.pair_pack(cfg, logits, local_ids, rank=0)
        gathered = cands.unsqueeze(0).expand(W, -1, -1, -1).contiguous()  # a stand-in all-gather
        return ops.pair_select(cfg, gathered, rank=0)
    return step


def _packed_step(cfg, ws):
    def step(logits, row_ends):
        packed = ops.pack(cfg, logits, row_ends)
        return ops.select(cfg, packed.unsqueeze(0), rank=0, workspace=ws, logits=logits,
                          row_ends=row_ends)
    return step


def test_fake_tensors_trace_the_ops():
    from torch._subclasses.fake_tensor import FakeTensorMode
    cfg = packed_cfg(K=128, N=32, W=1)
    ws = dcptopk.Workspace.host(cfg, 64)
    step = _packed_step(cfg, ws)
    with FakeTensorMode():
        out = step(torch.empty(8, 256, dtype=torch.bfloat16), torch.empty(8, dtype=torch.int32))
        assert tuple(out.shape) == (8, 128) and out.dtype == torch.int32
        # A shape error is a ValueError while tracing too.
        raises(ValueError, step, torch.empty(8, 250, dtype=torch.bfloat16),
               torch.empty(8, dtype=torch.int32), match=["logits", "multiple of 8"])
    meta = step(torch.empty(8, 256, dtype=torch.bfloat16, device="meta"),
                torch.empty(8, dtype=torch.int32, device="meta"))
    assert meta.device.type == "meta" and tuple(meta.shape) == (8, 128)
    raises(ValueError, ops.pair_select, pair_cfg(K=64, W=8),
           torch.empty(4, 3, 64, 2, dtype=torch.int32, device="meta"), rank=0,
           match=["candidates", "W = 8"])


def test_torch_compile_fullgraph_traces_a_step():
    import torch._dynamo
    g = gen(9)
    pcfg = pair_cfg(K=64, W=2)
    pstep = _pair_step(pcfg, 2)
    lg = torch.randn(4, 100, generator=g)
    ids = torch.randint(-1, 100, (4, 64), generator=g, dtype=torch.int32)
    cfg = packed_cfg(K=128, N=32, W=1)
    ws = dcptopk.Workspace.host(cfg, 64)
    kstep = _packed_step(cfg, ws)
    blg = refs.logits_bf16(4, 256, "random", g)
    re = torch.full((4,), 256, dtype=torch.int32)
    for backend in ("eager", "aot_eager"):
        torch._dynamo.reset()
        got = torch.compile(pstep, fullgraph=True, backend=backend)(lg, ids)
        assert torch.equal(got, pstep(lg, ids)), backend
        got = torch.compile(kstep, fullgraph=True, backend=backend)(blg, re)
        assert torch.equal(got, kstep(blg, re)), backend
    # A wrong shape fails the trace with the op's ValueError.
    torch._dynamo.reset()
    bad = torch.compile(pstep, fullgraph=True, backend="aot_eager")
    try:
        bad(lg, ids[:, :32].contiguous())
        raise AssertionError("traced a wrong shape")
    except Exception as e:  # dynamo wraps it; the op's message survives
        assert "local_ids" in str(e) and "K = topk = 64" in str(e), str(e)


def test_compiled_drop_in_merge():
    import torch._dynamo
    torch._dynamo.reset()
    K, N = 128, 32
    M.init_dcp_topk_rescue_workspace(16, K, N, device="cpu")
    g = gen(12)
    lg = refs.logits_bf16(4, 256, "ties", g)
    re = torch.randint(1, 256, (4,), generator=g, dtype=torch.int32)

    def step(logits, row_ends):
        out = torch.empty((logits.shape[0], K), dtype=torch.int32)
        M.dcp_topk_merge(logits, row_ends, out, N)
        return out
    got = torch.compile(step, fullgraph=True, backend="aot_eager")(lg, re)
    assert torch.equal(got, step(lg, re))


# ------------------------------------------------------------ the drop-in API

def test_drop_in_api_on_one_rank():
    K, N = 128, 32
    M._RESCUE_WORKSPACES.clear()
    g = gen(13)
    T, S = 5, 304
    lg = refs.logits_bf16(T, S, "masked", g)
    re = torch.randint(0, S, (T,), generator=g, dtype=torch.int32)
    ids = torch.empty(T, K, dtype=torch.int32)
    raises(RuntimeError, M.dcp_topk_merge, lg, re, ids, N,
           match=["no rescue workspace", "init_dcp_topk_rescue_workspace"])
    ws = M.init_dcp_topk_rescue_workspace(4, K, N, device="cpu")
    assert M.get_dcp_topk_rescue_workspace(K, N) is ws
    raises(ValueError, M.dcp_topk_merge, lg, re, ids, N, match=["rows", "at most 4"])
    ws = M.init_dcp_topk_rescue_workspace(16, K, N, device="cpu")      # grown: a new one
    assert ws.max_rows == 16 and M.get_dcp_topk_rescue_workspace(K, N) is ws
    assert M.init_dcp_topk_rescue_workspace(8, K, N, device="cpu") is ws  # large enough: reused
    M.dcp_topk_merge(lg, re, ids, N)
    want = refs.global_topk_sets([lg], [re], K)
    for t in range(T):
        assert [i for i in ids[t].tolist() if i >= 0] == want[t], t
    # max_local_len bounds every row.
    M.dcp_topk_merge(lg, re, ids, N, max_local_len=100)
    want = refs.global_topk_sets([lg], [re], K, max_local_len=100)
    for t in range(T):
        assert [i for i in ids[t].tolist() if i >= 0] == want[t], t
    # Rows output, with and without given packed rows.
    B = 32
    bt = torch.randint(0, 100, (T, 10), generator=g, dtype=torch.int32)
    req = torch.arange(T, dtype=torch.int32)
    packed = M.dcp_topk_pack(lg, re, N)
    M.assert_packed_merge_contract(packed, lg, re, N)
    for given in (None, packed):
        rows_out = torch.empty(T, K, dtype=torch.int32)
        valid = torch.empty(T, dtype=torch.int32)
        ids2 = torch.empty(T, K, dtype=torch.int32)
        M.dcp_topk_merge_rows(logits=lg, row_ends=re, packed=given, local_topk=N, topk=K,
                              req_id=req, block_table=bt, block_size=B, stride_rows=B,
                              dcp_rank=0, rows_out=rows_out, valid_out=valid, ids_out=ids2)
        M.dcp_topk_merge(lg, re, ids, N)
        assert torch.equal(ids2, ids)
        for t in range(T):
            sel = [i for i in ids[t].tolist() if i >= 0]
            want_rows = [int(bt[t, l // B]) * B + l % B for l in sel if l // B < 10]
            assert rows_out[t, :int(valid[t])].tolist() == want_rows, t
    raises(ValueError, M.dcp_topk_merge_rows, logits=lg, row_ends=re, local_topk=N, topk=K,
           req_id=req, block_table=bt, block_size=B, stride_rows=B, dcp_rank=1,
           rows_out=torch.empty(T, K, dtype=torch.int32), valid_out=torch.empty(T, dtype=torch.int32),
           match="dcp_rank 1")
    raises(ValueError, M.dcp_topk_merge_rows, logits=lg, row_ends=re, local_topk=N, topk=K,
           req_id=req, block_table=bt, block_size=B, stride_rows=B, dcp_rank=0,
           rows_out=torch.empty(T, K - 32, dtype=torch.int32),
           valid_out=torch.empty(T, dtype=torch.int32), match="rows_out must be")
    raises(ValueError, M.dcp_topk_merge_rows, row_ends=re, local_topk=N, topk=K, req_id=req,
           block_table=bt, block_size=B, stride_rows=B, dcp_rank=0, rows_out=rows_out,
           valid_out=valid, match="needs logits=")
    raises(ValueError, M.dcp_topk_select, packed.unsqueeze(0), N, ids, match="rescue state")
    raises(ValueError, M.dcp_topk_pack, lg, re, 48, match=["local_topk", "multiple of 32"])


def test_contract_checker_catches_violations():
    N = 32
    g = gen(14)
    T, S = 4, 128
    lg = refs.logits_bf16(T, S, "random", g)
    re = torch.full((T,), S, dtype=torch.int32)
    packed = M.dcp_topk_pack(lg, re, N)
    M.assert_packed_merge_contract(packed, lg, re, N)
    dup = packed.clone()
    dup[1, 1] = dup[1, 0]
    raises(AssertionError, M.assert_packed_merge_contract, dup, lg, re, N, match="row 1")
    worse = packed.clone()
    worse[2, 0] = 0  # one word missing: count and top-N broken
    raises(AssertionError, M.assert_packed_merge_contract, worse, lg, re, N, match="row 2")
    # Rows that are not multiples of 8 columns are padded for the checker.
    lg2 = refs.logits_bf16(T, 100, "random", g)
    re2 = torch.full((T,), 100, dtype=torch.int32)
    M.assert_packed_merge_contract(M.dcp_topk_pack_indices(
        lg2[:, :96].contiguous(), torch.topk(lg2[:, :96].float(), N).indices.int(),
        torch.empty(T, 33, dtype=torch.int32)), lg2[:, :96], re2, N)


def _store_group_rank(rank, W, init_file, failures, own_gpus=False):
    import torch.distributed as dist
    from dcptopk import _context, _group
    try:
        dist.init_process_group("gloo", init_method=f"file://{init_file}", world_size=W,
                                rank=rank)
        # Every rank "on" one GPU, without a GPU: the same UUID, and a
        # compile-only context (the group needs no device to form).
        class Props:
            uuid = f"GPU-{rank}" if own_gpus else "GPU-one"
        torch.cuda.get_device_properties = lambda d: Props()
        ctx = _context.Context(device=-1, arch="sm_90a")
        got = _group.all_gather_bytes(bytes([rank]) * (rank + 1), dist.group.WORLD)
        assert got == [bytes([r]) * (r + 1) for r in range(W)], got
        if own_gpus:
            # NCCL is absent here: rank 0 cannot make the unique id, and
            # every rank must fail rather than wait for it.
            want = "DCPTOPK_NCCL_ERROR" if rank == 0 else "could not make the NCCL unique id"
            raises(Exception, _group.Group.from_torch, dist.group.WORLD, 0, ctx, match=want)
            # Both failed: only now may a rank tear gloo down (one that
            # leaves while its peer is still in a collective aborts it).
            dist.barrier()
            return
        rt = _group.Group.from_torch(dist.group.WORLD, 0, ctx)
        assert rt.bootstrap == "store" and rt.store_dir, (rt.bootstrap, rt.store_dir)
        assert os.path.isdir(rt.store_dir), rt.store_dir
        path, why = rt.path()
        assert path == "push", (path, why)
        dist.barrier()
    except Exception as e:
        import traceback
        traceback.print_exc()
        failures.put(f"rank {rank}: {e!r}")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_ranks_sharing_a_gpu_get_a_store_only_group():
    """A gloo group of 3 processes that share one GPU: the library's group is
    store-only in rank 0's private folder (named over the torch group, with
    no numpy-backed object collective) and chooses the push path."""
    if not dcptopk.has_dist_runtime():
        raise harness.Skip("the library lacks the distributed runtime")
    _spawn_group_ranks(3, False)


def _spawn_group_ranks(W, own_gpus):
    import tempfile
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as d:
        failures = mp.get_context("spawn").Queue()
        mp.start_processes(_store_group_rank, args=(W, os.path.join(d, "init"), failures,
                                                    own_gpus),
                           nprocs=W, join=True, start_method="spawn")
        errs = []
        while not failures.empty():
            errs.append(failures.get())
        assert not errs, errs


def test_a_failed_unique_id_fails_every_rank():
    """One GPU per rank without NCCL (DCPTOPK_NCCL_LIBRARY names no file):
    rank 0's unique id fails, and the other ranks get a clear error instead
    of waiting for it forever."""
    if not dcptopk.has_dist_runtime():
        raise harness.Skip("the library lacks the distributed runtime")
    old = os.environ.get("DCPTOPK_NCCL_LIBRARY")
    os.environ["DCPTOPK_NCCL_LIBRARY"] = "/nonexistent/libnccl.so.2"
    try:
        _spawn_group_ranks(2, True)
    finally:
        if old is None:
            del os.environ["DCPTOPK_NCCL_LIBRARY"]
        else:
            os.environ["DCPTOPK_NCCL_LIBRARY"] = old


def test_bytes_frames_over_a_group():
    from dcptopk import _group
    for data in (b"", b"x", bytes(range(256)) * 4):
        assert _group._unframe(_group._frame(data, 1024)) == data
    raises(ValueError, _group._frame, b"x" * 1025, 1024, match="1025 bytes")


def test_warmup_registry():
    M._WARMUP_CONFIGS.clear()
    M.register_dcp_topk_merge_warmup(2048, 384, 8)
    M.register_dcp_topk_merge_warmup(2048, 384, 8)
    M.register_dcp_topk_merge_warmup(2048, 384, 8, emit_ids=False, block_size=64)
    assert len(M._WARMUP_CONFIGS) == 2
    raises(ValueError, M.register_dcp_topk_merge_warmup, 2048, 100, 8, match="local_topk")
    raises(ValueError, M.register_dcp_topk_merge_warmup, 2048, 384, 17, match="world_size")
    M._WARMUP_CONFIGS.clear()


def test_arithmetic_matches_the_library():
    for k, n in ((2048, 384), (1024, 192), (512, 96), (2048, 1536)):
        assert M.packed_row_words(n) == dcptopk.packed_row_words(n)
        assert M.rescue_slots(k, n) == dcptopk.rescue_slots(k, n)


# ------------------------------------------- the boundary of the drop-in (#32)

class _FakeDist:
    """torch.distributed as an engine's process sees it: initialised, with
    `world` ranks in the default group and the sizes of the groups given."""

    def __init__(self, world, sizes=()):
        self.world, self.sizes = world, dict(sizes)
        self.saved = {}

    def __enter__(self):
        import torch.distributed as dist
        for n in ("is_available", "is_initialized", "get_world_size", "get_rank"):
            self.saved[n] = getattr(dist, n, None)
        dist.is_available = lambda: True
        dist.is_initialized = lambda: True
        dist.get_world_size = lambda group=None: self.world if group is None \
            else self.sizes[id(group)]
        dist.get_rank = lambda group=None: 0
        M._RESCUE_WORKSPACES.clear()
        M.set_dcp_group(None)
        return self

    def __exit__(self, *exc):
        import torch.distributed as dist
        for n, f in self.saved.items():
            if f is None:
                delattr(dist, n)
            else:
                setattr(dist, n, f)
        M._RESCUE_WORKSPACES.clear()
        M.set_dcp_group(None)


class _FakeVllm:
    """vllm.distributed.parallel_state in sys.modules: get_dcp_group() returns
    `coordinator`, or raises as vLLM does when the group is not initialised
    (coordinator None); broken=True makes the import itself fail."""

    NAMES = ("vllm", "vllm.distributed", "vllm.distributed.parallel_state")

    def __init__(self, coordinator=None, broken=False):
        self.coordinator, self.broken = coordinator, broken

    def __enter__(self):
        import types
        self.saved = {n: sys.modules.get(n) for n in self.NAMES}
        top, d = types.ModuleType("vllm"), types.ModuleType("vllm.distributed")
        ps = types.ModuleType("vllm.distributed.parallel_state")
        ps._DCP = self.coordinator

        def get_dcp_group():
            assert ps._DCP is not None, "decode context parallel group is not initialized"
            return ps._DCP
        ps.get_dcp_group = get_dcp_group
        top.distributed, d.parallel_state = d, ps
        sys.modules["vllm"], sys.modules["vllm.distributed"] = top, d
        # None in sys.modules makes `import` raise ImportError.
        sys.modules["vllm.distributed.parallel_state"] = None if self.broken else ps
        return self

    def __exit__(self, *exc):
        for n, m in self.saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m


def test_group_none_under_torch_distributed_is_the_dcp_group():
    K, N = 128, 32
    # Two ranks and no DCP group known: an error naming the fix, never a
    # world of one (which would return this rank's local top K).
    with _FakeDist(2):
        e = raises(ValueError, M.init_dcp_topk_rescue_workspace, 8, K, N, device="cpu",
                   match=("group", "2 ranks", "set_dcp_group", "get_dcp_group"))
        assert M.get_dcp_topk_rescue_workspace(K, N) is None, e
        # vLLM imported but its DCP group not initialised, or its
        # parallel_state failing to import: the same error, no crash.
        for fake in (_FakeVllm(None), _FakeVllm(object(), broken=True)):
            with fake:
                raises(ValueError, M.init_dcp_topk_rescue_workspace, 8, K, N, device="cpu",
                       match="set_dcp_group")
    # A group of one rank set as the DCP group: group=None is that group.
    one = object()
    with _FakeDist(2, {id(one): 1}):
        M.set_dcp_group(one)
        assert M.get_dcp_group() is one
        ws = M.init_dcp_topk_rescue_workspace(8, K, N, device="cpu")
        assert ws.device_group is one and ws.world_size == 1
        M.set_dcp_group(None)
        assert M.get_dcp_group() is None
        raises(TypeError, M.set_dcp_group, 3, match="group")
    # vLLM's initialised DCP group (a GroupCoordinator: .device_group).
    pg = object()

    class Coordinator:
        device_group = pg
    with _FakeDist(2, {id(pg): 1}), _FakeVllm(Coordinator()):
        ws = M.init_dcp_topk_rescue_workspace(8, K, N, device="cpu")
        assert ws.device_group is pg
    # The set group wins over vLLM's.
    with _FakeDist(2, {id(pg): 1, id(one): 1}), _FakeVllm(Coordinator()):
        M.set_dcp_group(one)
        assert M.init_dcp_topk_rescue_workspace(8, K, N, device="cpu").device_group is one
    # torch.distributed initialised with one rank: a world of one, as without it.
    with _FakeDist(1):
        ws = M.init_dcp_topk_rescue_workspace(8, K, N, device="cpu")
        assert ws.world_size == 1 and ws.device_group is None


def _host_ws_claiming(K, N, device):
    """A registered rescue workspace that says it lives on `device` (a host
    one underneath: no kernel can run, so nothing may get that far)."""
    M._RESCUE_WORKSPACES.clear()
    ws = M.init_dcp_topk_rescue_workspace(8, K, N, device="cpu")
    ws.device = torch.device(device)
    return ws


def test_tensors_off_the_workspace_device_are_refused():
    K, N, T, S = 128, 32, 3, 304
    g = gen(21)
    lg = refs.logits_bf16(T, S, "masked", g)
    re = torch.randint(0, S, (T,), generator=g, dtype=torch.int32)
    ids = torch.full((T, K), -7, dtype=torch.int32)
    _host_ws_claiming(K, N, "cuda:0")
    try:
        raises(ValueError, M.dcp_topk_merge, lg, re, ids, N,
               match=("logits", "cpu", "cuda:0", f"K={K}", f"N={N}"))
        assert (ids == -7).all(), "a refused call wrote its output"
        bt = torch.zeros((T, 4), dtype=torch.int32)
        req = torch.arange(T, dtype=torch.int32)
        raises(ValueError, M.dcp_topk_merge_rows, logits=lg, row_ends=re, local_topk=N,
               topk=K, req_id=req, block_table=bt, block_size=32, stride_rows=32, dcp_rank=0,
               rows_out=torch.empty(T, K, dtype=torch.int32),
               valid_out=torch.empty(T, dtype=torch.int32), match=("cpu", "cuda:0"))
        packed = M.dcp_topk_pack(lg, re, N)
        ws = M.get_dcp_topk_rescue_workspace(K, N)
        raises(ValueError, M.dcp_topk_select, packed.unsqueeze(0), N, ids,
               exact=M.ExactArgs(ws, lg, re), match=("gathered", "cpu", "cuda:0"))
    finally:
        M._RESCUE_WORKSPACES.clear()
    # The ops check the workspace's device too (fake and real alike).
    cfg = packed_cfg(K, N, 1)
    info = (K, N, 1, 0, 8, "cuda:0")
    gathered = torch.zeros((1, T, N + N // 32), dtype=torch.int32)
    raises(ValueError, dcptopk._checks.plan_select, cfg, gathered, 0, ids, lg, re, None, info,
           match=("gathered", "cpu", "cuda:0"))
    raises(ValueError, dcptopk._checks.plan_group_merge, cfg, lg, re, None, ids, None, info,
           match=("logits", "cpu", "cuda:0"))


def test_a_topk_or_local_topk_off_the_workspace_is_named():
    K, N, T, S = 128, 32, 3, 304
    g = gen(22)
    lg = refs.logits_bf16(T, S, "masked", g)
    re = torch.randint(0, S, (T,), generator=g, dtype=torch.int32)
    M._RESCUE_WORKSPACES.clear()
    try:
        M.init_dcp_topk_rescue_workspace(8, K, N, device="cpu")
        # topk_indices of [T, K - 32]: the argument, what it got, the workspace's (K, N).
        e = raises(ValueError, M.dcp_topk_merge, lg, re,
                   torch.empty(T, K - 32, dtype=torch.int32), N,
                   match=("topk_indices", f"[{T}, {K - 32}]", f"(K={K}, N={N})"))
        assert "has no rescue workspace" not in str(e), e
        e = raises(ValueError, M.dcp_topk_merge, lg, re, torch.empty(T, K, dtype=torch.int32),
                   N + 32, match=("local_topk", f"{N + 32}", f"(K={K}, N={N})"))
        assert "has no rescue workspace" not in str(e), e
        raises(ValueError, M.dcp_topk_merge_rows, logits=lg, row_ends=re, local_topk=N,
               topk=K + 32, req_id=torch.arange(T, dtype=torch.int32),
               block_table=torch.zeros((T, 4), dtype=torch.int32), block_size=32,
               stride_rows=32, dcp_rank=0, rows_out=torch.empty(T, K + 32, dtype=torch.int32),
               valid_out=torch.empty(T, dtype=torch.int32),
               match=("topk", f"K={K + 32}", f"(K={K}, N={N})"))
    finally:
        M._RESCUE_WORKSPACES.clear()
    # With no workspace at all the message still says how to make one.
    raises(RuntimeError, M.dcp_topk_merge, lg, re, torch.empty(T, K, dtype=torch.int32), N,
           match="init_dcp_topk_rescue_workspace")


def test_ops_name_their_workspace_and_an_unknown_name_is_clear():
    """The ops take a workspace and a context by name (str), resolved in this
    process at run time: the workspace's name selects it, a name no live
    workspace has is a ValueError naming it, also through the dispatcher."""
    for op in ("pack", "pack_indices", "select", "pair_pack", "pair_select"):
        assert "str ctx" in str(getattr(torch.ops.dcptopk, op).default._schema), op
    assert "str workspace" in str(torch.ops.dcptopk.select.default._schema)
    assert "str workspace" in str(torch.ops.dcptopk.group_merge.default._schema)
    K, N, T, S = 128, 32, 4, 304
    cfg = packed_cfg(K, N, 1)
    g = gen(41)
    lg = refs.logits_bf16(T, S, "ties", g)
    re = torch.randint(1, S, (T,), generator=g, dtype=torch.int32)
    ws = dcptopk.Workspace.host(cfg, T)
    gathered = ops.pack(cfg, lg, re).unsqueeze(0)
    want = ops.select(cfg, gathered, rank=0, workspace=ws, logits=lg, row_ends=re)
    got = torch.empty_like(want)
    args = [cfg.as_list(), gathered, 0, got, lg, re, None, None, None, None, None, 0]
    torch.ops.dcptopk.select(*args, ws.key, "")
    assert torch.equal(got, want)
    other = "group[0,1]/K=128,N=32,W=1,rank=0/cuda:0"
    raises(ValueError, torch.ops.dcptopk.select, *args, other, "",
           match=[repr(other), "no live Workspace", repr(ws.key)])
    raises(ValueError, torch.ops.dcptopk.pack, cfg.as_list(), lg, re,
           torch.empty(T, N + 1, dtype=torch.int32), None, "no-such-context",
           match=["'no-such-context'", "no live Context"])
    ws.close()
    raises(ValueError, ops.select, cfg, gathered, rank=0, workspace=ws, logits=lg, row_ends=re,
           match="no live Workspace")


def test_op_ints_are_range_checked():
    cfg = packed_cfg(128, 32, 2)
    T = 2
    gathered = torch.zeros((2, T, 33), dtype=torch.int32)
    ids = torch.empty(T, 128, dtype=torch.int32)
    raises(ValueError, ops.select, cfg, gathered, rank=2 ** 32, ids_out=ids, match="rank")
    raises(TypeError, ops.select, cfg, gathered, rank=1.0, ids_out=ids, match="rank")
    raises(TypeError, ops.select, cfg, gathered, rank=True, ids_out=ids, match="rank")
    raises(ValueError, ops.select, list(cfg.as_list()[:1]) + [2 ** 32 + 128] +
           cfg.as_list()[2:], gathered, rank=0, ids_out=ids, match="topk")


if __name__ == "__main__":
    sys.exit(harness.run(globals()))
