"""The Python package's layout, read from its source with ast: its modules
import one another without a cycle (imports inside functions count: a lazy
import is still a dependency), every name of each __all__ resolves, and no
two modules define a public class of one name.

Needs neither torch nor the library; the modules that import torch are
imported only when torch is there (their names are checked in the source
otherwise)."""
import ast
import importlib
import importlib.util
import os
import sys
import warnings

import harness
from harness import raises

PKG = "dcptopk"


def package_dir():
    spec = importlib.util.find_spec(PKG)
    assert spec is not None and spec.submodule_search_locations, f"{PKG} not found"
    return list(spec.submodule_search_locations)[0]


def modules():
    """{module name: its ast} for every .py file of the package; the package
    itself is "__init__"."""
    d = package_dir()
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".py"):
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                out[f[:-3]] = ast.parse(fh.read(), f)
    return out


def imported(tree, names):
    """The package modules a module's imports name, anywhere in it. `from .
    import x` names module x when there is one, else the package; a relative
    import of a deeper level (..) leaves the package and is ignored."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 1:
                parts = mod.split(".") if mod else []
            elif node.level == 0 and (mod == PKG or mod.startswith(PKG + ".")):
                parts = mod.split(".")[1:]
            else:
                continue
            if parts:
                out.add(parts[0])
            else:
                out |= {a.name if a.name in names else "__init__" for a in node.names}
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == PKG:
                    out.add(parts[1] if len(parts) > 1 else "__init__")
    return out


def import_graph():
    mods = modules()
    graph = {m: imported(t, mods) for m, t in mods.items()}
    for m, deps in graph.items():
        unknown = deps - set(mods)
        assert not unknown, f"{m} imports {sorted(unknown)}, which the package lacks"
    return graph


def find_cycle(graph):
    """A cycle of the graph as a list of nodes (first == last), or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for d in sorted(graph[n]):
            if d == n:
                continue   # a module that names itself depends on nothing else
            if state.get(d) == "open":
                return stack[stack.index(d):] + [d]
            if d not in state:
                c = visit(d)
                if c:
                    return c
        stack.pop()
        state[n] = "done"
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def test_the_cycle_finder_finds_cycles():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    # A lazy import inside a function is an edge like any other.
    tree = ast.parse("def f():\n    from ._core import x\n\nfrom . import ops, version\n")
    assert imported(tree, {"ops"}) == {"_core", "ops", "__init__"}


def test_package_modules_import_without_a_cycle():
    graph = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle among the package's modules: " + " -> ".join(cycle)
    # The package's own imports: torch only below dcptopk.ops and merge.
    mods = modules()
    for m, tree in mods.items():
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        takes_torch = any(
            isinstance(n, ast.Import) and any(a.name.split(".")[0] == "torch" for a in n.names)
            or isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "torch"
            for n in top)
        if takes_torch:
            assert m in ("ops", "merge"), f"{m} imports torch at import time"


def top_level_names(tree):
    """The names a module binds at its top level (def, class, assignments,
    imports, loops), and whether it has a module __getattr__."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Try):
            names |= top_level_names(ast.Module(body=node.body, type_ignores=[]))
    return names


def all_list(tree):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def have_torch():
    return importlib.util.find_spec("torch") is not None


def test_every_name_of_each_all_resolves():
    mods = modules()
    checked = 0
    for m, tree in mods.items():
        names = all_list(tree)
        if names is None:
            continue
        assert len(names) == len(set(names)), f"{m}.__all__ repeats a name"
        missing = [n for n in names if n not in top_level_names(tree)]
        assert not missing, f"{m}.__all__ names {missing}, which {m} does not define"
        if m in ("ops", "merge") and not have_torch():
            continue
        full = PKG if m == "__init__" else f"{PKG}.{m}"
        mod = importlib.import_module(full)
        with warnings.catch_warnings():
            # A name of __all__ is current: its use warns of nothing.
            warnings.simplefilter("error", DeprecationWarning)
            for n in names:
                assert hasattr(mod, n), f"{full}.{n} does not resolve"
        checked += 1
    assert checked >= 1


def test_no_two_public_classes_share_a_name():
    seen = {}
    for m, tree in modules().items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                assert node.name not in seen, \
                    f"class {node.name} is defined in {seen[node.name]} and in {m}"
                seen[node.name] = m


def test_deprecated_names_warn_and_still_work():
    if not have_torch():
        raise harness.Skip("torch is not installed (dcptopk.merge needs it)")
    from dcptopk import merge
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        old = merge.RowsOutput
    assert old is merge.DcpRowsOutput
    assert any(issubclass(x.category, DeprecationWarning) and "DcpRowsOutput" in str(x.message)
               for x in w), [str(x.message) for x in w]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        from dcptopk.merge import RowsOutput  # noqa: F401
    assert any(issubclass(x.category, DeprecationWarning) for x in w)
    raises(AttributeError, getattr, merge, "NoSuchName", match="NoSuchName")


def test_context_calls_moved_to_ops():
    """Context's calls on tensors are dcptopk.ops' functions with ctx=; the
    old methods stay on Context, deprecated, without importing ops (or
    torch) until one is called."""
    import dcptopk
    ctx = object.__new__(dcptopk.Context)
    for name in ("pack", "pack_indices", "select", "pair_pack", "pair_select"):
        assert callable(getattr(dcptopk.Context, name)), name
        assert name in getattr(dcptopk.Context, name).__doc__, name
    raises(AttributeError, getattr, ctx, "nothing_here", match="nothing_here")
    if not have_torch():
        return
    import dcptopk.ops as ops
    calls = []
    real = ops.pack
    ops.pack = lambda *a, **kw: calls.append((a, kw)) or "packed"
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            got = ctx.pack("cfg", "logits", rows=3)
    finally:
        ops.pack = real
    assert got == "packed" and calls == [(("cfg", "logits"), {"rows": 3, "ctx": ctx})], calls
    assert any(issubclass(x.category, DeprecationWarning) and "dcptopk.ops.pack" in str(x.message)
               for x in w), [str(x.message) for x in w]


if __name__ == "__main__":
    sys.exit(harness.run(globals()))
