#!/usr/bin/env python3
"""tables.py - docs/BENCHMARKS.md's tables, generated from the JSON lines the
benchmarks write.

Input: one .jsonl per device run (bench/device.sh writes $OUT/bench.jsonl).
Its first record is the run's header, written by device.sh:

    {"bench": "run", "date": "...", "gpu": "...", "driver": "...", "commit": "..."}

then the records of bench_warmup, bench_pair, bench_topn, bench_packed and
bench_dist, and
those of bench/torch_*.py (torch.topk on the same shapes, in the same run, and
the Python binding's host overhead, torch_host.py).

Each table row takes its figures from the newest run that measured it (runs
are ordered by their header's date, then by their order on the command line),
and its torch.topk figure from that same run only, never from another: a
ratio between two runs would mix two machines' states. Each row names its run
by a letter, and the list of runs after the tables gives each one's date, GPU,
driver and commit.

Runs are grouped by GPU model, one block of tables each (a row never mixes
two GPUs): the H200's between the markers below, another model's between
<!-- tables:MODEL:begin --> and <!-- tables:MODEL:end --> (MODEL as in
gpu_model(), e.g. H100). Floors are computed here, from the bytes a kernel
must move, at one bandwidth a model (FLOOR_TBPS), so every table of a block
uses the same one: the bench's own `bytes` where it reports them, else the
bytes derived from the shape.

Usage:
    bench/tables.py RUN.jsonl [RUN.jsonl ...]              print the tables
    bench/tables.py RUN.jsonl [...] --doc docs/BENCHMARKS.md
        replace the text between the markers below in that file (re-runnable)
"""
import argparse
import json
import re
import sys

BEGIN = "<!-- tables:begin -->"
END = "<!-- tables:end -->"
# Read + write bandwidth of the floors, TB/s: the H200's measured copy
# bandwidth (../shared/DEVICE.md); the H100's HBM3 datasheet peak (no copy
# measured), which keeps its floors lower bounds.
FLOORS = {"H200": 4.1, "H100": 3.35}
FLOOR_TBPS = FLOORS["H200"]  # the block being rendered (render_model)


# ------------------------------------------------------------------ input

class Run:
    """One device run: its header and its records, in file order."""

    def __init__(self, path, order):
        self.path = path
        self.order = order
        self.header = {}
        self.records = []
        self.torch_version = None
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise SystemExit(f"{path}:{lineno}: not a JSON line: {e}")
                if not isinstance(rec, dict):
                    raise SystemExit(f"{path}:{lineno}: not a JSON object")
                if rec.get("bench") == "run":
                    self.header = rec
                elif rec.get("bench") == "torch_env":
                    self.torch_version = rec.get("torch")
                else:
                    self.records.append(rec)
        if not self.header:
            raise SystemExit(f"{path}: no header record "
                             '({"bench": "run", ...}, written by bench/device.sh)')
        self.label = None  # set once all runs are known

    def sort_key(self):
        return (str(self.header.get("date", "")), self.order)

    def find(self, pred):
        """The last record of this run for which pred(record) holds."""
        hit = None
        for rec in self.records:
            if pred(rec):
                hit = rec
        return hit

    def legend(self):
        h = self.header
        parts = [str(h.get("date", "date unknown")), str(h.get("gpu", "GPU unknown"))]
        if h.get("driver"):
            parts.append(f"driver {h['driver']}")
        parts.append(f"commit {h.get('commit', 'unknown')}")
        if self.torch_version:
            parts.append(f"torch {self.torch_version}")
        if h.get("note"):
            parts.append(str(h["note"]))
        return ", ".join(parts)


def newest(runs, pred):
    """(run, record) from the newest run with a record matching pred."""
    for run in reversed(runs):
        rec = run.find(pred)
        if rec is not None:
            return run, rec
    return None, None


def is_(bench, **fields):
    def pred(rec):
        if rec.get("bench") != bench:
            return False
        return all(rec.get(k) == v for k, v in fields.items())
    return pred


def shape_fields(shape):
    """'W=8 K=2048 N=384 T=6710 ids' -> {'W': 8, 'K': 2048, 'N': 384, 'T': 6710}."""
    return {k: int(v) for k, v in re.findall(r"\b([A-Z])=(\d+)", shape or "")}


def median(rec):
    """A record's median in us; None for no record or no figure."""
    if not rec:
        return None
    for k in ("median_us", "us"):
        if isinstance(rec.get(k), (int, float)):
            return float(rec[k])
    return None


# ----------------------------------------------------------------- output

def num(v):
    """About three significant figures: what the medians can tell apart."""
    if v is None:
        return "-"
    if v >= 1000:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def ratio(a, b):
    """a / b as '7.5x', or '-'."""
    if a is None or b is None or b <= 0:
        return "-"
    return f"{a / b:.1f}x"


def saved(a, b):
    """What b saves of a, as '12%', or '-'."""
    if a is None or b is None or a <= 0:
        return "-"
    return f"{(a - b) / a * 100:.0f}%"


def floor_us(nbytes):
    return nbytes / (FLOOR_TBPS * 1e6)


class Table:
    def __init__(self, title, source, columns):
        self.title = title
        self.source = source
        self.columns = columns
        self.rows = []
        self.runs = []  # the runs rows refer to, in first-use order

    def add(self, run, cells):
        if run not in self.runs:
            self.runs.append(run)
        self.rows.append(cells + [run.label])

    def render(self):
        if not self.rows:
            return ""
        out = [f"### {self.title}", "", self.source, ""]
        cols = self.columns + ["run"]
        out.append("| " + " | ".join(cols) + " |")
        out.append("| " + " | ".join("---" for _ in cols) + " |")
        for r in self.rows:
            out.append("| " + " | ".join(str(c) for c in r) + " |")
        out.append("")
        return "\n".join(out)


# ----------------------------------------------------------------- tables

def warmup_table(runs):
    t = Table("Warmup and the compile cache",
              "`bench/bench_warmup`, the default config (deepseek-v3.2-dcp8). "
              "Wall-clock times on the host.",
              ["what", "figure", "goal"])
    run, rec = newest(runs, is_("warmup", stage="cold_total"))
    if rec:
        t.add(run, ["cold compile, cache off", f"{num(rec['ms'])} ms for {rec['keys']} kernels", "-"])
    run, rec = newest(runs, is_("warmup", stage="warm_start"))
    if rec:
        fig = f"**{num(rec['median_ms'])} ms** median"
        if rec.get("min_ms"):
            fig += f" (min {num(rec['min_ms'])})"
        t.add(run, ["warm start: open the cache, fresh context, load every module",
                    fig, f"< {rec.get('goal_ms', 10)} ms"])
        if rec.get("first_ms"):
            t.add(run, ["warm start, first context of the process (creates the CUDA context)",
                        f"{num(rec['first_ms'])} ms", "-"])
    run, rec = newest(runs, is_("warmup", stage="concurrent"))
    if rec:
        t.add(run, [f"{rec['processes']} processes warming one empty cache at once",
                    f"{num(rec['wall_ms'])} ms wall, {rec['total_compiles']} compiles "
                    f"for {rec['distinct_keys']} keys",
                    "compiles = keys"])
    return t


PAIR_SHAPES = [(8, 2048, 6710), (4, 2048, 6710), (2, 2048, 6710), (16, 2048, 6710),
               (8, 1024, 6710), (8, 4096, 6710), (8, 512, 6710),
               (8, 2048, 64), (4, 2048, 64), (2, 2048, 64)]


def pair_table(runs):
    t = Table("Pair merge",
              "`bench/bench_pair` + `bench/torch_pair.py`: select the top K of W*K (fp32 score, "
              "int32 gid) candidates a row, ids out, L2 flushed before each call. "
              "\"torch route\" is what engines run today: the reorder copy to row-major, "
              "torch.topk and a gather. Times in us; floor: the candidates read and the ids "
              f"written once at {FLOOR_TBPS} TB/s.",
              ["W K T", "in place (rank-major)", "row-major", "torch.topk", "torch route",
               "x faster than topk / route", "floor", "x floor"])
    for w, k, tt in PAIR_SHAPES:
        run, rec = newest(runs, is_("pair_select", layout="rank-major", W=w, K=k, T=tt))
        if not rec:
            continue
        ours = median(rec)
        row = run.find(is_("pair_select", layout="row-major", W=w, K=k, T=tt))
        topk = run.find(is_("torch_pair_topk", W=w, K=k, T=tt))
        route = run.find(is_("torch_pair_route", W=w, K=k, T=tt))
        tk = median(topk)
        rt = median(route)
        fl = floor_us(rec["bytes"]) if rec.get("bytes") else None
        t.add(run, [f"{w} {k} {tt}", f"**{num(ours)}**", num(median(row)),
                    num(tk), num(rt), f"{ratio(tk, ours)} / {ratio(rt, ours)}",
                    num(fl), ratio(ours, fl)])
    run, rec = newest(runs, is_("pair_pack"))
    if rec:
        ours = median(rec)
        fl = floor_us(rec["bytes"]) if rec.get("bytes") else None
        t.add(run, [f"pack {rec['W']} {rec['K']} {rec['T']} (fp32 logits)", f"**{num(ours)}**",
                    "-", "-", "-", "-", num(fl), ratio(ours, fl)])
    return t


def pair_split_table(runs):
    t = Table("Pair select: a row on 1, 2 or 4 CTAs",
              "`bench/bench_pair`, rank-major, L2 flushed before each call: one CTA a row (what "
              "`dcptopk_pair_select` runs) against each row split over a cluster of 2 or 4 "
              "(`dc_pair_select_split`; a split keeps at least 2048 candidates a CTA), on the same "
              "rows; every split's ids equal one CTA's bit for bit. Times in us.",
              ["W K T", "1 CTA", "2 CTAs", "4 CTAs", "torch.topk", "x faster than topk (1 CTA)"])
    for w, k, tt in PAIR_SHAPES:
        run, rec = newest(runs, is_("pair_select_split", layout="rank-major-ctas2", W=w, K=k,
                                    T=tt))
        if not rec:
            continue
        one = run.find(is_("pair_select", layout="rank-major", W=w, K=k, T=tt))
        four = run.find(is_("pair_select_split", layout="rank-major-ctas4", W=w, K=k, T=tt))
        topk = run.find(is_("torch_pair_topk", W=w, K=k, T=tt))
        om = median(one)
        tk = median(topk)
        t.add(run, [f"{w} {k} {tt}", f"**{num(om)}**", num(median(rec)),
                    num(median(four)), num(tk), ratio(tk, om)])
    return t


def float_ids_table(runs):
    t = Table("Pair select on float-valued ids (vLLM's layout)",
              "`bench/bench_pair` + `bench/torch_pair.py`, W = 8, K = 2048: the same candidates "
              "with each gid stored as a float32 value, read in place by the float-id layouts, "
              "against the int32 layouts and against the copy they replace (the torch "
              "conversion of `ids_as_float=True`, then the int32 select). Times in us.",
              ["T", "layout", "float ids in place", "int32 ids", "copy + int32 select",
               "x faster than the copy route"])
    for tt in (6710, 64):
        for base in ("rank-major", "row-major"):
            run, rec = newest(runs, is_("pair_select", layout=base + "-float-ids", W=8, K=2048,
                                        T=tt))
            if not rec:
                continue
            ours = median(rec)
            plain = run.find(is_("pair_select", layout=base, W=8, K=2048, T=tt))
            copy = run.find(is_("torch_pair_float_copy", W=8, K=2048, T=tt))
            pm = median(plain)
            route = median(copy) + pm if copy and pm is not None else None
            t.add(run, [str(tt), base, f"**{num(ours)}**", num(pm), num(route),
                        ratio(route, ours)])
    return t


TOPN_SHAPES = [(6710, 16384), (64, 131072), (8, 131072), (64, 16384)]
FAMILIES = ["normal", "normal+100", "integer0..3", "-inf-masked"]


def topn_table(runs):
    t = Table("Local top-N + pack (packed merge, round 1)",
              "`bench/bench_topn` + `bench/torch_topn.py`: the fused local top-N + pack, N = 384, "
              "bf16 rows, inputs rotated over more than the L2. \"call\": events around one "
              "launch (includes the host's launch gap); \"back to back\": 20 launches between "
              "two events, the median of 9 such batches. torch.topk is timed as a call, on the "
              "same rows. Times in us; floor: the rows read and the packed words written once "
              f"at {FLOOR_TBPS} TB/s; \"x floor\" is of the back-to-back time.",
              ["rows x columns", "family", "call", "back to back", "torch.topk",
               "x faster (call / b2b)", "floor", "x floor"])
    for T, S in TOPN_SHAPES:
        for fam in FAMILIES:
            run, rec = newest(runs, is_("topn_pack", T=T, S=S, family=fam, auto=True))
            if not rec:
                continue
            call = median(rec)
            b2b = rec.get("pipelined_us")
            n = rec.get("N", 384)
            tr = run.find(is_("torch_topk", T=T, S=S, family=fam))
            tk = median(tr)
            fl = floor_us(T * S * 2 + T * (n + n // 32) * 4)
            bold = fam == "normal"
            c = f"**{num(call)}**" if bold else num(call)
            t.add(run, [f"{T} x {S}", fam, c, num(b2b), num(tk),
                        f"{ratio(tk, call)} / {ratio(tk, b2b)}", num(fl), ratio(b2b, fl)])
    return t


# The exact select's parts that find no saturated row: they move no
# candidate and have no floor or torch.topk figure of their own.
NO_FLOOR_PARTS = ("select exact: push, no sat row", "select exact: rescue, no sat row")


def packed_table(runs):
    t = Table("Packed merge: select, rescue, the two rounds",
              "`bench/bench_packed` + `bench/torch_packed.py`: W = 8, K = 2048, N = 384, no "
              "saturated row unless named. \"piped\": 50 calls launched back to back; "
              "\"graph\": the same 50 replayed as one CUDA graph (per call).{rows} The loopback "
              "merge runs all 8 ranks' work one after another on one GPU: 8 times one rank's "
              "work, not a latency. Times in us; floor: the gathered words read and the ids "
              f"written once at {FLOOR_TBPS} TB/s.",
              ["workload", "shape", "us", "torch.topk", "x faster", "floor", "x floor"])
    seen = []
    for run in runs:
        for rec in run.records:
            if rec.get("bench") in ("select", "select exact (+push+rescue)",
                                    "select exact: select kernel", *NO_FLOOR_PARTS, "rescue",
                                    "rescue, no saturated row", "rescue, no saturated row, piped",
                                    "rescue, no saturated row, graph", "rescue, rows out",
                                    "loopback merge (8 ranks, 1 GPU)"):
                key = (rec["bench"], rec.get("shape"))
                if key in seen:
                    continue
                # A rescue row first met in a later run goes after the rescue
                # rows already listed, not after the loopback rows.
                at = len(seen)
                if key[0].startswith("rescue"):
                    for i, (name, _) in enumerate(seen):
                        if name.startswith("rescue"):
                            at = i + 1
                seen.insert(at, key)
    rows = ""
    if any(name == "rescue, rows out" for name, _ in seen):
        rows = (" \"rows out\": the owned physical rows and their counts written besides the "
                "ids (block 64, one request a row), as an engine's decode asks.")
    t.source = t.source.replace("{rows}", rows)
    for name, shape in seen:
        run, rec = newest(runs, is_(name, shape=shape))
        ours = median(rec)
        f = shape_fields(shape)
        tk, tdesc, fl = None, None, None
        part = name in NO_FLOOR_PARTS
        if part:
            tr = None
        elif name.startswith("select"):
            tr = run.find(is_("torch_packed_topk", role="select"))
            fl = floor_us(f["W"] * f["T"] * (f["N"] + f["N"] // 32) * 4 + f["T"] * f["K"] * 4)
        elif name.startswith("loopback"):
            tr = run.find(is_("torch_packed_topk",
                              role="decode top-N" if f.get("T", 0) <= 64 else "prefill top-N"))
        else:
            tr = None
        if tr:
            tk = median(tr)
            tdesc = f"{num(tk)} ({tr.get('what', '')})" if tr.get("what") else num(tk)
        x = ratio(tk, ours) if name.startswith("select") and not part else "-"
        t.add(run, [name, shape, f"**{num(ours)}**" if name == "select" else num(ours),
                    tdesc or "-", x, num(fl), ratio(ours, fl)])
    return t


def host_table(runs):
    t = Table("Host overhead of one drop-in merge call (Python)",
              "`bench/torch_host.py`: `dcptopk.merge.dcp_topk_merge` on one rank (pack + select + "
              "push + rescue), eager. Host time per call with calls issued back to back (the "
              "Python, ctypes and launch cost alone); the same for the library calls it made, "
              "from a bare loop; the difference (the drop-in call's own cost, the goal's "
              "figure); the call's device time (CUDA events); the host time of one replay of a "
              "captured call. Microseconds, medians.",
              ["call", "shape", "host per call", "launches alone", "beyond the launches",
               "kernels", "graph replay host", "goal"])
    shapes = []
    for run in runs:
        for rec in run.records:
            if rec.get("bench") == "torch_host_overhead":
                key = (rec.get("call"), rec.get("T"), rec.get("K"), rec.get("N"), rec.get("S"))
                if key not in shapes:
                    shapes.append(key)
    for call, T, K, N, S in sorted(shapes, key=lambda k: (str(k[0]), k[1] or 0)):
        run, rec = newest(runs, is_("torch_host_overhead", call=call, T=T, K=K, N=N, S=S))
        goal = rec.get("goal_us")
        t.add(run, [f"`{call}`", f"T={T} K={K} N={N} S={S}", num(rec.get("host_us")),
                    num(rec.get("launches_us")),
                    f"**{num(rec['beyond_us'])}**" if rec.get("beyond_us") is not None else "-",
                    num(rec.get("kernels_us")), num(rec.get("replay_host_us")),
                    f"<= {goal}" if goal is not None else "-"])
    return t


def dist_table(runs):
    t = Table("The merge across ranks, on one GPU",
              "`bench/bench_dist`. One-call merge: `dcptopk_group_merge` of a one-rank group "
              "(packed exact, K = 2048, N = 384), host time per call issued back to back; the "
              "same launches through `dcptopk_pack` + `dcptopk_select` from a bare loop; the "
              "difference is the group layer's own host cost (goal <= 5 us); device time of "
              "one call; host time of one graph replay. Exchange: eight virtual ranks in one "
              "process on one GPU, the device push (rows stored into every rank's buffer, "
              "flags released and awaited) against plain device copies of the same rows; "
              "both move W x W row blocks through one GPU, so they say which is cheaper to "
              "launch and run, not what eight GPUs take. Microseconds, medians.",
              ["measure", "path / shape", "host per call", "lower-level calls",
               "beyond", "device", "graph replay host"])
    keys = []
    for run in runs:
        for rec in run.records:
            if rec.get("bench") in ("dist_host", "dist_exchange"):
                key = (rec["bench"], rec.get("path"), rec.get("shape"))
                if key not in keys:
                    keys.append(key)
    for bench, path, shape in keys:
        if bench == "dist_host":
            run, rec = newest(runs, is_(bench, path=path, shape=shape))
            replay = rec.get("replay_host_us")
            t.add(run, ["one-call merge", f"{path}, {shape}", num(rec.get("host_us")),
                        num(rec.get("lower_us")), f"**{num(rec.get('beyond_us'))}**",
                        num(rec.get("device_us")),
                        num(replay) if replay is not None and replay >= 0 else "-"])
        else:
            run, rec = newest(runs, is_(bench, shape=shape))
            t.add(run, ["exchange: push / copies", shape, "-", "-", "-",
                        f"{num(rec.get('push_us'))} / {num(rec.get('copy_us'))}", "-"])
    return t


def pdl_table(runs):
    t = Table("Dependent launches, back to back",
              "`bench/bench_pair` and `bench/bench_packed`: 20 calls launched back to back "
              "between two events (the median of 9 such batches, per call; no L2 flush, the "
              "inputs rotated over more than twice the L2), with the kernels' programmatic "
              "dependent launches and in plain stream order (`dc_ctx_set_pdl`), in one run. "
              "\"one call\": events around one launch, as in the tables above (the pair "
              "select's after an L2 flush). Times in us.",
              ["workload", "shape", "one call", "stream order", "dependent launch", "time saved"])
    for w, k, tt in PAIR_SHAPES:
        run, on = newest(runs, is_("pair_select_b2b", layout="rank-major-pdl", W=w, K=k, T=tt))
        if not on:
            continue
        off = run.find(is_("pair_select_b2b", layout="rank-major-nopdl", W=w, K=k, T=tt))
        one = run.find(is_("pair_select", layout="rank-major", W=w, K=k, T=tt))
        a, b = median(off), median(on)
        t.add(run, ["pair select, rank-major", f"W={w} K={k} T={tt}",
                    num(median(one)), num(a), f"**{num(b)}**",
                    saved(a, b)])
    for name, one_name in (("select", "select"), ("select exact", "select exact (+push+rescue)")):
        run, on = newest(runs, is_(name + " b2b, dependent launch"))
        if not on:
            continue
        off = run.find(is_(name + " b2b, stream order", shape=on.get("shape")))
        one = run.find(is_(one_name, shape=on.get("shape")))
        a, b = median(off), median(on)
        t.add(run, ["packed " + name, on.get("shape", "-"), num(median(one)),
                    num(a), f"**{num(b)}**", saved(a, b)])
    return t


def render(runs):
    runs = sorted(runs, key=Run.sort_key)
    for i, run in enumerate(runs):
        run.label = chr(ord("A") + i) if i < 26 else f"R{i}"
    tables = [warmup_table(runs), pair_table(runs), pair_split_table(runs), float_ids_table(runs),
              topn_table(runs),
              packed_table(runs), pdl_table(runs), host_table(runs), dist_table(runs)]
    body = "\n".join(x for x in (tb.render() for tb in tables) if x)
    used = [r for r in runs if any(r in tb.runs for tb in tables)]
    if used:
        body += "\n### Runs\n\n" + "\n".join(
            f"- **{r.label}**: {r.legend()}." for r in used) + "\n"
    return ("<!-- generated by bench/tables.py from "
            + ", ".join(r.path.split("/")[-1] for r in runs)
            + "; edit the runs, not this text -->\n\n" + body)


def gpu_model(run):
    """H200, H100, ... from the header's GPU name; else the whole name."""
    name = str(run.header.get("gpu", "unknown"))
    for word in name.replace("-", " ").split():
        if len(word) >= 4 and word[0] in "ABHLV" and word[1:4].isdigit():
            return word
    return name


def markers(model):
    if model == "H200":
        return BEGIN, END
    return f"<!-- tables:{model}:begin -->", f"<!-- tables:{model}:end -->"


def render_model(model, runs):
    global FLOOR_TBPS
    FLOOR_TBPS = FLOORS.get(model, FLOORS["H200"])
    return render(runs)


def replace_between_markers(text, doc_path, generated, begin=BEGIN, end=END):
    """text with the part between the markers replaced by generated."""
    b, e = text.find(begin), text.find(end)
    if b < 0 or e < 0 or e < b:
        raise SystemExit(f"{doc_path}: the markers {begin} and {end} are missing or out of order")
    return text[:b + len(begin)] + "\n" + generated.rstrip("\n") + "\n" + text[e:]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", help="one .jsonl per device run")
    ap.add_argument("--doc", help="replace the tables between the markers in this file")
    a = ap.parse_args(argv)
    groups = {}
    for i, p in enumerate(a.runs):
        run = Run(p, i)
        groups.setdefault(gpu_model(run), []).append(run)
    blocks = [(model, render_model(model, runs)) for model, runs in sorted(groups.items())]
    if not a.doc:
        for model, generated in blocks:
            sys.stdout.write(f"<!-- {model} -->\n" + generated)
        return 0
    # Every block is placed before the file is written: a missing marker
    # leaves the document as it was.
    with open(a.doc, encoding="utf-8") as f:
        text = f.read()
    new = text
    for model, generated in blocks:
        new = replace_between_markers(new, a.doc, generated, *markers(model))
    if new != text:
        with open(a.doc, "w", encoding="utf-8") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
