#!/usr/bin/env python3
"""test_sass_segments.py - bench/sass_segments.py on a small hand-made source page.

The page has three barrier segments whose shares, counts of lines run on
every entry and stall mixes are worked out by hand below; then the errors:
a missing column and a segment number out of range, each named.
Usage: test_sass_segments.py [path of bench/sass_segments.py]
"""
import csv
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checks import check, finish  # noqa: E402

TOOL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "bench",
                                                          "sass_segments.py")
HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
          "stall_barrier", "stall_wait", "stall_wait (Not Issued)"]
# (source, executed, samples, barrier stalls, wait stalls)
LINES = [
    # segment 0: straight code, 30 instructions, 6 samples, all barrier
    ("LDS R1, [R2]", 10, 1, 1, 0),
    ("IADD3 R1, R1, 1, RZ", 10, 2, 2, 0),
    ("BAR.SYNC.DEFER_BLOCKING 0x0", 10, 3, 3, 0),
    # segment 1: 25 instructions, 4 samples (3 wait, 1 barrier); two lines
    # run on every entry, one on half of them, one never
    ("ISETP.GE.AND P0, PT, R1, 0x10, PT", 10, 2, 0, 2),
    ("@P0 BRA 0x100", 5, 1, 0, 1),
    ("STS [R3], R1", 0, 0, 0, 0),
    ("BAR.SYNC.DEFER_BLOCKING 0x0", 10, 1, 1, 0),
    # segment 2: opens with dead code, then 20 instructions, no samples
    ("BRA 0x0", 0, 0, 0, 0),
    ("EXIT", 20, 0, 0, 0),
]



def write_page(path, header, lines):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(["Kernel Name", "k"])
        w.writerow(header)
        for i, (src, ex, smp, bar, wait) in enumerate(lines):
            row = {"Address": f"0x7f00{i * 16:04x}", "Source": src,
                   "Warp Stall Sampling (All Samples)": smp, "Instructions Executed": ex,
                   "stall_barrier": bar, "stall_wait": wait, "stall_wait (Not Issued)": 99}
            w.writerow([row[h] for h in header])


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)


with tempfile.TemporaryDirectory() as tmp:
    page = os.path.join(tmp, "k.sass.csv")
    write_page(page, HEADER, LINES)
    r = run(page, "--min", "0")
    check("rc", r.returncode == 0, r.stderr)
    out = r.stdout.splitlines()
    check("summary", out and out[0].startswith("9 lines, 3 barrier segments, 0.0 M"),
          out[:1])
    segs = {}
    for line in out[1:]:
        m = re.match(r"seg +(\d+) +\S+ lines +(\d+) ins +([\d.]+)% smp +([\d.]+)% "
                     r"full +(\d+)/(\d+) +\| (.*) \| ends (.*)$", line)
        if m:
            segs[int(m.group(1))] = m.groups()[1:]
    check("three segments", sorted(segs) == [0, 1, 2], out)
    if sorted(segs) == [0, 1, 2]:
        # Instructions 30, 25, 20 of 75; samples 6, 4, 0 of 10.
        want = {0: ("3", "40.0", "60.0", "3", "3"), 1: ("4", "33.3", "40.0", "2", "4"),
                2: ("2", "26.7", "0.0", "1", "2")}
        for k, w in want.items():
            check(f"segment {k}", segs[k][:5] == w, f"{segs[k][:5]} want {w}")
        check("segment 0 stalls", segs[0][5] == "barrier 100%", segs[0][5])
        # The (Not Issued) column is not a stall reason of its own.
        check("segment 1 stalls", segs[1][5] == "wait 75%, barrier 25%", segs[1][5])
        check("segment 1 end", segs[1][6].startswith("BAR.SYNC"), segs[1][6])
        check("segment 2 end", segs[2][6] == "(kernel end)", segs[2][6])
    # --min hides small segments: at 35%, only segment 0 (40% of instructions)
    # and segment 1 (40% of samples) remain.
    r = run(page, "--min", "35")
    shown = [l.split()[1] for l in r.stdout.splitlines()[1:] if l.startswith("seg")]
    check("min", shown == ["0", "1"], shown)
    # --lines: segment 1's lines, most executed first.
    r = run(page, "--seg", "1", "--lines", "2")
    tail = r.stdout.splitlines()[-2:]
    check("lines", len(tail) == 2 and tail[0].split()[0] == "10" and "ISETP" in tail[0]
          and "BAR.SYNC" in tail[1], tail)
    # --in-order: segment 1's first three lines in address order, offsets
    # from its first line (16 bytes a line), counts as written.
    r = run(page, "--seg", "1", "--lines", "3", "--in-order")
    tail = [l.split() for l in r.stdout.splitlines()[-3:]]
    check("in order", [t[:2] for t in tail] == [["0", "10"], ["10", "5"], ["20", "0"]]
          and tail[0][3] == "ISETP.GE.AND" and tail[2][3] == "STS", tail)
    # Errors name what is wrong and exit 2.
    r = run(page, "--seg", "7", "--lines", "1")
    check("seg range", r.returncode == 2 and "--seg 7" in r.stderr and "0..2" in r.stderr,
          r.stderr)
    bad = os.path.join(tmp, "bad.csv")
    write_page(bad, [h for h in HEADER if h != "Instructions Executed"],
               [(s, 0, 0, 0, 0) for s, *_ in LINES])
    r = run(bad)
    check("missing column", r.returncode == 2 and "'Instructions Executed'" in r.stderr,
          r.stderr)

finish("sass_segments")
