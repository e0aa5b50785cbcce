"""Warnings for a user scoring their own answers: partial coverage of a subset, a headline on few
scenarios, smoke being a plumbing check (read by `evenhand score`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

FEW_SCENARIOS = 10
"""A degree-3 headline metric resting on fewer scenarios than this is warned about: its interval is
not to be trusted (docs/metrics/uncertainty.md)."""


def _subset_ids(responses: "pd.DataFrame") -> tuple[str, set] | None:
    """The smallest named subset (seed 0, the rows' suite version) holding every item id of ``responses``:
    its name and item ids; None when none does (a suite of one's own, another seed, an items file)."""
    from ..suite.content import ContentError, content_for
    from ..suite.matched import ORGANISM_SUITE
    from ..suite.subsets import iter_subset
    versions = responses["suite_version"].tolist() if "suite_version" in responses.columns else []
    try:
        content = content_for(versions)
    except (ContentError, KeyError, ValueError):
        return None
    if not set(responses["scenario_id"]) <= {sc.id for sc in content.scenarios}:
        return None  # scenarios of one's own
    ids = set(responses["item_id"].astype(str))
    for name in ("smoke", "organism_heldout", "core"):
        if name == "organism_heldout":
            from ..suite.content import suite_major
            if suite_major(content.version) != suite_major(ORGANISM_SUITE):
                continue
            import json

            from ..suite.matched import ORGANISM_DIR, heldout_items
            record = json.loads((ORGANISM_DIR / "organism.json").read_text())
            if not set(responses["scenario_id"]) <= set(record["heldout_ids"]):
                continue  # rendering the held-out set costs seconds: only when the scenarios fit
            sub = heldout_items(record)
            found = dict(zip(sub["item_id"], sub["contrast_type"]))
        else:
            found = {it["item_id"]: it["contrast_type"] for it in iter_subset(name, 0, content)}
        if ids <= found.keys():
            return name, found
    return None


def scoring_warnings(responses: "pd.DataFrame", report: dict) -> list[str]:
    """What a user scoring their own answers must know before reading ``report`` (the
    :func:`evenhand.scoring.metrics.score` report of the validated ``responses``), one line each: the file covers
    only part of its subset (counts, for the contrast type scored); a degree-3 headline metric rests on fewer
    than :data:`FEW_SCENARIOS` scenarios; the subset is ``smoke`` (a plumbing check)."""
    from ..vocab.metric_defs import get_metric, headline
    out = []
    ctype = report["contrast_type"]
    mine = responses[responses["contrast_type"] == ctype]
    found = _subset_ids(responses)
    if found is not None:
        name, ids = found
        total = sum(t == ctype for t in ids.values())
        if len(mine) < total:
            out.append(f"the file covers {len(mine):,} of {total:,} {ctype} items of subset {name} (seed 0): "
                       f"{total - len(mine):,} items are missing, and the metrics rest on the ones present")
    d3 = report.get("by_degree", {}).get("3")
    if d3:
        few = [f"{get_metric(m).display} k={d3[m]['clusters']}" for m in headline()
               if m in d3 and d3[m].get("clusters") is not None and d3[m]["clusters"] < FEW_SCENARIOS]
        if few:
            out.append(f"the degree-3 headline rests on fewer than {FEW_SCENARIOS} scenarios ({', '.join(few)}): "
                       f"its intervals are not to be trusted at this size")
    if found is not None and found[0] == "smoke":
        out.append("smoke is a plumbing check (4 units per stratum), not an estimate: answer the core subset "
                   "(`evenhand suite export --subset core`) and run `evenhand power` on a pilot to size the run")
    return out
