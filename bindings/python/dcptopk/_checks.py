"""Tensor checks against a merge config, shared by the real and the fake (meta)
implementations of every op, so that a shape error is a ValueError naming the
tensor, what it got and what was expected: eagerly, and while torch.compile
traces.

Each plan_* function validates its call and returns the integers the C call
needs (rows, strides); it reads only dtype, shape, strides and device, and the
data pointer only of real tensors (for alignment), so it runs on fake tensors.
"""

class ArgTypeError(TypeError, ValueError):
    """An argument of the wrong type (a float, a bool, a str for an int).
    Both a TypeError and a ValueError: the binding's argument errors are
    ValueErrors, and Python's convention for a wrong type is TypeError."""


MAX_LOCAL_LEN = 1 << 17      # DCPTOPK_LOCAL_INDEX_BITS
MAX_ROWS = (1 << 31) - 1
PACKED, PAIR = 0, 1


def packed_row_words(n):
    """int32 words of a packed row of n candidates: n + n/32."""
    return n + n // 32


def rescue_slots(k, n):
    """Pushed local top-K lists a rank receives per row: (K - 1) // N."""
    return (k - 1) // n


def _desc(t):
    return (f"{str(t.dtype).replace('torch.', '')} {list(t.shape)} strides {list(t.stride())} "
            f"on {t.device}")


def fail(name, t, expected):
    got = _desc(t) if hasattr(t, "dtype") else f"{type(t).__name__} {t!r}"
    raise ValueError(f"{name}: got {got}; expected {expected}")


_Tensor = None


def is_real(t):
    """A tensor with real storage (neither fake nor meta): its pointer is valid."""
    global _Tensor
    if _Tensor is None:
        import torch
        _Tensor = torch.Tensor
    if type(t) is _Tensor:  # the common eager case, cheaply
        return t.device.type != "meta"
    if t.device.type == "meta":
        return False
    from torch._subclasses.fake_tensor import is_fake
    return not is_fake(t)


def tensor(t, name, dtype, dims, expected, device=None, optional=False):
    """t is a tensor of `dtype` with len(dims) dimensions; dims entries: an int
    (exact size), None (any) or (">=", n). `expected` is the phrase the error
    shows. Returns t (None when optional and absent)."""
    import torch
    if t is None:
        if optional:
            return None
        raise ValueError(f"{name}: got None; expected {expected}")
    if not isinstance(t, torch.Tensor):
        fail(name, t, expected)
    if t.dtype != dtype or t.dim() != len(dims):
        fail(name, t, expected)
    for got, want in zip(t.shape, dims):
        if want is None:
            continue
        if isinstance(want, tuple):
            if got < want[1]:
                fail(name, t, expected)
        elif got != want:
            fail(name, t, expected)
    if device is not None and t.device != device:
        raise ValueError(f"{name}: got a tensor on {t.device}; expected it on {device} "
                         "(every tensor of a call on one device)")
    return t


def on_device(t, name, ws_dev, k, n):
    """t on the workspace's device (the call's other tensors are checked
    against t's): a host tensor must never reach a kernel."""
    if t.device.type != "meta" and str(t.device) != ws_dev:   # meta: nothing launches
        raise ValueError(f"{name}: got a tensor on {t.device}; the rescue workspace (K={k}, "
                         f"N={n}) is on {ws_dev}: every tensor of the call must be there")


def aligned(t, name, align):
    if t is not None and is_real(t) and t.numel() > 0 and t.data_ptr() % align:
        raise ValueError(f"{name}: data pointer {t.data_ptr():#x} is not {align}-byte aligned "
                         f"(storage offset {t.storage_offset()}); expected {align}-byte alignment")


def covers(t, name, rows, row_stride):
    """A real tensor whose rows are read `row_stride` elements apart must own
    the whole span (a row-padded view cut from the end of a buffer does not)."""
    if t is None or not is_real(t) or rows == 0:
        return
    need = (t.storage_offset() + rows * row_stride) * t.element_size()
    if need > t.untyped_storage().nbytes():
        raise ValueError(f"{name}: {rows} rows {row_stride} elements apart need {need} bytes of "
                         f"storage, the tensor's storage has {t.untyped_storage().nbytes()}")


def integer(v, name, lo, hi, what=None):
    """v as an int in lo..hi; a float or a bool is refused (ArgTypeError),
    never rounded or read as 0 / 1."""
    import operator
    if isinstance(v, (bool, float)):
        raise ArgTypeError(f"{name}: got {type(v).__name__} {v!r}; expected an int")
    try:
        v = operator.index(v)
    except TypeError:
        raise ArgTypeError(f"{name}: got {type(v).__name__} {v!r}; expected an int") from None
    if v < lo or v > hi:
        raise ValueError(f"{name}: got {v}; expected {what or f'an int in {lo}..{hi}'}")
    return v


def config_kind(cfg, kind, call):
    if cfg.kind != kind:
        want = "packed (kind 0)" if kind == PACKED else "pair (kind 1)"
        raise ValueError(f"cfg: kind = {cfg.kind}; {call} needs a {want} config")


def rank(r, cfg):
    if r is None:
        raise ValueError("rank: got None; expected this rank's index in "
                         f"[0, world_size = {cfg.world_size}) (there is no default)")
    return integer(r, "rank", 0, cfg.world_size - 1,
                   f"an int in [0, world_size = {cfg.world_size})")


def _rows_stride(t, name, width, expected):
    """2-D t with contiguous columns and a row stride >= width: the stride."""
    if t.stride(1) != 1 and t.shape[1] > 1:
        fail(name, t, expected + " with contiguous columns (stride(1) == 1)")
    s = t.stride(0)
    if t.shape[0] > 1 and s < width:
        fail(name, t, expected + f" with a row stride >= {width}")
    return max(s, width) if t.shape[0] > 1 else width


def contiguous_1d(t, name, expected):
    if t is not None and t.shape[0] > 1 and t.stride(0) != 1:
        fail(name, t, expected + " (contiguous)")


def ids_out(cfg, t, rows, dev):
    """ids_out int32 [T, K] with a row stride >= K (a padded buffer's view is fine)."""
    import torch
    K = cfg.topk
    exp = f"int32 [{rows}, {K}] (T rows, K = topk = {K} ids)"
    if tensor(t, "ids_out", torch.int32, (rows, K), exp, dev, optional=True) is None:
        return 0
    if not cfg.emit_ids:
        raise ValueError("ids_out: given, but the config has emit_ids = 0; pass ids_out=None "
                         "or a config with emit_ids = 1")
    aligned(t, "ids_out", 4)
    return _rows_stride(t, "ids_out", K, exp)


def rows_map(cfg, rows, dev, req_id, block_table, rows_out, counts_out, stride_rows):
    """The physical-rows output; returns a dict of the RowsMap fields (pointers
    excluded), or None without rows_out."""
    import torch
    if rows_out is None:
        for n, v in (("counts_out", counts_out), ("req_id", req_id), ("block_table", block_table)):
            if v is not None:
                raise ValueError(f"{n}: given without rows_out; the physical rows output needs "
                                 "rows_out, counts_out, req_id and block_table together")
        return None
    K = cfg.topk
    if cfg.block_size <= 0:
        raise ValueError(f"rows_out: given, but the config has block_size = {cfg.block_size}; "
                         "physical rows need a config with block_size > 0")
    exp = f"int32 [{rows}, >= {K}] (T rows, at least K = topk = {K} columns)"
    tensor(rows_out, "rows_out", torch.int32, (rows, (">=", K)), exp, dev)
    rs = _rows_stride(rows_out, "rows_out", K, exp)
    tensor(counts_out, "counts_out", torch.int32, (rows,), f"int32 [{rows}] (one count per row)",
           dev)
    contiguous_1d(counts_out, "counts_out", f"int32 [{rows}]")
    tensor(req_id, "req_id", torch.int32, ((">=", rows),),
           f"int32 [>= {rows}] (a request per row)", dev)
    contiguous_1d(req_id, "req_id", f"int32 [>= {rows}]")
    exp_bt = "int32 [num_reqs, max_blocks] with contiguous columns"
    tensor(block_table, "block_table", torch.int32, (None, None), exp_bt, dev)
    if block_table.shape[1] > 1 and block_table.stride(1) != 1:
        fail("block_table", block_table, exp_bt)
    if block_table.shape[0] >= (1 << 31) or block_table.shape[1] >= (1 << 31):
        fail("block_table", block_table, "fewer than 2^31 requests and blocks")
    bt_stride = block_table.stride(0) if block_table.shape[0] > 1 else block_table.shape[1]
    integer(stride_rows, "stride_rows", 0, (1 << 31) - 1,
            "the physical rows per block-table entry, an int in 0..2^31-1")
    for n, t in (("rows_out", rows_out), ("counts_out", counts_out), ("req_id", req_id),
                 ("block_table", block_table)):
        aligned(t, n, 4)
    return dict(block_table_stride=max(bt_stride, block_table.shape[1]),
                block_table_cols=block_table.shape[1], num_reqs=block_table.shape[0],
                stride_rows=stride_rows, rows_out_stride=rs)


def bf16_logits(logits, rows, dev, max_local_len, name="logits"):
    """bf16 logits [>= T, S], 16-byte rows; returns (row stride, max_local_len)."""
    import torch
    exp = (f"bf16 [>= {rows}, S] with contiguous columns and a row stride that is a multiple of "
           "8 elements (16-byte rows)")
    tensor(logits, name, torch.bfloat16, ((">=", rows), None), exp, dev)
    S = logits.shape[1]
    if S > 1 and logits.stride(1) != 1:
        fail(name, logits, exp)
    if logits.shape[0] > 1:
        stride = logits.stride(0)
        if stride % 8:
            fail(name, logits, exp + " (pad the rows to a multiple of 8 columns and pass a view)")
    else:
        # One row: the stride only has to satisfy the library's rule.
        stride = max(8, (S + 7) // 8 * 8)
    if max_local_len is None:
        max_local_len = min(S, MAX_LOCAL_LEN)
    integer(max_local_len, "max_local_len", 0, min(S, MAX_LOCAL_LEN),
            f"an int in 0..min(S = {S}, 2^17) (the columns considered)")
    aligned(logits, name, 16)
    return stride, max_local_len


def row_ends(t, rows, dev, name="row_ends", optional=False):
    import torch
    exp = f"int32 [>= {rows}] (one end per row), contiguous"
    if tensor(t, name, torch.int32, ((">=", rows),), exp, dev, optional) is None:
        return
    contiguous_1d(t, name, exp)
    aligned(t, name, 4)


def plan_pack(cfg, logits, rows_ends_t, out, max_local_len, local_ids=None, indices=False):
    import torch
    config_kind(cfg, PACKED, "pack_indices" if indices else "pack")
    exp_l = "a bf16 [T, S] tensor"
    tensor(logits, "logits", torch.bfloat16, (None, None), exp_l)
    dev = logits.device
    T = logits.shape[0]
    if T > MAX_ROWS:
        fail("logits", logits, f"at most {MAX_ROWS} rows")
    stride, mll = bf16_logits(logits, T, dev, max_local_len)
    row_ends(rows_ends_t, T, dev)
    N = cfg.local_topk
    words = packed_row_words(N)
    exp_o = (f"int32 [{T}, {words}] (T rows of N + N/32 = {words} words, N = local_topk = {N}), "
             "contiguous")
    tensor(out, "out", torch.int32, (T, words), exp_o, dev)
    if T > 1 and (out.stride(0) != words or out.stride(1) != 1):
        fail("out", out, exp_o)
    aligned(out, "out", 4)
    plan = dict(rows=T, logits_stride=stride, max_local_len=mll, local_ids_stride=0)
    if indices:
        exp_i = f"int32 [{T}, {N}] (T rows of N = local_topk = {N} local ids)"
        tensor(local_ids, "local_idx", torch.int32, (T, N), exp_i, dev)
        plan["local_ids_stride"] = _rows_stride(local_ids, "local_idx", N, exp_i)
        aligned(local_ids, "local_idx", 4)
    elif local_ids is not None:
        raise ValueError("local_ids: given to the fused pack; use pack_indices to pack given ids")
    return plan


def plan_select(cfg, gathered, rank_, ids, logits, row_ends_t, max_local_len, ws_info,
                req_id=None, block_table=None, rows_out=None, counts_out=None, stride_rows=0):
    """ws_info: None or (topk, local_topk, world_size, rank, max_rows, device) of
    the workspace (device: "cuda:<i>", or "cpu" for a host workspace)."""
    import torch
    config_kind(cfg, PACKED, "select")
    N, W = cfg.local_topk, cfg.world_size
    words = packed_row_words(N)
    exp = (f"int32 [W = {W}, T, N + N/32 = {words}] (the all-gathered packed rows, rank-major; "
           "a [W, T_alloc, words][:, :T] view is fine)")
    tensor(gathered, "gathered", torch.int32, (W, None, words), exp)
    dev = gathered.device
    T = gathered.shape[1]
    if T > MAX_ROWS:
        fail("gathered", gathered, exp)
    if T > 0 and (gathered.stride(2) != 1 or (T > 1 and gathered.stride(1) != words)):
        fail("gathered", gathered, exp + " with contiguous rows")
    rank_stride = 0
    if W > 1 and T > 0:
        s0 = gathered.stride(0)
        if s0 % words or s0 // words < T:
            fail("gathered", gathered, exp + f" with a rank stride a multiple of {words} "
                 f"and >= T * {words}")
        rank_stride = s0 // words
        covers(gathered, "gathered", (W - 1) * rank_stride + T, words)
    aligned(gathered, "gathered", 4)
    r = rank(rank_, cfg)
    ids_stride = ids_out(cfg, ids, T, dev)
    rm = rows_map(cfg, T, dev, req_id, block_table, rows_out, counts_out, stride_rows)
    if ids is None and rm is None:
        raise ValueError("ids_out and rows_out: both None; the select would output nothing "
                         "(pass topk_indices / ids_out, or the physical rows outputs)")
    plan = dict(rows=T, rank_stride_rows=rank_stride, rank=r, ids_out_stride=ids_stride,
                rows_map=rm, logits_stride=0, max_local_len=0)
    if cfg.exact:
        if ws_info is None:
            raise RuntimeError(
                f"the exact merge (K={cfg.topk}, N={N}) has no rescue workspace: call "
                "init_dcp_topk_rescue_workspace (or Context.workspace) first")
        if logits is None or row_ends_t is None:
            raise ValueError("logits, row_ends: the exact merge needs this rank's bf16 logits and "
                             "row_ends (a saturated rank re-reads its row)")
        k, n, w, wr, max_rows, ws_dev = ws_info
        on_device(gathered, "gathered", ws_dev, k, n)
        if (k, n, w) != (cfg.topk, N, W):
            raise ValueError(f"workspace: built for K={k}, N={n}, W={w}; the call has "
                             f"K={cfg.topk}, N={N}, W={W}")
        if wr != r:
            raise ValueError(f"rank: got {r}; the rescue workspace belongs to rank {wr}")
        if T > max_rows:
            raise ValueError(f"gathered: {T} rows; the rescue workspace holds at most "
                             f"{max_rows} (init it with a larger max_rows)")
        plan["logits_stride"], plan["max_local_len"] = bf16_logits(logits, T, dev, max_local_len)
        row_ends(row_ends_t, T, dev)
    return plan


def plan_pair_pack(cfg, logits, local_ids, rank_, row_starts, row_ends_t, out):
    import torch
    config_kind(cfg, PAIR, "pair_pack")
    K = cfg.topk
    exp_i = f"int32 [T, K = topk = {K}] (this rank's local top-K ids, -1 = empty)"
    tensor(local_ids, "local_ids", torch.int32, (None, K), exp_i)
    dev = local_ids.device
    T = local_ids.shape[0]
    ids_stride = _rows_stride(local_ids, "local_ids", K, exp_i)
    exp_l = f"float32 [>= {T}, S] with contiguous columns"
    tensor(logits, "logits", torch.float32, ((">=", T), None), exp_l, dev)
    if logits.shape[1] > 1 and logits.stride(1) != 1:
        fail("logits", logits, exp_l)
    if logits.shape[1] == 0:
        fail("logits", logits, exp_l + " and at least one column")
    lstride = logits.stride(0) if logits.shape[0] > 1 else logits.shape[1]
    lstride = max(lstride, logits.shape[1])
    covers(logits, "logits", T, lstride)
    r = rank(rank_, cfg)
    row_ends(row_starts, T, dev, "row_starts", optional=True)
    row_ends(row_ends_t, T, dev, "row_ends", optional=True)
    exp_o = f"int32 [{T}, {K}, 2] (score bits, global id), contiguous"
    tensor(out, "out", torch.int32, (T, K, 2), exp_o, dev)
    if T > 0 and not out.is_contiguous():
        fail("out", out, exp_o)
    for n, t, a in (("logits", logits, 4), ("local_ids", local_ids, 4), ("out", out, 8)):
        aligned(t, n, a)
    return dict(rows=T, logits_stride=lstride, local_ids_stride=ids_stride, rank=r)


def pair_candidates_dtype(candidates, ids_as_float):
    """Refuses float candidates unless the caller said how to read them."""
    import torch
    if not isinstance(candidates, torch.Tensor):
        fail("candidates", candidates, "a tensor")
    if candidates.dtype == torch.float32 and not ids_as_float:
        raise ValueError(
            f"candidates: got {_desc(candidates)}; expected int32 pairs (fp32 score bits, int32 "
            "global id). A float32 [.., 2] tensor whose second value is the global id as a float "
            "(vLLM's pair pack) is read in place with ids_as_float=True (never reinterpreted "
            "with .view(torch.int32), which would turn id 5 into 1084227584)")
    if candidates.dtype == torch.int32 and ids_as_float:
        raise ValueError(f"candidates: got {_desc(candidates)} with ids_as_float=True; expected "
                         "float32 (score, id as a float value) pairs")


def plan_pair_select(cfg, candidates, rank_, ids, req_id=None, block_table=None, rows_out=None,
                     counts_out=None, stride_rows=0):
    import torch
    config_kind(cfg, PAIR, "pair_select")
    W, K = cfg.world_size, cfg.topk
    exp = (f"int32 [W = {W}, T, K = {K}, 2] (rank-major, the all-gather output read in place; "
           f"a [W, T_alloc, K, 2][:, :T] view is fine) or [T, W*K = {W * K}, 2] (row-major, "
           "contiguous); float32 pairs of the same shapes read the id as a float value")
    if not isinstance(candidates, torch.Tensor) or \
            candidates.dtype not in (torch.int32, torch.float32):
        fail("candidates", candidates, exp)
    # float32 pairs (vLLM's: the id is a float value) use the float-id
    # layouts, read in place; ops.pair_select asks for ids_as_float first.
    dt, float_ids = candidates.dtype, 2 if candidates.dtype == torch.float32 else 0
    dev = candidates.device
    if candidates.dim() == 4:
        tensor(candidates, "candidates", dt, (W, None, K, 2), exp)
        layout, T = 0, candidates.shape[1]
        rank_stride = 0
        if T > 0:
            if candidates.stride(3) != 1 or candidates.stride(2) != 2 or \
                    (T > 1 and candidates.stride(1) != 2 * K):
                fail("candidates", candidates, exp + " with contiguous [K, 2] rows")
            if W > 1:
                s0 = candidates.stride(0)
                if s0 % (2 * K) or s0 // (2 * K) < T:
                    fail("candidates", candidates, exp + f" with a rank stride a multiple of "
                         f"{2 * K} and >= T * {2 * K}")
                rank_stride = s0 // (2 * K)
                covers(candidates, "candidates", (W - 1) * rank_stride + T, 2 * K)
    elif candidates.dim() == 3:
        tensor(candidates, "candidates", dt, (None, W * K, 2), exp)
        layout, T, rank_stride = 1, candidates.shape[0], 0
        if T > 0 and not candidates.is_contiguous():
            fail("candidates", candidates, exp)
    else:
        fail("candidates", candidates, exp)
    if T > MAX_ROWS:
        fail("candidates", candidates, exp)
    aligned(candidates, "candidates", 8)
    r = rank(rank_, cfg)
    ids_stride = ids_out(cfg, ids, T, dev)
    rm = rows_map(cfg, T, dev, req_id, block_table, rows_out, counts_out, stride_rows)
    if ids is None and rm is None:
        raise ValueError("ids_out and rows_out: both None; the select would output nothing")
    return dict(rows=T, layout=layout | float_ids, rank_stride_rows=rank_stride, rank=r,
                ids_out_stride=ids_stride, rows_map=rm)


def indptr(cfg, t, rows, dev, rm):
    """indptr_out int32 [T + 1], contiguous: the owned rows' CSR offsets (so
    rows_out must be given)."""
    import torch
    exp = f"int32 [{rows + 1}] (T + 1 offsets), contiguous"
    if tensor(t, "indptr_out", torch.int32, (rows + 1,), exp, dev, optional=True) is None:
        return
    if rm is None:
        raise ValueError("indptr_out: given without rows_out; the offsets are those of the "
                         "owned rows")
    contiguous_1d(t, "indptr_out", exp)
    aligned(t, "indptr_out", 4)
    if rows * cfg.topk >= 2**31:
        raise ValueError(f"indptr_out: int32 offsets of {rows} rows of up to K = {cfg.topk} "
                         "owned rows each may pass 2^31")


def plan_group_merge(cfg, logits, row_ends_t, local_ids, ids, max_local_len, ws_info,
                     req_id=None, block_table=None, rows_out=None, counts_out=None,
                     stride_rows=0, packed=None, indptr_out=None):
    """One step of the library's one-call merge on a group workspace whose
    config is cfg; ws_info as for plan_select. packed: this rank's rows from
    the caller's producer, sent instead of the fused local top-N."""
    import torch
    config_kind(cfg, PACKED, "group_merge")
    exp_l = "a bf16 [T, S] tensor"
    tensor(logits, "logits", torch.bfloat16, (None, None), exp_l)
    dev = logits.device
    # With packed rows, T is theirs (the seed's rule): logits may hold more.
    T = packed.shape[0] if packed is not None and getattr(packed, "dim", lambda: 0)() == 2 \
        else logits.shape[0]
    stride, mll = bf16_logits(logits, T, dev, max_local_len)
    row_ends(row_ends_t, T, dev)
    k, n, w, r, max_rows, ws_dev = ws_info
    on_device(logits, "logits", ws_dev, k, n)
    if (k, n, w) != (cfg.topk, cfg.local_topk, cfg.world_size):
        raise ValueError(f"workspace: built for K={k}, N={n}, W={w}; the call has "
                         f"K={cfg.topk}, N={cfg.local_topk}, W={cfg.world_size}")
    if T > max_rows:
        raise ValueError(f"logits: {T} rows; the group workspace holds at most {max_rows}")
    N = cfg.local_topk
    ids_stride = 0
    if local_ids is not None:
        exp_i = f"int32 [{T}, {N}] (T rows of N = local_topk = {N} local ids)"
        tensor(local_ids, "local_ids", torch.int32, (T, N), exp_i, dev)
        ids_stride = _rows_stride(local_ids, "local_ids", N, exp_i)
        aligned(local_ids, "local_ids", 4)
    packed_stride = 0
    if packed is not None:
        words = packed_row_words(N)
        exp_p = f"int32 [{T}, {words}] (T rows of N + N/32 = {words} packed words)"
        if local_ids is not None:
            raise ValueError("packed and local_ids: both given; pass one (the packed rows, or "
                             "the local ids to pack)")
        tensor(packed, "packed", torch.int32, (T, words), exp_p, dev)
        packed_stride = _rows_stride(packed, "packed", words, exp_p)
        if packed_stride > (2**31 - 1) // 4:
            fail("packed", packed, exp_p + f" with a row stride <= {(2**31 - 1) // 4}")
        aligned(packed, "packed", 4)
    out_stride = ids_out(cfg, ids, T, dev)
    rm = rows_map(cfg, T, dev, req_id, block_table, rows_out, counts_out, stride_rows)
    if ids is None and rm is None:
        raise ValueError("ids_out and rows_out: both None; the merge would output nothing")
    indptr(cfg, indptr_out, T, dev, rm)
    return dict(rows=T, logits_stride=stride, max_local_len=mll, local_ids_stride=ids_stride,
                ids_out_stride=out_stride, rows_map=rm, rank=r, packed_stride=packed_stride)


# ----------------------------------------------------- values for ctypes
# ctypes stores a Python int into a C integer modulo 2^bits and truncates a
# char* at its first NUL, silently: every value bound for a C field or a C
# argument passes through c_value first (the struct base class below and the
# argument types of _lib's signatures), so nothing wraps on any path.

import ctypes as _ct  # noqa: E402


_INT_RANGES = {}
for _t in (_ct.c_int8, _ct.c_int16, _ct.c_int32, _ct.c_int64, _ct.c_uint8, _ct.c_uint16,
           _ct.c_uint32, _ct.c_uint64, _ct.c_int, _ct.c_uint, _ct.c_long, _ct.c_ulong,
           _ct.c_size_t, _ct.c_ssize_t, _ct.c_longlong, _ct.c_ulonglong):
    _bits = 8 * _ct.sizeof(_t)
    _signed = _t(-1).value == -1
    _INT_RANGES[_t] = ((-(1 << (_bits - 1)), (1 << (_bits - 1)) - 1) if _signed
                       else (0, (1 << _bits) - 1))
_INT_RANGES[_ct.c_void_p] = (0, (1 << (8 * _ct.sizeof(_ct.c_void_p))) - 1)
_C_NAMES = {_ct.c_int32: "int32", _ct.c_uint32: "uint32", _ct.c_int64: "int64",
            _ct.c_uint64: "uint64", _ct.c_size_t: "size_t", _ct.c_void_p: "an address",
            _ct.c_uint16: "uint16"}


def c_int(v, name, ctype, allow_bool=False):
    """v as an int that `ctype` holds exactly; ArgTypeError for a float, a bool
    (unless allow_bool: a flag field), a str...; ValueError out of range."""
    import operator
    if type(v) is bool:
        if not allow_bool:
            raise ArgTypeError(f"{name}: got bool {v!r}; expected an int")
        v = int(v)
    elif type(v) is not int:
        if isinstance(v, float):
            raise ArgTypeError(f"{name}: got float {v!r}; expected an int (floats are not "
                               "rounded)")
        try:
            v = operator.index(v)
        except TypeError:
            raise ArgTypeError(f"{name}: got {type(v).__name__} {v!r}; expected an int") \
                from None
    lo, hi = _INT_RANGES[ctype]
    if v < lo or v > hi:
        raise ValueError(f"{name}: got {v}; expected an int in {lo}..{hi} (the range of the C "
                         f"{_C_NAMES.get(ctype, ctype.__name__)} it fills)")
    return v


def c_str(v, name):
    """v (str, bytes or None) as the bytes of a char* field: no NUL inside
    (C would see a shorter string)."""
    if v is None:
        return None
    if isinstance(v, str):
        try:
            b = v.encode()
        except UnicodeEncodeError:
            raise ValueError(f"{name}: got {v!r}; expected a string encodable as UTF-8") \
                from None
    elif isinstance(v, bytes):
        b = v
    else:
        raise ArgTypeError(f"{name}: got {type(v).__name__} {v!r}; expected a str")
    if b"\0" in b:
        raise ValueError(f"{name}: got {v!r}, which holds a NUL byte (C would read only "
                         f"{b.split(bytes(1))[0]!r}); expected a string without NUL bytes")
    return b


def _arg_type(ctype):
    """A checked stand-in for an integer or char* ctypes argument type: its
    from_param runs c_int / c_str before ctypes converts the value."""
    if ctype is _ct.c_char_p:
        class CheckedStr:
            @staticmethod
            def from_param(v):
                if v is None or isinstance(v, (str, bytes)):
                    v = c_str(v, "char* argument")
                return _ct.c_char_p.from_param(v)   # a buffer: ctypes checks it
        return CheckedStr
    if ctype in _INT_RANGES and ctype is not _ct.c_void_p:
        cname = _C_NAMES.get(ctype, ctype.__name__)

        class CheckedInt:
            @staticmethod
            def from_param(v, _t=ctype, _n=f"{cname} argument"):
                return _t(c_int(v, _n, _t))
        CheckedInt.__name__ = f"Checked_{cname}"
        return CheckedInt
    return ctype


def arg_types(types):
    """The argtypes of a C function with every integer and char* checked."""
    return [_arg_type(t) for t in types]


class Struct(_ct.Structure):
    """A ctypes struct whose every field is filled through c_int / c_str:
    integers are range-checked for their C type (bool only for the fields
    listed in _flags_), char* has no NUL, and an unknown public attribute is
    an error (a misspelled field would otherwise be a new Python attribute
    that C never sees).

    The per-launch argument structs (LAUNCH_ARGS in _lib) opt out with
    _unchecked_ = True: a Python setter costs about a microsecond per field
    on every eager launch, and their every value comes from a plan of this
    module (rows, strides, ranks, lengths: each checked there) or from a
    tensor's data_ptr."""

    _flags_ = ()
    _unchecked_ = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        spec = {}
        for n, t in cls.__dict__.get("_fields_", ()):
            if t is _ct.c_char_p:
                spec[n] = "str"
            elif t in _INT_RANGES and t is not _ct.c_void_p:
                spec[n] = (t, *_INT_RANGES[t])
            else:
                spec[n] = True   # pointers, arrays, nested structs: ctypes checks them
        cls._dc_specs = spec
        if cls.__dict__.get("_unchecked_"):
            cls.__setattr__ = _ct.Structure.__setattr__

    def __setattr__(self, name, value, _set=_ct.Structure.__setattr__):
        s = self._dc_specs.get(name)
        if s is None:
            if not name.startswith("_"):
                raise AttributeError(
                    f"{type(self).__name__}: no field {name!r} (fields: "
                    f"{', '.join(n for n, _ in self._fields_)})")
        elif s == "str":
            value = c_str(value, name)
        elif s is not True and (type(value) is not int or not s[1] <= value <= s[2]):
            value = c_int(value, name, s[0], name in self._flags_)
        _set(self, name, value)
