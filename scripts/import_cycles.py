#!/usr/bin/env python3
"""The import cycles of fleetctl's modules: every import counted, function-level ones included.

Prints each strongly connected group of modules (modules that import each
other, directly or through others) with the imports that join them, and how
many imports of fleetctl are at module level and how many inside functions.
Imports under ``if TYPE_CHECKING:`` are counted separately: they are never run,
so a group they alone close is shown as type-only. Exit status 1 when a group
closed by imports that run remains. The import contracts (`make lint`,
``acyclic`` in pyproject.toml) check the same per package; this shows the
modules.

    python scripts/import_cycles.py [PACKAGE ...]   (default: fleetctl)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp


def cycles(graph: grimp.ImportGraph, prefix: str) -> list[list[str]]:
    """The strongly connected groups of more than one module under ``prefix`` (Tarjan, iterative), each sorted."""
    modules = sorted(m for m in graph.modules if m == prefix or m.startswith(prefix + "."))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = []
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work.append((root, sorted(w for w in graph.find_modules_directly_imported_by(root) if w in set(modules))))
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(w for w in graph.find_modules_directly_imported_by(nxt) if w in set(modules))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    group.append(m)
                    if m == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def _names_package(node: ast.AST, package: str) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] == package
    return isinstance(node, ast.Import) and any(a.name.split(".")[0] == package for a in node.names)


def import_levels(package: str) -> tuple[int, int]:
    """(outside functions, inside functions): the import statements naming ``package`` in its own source files."""
    root = Path(__import__(package).__file__ or "").parent
    outside = inside = 0
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        in_functions = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(f)}
        for node in ast.walk(tree):
            if _names_package(node, package):
                if id(node) in in_functions:
                    inside += 1
                else:
                    outside += 1
    return outside, inside


def main(argv: list[str]) -> int:
    packages = argv or ["fleetctl"]
    runtime = grimp.build_graph(*packages, exclude_type_checking_imports=True, cache_dir=None)
    every = grimp.build_graph(*packages, cache_dir=None)
    status = 0
    for package in packages:
        top, inner = import_levels(package)
        print(f"{package}: {top} imports of {package} outside functions, {inner} inside functions")
        run_groups = cycles(runtime, package)
        for group in cycles(every, package):
            kind = "CYCLE" if any(set(g) & set(group) for g in run_groups) else "type-only cycle (TYPE_CHECKING)"
            print(f"  {kind} of {len(group)} modules:")
            for m in group:
                for w in sorted(every.find_modules_directly_imported_by(m)):
                    if w in group:
                        lines = [d["line_number"] for d in every.get_import_details(importer=m, imported=w)]
                        print(f"    {m} -> {w} (line {', '.join(map(str, lines))})")
        if run_groups:
            status = 1
        else:
            print("  no cycle of imports that run")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
