"""One hook mechanism for every edit: an intervention touches a model's hidden states only
through :mod:`steering.hooks` (``steer`` to edit, ``observe`` to read; they live in :mod:`evenhand.engine.hooks`,
where the core's reader, :mod:`evenhand.engine.reader`, uses them too), never by registering a torch hook
itself, through pyvene's ``IntervenableModel`` (which removes every hook on the model before each call) or
through nnsight. Checked statically over the sources (:func:`hook_bypasses`) and, in
tests/test_interventions.py, at run time while every editing method fits and decides."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THE_MECHANISM = Path("evenhand/engine/hooks.py")
SCANNED = ("interventions", "steering", "examples", "evenhand/engine")
"""The intervention path: the methods, the edits, the method plugins, the hooks and the reader on them."""
REGISTERING = frozenset({"register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
                         "register_full_backward_pre_hook", "register_backward_hook", "register_module_forward_hook",
                         "register_module_forward_pre_hook", "register_module_full_backward_hook"})
"""The torch calls that attach a hook to a module (or to every module)."""
OTHER_MECHANISMS = ("nnsight", "pyreft", "transformer_lens")
"""Packages whose model wrappers apply edits with hooks of their own."""
PYVENE_ALLOWED = frozenset({"DistributedRepresentationIntervention", "TrainableIntervention", "LowRankRotateLayer"})
"""What the intervention path may take from pyvene: modules (LoReFT's base classes and rotation), no model wrapper."""


def hook_bypasses(root: Path) -> list[str]:
    """Every place under ``root``'s :data:`SCANNED` folders that attaches a hook other than through
    evenhand/engine/hooks.py: a call of a :data:`REGISTERING` method, an import of an :data:`OTHER_MECHANISMS`
    package, or a pyvene name other than :data:`PYVENE_ALLOWED` (``IntervenableModel`` among them)."""
    out = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root)
            tree = ast.parse(path.read_text(), str(rel))
            for node in ast.walk(tree):
                where = f"{rel}:{getattr(node, 'lineno', '?')}"
                if isinstance(node, ast.Attribute) and node.attr in REGISTERING and rel != THE_MECHANISM:
                    out.append(f"{where}: {node.attr}")
                elif isinstance(node, ast.Name) and node.id in REGISTERING and rel != THE_MECHANISM:
                    out.append(f"{where}: {node.id}")
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    for m in mods:
                        if m.split(".")[0] in OTHER_MECHANISMS:
                            out.append(f"{where}: imports {m}")
                    if isinstance(node, ast.ImportFrom) and rel != THE_MECHANISM:
                        out += [f"{where}: imports {a.name}" for a in node.names if a.name in REGISTERING]
                    if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pyvene":
                        out += [f"{where}: from {node.module} imports {a.name}" for a in node.names
                                if a.name not in PYVENE_ALLOWED]
                    if isinstance(node, ast.Import):
                        out += [f"{where}: imports {a.name}" for a in node.names
                                if a.name.split(".")[0] == "pyvene" and a.name != "pyvene"]
                elif isinstance(node, ast.Attribute) and node.attr == "IntervenableModel":
                    out.append(f"{where}: IntervenableModel")
    return out


def test_every_hook_of_the_intervention_path_is_registered_by_steering_hooks():
    """Fails on the tree before observe existed: interventions/reading.py and interventions/steered.py read
    activations with forward hooks of their own."""
    bypasses = hook_bypasses(ROOT)
    assert not bypasses, "hooks attached outside steering/hooks.py (use steer or observe):\n" + "\n".join(bypasses)


def test_the_check_finds_each_kind_of_bypass(tmp_path):
    """Each kind of bypass, planted in a copy of the tree's layout, is found (the check can fail)."""
    for folder in SCANNED:
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / THE_MECHANISM).write_text("def f(m, h):\n    return m.register_forward_hook(h)\n")
    assert hook_bypasses(tmp_path) == []  # the mechanism itself may
    planted = {"interventions/a.py": "def f(m, h):\n    m.register_forward_pre_hook(h)\n",
               "interventions/b.py": "from torch.nn.modules.module import register_module_forward_hook\n",
               "steering/c.py": "import nnsight\n",
               "examples/d.py": "from pyvene import IntervenableModel\n",
               "interventions/e.py": "import pyvene\nm = pyvene.IntervenableModel({}, None)\n",
               "interventions/f.py": "from pyreft import get_reft_model\n",
               "evenhand/engine/g.py": "def f(m, h):\n    m.register_forward_hook(h)\n"}
    for rel, text in planted.items():
        (tmp_path / rel).write_text(text)
    found = hook_bypasses(tmp_path)
    for rel in planted:
        assert any(f.startswith(rel + ":") for f in found), (rel, found)
    assert not any(f.startswith(str(THE_MECHANISM)) for f in found)
