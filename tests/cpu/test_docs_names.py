#!/usr/bin/env python3
"""test_docs_names.py - every repository path that README.md and docs/*.md cite
in backticks, and every C name they cite, exists in the tree, so a moved file
or a renamed function cannot leave the guides naming nothing.

Paths: an inline code word that contains a "/" or ends in one of PATH_EXTS is
a path from the repository root (a trailing "/" asks for a folder; <name> and
* are wildcards); a bare file name must be the name of some file of the tree.
A path without an extension may name a program of the build by its source
(bench/topn_ab: bench/topn_ab.c). Words that cannot be repository paths are
skipped: absolute, home and $VAR paths, URLs and host names, build outputs
(build/, BUILD/) and words with a component that holds no lower-case letter
(N/32, OUT_DIR/x).
Names: every dc_*, dcptopk_*, DC_* and DCPTOPK_* identifier of the docs (code
spans, fenced blocks and prose alike) must occur, as a whole word, in a file
of SOURCE_DIRS (<name> and * are wildcards).
What the docs name on purpose although the tree lacks it (other projects'
paths, the wheel's layout, files a run writes) is in EXCEPTIONS, with why;
an exception no doc cites any more fails too, so the list stays short.

Each failure prints DOC:LINE, what is missing and the cited text.
Usage: test_docs_names.py [SOURCE_DIR]"""
import os
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()

PATH_EXTS = (".c", ".h", ".cu", ".cuh", ".py", ".sh", ".md", ".txt")
SOURCE_DIRS = ("base", "src", "runtime", "cache", "group", "kernels",
               "include", "tools", "bindings", "tests", "bench", "cmake",
               "scripts", "CMakeLists.txt", "pyproject.toml")
SOURCE_EXTS = (".c", ".h", ".cu", ".cuh", ".py", ".sh", ".cmake", ".txt",
               ".in", ".pml", ".toml")

# Cited on purpose, not in the tree. Keep each reason; remove an entry once
# no doc needs it.
EXCEPTIONS = {
    # Headers and sources of other projects the build or the kernels meet.
    "cuda.h": "the CUDA toolkit's driver header",
    "nvrtc.h": "the CUDA toolkit's NVRTC header",
    "xxhash.h": "xxHash's header, found at configure time",
    "sqlite3.c": "SQLite's amalgamation (DCPTOPK_BUNDLED_SQLITE)",
    "sqlite3.h": "SQLite's amalgamation (DCPTOPK_BUNDLED_SQLITE)",
    # Other repositories, cited as the sources of models' figures
    # (INTEGRATION.md).
    "vllm-project/vllm": "a GitHub repository",
    "huggingface/transformers": "a GitHub repository",
    "malaiwah/transformers": "a GitHub repository",
    "tests/kernels/attention/": "a folder of vLLM's repository",
    "test_rocm_triton_attn_dsv4.py": "a test of vLLM's repository",
    "docs/source/en/model_doc/deepseek_v41.md":
        "a page of a transformers fork",
    "docs/DEEPSEEK_V32_API.md": "a page of a transformers branch",
    # What the wheel installs, relative to its package folder.
    "dcptopk/*.py": "the Python package inside the wheel",
    "dcptopk/lib/libdcptopk.so": "the library inside the wheel",
    "dcptopk/bin/dcptopk": "the CLI inside the wheel",
    # Files a device run writes (bench/device.sh), not sources.
    "summary.txt": "written by bench/device.sh",
    "tables.md": "written by bench/device.sh",
}


def walk_files(top):
    """Every file under top, skipping hidden folders and build trees."""
    if top.is_file():
        yield top
        return
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs
                   if not x.startswith(".") and not x.startswith("build")
                   and x != "__pycache__"]
        for f in files:
            yield pathlib.Path(d) / f


def read_sources():
    text = []
    for name in SOURCE_DIRS:
        for p in walk_files(root / name):
            if p.name == pathlib.Path(__file__).name:
                continue  # this file names what the docs may cite
            if p.name.endswith(SOURCE_EXTS) or p.name == "CMakeLists.txt":
                text.append(p.read_text(errors="replace"))
    return "\n".join(text)


def wildcard_regex(s, word):
    """s with <placeholder> and * as wildcards, as a regex."""
    out = ""
    for part in re.split(r"(<[^>]*>|\*)", s):
        if part.startswith("<") or part == "*":
            out += word + "*"
        else:
            out += re.escape(part)
    return out


basenames = set()
for p in walk_files(root):
    basenames.add(p.name)
sources = read_sources()

NAME = re.compile(r"\b(?:dc_|dcptopk_|DC_|DCPTOPK_)(?:\w|<\w+>|\*)*")
DOMAIN = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+)+/")


def is_repo_path(word):
    if not ("/" in word or word.endswith(PATH_EXTS)):
        return False
    if not re.fullmatch(r"[A-Za-z0-9_.\-/<>*]+", word):
        return False  # expressions, shapes, key specs
    if word[0] in "/~$.-" or "://" in word or DOMAIN.match(word):
        return False
    first = word.split("/", 1)[0]
    if first == "build" or first.startswith("build-"):
        return False  # a build tree's outputs
    parts = [c for c in word.split("/") if c]
    return all(re.search(r"[a-z*<]", c) for c in parts)


def path_exists(word):
    if "/" not in word:
        rx = re.compile(wildcard_regex(word, "[^/]") + r"\Z")
        return any(rx.match(b) for b in basenames)
    want_dir = word.endswith("/")
    pattern = re.sub(r"<[^>]*>", "*", word.rstrip("/"))
    for p in root.glob(pattern):
        if p.is_dir() if want_dir else p.exists():
            return True
    return False


def program_exists(word):
    """bench/topn_ab: a program of the build, from bench/topn_ab.c."""
    return "/" in word and not word.endswith("/") and \
        "." not in word.rsplit("/", 1)[1] and path_exists(word + ".c")


name_seen = {}


def name_exists(name):
    if name not in name_seen:
        rx = r"\b" + wildcard_regex(name, r"\w") + r"\b"
        name_seen[name] = re.search(rx, sources) is not None
    return name_seen[name]


bad = []
used = set()


def check_names(where, text, cited):
    for m in NAME.finditer(text):
        name = m.group(0)
        if name.endswith("_") and not name.endswith("__"):
            continue  # a prefix in prose ("DCPTOPK_ fields")
        if name in EXCEPTIONS:
            used.add(name)
        elif not name_exists(name):
            bad.append(f"{where}: no C name {name} in the sources "
                       f"(cited in: {cited[:100]})")


def check_paths(where, span):
    for word in span.split():
        word = word.rstrip(",;:")
        if word in EXCEPTIONS:
            used.add(word)
        elif is_repo_path(word) and not path_exists(word) and \
                not program_exists(word):
            bad.append(f"{where}: no file {word} in the tree "
                       f"(cited in: `{span}`)")


def blank(m):
    """m's text with everything but its newlines blanked (keeps lines)."""
    return re.sub(r"[^\n]", " ", m.group(0))


FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)
SPAN = re.compile(r"(`+)(.+?)\1", flags=re.S)
spans = 0
for md in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
    rel = md.relative_to(root)
    text = md.read_text()
    lines = text.split("\n")
    # Fenced blocks: C names only (their paths are commands' arguments).
    for m in FENCE.finditer(text):
        first = text.count("\n", 0, m.start())
        for i, l in enumerate(m.group(0).split("\n")):
            check_names(f"{rel}:{first + i + 1}", l, l.strip())
    prose = FENCE.sub(blank, text)
    # Inline code spans: paths and names.
    for m in SPAN.finditer(prose):
        span = m.group(2).strip()
        where = f"{rel}:{prose.count(chr(10), 0, m.start()) + 1}"
        check_names(where, span, f"`{span}`")
        check_paths(where, span)
        spans += 1
    # The prose around them: names only.
    for i, l in enumerate(SPAN.sub(blank, prose).split("\n")):
        check_names(f"{rel}:{i + 1}", l, lines[i].strip())
for name in sorted(set(EXCEPTIONS) - used):
    bad.append(f"{pathlib.Path(__file__).name}: exception {name} is cited "
               f"by no doc any more: remove it")
for line in bad:
    print(line)
print(f"{'FAIL' if bad else 'ok'}: {len(bad)} missing names or paths "
      f"({spans} code spans and the prose checked)")
sys.exit(1 if bad else 0)
