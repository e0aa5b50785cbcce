"""Problems found in response rows, gathered so that one error reports them all.

A reader or validator appends a :class:`Problem` for everything it finds and goes on;
:func:`raise_problems` then raises one :class:`RowError` whose message lists the first
:data:`SHOWN` problems in file order, each naming its row and field, and counts them by kind.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

SHOWN = 20
"""How many problems an error message lists one by one (all are counted)."""


@dataclass(frozen=True)
class Problem:
    """One problem. ``order`` sorts it into file order (-1: the whole file); ``where`` names the
    row (``line 4 (item_id=...)``, ``row 3 (...)``) or is empty for the whole file; ``field`` is
    None for a whole row or file; ``kind`` is what the counts group by."""

    order: int
    where: str
    field: str | None
    kind: str
    message: str

    def __str__(self) -> str:
        text = f"field '{self.field}' {self.message}" if self.field else self.message
        return f"{self.where}: {text}" if self.where else text


class RowError(ValueError):
    """Response rows are unusable; the message names the row and the field of each problem.

    ``problems`` holds every :class:`Problem` found (empty when raised with a message only)."""

    def __init__(self, message: str, problems: Sequence[Problem] = ()):
        super().__init__(message)
        self.problems = tuple(problems)


def report(problems: Sequence[Problem], source: str | None = None) -> str:
    """The text of an error for ``problems``: the first :data:`SHOWN` in file order, then counts by kind."""
    ps = sorted(problems, key=lambda p: p.order)
    prefix = f"{source}: " if source else ""
    if len(ps) == 1:
        return prefix + str(ps[0])
    rows = len({p.where for p in ps if p.where})
    head = f"{prefix}{len(ps):,} problems" + (f" in {rows:,} row{'s' * (rows != 1)}" if rows else "")
    head += f" (the first {SHOWN} below)" if len(ps) > SHOWN else ""
    lines = [head + ":"] + [f"  {p}" for p in ps[:SHOWN]]
    if len(ps) > SHOWN:
        lines.append(f"  ... and {len(ps) - SHOWN:,} more")
    kinds = Counter(p.kind for p in ps)
    lines.append("  problems by kind: " + ", ".join(f"{k} {n:,}" for k, n in kinds.most_common()))
    return "\n".join(lines)


def raise_problems(problems: Sequence[Problem], source: str | None = None) -> None:
    """Raise one :class:`RowError` listing ``problems``; do nothing when there are none."""
    if problems:
        raise RowError(report(problems, source), problems)
