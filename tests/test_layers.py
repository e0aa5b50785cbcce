"""The import layers (setup.cfg's [importlinter] contracts): the core imports nothing built on it,
the organism sits between probes/steering and interventions, the core's floors hold, probes and
steering are independent, and no two modules import each other, checked on this project and, to
show the check can fail, on a synthetic tree that breaks each contract."""
from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evenhand", "probes", "steering", "organism", "interventions", "experiments")


def lint(cwd: Path) -> subprocess.CompletedProcess:
    """Run import-linter on the setup.cfg in ``cwd`` (the project's own contract types importable)."""
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env)


def test_project_keeps_its_layers():
    r = lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def _contracts_only(tmp_path: Path) -> None:
    """Copy the project's [importlinter] sections (and nothing else) into ``tmp_path/setup.cfg``."""
    src = configparser.ConfigParser(interpolation=None)
    src.read(ROOT / "setup.cfg")
    dst = configparser.ConfigParser(interpolation=None)
    for section in src.sections():
        if section.startswith("importlinter"):
            dst[section] = dict(src[section])
    with open(tmp_path / "setup.cfg", "w") as fh:
        dst.write(fh)


def core_floors() -> list[list[str]]:
    """The core's floors (setup.cfg's ``core-floors`` contract), top first: each a list of module names,
    optional ones (in parentheses) left out."""
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(ROOT / "setup.cfg")
    if not cfg.has_section("importlinter:contract:core-floors"):
        return []
    lines = [ln.strip() for ln in cfg["importlinter:contract:core-floors"]["layers"].splitlines() if ln.strip()]
    return [[m.strip() for m in ln.replace("|", ":").split(":") if not m.strip().startswith("(")] for ln in lines]


def _tree(tmp_path: Path, files: dict[str, str]) -> None:
    """The top-level packages, an empty package for each floor folder of the core, then ``files``."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    for pkg in ("experiments/studies", "experiments/cli"):  # the packages the studies-below-cli contract names
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    for floor in core_floors():
        for folder in floor:
            (tmp_path / "evenhand" / folder).mkdir(exist_ok=True)
            (tmp_path / "evenhand" / folder / "__init__.py").write_text("")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if not (tmp_path / name).parent.joinpath("__init__.py").exists():
            (tmp_path / name).parent.joinpath("__init__.py").write_text("")
        (tmp_path / name).write_text(text)


def test_a_clean_synthetic_tree_passes(tmp_path):
    _contracts_only(tmp_path)
    _tree(tmp_path, {"evenhand/core.py": "", "probes/sweep.py": "import evenhand.core\n",
                     "organism/dial.py": "import probes.sweep\nimport evenhand.models\n",
                     "interventions/dose.py": "import probes.sweep\n",
                     "experiments/cli/main.py": "import probes.sweep\nimport evenhand.core\nimport organism.dial\n"
                                                "import experiments.studies.run\n",
                     "experiments/studies/run/study.py": "import evenhand.core\nimport organism.dial\n",
                     "evenhand/suite/loader.py": "import evenhand.files.rowfiles\n",
                     "evenhand/rows/schema.py": "import evenhand.suite.loader\n",
                     "evenhand/models/loading.py": "import evenhand.scoring.metrics\nimport evenhand.suite\n"})
    r = lint(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_core_module_importing_an_upper_package_fails_naming_the_import(tmp_path):
    _contracts_only(tmp_path)
    _tree(tmp_path, {"evenhand/core.py": "def f():\n    from experiments.cli import main\n    return main\n",
                     "experiments/cli/__init__.py": "main = 1\n"})
    r = lint(tmp_path)
    assert r.returncode != 0
    assert "evenhand is not allowed to import experiments" in r.stdout
    assert "evenhand.core -> experiments.cli (l.2)" in r.stdout


@pytest.mark.parametrize("files, chain", [
    ({"experiments/studies/rogue.py": "def text(cfg, result):\n    from experiments.cli.formatting import score_table\n"
                                      "    return score_table(result)\n",
      "experiments/cli/formatting.py": "def score_table(r):\n    return ''\n"},
     "experiments.studies.rogue -> experiments.cli.formatting (l.2)"),
    ({"experiments/studies/rogue.py": "import experiments.render\n",  # through a module outside both
      "experiments/render.py": "import experiments.cli.formatting\n", "experiments/cli/formatting.py": ""},
     "experiments.render -> experiments.cli.formatting (l.1)"),
])
def test_a_study_importing_the_cli_fails(tmp_path, files, chain):
    """A throwaway study module that renders its text with the CLI's formatting (directly, or through another
    module) breaks the studies-below-cli contract, which names the chain; the clean tree above passes."""
    _contracts_only(tmp_path)
    _tree(tmp_path, files)
    r = lint(tmp_path)
    assert r.returncode != 0, r.stdout
    assert "Studies never import the CLI BROKEN" in r.stdout
    assert "experiments.studies is not allowed to import experiments.cli" in r.stdout
    assert chain in r.stdout, r.stdout


def test_probes_importing_steering_fails(tmp_path):
    _contracts_only(tmp_path)
    _tree(tmp_path, {"probes/sweep.py": "import steering.hooks\n", "steering/hooks.py": ""})
    r = lint(tmp_path)
    assert r.returncode != 0
    assert "probes.sweep -> steering.hooks" in r.stdout


def test_an_import_cycle_inside_one_layer_fails(tmp_path):
    _contracts_only(tmp_path)
    _tree(tmp_path, {"experiments/a.py": "import experiments.b\n",
                     "experiments/b.py": "def f():\n    import experiments.c\n",
                     "experiments/c.py": "from experiments import a\n"})
    r = lint(tmp_path)
    assert r.returncode != 0
    assert "Import cycle among experiments.a, experiments.b, experiments.c" in r.stdout
    assert "experiments.b -> experiments.c (l.2)" in r.stdout


def test_the_core_importing_the_organism_fails(tmp_path):
    """The loop issue 29 removed: the suite's loader importing the organism's code."""
    _contracts_only(tmp_path)
    _tree(tmp_path, {"evenhand/suite/loader.py": "def items():\n    from organism.recipe import COMMITTED\n",
                     "organism/recipe.py": "import evenhand.suite\n"})
    r = lint(tmp_path)
    assert r.returncode != 0
    assert "evenhand is not allowed to import organism" in r.stdout
    assert "evenhand.suite.loader -> organism.recipe (l.2)" in r.stdout


def test_probes_importing_the_organism_fails(tmp_path):
    _contracts_only(tmp_path)
    _tree(tmp_path, {"probes/sweep.py": "import organism.probe\n", "organism/probe.py": ""})
    r = lint(tmp_path)
    assert r.returncode != 0
    assert "probes is not allowed to import organism" in r.stdout


def test_the_organism_importing_interventions_fails(tmp_path):
    _contracts_only(tmp_path)
    _tree(tmp_path, {"organism/dial.py": "import interventions.base\n", "interventions/base.py": ""})
    r = lint(tmp_path)
    assert r.returncode != 0
    assert "organism is not allowed to import interventions" in r.stdout


@pytest.mark.parametrize("importer, imported", [
    ("evenhand/suite/loader.py", "evenhand.models"),   # the suite reading the organism's package (the old loop)
    ("evenhand/suite/fairstress.py", "evenhand.rows.schema"),  # the suite validating rows (the old suite <-> schema loop)
    ("evenhand/suite/export.py", "evenhand.runs.rundir"),  # the suite writing through run directories
    ("evenhand/scoring/metrics.py", "evenhand.running.decisions"),  # scoring reaching up to the running floor
    ("evenhand/vocab/sides.py", "evenhand.suite"),  # the ground floor importing anything in the core
])
def test_a_core_module_importing_a_higher_floor_fails(tmp_path, importer, imported):
    _contracts_only(tmp_path)
    files = {importer: f"def f():\n    import {imported}\n"}
    if imported.count(".") > 1:  # a module inside a floor's folder
        files[imported.replace(".", "/") + ".py"] = ""
    _tree(tmp_path, files)
    r = lint(tmp_path)
    assert r.returncode != 0, r.stdout
    low, high = ".".join(Path(importer).parts[:2]), ".".join(imported.split(".")[:2])  # the two floor folders
    assert f"{low} is not allowed to import {high}" in r.stdout
    assert f"{Path(importer).with_suffix('').as_posix().replace('/', '.')} -> {imported} (l.2)" in r.stdout


def test_every_floor_names_existing_folders():
    """A floor naming a folder that is gone would make lint-imports fail on this project; a child of evenhand/
    no floor names would be unchecked, so every one is on a floor, and every one is a folder (the core has no
    flat modules: a module sits in the folder of its floor)."""
    named = {m for floor in core_floors() for m in floor}
    have = {p.stem if p.is_file() else p.name for p in (ROOT / "evenhand").iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()}
    assert named <= have, sorted(named - have)
    assert have == named, sorted(have ^ named)
    assert not [p.name for p in (ROOT / "evenhand").glob("*.py") if p.name != "__init__.py"]


def test_the_cores_folders_import_each_other_in_no_loop():
    """Folder level (a direct child of evenhand: suite/, models/, rows/, ...): the floors let two modules
    of one floor import each other, so a loop between two folders of a floor is checked here. Main before
    issue 29 had one (models.organism -> decisions ... suite.loader -> models.organism; schema <-> suite)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from core_folders import folder_graph
    from tests.import_contracts import strongly_connected

    edges, example = folder_graph("evenhand")
    assert set(edges) == {f"evenhand.{f}" for floor in core_floors() for f in floor} and example
    assert strongly_connected(edges) == []
