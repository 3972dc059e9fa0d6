#!/usr/bin/env python3
"""test_tables.py - bench/tables.py on two small fixture runs (tests/cpu/tables/).

Checks the generated rows cell by cell: each row comes from the newest run
that measured it, its torch.topk figure only from that same run, the ratios
and floors are computed from the figures, and writing into a document
replaces exactly the text between the markers (twice gives the same file),
a run of another GPU model fills that model's block only;
then bench/device.sh, with a fake nvidia-smi, writes a header record that
tables.py reads.
Usage: test_tables.py [path of bench/tables.py]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from checks import check, finish  # noqa: E402

TABLES = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "bench", "tables.py")
OLD = os.path.join(HERE, "tables", "old_run.jsonl")
NEW = os.path.join(HERE, "tables", "new_run.jsonl")


def run(*args):
    return subprocess.run([sys.executable, TABLES, *args], capture_output=True, text=True)


def row_of(text, first_cells):
    """The cells of the first table row that starts with first_cells."""
    for line in text.splitlines():
        if not line.startswith("| "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:len(first_cells)] == first_cells:
            return cells
    return None


# The runs are given newest first: the order comes from the headers' dates.
r = run(NEW, OLD)
check("exit status", r.returncode == 0, r.stderr)
out = r.stdout

pair = row_of(out, ["8 2048 6710"])
check("pair row exists", pair is not None, out)
if pair:
    # The newest run measured this row: its figure, its torch.topk, and no
    # row-major or route figure borrowed from the older run.
    check("pair figure from the newest run", pair[1] == "**320.0**", pair)
    check("pair row-major not borrowed", pair[2] == "-", pair)
    check("pair torch.topk of the same run", pair[3] == "1440", pair)
    check("pair route not borrowed", pair[4] == "-", pair)
    check("pair x faster", pair[5] == "4.5x / -", pair)
    check("pair floor from bytes at 4.1 TB/s", pair[6] == "227.9", pair)
    check("pair x floor", pair[7] == "1.4x", pair)
    check("pair run label", pair[8] == "B", pair)

small = row_of(out, ["4 2048 64"])
check("older run's row kept", small is not None and small[1] == "**10.0**" and
      small[5] == "7.0x / -" and small[8] == "A", small)

topn = row_of(out, ["64 x 131072", "normal"])
check("top-N row exists", topn is not None, out)
if topn:
    check("top-N auto variant only", topn[2] == "**15.0**" and topn[3] == "12.0", topn)
    check("top-N torch not borrowed from the older run", topn[4] == "-" and topn[5] == "- / -", topn)
    check("top-N floor and x floor", topn[6] == "4.12" and topn[7] == "2.9x", topn)

warm = row_of(out, ["warm start: open the cache, fresh context, load every module"])
check("warm start", warm is not None and warm[1] == "**2.50 ms** median (min 2.25)", warm)

sel = row_of(out, ["select"])
check("select", sel is not None and sel[2] == "**90.0**" and sel[4] == "5.0x" and
      sel[5] == "34.1" and sel[6] == "2.6x" and sel[3].startswith("450.0"), sel)

# The Python host overhead: each shape from the newest run that measured it.
host = row_of(out, ["`dcp_topk_merge`", "T=64 K=2048 N=384 S=65536"])
check("host row from the newest run", host is not None and host[2:] ==
      ["19.5", "10.0", "**9.50**", "75.2", "3.12", "<= 10", "B"], host)
host1 = row_of(out, ["`dcp_topk_merge`", "T=1 K=2048 N=384 S=65536"])
check("host row only the older run measured", host1 is not None and host1[2:] ==
      ["11.0", "-", "-", "20.0", "3.00", "<= 10", "A"], host1)

check("legend names date, GPU, commit, torch",
      "- **A**: 2026-01-01T10:00:00Z, NVIDIA H200, driver 580.159, commit aaaaaaa, torch 2.11." in out,
      out)
check("legend of the newest run", "- **B**: 2026-02-01T10:00:00Z, NVIDIA H200, driver 580.159, commit bbbbbbb." in out, out)

# Into a document: only the text between the markers changes; re-runnable.
tmp = tempfile.mkdtemp()
try:
    doc = os.path.join(tmp, "BENCH.md")
    head, tail = "# Title\n\nprose before\n\n", "\nprose after\n"
    with open(doc, "w") as f:
        f.write(head + "<!-- tables:begin -->\nold table\n<!-- tables:end -->" + tail)
    r = run(OLD, NEW, "--doc", doc)
    check("--doc exit status", r.returncode == 0, r.stderr)
    text = open(doc).read()
    check("text outside the markers kept", text.startswith(head + "<!-- tables:begin -->\n") and
          text.endswith("<!-- tables:end -->" + tail), text[:200])
    check("old table replaced", "old table" not in text and "**320.0**" in text, text[:200])
    r = run(OLD, NEW, "--doc", doc)
    check("re-run leaves the file as it was", open(doc).read() == text)

    bare = os.path.join(tmp, "BARE.md")
    with open(bare, "w") as f:
        f.write("no markers\n")
    r = run(NEW, "--doc", bare)
    check("missing markers refused", r.returncode != 0 and "markers" in r.stderr, r.stderr)
    check("a refused document is not touched", open(bare).read() == "no markers\n")

    # A run of another GPU model: its own block, never the H200's rows,
    # floors at that model's bandwidth; one missing block leaves the
    # document untouched.
    h100 = os.path.join(tmp, "h100.jsonl")
    with open(h100, "w") as f:
        f.write('{"bench": "run", "date": "2026-03-01T10:00:00Z", '
                '"gpu": "NVIDIA H100 80GB HBM3", "driver": "580.159", "commit": "ccccccc"}\n')
        f.write('{"bench": "pair_select", "layout": "rank-major", "W": 8, "K": 2048, '
                '"T": 6710, "median_us": 400.0, "bytes": 934584320}\n')
    r = run(OLD, NEW, h100)
    check("two models exit status", r.returncode == 0, r.stderr)
    h200_part, _, h100_part = r.stdout.partition("<!-- H200 -->")[2].partition("<!-- H100 -->")
    if not h100_part:  # the blocks print in model order: H100 first
        h100_part, _, h200_part = r.stdout.partition("<!-- H100 -->")[2].partition("<!-- H200 -->")
    p200 = row_of(h200_part, ["8 2048 6710"])
    p100 = row_of(h100_part, ["8 2048 6710"])
    check("the H200 row keeps the H200 run", p200 is not None and p200[1] == "**320.0**" and
          p200[8] == "B", p200)
    check("the H100 row in its block, floor at 3.35 TB/s", p100 is not None and
          p100[1] == "**400.0**" and p100[6] == "279.0" and p100[8] == "A", p100)
    with open(doc, "w") as f:
        f.write(head + "<!-- tables:begin -->\n<!-- tables:end -->" + tail)
    before = open(doc).read()
    r = run(OLD, NEW, h100, "--doc", doc)
    check("a model without its markers refused",
          r.returncode != 0 and "tables:H100:begin" in r.stderr, r.stderr)
    check("a refused document is left whole", open(doc).read() == before)
    with open(doc, "w") as f:
        f.write(head + "<!-- tables:begin -->\n<!-- tables:end -->\n"
                "<!-- tables:H100:begin -->\n<!-- tables:H100:end -->" + tail)
    r = run(OLD, NEW, h100, "--doc", doc)
    text = open(doc).read()
    b100 = text[text.find("<!-- tables:H100:begin -->"):]
    check("both blocks written", r.returncode == 0 and "**320.0**" in text[:text.find(
        "<!-- tables:end -->")] and "**400.0**" in b100 and "**400.0**" not in text[:text.find(
        "<!-- tables:end -->")], r.stderr + text[:400])

    headless = os.path.join(tmp, "headless.jsonl")
    with open(headless, "w") as f:
        f.write('{"bench": "select", "shape": "W=8 K=2048 N=384 T=6710 ids", "us": 90.0}\n')
    r = run(headless)
    check("a run without its header record is refused",
          r.returncode != 0 and "header" in r.stderr, r.stderr)

    # bench/device.sh's header record, end to end: a fake nvidia-smi, the
    # commit from BUILD/COMMIT, one harmless stage; then tables.py reads the
    # bench.jsonl it wrote. (Skipped where device.sh would link /work/main.)
    root = os.path.dirname(os.path.dirname(os.path.abspath(TABLES)))
    if shutil.which("bash") and os.path.exists("/work/main"):
        fake = os.path.join(tmp, "bin")
        os.mkdir(fake)
        with open(os.path.join(fake, "nvidia-smi"), "w") as f:
            f.write("#!/bin/sh\necho 'NVIDIA H200, 580.159, 143771 MiB, 1980 MHz'\n")
        os.chmod(os.path.join(fake, "nvidia-smi"), 0o755)
        build = os.path.join(tmp, "build")
        os.mkdir(build)
        with open(os.path.join(build, "COMMIT"), "w") as f:
            f.write("abc1234\n")
        out = os.path.join(tmp, "out")
        cache = os.path.join(tmp, "cache-dir")
        os.mkdir(cache)
        env = dict(os.environ, PATH=fake + os.pathsep + os.environ.get("PATH", ""), OUT=out,
                   DCPTOPK_CACHE_DIR=cache)
        env.pop("DCPTOPK_COMMIT", None)
        r = subprocess.run(["bash", os.path.join(root, "bench", "device.sh"), build, "keepcache"],
                           cwd=root, env=env, capture_output=True, text=True)
        check("device.sh exit status", r.returncode == 0, r.stdout + r.stderr)
        lines = open(os.path.join(out, "bench.jsonl")).read().splitlines()
        header = json.loads(lines[0]) if lines else {}
        check("device.sh header record",
              header.get("bench") == "run" and header.get("gpu") == "NVIDIA H200" and
              header.get("driver") == "580.159" and header.get("commit") == "abc1234" and
              re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", header.get("date", "")),
              lines[:1])
        with open(os.path.join(out, "bench.jsonl"), "a") as f:
            f.write('{"bench": "select", "shape": "W=8 K=2048 N=384 T=6710 ids", "us": 90.0}\n')
        r = run(os.path.join(out, "bench.jsonl"))
        check("tables.py reads device.sh's run", r.returncode == 0 and "commit abc1234" in r.stdout,
              r.stdout + r.stderr)
    else:
        print("device.sh part skipped (no bash, or no /work/main)")
finally:
    shutil.rmtree(tmp)

finish("tables")
