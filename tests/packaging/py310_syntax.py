"""py310_syntax.py PACKAGE_DIR - every module of the Python package parses as
Python 3.10, the oldest that pyproject.toml's requires-python accepts.

No 3.10 interpreter is at hand in CI (Debian has 3.11), so this is the
parse-level check: ast with feature_version=(3, 10) refuses syntax newer
than 3.10 (match is fine, `except*` and PEP 695 generics are not). Imports
newer than 3.10 (tomllib, typing.Self, ...) are looked for by name.
"""
import ast
import os
import sys

NEWER_MODULES = {"tomllib"}
NEWER_TYPING = {"Self", "LiteralString", "Never", "TypeVarTuple", "Unpack", "override",
                "assert_never", "reveal_type", "dataclass_transform"}


def check(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    errors = []
    try:
        tree = ast.parse(text, path, feature_version=(3, 10))
    except SyntaxError as e:
        return [f"{path}:{e.lineno}: not Python 3.10 syntax: {e.msg}"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            errors += [f"{path}:{node.lineno}: imports {a.name} (newer than 3.10)"
                       for a in node.names if a.name in NEWER_MODULES]
        elif isinstance(node, ast.ImportFrom):
            if node.module in NEWER_MODULES:
                errors.append(f"{path}:{node.lineno}: imports {node.module} (newer than 3.10)")
            if node.module == "typing":
                errors += [f"{path}:{node.lineno}: typing.{a.name} is newer than 3.10"
                           for a in node.names if a.name in NEWER_TYPING]
    return errors


def main():
    pkg = sys.argv[1]
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(pkg) for f in fs
                   if f.endswith(".py"))
    if not files:
        print(f"FAIL: no .py files under {pkg}")
        return 1
    errors = [e for f in files for e in check(f)]
    for e in errors:
        print("FAIL:", e)
    if errors:
        return 1
    print(f"py310: {len(files)} modules parse as Python 3.10")
    return 0


if __name__ == "__main__":
    sys.exit(main())
