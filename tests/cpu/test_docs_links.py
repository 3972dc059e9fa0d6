#!/usr/bin/env python3
"""test_docs_links.py - every relative link in README.md and docs/*.md names a
file or folder of the tree, so a moved or renamed file cannot leave the guides
pointing at nothing. Usage: test_docs_links.py [SOURCE_DIR]"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
link = re.compile(r"\]\(([^)\s]+)\)")
bad = []
for md in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)  # code blocks
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code
    for target in link.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # URLs, mailto:, anchors within the page
        path = target.split("#", 1)[0]
        if not (md.parent / path).exists():
            bad.append(f"{md.relative_to(root)}: link to {target}: no such file")
for line in bad:
    print(line)
print(f"{'FAIL' if bad else 'ok'}: {len(bad)} broken relative links")
sys.exit(1 if bad else 0)
