"""The project's import graph, read from the source (every ``import`` statement, at any depth of a
module), for the layering tests: which module imports which, and the cycles in it."""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    """``zoo/grpo/strategy.py`` -> ``zoo.grpo.strategy``; a package's ``__init__.py`` is the
    package."""
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def imported_names(tree: ast.Module, package: str) -> list[str]:
    """Dotted names an ``import`` statement of the module may mean (``from a import b``: ``a`` and
    ``a.b``)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package upwards
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names += [base] + [f"{base}.{alias.name}" for alias in node.names]
    return names


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the project modules it imports. An import of a package's ``__init__`` (which
    re-exports its submodules for short class paths) is not an edge: it names the package, not a
    layer."""
    paths = {module_name(root, p): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for imported in imported_names(ast.parse(path.read_text()), package):
            while imported and imported not in paths:  # a class or function: its module
                imported = imported.rpartition(".")[0]
            if imported and imported != name and paths[imported].name != "__init__.py":
                graph[name].add(imported)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of modules that import each other, each as a cycle through it
    (``[a, b, a]``), sorted; [] when the graph has none."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(_cycle_through(graph, sorted(group)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _cycle_through(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """A path from the group's first module back to itself inside the group (breadth first: the
    shortest)."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        step = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    step.append(w)
        frontier = step
    return group + [start]


def core_to_tools(graph: dict[str, set[str]]) -> list[str]:
    """Edges from a core module into ``zoo.tools``: only the composition root (the CLI) may name the
    tools."""
    root = ("zoo.cli", "zoo.__main__")
    return sorted(
        f"{m} -> {n}"
        for m, imported in graph.items()
        for n in imported
        if n.startswith("zoo.tools") and not m.startswith("zoo.tools") and m not in root
    )
