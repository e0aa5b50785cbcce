"""How the house reads: the measures of the core's layout, for a restructuring's before and after.

Prints the modules directly in ``evenhand/`` (files, lines) and its subpackages; the core's floors as setup.cfg's
layers contract over ``evenhand`` names them (top first); back arrows (an import from a module on a lower floor to
one on a higher floor, and between the top-level packages of the ``layers`` contract); import cycles between the
core's folders (benchmarks/core_folders.py) and between modules of every package; and the lines of each docs page.
Every import counts, at module level or inside a function.

    python benchmarks/house_measures.py [--root TREE]
"""
from __future__ import annotations

import argparse
import configparser
import re
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evenhand", "probes", "steering", "interventions", "organism", "experiments")


def contracts(root: Path) -> list[dict[str, str]]:
    """setup.cfg's import-linter contracts, each a dict of its fields (with ``id``)."""
    cfg = configparser.ConfigParser()
    cfg.read(root / "setup.cfg")
    return [{"id": s.split(":")[-1], **cfg[s]} for s in cfg.sections() if s.startswith("importlinter:contract:")]


def floors(contract: dict[str, str]) -> list[list[str]]:
    """A layers contract's layers, top first, each the full names of its members (``a : b`` and ``a | b`` both
    put ``a`` and ``b`` on one floor)."""
    container = contract.get("containers", "").strip()
    out = []
    for line in contract["layers"].strip().splitlines():
        names = [n.strip().strip("()") for n in re.split(r"[:|]", line) if n.strip()]
        out.append([f"{container}.{n}" if container else n for n in names])
    return out


def floor_of(module: str, layers: list[list[str]]) -> int | None:
    """The index (0 = top) of the floor holding ``module``, by its longest member prefix; None when on none."""
    best, at = -1, None
    for i, members in enumerate(layers):
        for m in members:
            if (module == m or module.startswith(m + ".")) and len(m) > best:
                best, at = len(m), i
    return at


def back_arrows(graph, layers: list[list[str]]) -> list[str]:
    """Each import ``a -> b`` (with its line) where ``a``'s floor is below ``b``'s."""
    out = []
    for a in sorted(graph.modules):
        fa = floor_of(a, layers)
        if fa is None:
            continue
        for b in sorted(graph.find_modules_directly_imported_by(a)):
            fb = floor_of(b, layers)
            if fb is not None and fb < fa:
                line = min(d["line_number"] for d in graph.get_import_details(importer=a, imported=b))
                out.append(f"{a} -> {b} (l.{line})")
    return out


def module_cycles(graph) -> list[list[str]]:
    """Groups of modules that import each other in a loop (strongly connected, more than one module)."""
    from import_contracts import strongly_connected
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in graph.modules and i != m}
             for m in graph.modules}
    return strongly_connected(edges)


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=ROOT, help="the source tree to measure (default: this one)")
    root = ap.parse_args(argv).root.resolve()
    sys.path[:0] = [str(root), str(root / "tests"), str(ROOT / "benchmarks")]
    core = root / "evenhand"
    flat = sorted(p for p in core.glob("*.py") if p.name != "__init__.py")
    subs = sorted(p.name for p in core.iterdir() if (p / "__init__.py").exists())
    all_core = sum(lines(p) for p in core.rglob("*.py"))
    all_code = sum(lines(p) for top in PACKAGES for p in (root / top).rglob("*.py"))
    flat_lines = sum(lines(p) for p in flat)
    print(f"modules directly in evenhand/: {len(flat)} files (besides __init__.py), {flat_lines} lines "
          f"({flat_lines / all_core:.0%} of evenhand/'s {all_core}); evenhand/ is {all_core / all_code:.0%} of the "
          f"{all_code} lines of Python in {', '.join(PACKAGES)}")
    print(f"subpackages of evenhand/: {len(subs)}: {', '.join(subs)}")

    found = contracts(root)
    core_floors = next((c for c in found if c.get("type") == "layers" and c.get("containers", "").strip()
                        == "evenhand"), None)
    top = next((c for c in found if c.get("type") == "layers" and not c.get("containers", "").strip()), None)
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    for name, contract in (("core floors", core_floors), ("top-level layers", top)):
        if contract is None:
            print(f"{name}: no such layers contract in setup.cfg")
            continue
        layers = floors(contract)
        print(f"{name} ({contract['id']}): {len(layers)} floors, top first")
        for i, members in enumerate(layers):
            print(f"  {i + 1}. {', '.join(m.split('.', 1)[-1] if name == 'core floors' else m for m in members)}")
        arrows = back_arrows(graph, layers)
        print(f"{name}: {len(arrows)} back arrow(s) (an import from a lower floor up)")
        for a in arrows:
            print(f"  {a}")
        if name == "core floors":
            on = {m for m in graph.modules if m.startswith("evenhand.")}
            off = sorted(m for m in on if floor_of(m, layers) is None and m.count(".") == 1
                         and not (core / (m.split(".")[1])).is_dir())
            print(f"core modules on no floor: {len(off)}{': ' + ', '.join(off) if off else ''}")

    from core_folders import folder_graph
    from import_contracts import strongly_connected
    sys.path.insert(0, str(root))
    edges, _ = folder_graph("evenhand")
    comps = strongly_connected(edges)
    print(f"cycles between the core's folders: {len(comps)} ({len(edges)} folders, "
          f"{sum(map(len, edges.values()))} folder-to-folder imports)")
    for comp in comps:
        print(f"  {', '.join(comp)}")
    loops = module_cycles(graph)
    print(f"cycles between modules (all packages): {len(loops)}")
    for comp in loops:
        print(f"  {', '.join(comp)}")

    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    pages = [p for p in pages if p.exists()]
    counts = [(p.relative_to(root).as_posix(), lines(p)) for p in pages]
    print(f"docs: {len(counts)} pages, {sum(n for _, n in counts)} lines; over 400 lines: "
          f"{sum(n > 400 for _, n in counts)}")
    for name, n in counts:
        print(f"  {n:6d}  {name}")


if __name__ == "__main__":
    main()
