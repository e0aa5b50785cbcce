"""The folders of the core and the import cycles between them (the floor plan's before/after).

A folder is a direct child of ``evenhand`` (a floor's subpackage such as ``evenhand.suite`` or
``evenhand.rows``; in older trees, also a flat module such as ``evenhand.schema``); ``--split`` names
subpackages to count as separate folders one level deeper (``evenhand.models`` -> ``evenhand.models.organism``,
``evenhand.models.policy``, ...). Every import counts,
at module level or inside a function. Prints each cycle (a strongly connected group of folders) with one
import per link, then the lines of Python in ``evenhand/``.

    python benchmarks/core_folders.py [--split evenhand.models]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests"))

from import_contracts import cycle_through, strongly_connected  # noqa: E402


def folder(module: str, split: tuple[str, ...]) -> str:
    parts = module.split(".")
    depth = 3 if any(module == s or module.startswith(s + ".") for s in split) else 2
    return ".".join(parts[:depth])


def folder_graph(package: str = "evenhand", split: tuple[str, ...] = ()):
    """(edges between folders, one example import per edge) of ``package``."""
    graph = grimp.build_graph(package, cache_dir=None)
    edges: dict[str, set[str]] = {}
    example: dict[tuple[str, str], str] = {}
    for m in graph.modules:
        if m == package:
            continue
        a = folder(m, split)
        edges.setdefault(a, set())
        for i in graph.find_modules_directly_imported_by(m):
            if i == package or not i.startswith(package + "."):
                continue
            b = folder(i, split)
            if a != b:
                edges[a].add(b)
                edges.setdefault(b, set())
                if (a, b) not in example:
                    line = min(d["line_number"] for d in graph.get_import_details(importer=m, imported=i))
                    example[(a, b)] = f"{m} -> {i} (l.{line})"
    return edges, example


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", nargs="*", default=[], help="subpackages counted one level deeper")
    a = ap.parse_args()
    edges, example = folder_graph("evenhand", tuple(a.split))
    comps = strongly_connected(edges)
    print(f"{len(edges)} folders, {sum(map(len, edges.values()))} folder-to-folder imports, {len(comps)} cycle(s)")
    for comp in comps:
        print(f"cycle among {', '.join(comp)}:")
        chain = cycle_through(comp[0], edges, set(comp))
        for x, y in zip(chain, chain[1:]):
            print(f"  {example[(x, y)]}")
        inner = sorted((x, y) for x in comp for y in edges[x] if y in comp)
        print(f"  imports inside this cycle ({len(inner)}):")
        for x, y in inner:
            print(f"    {x} -> {y}: {example[(x, y)]}")
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / "evenhand").rglob("*.py"))
    print(f"{lines} lines of Python in evenhand/")


if __name__ == "__main__":
    main()
