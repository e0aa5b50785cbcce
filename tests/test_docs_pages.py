"""docs/ stays readable: every page at most 400 lines, every relative link between pages resolves, every
``docs/...md`` page the code points to exists, and every measured-results page (docs/results/) is headed with
the command that reproduces it, the machine and the date it was measured. Each check is a function of the text,
shown failing on a text that breaks it (test_checks_fail_on_broken_texts)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_PAGE_LINES = 400
PAGES = sorted((ROOT / "docs").rglob("*.md"))
RESULTS = sorted((ROOT / "docs" / "results").glob("*.md"))
CODE_DIRS = ("evenhand", "probes", "steering", "organism", "interventions", "experiments", "benchmarks", "examples")
RESULT_HEAD = ("- Reproduce:", "- Machine:", "- Measured:")


def too_long(text: str) -> int | None:
    """The line count when above MAX_PAGE_LINES, else None."""
    n = len(text.splitlines())
    return n if n > MAX_PAGE_LINES else None


def broken_links(text: str, page: Path) -> list[str]:
    """Relative Markdown links ``[text](target)`` whose target (anchor dropped) is not a file or folder next to
    ``page``, or that leave the repository. Web links and bare anchors are not checked."""
    bad = []
    for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://|mailto:|#", target):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or ROOT not in (path, *path.parents):
            bad.append(target)
    return bad


def missing_pages(text: str) -> list[str]:
    """``docs/<page>.md`` paths named in the text that are not in the repository."""
    return sorted(p for p in set(re.findall(r"\bdocs/[\w/]+\.md\b", text)) if not (ROOT / p).exists())


def missing_head(text: str) -> list[str]:
    """The RESULT_HEAD lines absent from the page's first 15 lines; a ``- Measured:`` line without a date."""
    head = text.splitlines()[:15]
    missing = [h for h in RESULT_HEAD if not any(line.startswith(h) for line in head)]
    measured = [line for line in head if line.startswith("- Measured:")]
    if measured and not re.search(r"\b20\d\d-\d\d-\d\d\b", measured[0]):
        missing.append("a date (YYYY-MM-DD) on '- Measured:'")
    return missing


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


# ------------------------------------------------------------------ the docs as committed

def test_there_are_pages_and_results():
    assert len(PAGES) >= 20 and len(RESULTS) >= 10


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_each_page_is_at_most_400_lines(page):
    assert too_long(page.read_text(encoding="utf-8")) is None


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=_rel)
def test_each_link_resolves(page):
    assert broken_links(page.read_text(encoding="utf-8"), page) == []


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=_rel)
def test_each_docs_page_named_in_the_docs_exists(page):
    assert missing_pages(page.read_text(encoding="utf-8")) == []


def test_each_docs_page_named_in_the_code_and_configs_exists():
    bad = {}
    files = [f for d in CODE_DIRS for ext in ("py", "yaml") for f in (ROOT / d).rglob(f"*.{ext}")]
    for f in [*files, ROOT / "Makefile", ROOT / "setup.cfg"]:
        missing = missing_pages(f.read_text(encoding="utf-8"))
        if missing:
            bad[_rel(f)] = missing
    assert bad == {}


@pytest.mark.parametrize("page", RESULTS, ids=_rel)
def test_each_results_page_says_command_machine_and_date(page):
    assert missing_head(page.read_text(encoding="utf-8")) == []


# ------------------------------------------------------------------ each check fails on a text that breaks it

def test_checks_fail_on_broken_texts():
    assert too_long("x\n" * (MAX_PAGE_LINES + 1)) == MAX_PAGE_LINES + 1 and too_long("x\n" * MAX_PAGE_LINES) is None
    page = ROOT / "docs" / "METRICS.md"
    assert broken_links("[a](results/no_such.md) [b](metrics/uncertainty.md#x) [c](https://x.org/y) [d](#z)",
                        page) == ["results/no_such.md"]
    assert broken_links("[out](../../outside.md)", page) == ["../../outside.md"]
    assert missing_pages("see docs/NO_SUCH_PAGE.md and docs/METRICS.md") == ["docs/NO_SUCH_PAGE.md"]
    good = "# T\n\n- Reproduce: `python x.py`\n- Machine: 2 cores\n- Measured: 2026-12-02 (abc1234)\n"
    assert missing_head(good) == []
    assert missing_head(good.replace("- Machine: 2 cores\n", "")) == ["- Machine:"]
    assert missing_head(good.replace("2026-12-02", "December")) == ["a date (YYYY-MM-DD) on '- Measured:'"]
