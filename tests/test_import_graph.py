"""The project's module import graph, built statically: no cycles, no private names
imported across modules.

Every ``import`` / ``from … import`` at any depth (inside functions and ``try``
blocks too: an import deferred into a function still ties the two modules together)
is resolved to project modules.  ``from a.b import c`` is an edge to ``a.b.c`` when
that is a module, else to ``a.b``.  A package's ``__init__`` is a node of its own;
importing a submodule does not count as an edge to its package (Python runs the
package's ``__init__`` first, but that is not a dependency a reader has to follow).
Modules imported by name at run time (``importlib.import_module("devstack.s3")``)
are not edges.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("streams", "api", "cli", "devstack", "search", "drills", "agents", "topics",
            "schemas", "stages", "adapters", "bench", "mcp_server")


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """``{dotted module name: path}`` of every .py file in the project's packages."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def _absolute(node: ast.ImportFrom, module: str, modules: dict[str, Path]) -> str:
    """The absolute module name of a (possibly relative) ``from`` import."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module, modules):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, modules: dict[str, Path]) -> list[tuple[str, list[str], int]]:
    """``[(target module, [imported names], line)]`` for every import in ``module``
    that resolves to a project module (names empty for plain ``import x``)."""
    tree = ast.parse(modules[module].read_text(), filename=str(modules[module]))
    out: list[tuple[str, list[str], int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.name
                while name and name not in modules:  # import a.b.c where only a.b is ours
                    name = name.rpartition(".")[0]
                if name:
                    out.append((name, [], node.lineno))
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(node, module, modules)
            if target not in modules:
                continue
            plain: list[str] = []
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in modules:  # from package import submodule
                    out.append((sub, [], node.lineno))
                else:
                    plain.append(alias.name)
            if plain:
                out.append((target, plain, node.lineno))
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """``{module: {project modules it imports}}`` (self-imports dropped)."""
    return {m: {t for t, _, _ in imports_of(m, modules) if t != m} for m in modules}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan),
    each as ``[a, b, …, a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:  # recursion depth ≤ module count (~150)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(comp)

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)

    cycles = []
    for comp in components:  # a concrete path around the component, for the message
        members, start = set(comp), min(comp)
        path, seen, v = [start], {start}, start
        while True:
            nxt = sorted(w for w in graph[v] if w in members)
            back = [w for w in nxt if w == start]
            if back and len(path) > 1:
                path.append(start)
                break
            fresh = [w for w in nxt if w not in seen]
            v = fresh[0] if fresh else nxt[0]
            path.append(v)
            if v in seen:
                break
            seen.add(v)
        cycles.append(path)
    return cycles


def private_imports(modules: dict[str, Path]) -> list[str]:
    """``module:line imports _name from other.module`` for each private name (one
    leading underscore, not a dunder) imported from another project module."""
    out = []
    for m in sorted(modules):
        for target, names, line in imports_of(m, modules):
            for name in names:
                if target != m and name.startswith("_") and not name.startswith("__"):
                    out.append(f"{m}:{line} imports {name} from {target}")
    return out


def test_graph_sees_imports_inside_functions():
    """The graph includes deferred imports: cli.main imports its command modules
    inside a function, and that must be an edge."""
    modules = project_modules()
    graph = import_graph(modules)
    assert "cli.worker" in graph["cli.main"]
    assert "devstack.supervisor" in graph["devstack.triton"]  # inside _register_devstack


def test_cycle_finder_reports_a_cycle():
    cycles = find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    assert cycles == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    cycles = find_cycles(import_graph(project_modules()))
    assert not cycles, "import cycles:\n" + "\n".join(" → ".join(c) for c in cycles)


def test_no_private_names_imported_across_modules():
    found = private_imports(project_modules())
    assert not found, "private names imported from other modules:\n" + "\n".join(found)
