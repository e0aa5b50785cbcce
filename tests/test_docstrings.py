"""Docstring hygiene in the project's code: a module docstring says what the module holds in at most
``MAX_MODULE_DOCSTRING`` lines (the rest belongs in docs/), and no docstring or comment (nor a committed
config's comment) cites an issue number (the history lives in the tracker and docs/). Each check is shown
to fail on a module that breaks it."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from .floor_plan import PACKAGES, ROOT

MAX_MODULE_DOCSTRING = 15
"""The longest module docstring, in source lines (its quotes included)."""
ISSUE = re.compile(r"\bissues?\s*#\s*\d+|\bissues?\s+\d+|\(\s*issue\b", re.IGNORECASE)
"""An issue citation: ``issue 18``, ``issues 16 and 17``, ``issue #3``, ``(issue ...``."""
CONFIG_SUFFIXES = (".yaml", ".yml")


def module_docstring_lines(source: str) -> int:
    """How many source lines the module docstring of ``source`` spans (0 without one)."""
    body = ast.parse(source).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(
            body[0].value.value, str):
        return body[0].end_lineno - body[0].lineno + 1
    return 0


def _docstrings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                yield first.lineno, first.value.value
        # attribute docstrings: a string statement right after an assignment
        for body in (getattr(node, "body", None), getattr(node, "orelse", None)):
            if not isinstance(body, list):
                continue
            for prev, cur in zip(body, body[1:]):
                if isinstance(prev, (ast.Assign, ast.AnnAssign)) and isinstance(cur, ast.Expr) and isinstance(
                        cur.value, ast.Constant) and isinstance(cur.value.value, str):
                    yield cur.lineno, cur.value.value


def issue_citations(source: str) -> list[str]:
    """``line: text`` for each docstring or comment of the Python ``source`` that cites an issue number."""
    found = [(line, text) for line, text in _docstrings(ast.parse(source)) if ISSUE.search(text)]
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and ISSUE.search(tok.string):
            found.append((tok.start[0], tok.string))
    return [f"{line}: {ISSUE.search(text).group(0)}" for line, text in sorted(found)]


def config_issue_citations(text: str) -> list[str]:
    """``line: text`` for each comment of a YAML file that cites an issue number (a ``#`` that starts the line
    or follows a blank)."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        m = re.search(r"(^|\s)#(.*)$", line)
        if m and ISSUE.search(m.group(2)):
            out.append(f"{i}: {ISSUE.search(m.group(2)).group(0)}")
    return out


def _files(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return [p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*")) if p.suffix in suffixes]


def long_module_docstrings(root: Path = ROOT) -> dict[str, int]:
    """``{module: lines}`` for each module whose docstring is longer than the limit."""
    out = {}
    for p in _files(root, (".py",)):
        n = module_docstring_lines(p.read_text())
        if n > MAX_MODULE_DOCSTRING:
            out[p.relative_to(root).as_posix()] = n
    return out


def cited_issues(root: Path = ROOT) -> dict[str, list[str]]:
    """``{file: [citations]}`` over the project's modules and committed configs."""
    out = {}
    for p in _files(root, (".py", *CONFIG_SUFFIXES)):
        text = p.read_text()
        found = issue_citations(text) if p.suffix == ".py" else config_issue_citations(text)
        if found:
            out[p.relative_to(root).as_posix()] = found
    return out


def test_no_module_docstring_is_longer_than_the_limit():
    found = long_module_docstrings()
    assert not found, (f"module docstrings over {MAX_MODULE_DOCSTRING} lines (say what the module holds; move "
                       f"the rest to docs/): {found}")


def test_no_docstring_or_comment_cites_an_issue_number():
    found = cited_issues()
    assert not found, f"issue numbers in docstrings or comments (keep the content, drop the number): {found}"


def test_the_length_rule_fails_on_a_long_module_docstring(tmp_path):
    short = '"""One line."""\nx = 1\n'
    long = '"""Title.\n' + "more\n" * (MAX_MODULE_DOCSTRING - 2) + '"""\nx = 1\n'
    assert module_docstring_lines(short) == 1 and module_docstring_lines("x = 1\n") == 0
    assert module_docstring_lines(long) == MAX_MODULE_DOCSTRING
    longer = long.replace("more\n", "more\nmore\n", 1)
    assert module_docstring_lines(longer) == MAX_MODULE_DOCSTRING + 1
    (tmp_path / "evenhand").mkdir()
    (tmp_path / "evenhand" / "ok.py").write_text(long)
    (tmp_path / "evenhand" / "too_long.py").write_text(longer)
    assert long_module_docstrings(tmp_path) == {"evenhand/too_long.py": MAX_MODULE_DOCSTRING + 1}


def test_the_citation_rule_fails_on_docstrings_and_comments_that_cite_issues(tmp_path):
    bad = '''"""The benchmark (issue 18)."""
X = 0.1
"""How far (Issue 18: within 0.1)."""


class A:
    """See issues 16 and 17."""

    def f(self):
        """Fixed in issue #3."""
        return 1  # the loop issue 29 removed
'''
    assert [c.split(":")[0] for c in issue_citations(bad)] == ["1", "3", "7", "10", "11"]
    good = '''"""The benchmark: an issue with ties is resolved by the seed."""
X = "issue 18"  # a string that is not a docstring; an issue's bar
'''
    assert issue_citations(good) == []
    assert config_issue_citations("# dose (issue 18 item 3)\nkind: x  # size (issue 17)\nname: '#1'\n") == [
        "1: (issue", "2: (issue"]
    (tmp_path / "experiments" / "configs").mkdir(parents=True)
    (tmp_path / "experiments" / "m.py").write_text(bad)
    (tmp_path / "experiments" / "configs" / "c.yaml").write_text("# one more arm (issue 27)\nkind: compare\n")
    assert set(cited_issues(tmp_path)) == {"experiments/m.py", "experiments/configs/c.yaml"}
