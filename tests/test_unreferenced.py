"""No dead public functions: every module-level ``def`` not starting with ``_`` in the project's packages is used
somewhere else in the code, or is documented API.

A name counts as used when it occurs, outside its own ``def``, in the Python of the packages, ``benchmarks/`` or
``examples/`` (as a name, an attribute, an import, or a word of a string that is not a docstring, so registries
and lazy exports by name count), in ``setup.cfg``/``pyproject.toml``/``Makefile``, or in a code span of README.md
or docs/ (documented API, for a user to call). Tests do not count: a function only its own test calls is dead code
that the test keeps alive. A decorated function counts as used (its decorator registers it). ``ALLOWED`` names the
rest, each with its reason.

The bad case: a tree with a function referenced only by a test, or by nothing, is reported
(``test_a_planted_unreferenced_function_is_reported``).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evenhand", "probes", "steering", "interventions", "organism", "experiments")
"""Where a public function must be referenced."""
USERS = ("benchmarks", "examples")
"""Code outside the packages whose uses count (the benchmarks and examples call the API as a user would)."""
CONFIG = ("setup.cfg", "pyproject.toml", "Makefile")
"""Non-Python files whose words count (entry points, make targets)."""

ALLOWED: dict[str, str] = {
    "evenhand.engine.registry:unregister": "the registry's other half: an engine added from outside (and its "
                                           "extension test) removes what it registered",
}
"""``module:function`` -> why it is kept although nothing references it."""

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CODE_SPAN = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are statements (docstrings, attribute docstrings)."""
    return {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}


def names_used(tree: ast.AST) -> list[str]:
    """Every name a module uses: names, attributes, imports and the words of its non-docstring strings."""
    skip = _docstrings(tree)
    out: list[str] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.append(n.id)
        elif isinstance(n, ast.Attribute):
            out.append(n.attr)
        elif isinstance(n, ast.alias):
            out += [n.name.split(".")[-1], *([n.asname] if n.asname else [])]
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip:
            out += WORD.findall(n.value)
    return out


def public_functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module-level functions of a module whose names do not start with ``_``."""
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and not n.name.startswith("_")]


def unreferenced(root: Path = ROOT, allowed: dict[str, str] = ALLOWED) -> list[str]:
    """``module:function`` for each public function of ``root``'s packages that nothing outside its own
    ``def`` (and outside tests/) uses, nor a config file, nor a code span of the docs; not in ``allowed``."""
    uses: dict[str, int] = {}
    defined: list[tuple[str, ast.FunctionDef]] = []
    for top in (*PACKAGES, *USERS):
        for path in sorted((root / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name in names_used(tree):
                uses[name] = uses.get(name, 0) + 1
            if top in PACKAGES:
                module = ".".join(path.relative_to(root).with_suffix("").parts)
                for fn in public_functions(tree):
                    defined.append((module, fn))
                    inner = [n for n in names_used(fn) if n == fn.name]  # its own recursion is not a use
                    uses[fn.name] = uses.get(fn.name, 0) - len(inner)
                    if fn.decorator_list:  # its decorator registers it: a use
                        uses[fn.name] = uses.get(fn.name, 0) + 1
    text = [(root / f).read_text(encoding="utf-8") for f in CONFIG if (root / f).exists()]
    docs = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    text += [s for p in docs if p.exists() for s in CODE_SPAN.findall(p.read_text(encoding="utf-8"))]
    for s in text:
        for name in WORD.findall(s):
            uses[name] = uses.get(name, 0) + 1
    return sorted(f"{m}:{fn.name}" for m, fn in defined
                  if uses.get(fn.name, 0) <= 0 and f"{m}:{fn.name}" not in allowed)


def test_every_public_function_is_referenced():
    assert unreferenced() == [], "public functions nothing references (remove them, make them private, or add " \
                                 "them to ALLOWED with a reason)"


def test_the_allow_list_holds_only_functions_that_exist():
    """A stale allow-list entry (its function removed or renamed) is an error, not silence."""
    for entry in ALLOWED:
        module, name = entry.split(":")
        tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8"))
        assert name in {f.name for f in public_functions(tree)}, entry


def test_a_planted_unreferenced_function_is_reported(tmp_path):
    """The bad case: ``dead`` (nothing calls it), ``tested`` (only a test calls it) and ``prose`` (only a
    docstring and a README sentence name it) are reported; ``used``, ``registered``, ``by_name``, ``documented``
    and ``recursive_but_used`` are not."""
    (tmp_path / "evenhand").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "evenhand" / "a.py").write_text(
        '"""A module; see prose."""\n'
        "def used():\n    return 1\n\n"
        "def dead():\n    return used()\n\n"
        "def tested():\n    return 2\n\n"
        "def prose():\n    '''Not prose.'''\n\n"
        "@register\ndef registered():\n    pass\n\n"
        "def by_name():\n    pass\n\n"
        "def documented():\n    pass\n\n"
        "def recursive_but_used(n):\n    return recursive_but_used(n - 1) if n else 0\n")
    (tmp_path / "evenhand" / "b.py").write_text(
        "from .a import recursive_but_used\nEXPORTS = {'x': '.a:by_name'}\nrecursive_but_used(2)\n")
    (tmp_path / "tests" / "test_a.py").write_text("from evenhand.a import tested\n\ntested()\n")
    (tmp_path / "README.md").write_text("Call `eh.documented()`; prose is a word here.\n")
    assert unreferenced(tmp_path, {}) == ["evenhand.a:dead", "evenhand.a:prose", "evenhand.a:tested"]
    assert unreferenced(tmp_path, {"evenhand.a:dead": "kept"}) == ["evenhand.a:prose", "evenhand.a:tested"]
