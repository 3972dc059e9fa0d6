"""The drop-in merge over a torch.distributed group of W processes, one GPU
each (W = the visible GPUs, at most 8; NCCL refuses two ranks on one GPU):
every rank's dcp_topk_merge and dcp_topk_merge_rows bit-exact against the
oracle over consecutive calls with saturated rows (dist_case; ranks sharing
one GPU: test_dist_one_gpu.py).

Both exchange backends: torch (all-gather + symmetric memory) and the
library's group runtime (skipped when the library lacks it). Skips (77) with fewer than 2 GPUs or without torch.
"""
import sys

import harness

try:
    import torch
except ImportError:
    harness.skip_module("torch is not installed")
if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
    harness.skip_module("fewer than 2 CUDA devices (NCCL needs one GPU per rank)")

import dist_case  # noqa: E402


def _run(backend):
    dist_case.run(min(torch.cuda.device_count(), 8), backend)


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
