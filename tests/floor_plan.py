"""The floor plan's two rules (docs/ARCHITECTURE.md, "Run directories"), checked on the source by AST:

1. only :class:`evenhand.runs.rundir.RunDir` builds run-directory paths: no other module joins a run file's or
   folder's name (``"responses.parquet"``, ``"manifest.json"``, ``"cells"``, ...) onto a path;
2. every study runs through the stage driver: no module but ``evenhand/runs/rundir.py`` and
``evenhand/running/stages.py``
   starts, times or finishes a run itself, and the module of every registered study (or a module of its
   package it imports: its backends) calls :func:`evenhand.running.stages.run_stages` or
   :func:`evenhand.running.stages.run_study`.
"""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evenhand", "probes", "steering", "interventions", "experiments", "organism", "benchmarks", "examples")
"""Where the project's code lives (tests aside)."""
OWNERS = ("evenhand/runs/rundir.py", "evenhand/running/stages.py")
"""The run directory and the stage driver: the only modules that may do what the rules forbid."""
ALSO_RUN_NAMES = frozenset({"selection.json", "validation", "replications"})
"""Run-directory names the issue found built outside RunDir that RunDir does not name (yet)."""
DRIVER = frozenset({"run_stages", "run_study"})
DRIVER_ONLY = frozenset({"mark_stage_done", "record_timing", "timed", "finish"})
"""RunDir methods that only the driver calls: marking stages done, timing them, finishing the run."""


def run_names(runs_py: Path = ROOT / "evenhand" / "runs" / "rundir.py") -> frozenset[str]:
    """The file and folder names RunDir lays a run directory out with, read from its source: the paths of
    its ``_at(...)`` properties, its ``MANIFEST`` and every literal it joins with ``/`` (first segments too)."""
    tree = ast.parse(runs_py.read_text())
    rundir = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RunDir")
    names: set[str] = set()
    for node in ast.walk(rundir):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_at" and _literal(
                node.args[0]):
            names.add(node.args[0].value)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MANIFEST" for t in node.targets):
            names.add(node.value.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _literal(node.right):
            names.add(node.right.value)
    names = {n for n in names if not n.startswith(".")}  # .write-test: a write probe removed at once, no layout
    return frozenset(names | {n.split("/")[0] for n in names} | ALSO_RUN_NAMES)


def _literal(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _is_run_name(value: str, names: frozenset[str]) -> bool:
    return value in names or value.split("/")[0] in names and "/" in value


def _joined_literals(node) -> list[ast.Constant]:
    """String literals a node joins onto a path: ``x / "lit"``, ``os.path.join(x, "lit")``, ``Path(x, "lit")``,
    ``x.joinpath("lit")``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return [n for n in (node.left, node.right) if _literal(n)]
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name == "joinpath":
            return [a for a in node.args if _literal(a)]
        if name in ("join", "Path", "PurePath") and len(node.args) >= 2 and (
                name != "join" or isinstance(f, ast.Attribute) and ast.unparse(f.value) in ("os.path", "path")):
            return [a for a in node.args[1:] if _literal(a)]
    return []


def path_offences(source: str, names: frozenset[str]) -> list[str]:
    """``line: code`` for each place ``source`` joins a run-directory name onto a path."""
    out = []
    for node in ast.walk(ast.parse(source)):
        for lit in _joined_literals(node):
            if _is_run_name(lit.value, names):
                out.append((node.lineno, f"{node.lineno}: {ast.unparse(node)}"))
    return [o for _, o in sorted(out)]


def driver_offences(source: str) -> list[str]:
    """``line: code`` for each place ``source`` starts a run directory or marks, times or finishes its stages
    itself (the driver's work)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        f = node.func
        if (f.attr in ("create", "open_or_create") and isinstance(f.value, ast.Name) and f.value.id == "RunDir") or (
                f.attr in DRIVER_ONLY and _looks_like_a_run(f.value)):
            out.append((node.lineno, f"{node.lineno}: {ast.unparse(node)}"))
    return [o for _, o in sorted(out)]


def _looks_like_a_run(node) -> bool:
    """Whether the receiver of a call is (by its name) a run directory: ``run``, ``self.run``, ``out_run``."""
    text = ast.unparse(node)
    return text.split(".")[-1].endswith("run") or "RunDir(" in text


def calls_driver(source: str) -> bool:
    """Whether ``source`` calls :func:`~evenhand.running.stages.run_stages` or
    :func:`~evenhand.running.stages.run_study`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) in DRIVER:
                return True
    return False


def modules(root: Path = ROOT) -> list[Path]:
    """The project's modules outside the tests, the run directory and the driver."""
    out = []
    for pkg in PACKAGES:
        out += [p for p in sorted((root / pkg).rglob("*.py")) if p.relative_to(root).as_posix() not in OWNERS]
    return out


def offenders(root: Path = ROOT) -> dict[str, list[str]]:
    """``{module: [offences]}`` for both rules over the project's modules."""
    names = run_names(root / "evenhand" / "runs" / "rundir.py")
    out = {}
    for p in modules(root):
        src = p.read_text()
        found = [f"run path {o}" for o in path_offences(src, names)] + [f"driver {o}" for o in driver_offences(src)]
        if found:
            out[p.relative_to(root).as_posix()] = found
    return out


def siblings(path: Path) -> list[Path]:
    """The modules of its own package that the module at ``path`` imports (``from .x import ...``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            p = path.parent / f"{node.module.replace('.', '/')}.py"
            if p.exists():
                out.append(p)
    return out


def studies_off_the_driver(studies) -> dict[str, str]:
    """``{kind: module file}`` for each study whose module, and the modules of its package it imports (its
    backends: the run study's ``run/local.py``, ``run/ray.py``), never call the stage driver."""
    out = {}
    for study in studies:
        path = Path(inspect.getsourcefile(type(study)))
        if not any(calls_driver(p.read_text()) for p in [path, *siblings(path)]):
            out[study.kind] = str(path)
    return out
