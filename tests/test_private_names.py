"""No module imports another module's underscore names: what other modules use is public,
named and documented in its home module (issue 15)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evenhand", "probes", "steering", "organism", "interventions", "experiments", "benchmarks", "tests")


def private_uses(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of every ``from X import _name`` and every ``module._name`` on a name imported from
    this project's packages (dunder names such as ``__version__`` are public; other libraries' private
    names, such as ``argparse._SubParsersAction`` in a type hint, are theirs to keep)."""
    tree = ast.parse(source)
    imported: set[str] = set()
    found = []

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    def ours(module: str | None, level: int) -> bool:
        return level > 0 or (module or "").split(".")[0] in PACKAGES

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if not ours(node.module, node.level):
                continue
            for a in node.names:
                imported.add(a.asname or a.name)
                if private(a.name):
                    found.append((node.lineno, f"from {'.' * node.level}{node.module or ''} import {a.name}"))
        elif isinstance(node, ast.Import):
            imported.update((a.asname or a.name).split(".")[0] for a in node.names if ours(a.name, 0))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name) \
                and node.value.id in imported:
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return found


def test_the_check_finds_private_imports():
    src = ("import evenhand.running.decisions as d\nfrom evenhand.running.decisions import _x, y\nfrom . import __version__\nd._z()\n"
           "import argparse\nfrom .base import _hidden\nx: argparse._SubParsersAction\n")
    assert private_uses(src) == [(2, "from evenhand.running.decisions import _x"), (6, "from .base import _hidden"),
                                 (4, "d._z")]


def test_no_module_imports_another_modules_underscore_names():
    bad = [f"{path.relative_to(ROOT)}:{line}: {what}"
           for pkg in PACKAGES for path in sorted((ROOT / pkg).rglob("*.py"))
           for line, what in private_uses(path.read_text())]
    assert not bad, "underscore names used across modules (give them a public name):\n" + "\n".join(bad)
