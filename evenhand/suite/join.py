"""Join rows that carry little more than an item id and an answer to the suite's items.

A file of ``item_id`` + ``text`` (or ``choice``) is scored by rendering each item again from its id
(:func:`~evenhand.suite.generate.item_by_id`) and taking the item fields from it: the id fixes the
scenario, condition, degree, contrast, slots and pressure. A row may also carry item fields of its
own; each must agree with the suite's. Items are rendered from the suite version the rows' ``suite_version``
names (rows without one: the default version); rows of two versions, or of a version whose content this
EvenHand does not ship, are refused row by row instead of being scored against other text.
"""
from __future__ import annotations

import pandas as pd

from ..vocab.problems import Problem
from .content import SUITE_MAJORS, ContentError, content_for, load_content
from .generate import item_by_id

EXTRA = ("domain", "contrast_category", "candidate_noun")
"""The item fields a joined row takes from the suite besides the required ones."""


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _same(given: object, ours: object) -> bool:
    try:
        return float(given) == float(ours)  # a degree of 3, "3" or 3.0
    except (TypeError, ValueError):
        return str(given).strip() == str(ours)


def join_suite(df: pd.DataFrame, required: tuple[str, ...], where: list[str],
               order: list[int]) -> tuple[pd.DataFrame, set[int], list[Problem]]:
    """``df`` with the ``required`` item fields and :data:`EXTRA` filled from the suite's items by ``item_id``.

    Returns the joined frame, the positions of rows that could not be joined (each has a problem)
    and the problems: an id that is not a suite item's, another ``suite_version``, a given item
    field that disagrees with the suite's."""
    versions = df["suite_version"].tolist() if "suite_version" in df.columns else [None] * len(df)
    try:
        content = content_for(versions)  # the version the rows name (rescoring a v1 run renders v1 items)
    except ContentError:
        content = load_content()  # mixed or unknown versions: every row of another version gets a problem below
    joined = tuple(required) + EXTRA
    absent = [f for f in required if f not in df.columns]
    problems: list[Problem] = []
    failed: set[int] = set()
    filled = {f: [None] * len(df) for f in joined}
    given = {f: df[f].tolist() for f in joined if f in df.columns}
    for i, iid in enumerate(df["item_id"].tolist()):
        if _missing(iid):
            problems.append(Problem(order[i], where[i], "item_id", "missing value", "is missing"))
            failed.add(i)
            continue
        v = versions[i]
        if not _missing(v) and str(v) != content.version:
            problems.append(Problem(order[i], where[i], "suite_version", "other suite version",
                                    f"is {v!r} but the other rows are of suite {content.version!r} (this EvenHand "
                                    f"renders {', '.join(load_content(m).version for m in SUITE_MAJORS)}): score "
                                    f"each version's rows with the EvenHand version that exported them"))
            failed.add(i)
            continue
        try:
            item = item_by_id(str(iid), content)
        except KeyError as exc:
            problems.append(Problem(order[i], where[i], "item_id", "unknown item id",
                                    f"is not an item of suite {content.version} ({exc.args[0]})"))
            failed.add(i)
            continue
        for f, vals in given.items():
            if not _missing(vals[i]) and not _same(vals[i], item[f]):
                problems.append(Problem(order[i], where[i], f, "disagrees with the suite",
                                        f"is {vals[i]!r} but suite item {iid} has {item[f]!r}"))
                failed.add(i)
        for f in joined:
            filled[f][i] = item[f]
    if any(p.kind == "unknown item id" for p in problems):
        problems.append(Problem(-1, "", None, "missing column",
                                f"the file has no column {', '.join(absent)}: without them only rows whose item_id is "
                                f"a suite item's can be scored (every field: docs/METRICS.md)"))
    out = df.copy()
    for f in joined:
        out[f] = filled[f]
    out["suite_version"] = content.version
    return out, failed, problems
