"""The library's CPU reference, the oracle of the kernels: the whole exact
packed merge of simulated ranks, the merge contract's checker, and the
packed format's scalar helpers.

torch is imported only by the calls that take tensors (host tensors).
"""
import ctypes

from . import _checks
from ._config import as_config, packed_row_words
from ._lib import RowsMap, check, library, _c_i64, _vp


def ref_ord16(bf16_bits):
    """The order-preserving 16-bit key of bf16 bits (0 for NaN)."""
    _checks.integer(bf16_bits, "bf16_bits", 0, 0xFFFF, "a 16-bit pattern in 0..0xFFFF")
    return library().dcptopk_ref_ord16(bf16_bits)


def ref_ord32(f32_bits):
    """The order-preserving key of fp32 bits (0 for NaN)."""
    _checks.integer(f32_bits, "f32_bits", 0, 0xFFFFFFFF, "a 32-bit pattern")
    return library().dcptopk_ref_ord32(f32_bits)


def ref_global_id(local_id, owner, world_size, interleave=1):
    """The global id of local id `local_id` on rank `owner`."""
    _checks.integer(world_size, "world_size", 1, 16, "an int in 1..16")
    _checks.integer(owner, "owner", 0, world_size - 1, f"a rank in 0..{world_size - 1}")
    _checks.integer(local_id, "local_id", 0, (1 << 17) - 1, "a local id in 0..2^17-1")
    _checks.integer(interleave, "interleave", 1, 1 << 17, "a positive int")
    return library().dcptopk_ref_global_id(local_id, owner, world_size, interleave)


def ref_decode(packed_row, n, j, owner, world_size, interleave=1):
    """Slot j of a packed row (a sequence of N + N/32 int32 words, or a
    ctypes int32 array) sent by `owner`: dict of ord16 (0 = empty), local_id,
    global_id."""
    _checks.integer(n, "n", 32, 4064, "a multiple of 32 (N)")
    if n % 32:
        raise ValueError(f"n: got {n}; expected a multiple of 32")
    _checks.integer(j, "j", 0, n - 1, f"a slot in 0..{n - 1}")
    _checks.integer(world_size, "world_size", 1, 16, "an int in 1..16")
    _checks.integer(owner, "owner", 0, world_size - 1, f"a rank in 0..{world_size - 1}")
    _checks.integer(interleave, "interleave", 1, 1 << 17, "a positive int")
    words = n + n // 32
    if len(packed_row) != words:
        raise ValueError(f"packed_row: got {len(packed_row)} words; expected N + N/32 = {words}")
    arr = packed_row if isinstance(packed_row, ctypes.Array) else \
        (ctypes.c_int32 * words)(*[int(w) for w in packed_row])
    c = library().dcptopk_ref_decode(arr, n, j, owner, world_size, interleave)
    return {"ord16": c.ord16, "local_id": c.local_id, "global_id": c.global_id}


def ref_packed_merge(cfg, logits, row_ends, max_local_len=None, rows=None):
    """The whole two-round exact packed merge of W simulated ranks on the CPU
    (the oracle): logits W bf16 [T, S] host tensors (one stride), row_ends W
    int32 [T]. Returns (ids per rank, saturation words per rank, rescued rows);
    ids are None without emit_ids. rows: W RowsOutput (host) or None."""
    import torch
    cfg = as_config(cfg)
    W, T = cfg.world_size, logits[0].shape[0]
    dev = torch.device("cpu")
    if len(logits) != W or len(row_ends) != W:
        raise ValueError(f"logits, row_ends: got {len(logits)} / {len(row_ends)}; expected "
                         f"world_size = {W}")
    stride, mll = _checks.bf16_logits(logits[0], T, dev, max_local_len, "logits[0]")
    for r in range(W):
        s, _ = _checks.bf16_logits(logits[r], T, dev, mll, f"logits[{r}]")
        if s != stride or logits[r].shape[0] != T:
            _checks.fail(f"logits[{r}]", logits[r], f"[{T}, ..] with row stride {stride}")
        _checks.row_ends(row_ends[r], T, dev, f"row_ends[{r}]")
    ids = [torch.full((T, cfg.topk), -7, dtype=torch.int32) for _ in range(W)] \
        if cfg.emit_ids else None
    sats = [torch.zeros(max(T, 1), dtype=torch.int32) for _ in range(W)]
    maps = None
    if rows is not None:
        maps = (RowsMap * W)()
        for r in range(W):
            maps[r] = rows[r]._rows_map(cfg, T, dev)
    rescued = _c_i64(0)
    check(library().dcptopk_ref_packed_merge(
        ctypes.byref(cfg), (_vp * W)(*[t.data_ptr() for t in logits]), stride, mll,
        (_vp * W)(*[t.data_ptr() for t in row_ends]), T,
        (_vp * W)(*[t.data_ptr() for t in ids]) if ids else None, maps,
        (_vp * W)(*[t.data_ptr() for t in sats]), ctypes.byref(rescued)))
    return ids, [s[:T] for s in sats], rescued.value


def check_contract(cfg, packed, logits, row_ends, max_local_len=None):
    """Checks packed rows [T, N + N/32] made elsewhere against the merge
    contract with the library's checker (host tensors; CUDA tensors are copied
    to the host: this synchronises). Raises DcptopkError
    (DCPTOPK_CONTRACT_VIOLATION) naming the row and the reason."""
    import torch
    cfg = as_config(cfg)
    packed, logits, row_ends = (t.detach().cpu() if t.device.type != "cpu" else t
                                for t in (packed, logits, row_ends))
    T = packed.shape[0]
    words = packed_row_words(cfg.local_topk)
    dev = torch.device("cpu")
    _checks.tensor(packed, "packed", torch.int32, (T, words),
                   f"int32 [T, N + N/32 = {words}]")
    packed = packed.contiguous()
    stride, mll = _checks.bf16_logits(logits, T, dev, max_local_len)
    _checks.row_ends(row_ends, T, dev)
    bad = _c_i64(-1)
    check(library().dcptopk_ref_check_contract(ctypes.byref(cfg), packed.data_ptr(),
                                               logits.data_ptr(), stride, mll,
                                               row_ends.data_ptr(), T, ctypes.byref(bad)))


__all__ = ["ref_packed_merge", "check_contract", "ref_ord16", "ref_ord32", "ref_global_id",
           "ref_decode"]
