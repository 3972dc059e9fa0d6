"""A torch reference of the merge contract (docs/CONTRACT.md), written from the
contract and independent of the library, plus input generators. Slow (Python
loops over rows): for small shapes."""
import torch

INF_BITS = 0xFF800000


def bf16_bits(x):
    return x.contiguous().view(torch.int16).to(torch.int64) & 0xFFFF


def ord16(b):
    """ord16 of bf16 bit patterns (int64 tensor): 0 for NaN."""
    nan = (b & 0x7FFF) > 0x7F80
    o = torch.where((b & 0x8000) != 0, (~b) & 0xFFFF, b | 0x8000)
    return torch.where(nan, torch.zeros_like(o), o)


def ord32(b):
    """ord32 of fp32 bit patterns (int64 holding uint32)."""
    b = b & 0xFFFFFFFF
    nan = (b & 0x7FFFFFFF) > 0x7F800000
    o = torch.where((b & 0x80000000) != 0, (~b) & 0xFFFFFFFF, b | 0x80000000)
    return torch.where(nan, torch.zeros_like(o), o)


def to_i32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def gid_bits(W):
    return 17 + (W - 1).bit_length()


def pack_row(ids, ords, N):
    """Words of a packed row from slot lists (local id or None)."""
    row = [0] * (N + N // 32)
    for j, (l, o) in enumerate(zip(ids, ords)):
        if l is None:
            continue
        row[j] = to_i32((o << 16) | (0xFFFF - (l & 0xFFFF)))
        if l >> 16:
            row[N + j // 32] |= 1 << (j % 32)
    return [to_i32(w) for w in row]


def pack(logits, row_ends, N, max_local_len=None):
    """The fused local top-N + pack: [T, N + N/32] int32."""
    T, S = logits.shape
    mll = min(S, 1 << 17) if max_local_len is None else max_local_len
    o = ord16(bf16_bits(logits))
    out = []
    for t in range(T):
        E = max(0, min(int(row_ends[t]), mll, 1 << 17))
        cand = [(int(o[t, l]), l) for l in range(E) if int(o[t, l]) != 0]
        cand.sort(key=lambda c: (-c[0], c[1]))
        sent = sorted(cand[:N], key=lambda c: c[1])
        ids = [l for _, l in sent] + [None] * (N - len(sent))
        ords = [k for k, _ in sent] + [0] * (N - len(sent))
        out.append(pack_row(ids, ords, N))
    return torch.tensor(out, dtype=torch.int32).view(T, N + N // 32)


def pack_indices(logits, local_ids, N, row_ends=None, max_local_len=None):
    T, S = logits.shape
    mll = min(S, 1 << 17) if max_local_len is None else max_local_len
    o = ord16(bf16_bits(logits))
    out = []
    for t in range(T):
        E = min(mll, 1 << 17) if row_ends is None else max(0, min(int(row_ends[t]), mll, 1 << 17))
        ids, ords = [], []
        for j in range(N):
            l = int(local_ids[t, j])
            if l < 0 or l >= E or int(o[t, l]) == 0:
                ids.append(None)
                ords.append(0)
            else:
                ids.append(l)
                ords.append(int(o[t, l]))
        out.append(pack_row(ids, ords, N))
    return torch.tensor(out, dtype=torch.int32).view(T, N + N // 32)


def decode(gathered, N, W):
    """Per row: list of (position, gid, ord16) of the non-empty slots."""
    Wg, T, _ = gathered.shape
    g = gathered.to(torch.int64) & 0xFFFFFFFF
    rows = []
    for t in range(T):
        c = []
        for r in range(Wg):
            for j in range(N):
                w = int(g[r, t, j])
                if w == 0:
                    continue
                hi = (int(g[r, t, N + j // 32]) >> (j % 32)) & 1
                l = (0xFFFF - (w & 0xFFFF)) | (hi << 16)
                c.append((r * N + j, l * W + r, w >> 16))
        rows.append(c)
    return rows


def _emit(selected, K, W, rank, rows):
    """ids (ascending position) and owned physical rows of one row."""
    selected.sort(key=lambda c: c[0])
    ids = [gid for _, gid in selected] + [-1] * (K - len(selected))
    if rows is None:
        return ids, None, None
    req, bt, B, stride_rows = rows
    owned = []
    for _, gid in selected:
        if gid % W != rank:
            continue
        if req < 0 or req >= bt.shape[0]:
            continue
        l = gid // W
        if l // B >= bt.shape[1]:
            continue
        owned.append(to_i32(int(bt[req, l // B]) * stride_rows + l % B))
    return ids, owned + [-1] * (K - len(owned)), len(owned)


def select(gathered, N, K, W, rank=0, rows=None):
    """Round-1 select (no rescue): ids [T, K]; with rows = (req_id, block_table,
    B, stride_rows) also (rows_out [T, K], counts [T])."""
    gb = gid_bits(W)
    ids, ro, cnt = [], [], []
    for t, cands in enumerate(decode(gathered, N, W)):
        keyed = [((o << gb) | ((1 << gb) - 1 - gid), -p, p, gid) for p, gid, o in cands]
        keyed.sort(reverse=True)
        sel = [(p, gid) for _, _, p, gid in keyed[:K]]
        r = None if rows is None else (int(rows[0][t]), rows[1], rows[2], rows[3])
        i, o_, c = _emit(sel, K, W, rank, r)
        ids.append(i)
        ro.append(o_)
        cnt.append(c)
    ids = torch.tensor(ids, dtype=torch.int32).view(-1, K)
    if rows is None:
        return ids
    return ids, torch.tensor(ro, dtype=torch.int32).view(-1, K), torch.tensor(cnt, dtype=torch.int32)


def global_topk_sets(logits, row_ends, K, max_local_len=None):
    """The exact merge's selected set per row: the K largest (ord16, -gid) over
    every rank's tokens (rank r's local token l is gid l * W + r)."""
    W = len(logits)
    T, S = logits[0].shape
    mll = min(S, 1 << 17) if max_local_len is None else max_local_len
    out = []
    for t in range(T):
        c = []
        for r in range(W):
            o = ord16(bf16_bits(logits[r][t]))
            E = max(0, min(int(row_ends[r][t]), mll))
            c += [(int(o[l]), -(l * W + r)) for l in range(E) if int(o[l]) != 0]
        c.sort(reverse=True)
        out.append(sorted(-g for _, g in c[:K]))
    return out


def global_topk_scores(logits, row_ends, K, max_local_len=None):
    """The multiset (sorted, descending) of the union's top-K ord16 scores."""
    W = len(logits)
    T, S = logits[0].shape
    mll = min(S, 1 << 17) if max_local_len is None else max_local_len
    out = []
    for t in range(T):
        c = []
        for r in range(W):
            o = ord16(bf16_bits(logits[r][t]))
            E = max(0, min(int(row_ends[r][t]), mll))
            c += [int(o[l]) for l in range(E) if int(o[l]) != 0]
        out.append(sorted(c, reverse=True)[:K])
    return out


def scores_of(ids_row, logits, t):
    """ord16 scores (sorted, descending) of a row's selected global ids."""
    W = len(logits)
    out = []
    for gid in ids_row.tolist():
        if gid >= 0:
            out.append(int(ord16(bf16_bits(logits[gid % W][t, gid // W]))))
    return sorted(out, reverse=True)


def pair_select(cands, K, W, rank=0, rows=None):
    """cands: int32 [T, W*K, 2] (row-major). ids [T, K] (and rows)."""
    T = cands.shape[0]
    c64 = cands.to(torch.int64)
    ids, ro, cnt = [], [], []
    for t in range(T):
        keyed = []
        for p in range(cands.shape[1]):
            s, gid = int(c64[t, p, 0]) & 0xFFFFFFFF, int(c64[t, p, 1])
            o = int(ord32(torch.tensor(s)))
            if gid < 0 or o == 0:
                continue
            keyed.append(((o << 32) | (0xFFFFFFFF - gid), -p, p, gid))
        keyed.sort(reverse=True)
        sel = [(p, gid) for _, _, p, gid in keyed[:K]]
        r = None if rows is None else (int(rows[0][t]), rows[1], rows[2], rows[3])
        i, o_, c = _emit(sel, K, W, rank, r)
        ids.append(i)
        ro.append(o_)
        cnt.append(c)
    ids = torch.tensor(ids, dtype=torch.int32).view(-1, K)
    if rows is None:
        return ids
    return ids, torch.tensor(ro, dtype=torch.int32).view(-1, K), torch.tensor(cnt, dtype=torch.int32)


def pair_pack(logits, local_ids, W, rank, row_starts=None, row_ends=None):
    T, K = local_ids.shape
    stride = logits.stride(0) if T > 1 else logits.shape[1]
    bits = logits.contiguous().view(torch.int32)
    out = torch.empty((T, K, 2), dtype=torch.int32)
    for t in range(T):
        for j in range(K):
            l = int(local_ids[t, j])
            col = l + (int(row_starts[t]) if row_starts is not None else 0)
            ok = l >= 0 and (row_ends is None or l < int(row_ends[t])) and 0 <= col < stride
            gid = l * W + rank
            if ok and gid < (1 << 31):
                b = int(bits[t, col])
                if (b & 0x7FFFFFFF) > 0x7F800000:
                    ok = False
            if ok and gid < (1 << 31):
                out[t, j, 0], out[t, j, 1] = b, gid
            else:
                out[t, j, 0], out[t, j, 1] = to_i32(INF_BITS), -1
    return out


# ----------------------------------------------------------------- inputs

FAMILIES = ("random", "ties", "masked", "nan")


def logits_bf16(T, S, family, gen, device="cpu"):
    """bf16 [T, S] logits of a family: random, tie-heavy (4 values), -inf
    masked (a third), NaN (a few per row)."""
    if family == "ties":
        x = torch.randint(0, 4, (T, S), generator=gen).float()
    else:
        x = torch.randn(T, S, generator=gen)
    if family == "masked":
        x[torch.rand(T, S, generator=gen) < 0.33] = float("-inf")
    if family == "nan":
        x[torch.rand(T, S, generator=gen) < 0.02] = float("nan")
    return x.to(torch.bfloat16).to(device)


def logits_f32(T, S, family, gen, device="cpu"):
    return logits_bf16(T, S, family, gen).float().to(device) if family == "ties" else (
        torch.randn(T, S, generator=gen) if family == "random" else
        logits_bf16(T, S, family, gen).float()).to(device)
