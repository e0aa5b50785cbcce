"""The import layers (setup.cfg's [importlinter] contracts): the core imports nothing built on it,
probes and steering are independent, and no two modules import each other, checked on this project
and, to show the check can fail, on a synthetic tree that breaks each contract."""
from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evenhand", "probes", "steering", "interventions", "experiments")


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


def _tree(tmp_path: Path, files: dict[str, str]) -> None:
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (tmp_path / name).write_text(text)


def test_a_clean_synthetic_tree_passes(tmp_path):
    _contracts_only(tmp_path)
    _tree(tmp_path, {"evenhand/core.py": "", "probes/sweep.py": "import evenhand.core\n",
                     "experiments/cli.py": "import probes.sweep\nimport evenhand.core\n"})
    r = lint(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_core_module_importing_an_upper_package_fails_naming_the_import(tmp_path):
    _contracts_only(tmp_path)
    _tree(tmp_path, {"evenhand/core.py": "def f():\n    from experiments.cli import main\n    return main\n",
                     "experiments/cli.py": "main = 1\n"})
    r = lint(tmp_path)
    assert r.returncode != 0
    assert "evenhand is not allowed to import experiments" in r.stdout
    assert "evenhand.core -> experiments.cli (l.2)" in r.stdout


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
