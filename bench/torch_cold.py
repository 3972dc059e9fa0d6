"""torch_cold.py - bench/fixture.h's cold-input sizes for the torch baselines
(bench/torch_*.py), so that they flush and rotate their inputs as the C
benchmarks beside them do: a flush writes, and rotated inputs span more
than, 4 x the device's L2 and at least 256 MiB."""
import sys

import torch

COLD_MIN_BYTES = 256 << 20  # fixture.h's BENCH_COLD_MIN_BYTES
L2_FALLBACK_BYTES = 128 << 20
_said = False


def l2_bytes():
    """The current device's L2 in bytes; 128 MiB, said once on stderr, when
    this torch does not tell (too large errs on the cold side)."""
    global _said
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    n = getattr(props, "L2_cache_size", 0)
    if n > 0:
        return n
    if not _said:
        print("torch baseline: the device's L2 size is unknown; assuming 128 MiB",
              file=sys.stderr)
        _said = True
    return L2_FALLBACK_BYTES


def cold_bytes():
    return max(4 * l2_bytes(), COLD_MIN_BYTES)


def cold_copies(nbytes):
    """How many copies of nbytes together exceed cold_bytes()."""
    return cold_bytes() // nbytes + 1


def env_fields():
    """The torch_env record's fields of the L2 size and the cold bound."""
    return {"l2_bytes": l2_bytes(), "cold_bytes": cold_bytes()}
