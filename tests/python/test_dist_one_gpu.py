"""The drop-in merge over a torch.distributed group whose ranks all share ONE
GPU (gloo process group): NCCL refuses two ranks on one GPU, so the library's
group is store-only (a private folder rank 0 names over the torch group) and
exchanges through CUDA IPC peer memory (the push path). W = 2, 3 and 4
processes; each rank's dcp_topk_merge and dcp_topk_merge_rows bit-exact
against the oracle over consecutive calls with saturated rows (dist_case).
Skips (77) without torch, without a GPU, or when the library lacks the
distributed runtime."""
import sys

import harness

try:
    import torch
except ImportError:
    harness.skip_module("torch is not installed")
if not torch.cuda.is_available():
    harness.skip_module("no CUDA device")

import dist_case  # noqa: E402


def _run(W, probe=False, producer=False):
    import dcptopk
    if not dcptopk.has_dist_runtime():
        raise harness.Skip("the library lacks the distributed runtime")
    dist_case.run(W, "dcptopk", pg_backend="gloo", device=0, expect=("store", "push"),
                  probe=probe, producer=producer)


def test_two_ranks_on_one_gpu():
    _run(2)


def test_three_ranks_on_one_gpu():
    _run(3)


def test_four_ranks_on_one_gpu():
    _run(4)


def test_producer_packed_rows_two_ranks_on_one_gpu():
    # dcp_topk_merge_rows(packed=) on the library's group (the one-call
    # merge): rows from the test's own producer, contract-checked, against
    # the oracle reordered for their slot order.
    _run(2, producer=True)


def test_bad_arguments_leave_a_two_rank_group_usable():
    # Host tensors, a wrong K or N, group=None: refused on every rank before
    # any launch (dist_case.bad_arguments), then the steps are bit-exact.
    _run(2, probe=True)


if __name__ == "__main__":
    sys.exit(harness.run(globals()))
