#!/usr/bin/env python3
"""sass_segments.py - a kernel's Nsight Compute source page split at its
block barriers.

Input: the per-SASS-line CSV that bench/profile.sh writes for a profiled
kernel (prof/NAME.sass.csv: `ncu --page source --csv --print-source sass`).
Each run of lines that ends in a BAR.SYNC (or at the end of the kernel) is
one barrier segment: the code the warps of a CTA run between two barriers.
For each segment that holds at least --min percent of the executed warp
instructions or of the stall samples, one line gives:

    seg   its number (0 = the first), and the offset of its first line
    lines its SASS lines
    ins   its share of the kernel's executed warp instructions
    smp   its share of the stall samples
    full  how many of its instructions ran at least as often as its first
          one that ran (the segment's entries); the rest were branched
          around on some entries, or never ran
    stalls its four largest stall reasons, as shares of its samples
    ends  the barrier that ends it

A segment whose lines all ran the same number of times, though its code
loops over a row's rounds, was predicated rather than branched: each warp
issued every round, used or not. --lines N then prints the N most executed
lines of segment --seg S; with --in-order, its first N lines in address
order, each with its byte offset from the segment's start, so that an
unrolled loop reads round by round (how many instructions a round costs).

    bench/sass_segments.py prof/rescue100.sass.csv
    bench/sass_segments.py prof/rescue100.sass.csv --seg 11 --lines 40
    bench/sass_segments.py prof/rescue100.sass.csv --seg 5 --lines 400 --in-order
"""
import argparse
import csv
import signal
import sys

ADDR, SOURCE = "Address", "Source"
EXECUTED = "Instructions Executed"
SAMPLES = "Warp Stall Sampling (All Samples)"


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return 0.0


def read_lines(path):
    """The CSV's instruction lines as dicts, and the stall columns' names."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    # ncu writes a "Kernel Name" line before the header.
    start = next((i for i, r in enumerate(rows) if ADDR in r and SOURCE in r), None)
    if start is None:
        raise ValueError(f"{path}: no header with '{ADDR}' and '{SOURCE}' columns")
    header = rows[start]
    for need in (EXECUTED, SAMPLES):
        if need not in header:
            raise ValueError(f"{path}: no '{need}' column")
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    lines = [dict(zip(header, r)) for r in rows[start + 1:] if len(r) == len(header)]
    return lines, stalls


def split(lines):
    """Runs of lines, each ending at a BAR.SYNC (the last one at the end)."""
    segs, cur = [], []
    for line in lines:
        cur.append(line)
        if "BAR.SYNC" in line[SOURCE]:
            segs.append(cur)
            cur = []
    if cur:
        segs.append(cur)
    return segs


def summarize(seg, stalls):
    counts = [number(l[EXECUTED]) for l in seg]
    # Entries: the first line that ran (a segment may open with dead code).
    entries = next((c for c in counts if c > 0), 0.0)
    st = {s: sum(number(l.get(s)) for l in seg) for s in stalls}
    return {
        "first": seg[0][ADDR],
        "lines": len(seg),
        "ins": sum(counts),
        "smp": sum(number(l[SAMPLES]) for l in seg),
        "full": sum(1 for c in counts if entries > 0 and c >= entries),
        "stalls": sorted(st.items(), key=lambda kv: -kv[1])[:4],
        "ends": seg[-1][SOURCE].strip() if "BAR.SYNC" in seg[-1][SOURCE] else "(kernel end)",
    }


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--min", type=float, default=1.0,
                    help="percent of instructions or samples a segment needs to be listed")
    ap.add_argument("--seg", type=int, help="segment whose lines --lines prints")
    ap.add_argument("--lines", type=int, default=0, help="most executed lines of --seg to print")
    ap.add_argument("--in-order", action="store_true",
                    help="--lines prints the segment's first lines in address order instead")
    a = ap.parse_args(argv)
    try:
        lines, stalls = read_lines(a.csv)
    except (OSError, ValueError) as e:
        print(f"sass_segments: {e}", file=sys.stderr)
        return 2
    raw = split(lines)
    segs = [summarize(s, stalls) for s in raw]
    ti = sum(s["ins"] for s in segs) or 1.0
    ts = sum(s["smp"] for s in segs) or 1.0
    print(f"{len(lines)} lines, {len(segs)} barrier segments, "
          f"{ti / 1e6:.1f} M warp instructions, {ts:.0f} samples")
    for k, s in enumerate(segs):
        pi, ps = 100 * s["ins"] / ti, 100 * s["smp"] / ts
        if pi < a.min and ps < a.min:
            continue
        top = ", ".join(f"{name[6:]} {100 * v / s['smp']:.0f}%"
                        for name, v in s["stalls"] if s["smp"] > 0 and v > 0)
        print(f"seg {k:3d} {s['first'][-6:]:>6} lines {s['lines']:5d} ins {pi:5.1f}% "
              f"smp {ps:5.1f}% full {s['full']:5d}/{s['lines']:<5d} | {top} | ends {s['ends'][:40]}")
    if a.seg is not None and a.lines > 0:
        if not 0 <= a.seg < len(segs):
            print(f"sass_segments: --seg {a.seg}: the kernel has segments 0..{len(segs) - 1}",
                  file=sys.stderr)
            return 2
        if a.in_order:
            base = int(raw[a.seg][0][ADDR], 16)
            for line in raw[a.seg][:a.lines]:
                print(f"{int(line[ADDR], 16) - base:6x} {number(line[EXECUTED]):12.0f} "
                      f"{number(line[SAMPLES]):7.0f}  {line[SOURCE].strip()}")
        else:
            for line in sorted(raw[a.seg], key=lambda l: -number(l[EXECUTED]))[:a.lines]:
                print(f"{number(line[EXECUTED]):12.0f} {number(line[SAMPLES]):7.0f}  "
                      f"{line[SOURCE].strip()}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    sys.exit(main(sys.argv[1:]))
