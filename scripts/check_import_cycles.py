"""Fail when modules under ``apps`` import each other in a circle (issue #13: each app a clean stack).

import-linter's layers contract keeps the apps in order but does not see a circle inside one app, so
this walks grimp's import graph (every import, also those inside functions) and prints each set of
modules that reach one another. Migrations are left out: Django loads them, nothing imports them.
"""

from __future__ import annotations

import sys

import grimp


def import_cycles(package: str = "apps") -> list[list[str]]:
    graph = grimp.build_graph(package)
    modules = {m for m in graph.modules if ".migrations" not in m}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module) & modules:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(modules)))
    for module in sorted(modules):
        if module not in index:
            visit(module)
    return cycles


def main() -> int:
    cycles = import_cycles()
    for cycle in cycles:
        print("import circle: " + " <-> ".join(cycle))
    if cycles:
        return 1
    print("ok   no import circles in apps/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
