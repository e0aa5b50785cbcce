"""An import-linter contract type of this project's own: no import cycle between modules.

import-linter's built-in ``acyclic_siblings`` treats each subpackage as one node (so `evenhand.models`
importing `evenhand.running.decisions` while `evenhand.running.decisions` imports `evenhand.models.loading` counts
as a cycle);
this contract looks at modules, as Python imports them: any two modules that reach each other through
imports (at module level or inside functions) break it, and the report names one such chain with its
line numbers. Registered in setup.cfg's ``[importlinter]`` section (``contract_types``)."""
from __future__ import annotations

from collections import deque

import grimp
from importlinter.application import contract_utils, output
from importlinter.application.contract_utils import AlertLevel
from importlinter.domain import fields
from importlinter.domain.contract import Contract, ContractCheck


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (each sorted), iteratively (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return sorted(comps)


def cycle_through(start: str, edges: dict[str, set[str]], members: set[str]) -> list[str]:
    """The shortest chain of imports from ``start`` back to itself inside ``members``."""
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(edges.get(v, ())):
            if w not in members:
                continue
            if w == start:
                chain = [v]
                while chain[-1] != start:
                    chain.append(parent[chain[-1]])
                return [start] + chain[::-1][1:] + [start] if len(chain) > 1 else [start, start]
            if w not in parent:
                parent[w] = v
                queue.append(w)
    return [start]


class AcyclicModulesContract(Contract):
    """No two modules of ``containers`` import each other, directly or through other modules."""

    type_name = "acyclic_modules"

    containers = fields.SetField(subfield=fields.StringField())
    ignore_imports = fields.SetField(subfield=fields.ImportExpressionField(), required=False)
    unmatched_ignore_imports_alerting = fields.EnumField(AlertLevel, default=AlertLevel.ERROR)

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        removal = contract_utils.remove_ignored_imports_and_report(
            graph=graph, ignore_imports=self.ignore_imports,  # type: ignore[arg-type]
            unmatched_alerting=self.unmatched_ignore_imports_alerting)  # type: ignore[arg-type]
        roots = tuple(self.containers)  # type: ignore[arg-type]
        mods = {m for m in graph.modules if m.split(".")[0] in roots}
        edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in mods} for m in mods}
        cycles = []
        for comp in strongly_connected(edges):
            chain = cycle_through(comp[0], edges, set(comp))
            links = []
            for a, b in zip(chain, chain[1:]):
                lines = sorted({d["line_number"] for d in graph.get_import_details(importer=a, imported=b)})
                links.append((a, b, lines))
            cycles.append({"modules": comp, "links": links})
        return ContractCheck(kept=not cycles, warnings=list(removal.warnings),
                             ignored_import_count=removal.ignored_import_count, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for cycle in check.metadata["cycles"]:
            output.print(f"Import cycle among {', '.join(cycle['modules'])}:")
            output.new_line()
            for a, b, lines in cycle["links"]:
                output.print(f"- {a} -> {b} ({', '.join(f'l.{n}' for n in lines)})")
            output.new_line()
