"""The README orients (issue 30, item 8): at most 250 lines, in the order a new user needs (what EvenHand measures
with one figure, the two commands, a quickstart, a model of one's own, pointers), no path outside the repository,
every `evenhand` command it shows registered, every file it points to present, every metric it names in the
glossary. Each check is a function of the text, shown failing on a text that breaks it."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from experiments.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 250
ORDER = ("![", "## Two commands", "## Five-minute quickstart", "## On your GPU with your model", "## Where to read next")
GLOSSARY_TERMS = ("FragGap", "TieShift", "TieLean", "AccGap", "GT", "AMB", "degree", "beta", "pressure family",
                  "contrast", "scenario")
DOCS = ("README.md", "docs/GLOSSARY.md", "docs/BENCHMARKS.md", "docs/GUIDE.md", "docs/ARCHITECTURE.md")


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def too_long(text: str) -> int | None:
    """The line count when above MAX_LINES, else None."""
    n = len(text.splitlines())
    return n if n > MAX_LINES else None


def outside_paths(text: str) -> list[str]:
    """Every ``../`` path: a pointer out of the repository."""
    return re.findall(r"\S*(?<![\w.])\.\./\S*", text)


def out_of_order(text: str) -> list[str]:
    """The ORDER markers missing or not in order (the figure must come before the first section)."""
    missing = [m for m in ORDER if m not in text]
    if missing:
        return [f"missing: {m}" for m in missing]
    pos = [text.index(m) for m in ORDER]
    return [f"{ORDER[i + 1]!r} before {ORDER[i]!r}" for i in range(len(pos) - 1) if pos[i + 1] < pos[i]]


def commands() -> dict[str, set[str]]:
    """The registered commands: each top-level command with the names of its subcommands (empty if none)."""
    def subs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        for action in parser._actions:  # argparse has no public accessor for its subparsers
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}
    return {name: set(subs(p)) for name, p in subs(build_parser()).items()}


def unknown_commands(text: str, registered: dict[str, set[str]]) -> list[str]:
    """Every ``evenhand WORD [WORD]`` the text shows whose command (or subcommand) is not registered. Options
    (``--help``) and capitalised placeholders (``COMMAND``) are not commands."""
    bad = []
    for m in re.finditer(r"(?<!import )\bevenhand\s+([a-z][a-z0-9-]*)(?:\s+([a-z][a-z0-9-]*))?", text):
        cmd, sub = m.group(1), m.group(2)
        if cmd not in registered:
            bad.append(f"evenhand {cmd}")
        elif registered[cmd] and sub is not None and sub not in registered[cmd]:
            bad.append(f"evenhand {cmd} {sub}")
    return bad


def missing_files(text: str) -> list[str]:
    """Paths the text points to (``docs/*.md``, configs, images, scripts) that are not in the repository."""
    paths = set(re.findall(r"\b((?:docs|experiments/configs|evenhand|tests|benchmarks)/[\w./-]*\w)", text))
    paths |= set(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text))
    return sorted(p for p in paths if not (ROOT / p).exists())


def missing_terms(glossary: str) -> list[str]:
    """GLOSSARY_TERMS with no bold entry (``**term**``) in the glossary."""
    entries = {e.lower() for e in re.findall(r"\*\*([^*]+)\*\*", glossary)}
    return [t for t in GLOSSARY_TERMS if not any(e == t.lower() or e.startswith(t.lower() + " ") for e in entries)]


# ------------------------------------------------------------------ the README and the docs as committed

def test_readme_is_at_most_250_lines():
    assert too_long(readme()) is None


def test_readme_sections_in_order():
    assert out_of_order(readme()) == []
    first_screen = "\n".join(readme().splitlines()[:40])
    assert "![" in first_screen, "the figure is not on the first screen (40 lines)"


@pytest.mark.parametrize("doc", DOCS)
def test_no_path_outside_the_repository(doc):
    assert outside_paths((ROOT / doc).read_text(encoding="utf-8")) == []


def test_every_command_shown_is_registered():
    text = readme()
    assert len(re.findall(r"\bevenhand\s+[a-z]", text)) >= 8  # the check has commands to check
    assert unknown_commands(text, commands()) == []


@pytest.mark.parametrize("doc", ["README.md", "docs/GLOSSARY.md", "docs/BENCHMARKS.md", "docs/GUIDE.md"])
def test_every_file_pointed_to_exists(doc):
    assert missing_files((ROOT / doc).read_text(encoding="utf-8")) == []


def test_glossary_defines_the_metric_names():
    assert missing_terms((ROOT / "docs/GLOSSARY.md").read_text(encoding="utf-8")) == []


# ------------------------------------------------------------------ each check fails on a text that breaks it

def test_checks_fail_on_broken_texts():
    long = "x\n" * (MAX_LINES + 1)
    assert too_long(long) == MAX_LINES + 1 and too_long("x\n" * MAX_LINES) is None
    assert outside_paths("the design (`../shared/design/ARCHITECTURE.md`)") == ["(`../shared/design/ARCHITECTURE.md`)"]
    assert out_of_order("## Two commands\n![f](x.png)\n## Five-minute quickstart\n## On your GPU with your model\n"
                        "## Where to read next\n") == ["'## Two commands' before '!['"]
    assert out_of_order("# EvenHand\nruntimes first\n") == [f"missing: {m}" for m in ORDER]
    registered = commands()
    assert "score" in registered and "export" in registered["suite"]
    assert unknown_commands("`evenhand scores answers.csv`", registered) == ["evenhand scores"]
    assert unknown_commands("evenhand suite exports --subset core", registered) == ["evenhand suite exports"]
    assert unknown_commands("evenhand suite export --subset core; evenhand --help; evenhand COMMAND", registered) == []
    assert outside_paths("OUT/run-.../planted_truth.json, ../x") == ["../x"]
    assert missing_files("see docs/NO_SUCH_PAGE.md and ![f](no/such.png)") == ["docs/NO_SUCH_PAGE.md", "no/such.png"]
    assert missing_terms("- **FragGap**: a gap") == [t for t in GLOSSARY_TERMS if t != "FragGap"]
