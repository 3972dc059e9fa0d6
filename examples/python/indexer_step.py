"""An indexer's DCP top-K merge from Python, on one GPU (a world of one rank):
warmup at model load, a decode step and a prefill step through the drop-in
API, the decode step captured in a CUDA graph and replayed, and the same step
under torch.compile(fullgraph=True).

    PYTHONPATH=bindings/python DCPTOPK_LIBRARY=build/libdcptopk.so \
        python3 examples/python/indexer_step.py

With a torch.distributed group, pass group= to init_dcp_topk_rescue_workspace
on every rank (DCPTOPK_DIST_BACKEND=torch: torch all-gather + symmetric
memory); the step code does not change.
"""
import time

import torch

import dcptopk
from dcptopk import merge

TOPK, LOCAL_TOPK = 2048, 384        # K and N of DeepSeek-V3.2's indexer under DCP
MAX_DECODE_ROWS, MAX_PREFILL_ROWS = 64, 1024
MAX_LOCAL_LEN = 32768               # the local KV length bound (logits columns read)


def model_load():
    # Record the configs the model's indexers use, then compile or load them
    # all: a progress bar on a terminal, quiet in a log file.
    merge.register_dcp_topk_merge_warmup(TOPK, LOCAL_TOPK, world_size=1)
    t0 = time.perf_counter()
    stats = merge.warmup_dcp_topk_merge()
    print(f"warmup: {stats[0]['keys']} kernels in {time.perf_counter() - t0:.2f} s "
          f"({stats[0]['compiled']} compiled, {stats[0]['cache_hits']} from the cache)")
    # Once per (K, N), outside any capture: the rescue round's workspace.
    merge.init_dcp_topk_rescue_workspace(MAX_PREFILL_ROWS, TOPK, LOCAL_TOPK)


def indexer_step(logits, row_ends, topk_indices):
    """What the indexer calls after its logits GEMM: global top-K ids."""
    merge.dcp_topk_merge(logits, row_ends, topk_indices, LOCAL_TOPK, max_local_len=MAX_LOCAL_LEN)
    return topk_indices


def main():
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    model_load()

    # Decode: few rows, every row its request's whole context.
    T = MAX_DECODE_ROWS
    logits = torch.randn(T, MAX_LOCAL_LEN, device=dev).to(torch.bfloat16)
    row_ends = torch.randint(1, MAX_LOCAL_LEN, (T,), dtype=torch.int32, device=dev)
    ids = torch.empty(T, TOPK, dtype=torch.int32, device=dev)
    indexer_step(logits, row_ends, ids)
    torch.cuda.synchronize()
    print("decode ids[0][:8]:", ids[0, :8].tolist())

    # The decode step in a CUDA graph: static buffers, new values, replay.
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        indexer_step(logits, row_ends, ids)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        indexer_step(logits, row_ends, ids)
    logits.copy_(torch.randn_like(logits, dtype=torch.float32).to(torch.bfloat16))
    graph.replay()
    eager = indexer_step(logits, row_ends, torch.empty_like(ids))
    torch.cuda.synchronize()
    print("graph replay equals eager:", torch.equal(ids, eager))

    # The same step compiled whole.
    compiled = torch.compile(indexer_step, fullgraph=True)
    print("compiled equals eager:", torch.equal(compiled(logits, row_ends, torch.empty_like(ids)),
                                                eager))

    # Prefill: many rows of growing length (causal), physical rows output.
    T = 512
    logits = torch.randn(T, MAX_LOCAL_LEN, device=dev).to(torch.bfloat16)
    row_ends = torch.arange(1, T + 1, dtype=torch.int32, device=dev) * (MAX_LOCAL_LEN // T)
    block_size = 64
    block_table = torch.arange(MAX_LOCAL_LEN // block_size, dtype=torch.int32,
                               device=dev).unsqueeze(0)
    rows_out = torch.empty(T, TOPK, dtype=torch.int32, device=dev)
    valid = torch.empty(T, dtype=torch.int32, device=dev)
    merge.dcp_topk_merge_rows(logits=logits, row_ends=row_ends, local_topk=LOCAL_TOPK, topk=TOPK,
                              req_id=torch.zeros(T, dtype=torch.int32, device=dev),
                              block_table=block_table, block_size=block_size,
                              stride_rows=block_size, dcp_rank=0, rows_out=rows_out,
                              valid_out=valid, max_local_len=MAX_LOCAL_LEN)
    merge.get_dcp_topk_rescue_workspace(TOPK, LOCAL_TOPK).check()  # rescue status, syncs
    print("prefill rows selected (first, last):", int(valid[0]), int(valid[-1]))


if __name__ == "__main__":
    dcptopk.library()  # fails early, with the reason, when the library is missing
    main()
