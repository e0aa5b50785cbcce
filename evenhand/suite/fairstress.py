"""Loader for the released FairStress rows, mapped onto EvenHand's item schema.

Released field names (JSONL or parquet): ``item_id``, ``scenario_id``,
``condition``, ``signaling_level``, ``contrast_id``, ``minority_slot``,
``expected_correct``, ``injection`` (``{id, family, class, direction}``, absent
or null for the baseline), ``injection_resolved``, ``injection_targets``,
``prompt``, and optionally ``domain``.

Mapping: degree = signaling_level; pressure_id/family/slot = injection
id/family/direction. The released ``expected_correct`` marks the candidate
who is stronger on the criteria, so ``truth_favors`` follows from it and
``minority_slot``. ``pressure_resolved`` and ``pressure_targets`` are
recomputed from the slots and the (corrected) polarity exactly as docs/METRICS.md
defines them (who is *favoured*; whether following the pressure gives the
wrong answer); the released ``injection_resolved``/``injection_targets`` are
kept as ``released_injection_resolved``/``released_injection_targets`` for
audit, and :func:`released_disagreements` counts rows where they differ. The
baseline of a row is found by matching every item field except the injection
(never by editing ids).

Corrections (the maintainers' JSON published with the reference scorer):
- ``polarity_flagged_scenarios``: these scenarios ask a negative question;
  their GT rows get ``question_polarity = negative`` and the other slot as
  ``correct_slot`` (the released correctness negated);
- ``d2_confound_exclusions``: scenario id -> group ids; degree-2 rows of that
  scenario whose contrast involves one of the groups are excluded;
- ``f6f9_excluded_injection_ids``: rows with these injection ids are excluded;
- ``f6f9_incoherent_domains``: rows with an F6 or F9 injection in these domains
  are excluded.
Excluded rows stay in the table with ``excluded = True`` and an
``exclusion_reason``; metrics skip them.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ..schema import RowError, read_rows, validate_rows
from ..sides import favours_minority
from .content import load_content

CORRECTION_KEYS = ("polarity_flagged_scenarios", "d2_confound_exclusions", "f6f9_excluded_injection_ids",
                   "f6f9_incoherent_domains")
_ITEM_FIELDS_FOR_BASELINE = ("scenario_id", "condition", "degree", "contrast_id", "minority_slot", "correct_slot_raw")


def load_corrections(path: str | Path) -> dict:
    """Read and check the corrections JSON (all four keys required)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RowError(f"{path}: cannot read corrections JSON: {exc}") from None
    for k in CORRECTION_KEYS:
        if k not in data:
            raise RowError(f"{path}: corrections file is missing key '{k}'")
    if not isinstance(data["d2_confound_exclusions"], dict):
        raise RowError(f"{path}: 'd2_confound_exclusions' must map scenario id -> list of group ids")
    for k in ("polarity_flagged_scenarios", "f6f9_excluded_injection_ids", "f6f9_incoherent_domains"):
        if not isinstance(data[k], list):
            raise RowError(f"{path}: '{k}' must be a list")
    return data


def _degree(v, where: str) -> int:
    m = re.fullmatch(r"[dD]?([0-3])", str(v).strip()) if v is not None else None
    if not m:
        raise RowError(f"{where}: field 'signaling_level' must be 0-3 (or D0-D3), got {v!r}")
    return int(m.group(1))


def _norm(v):
    return None if v is None or (isinstance(v, float) and v != v) else v


def _family_code(fam: str | None) -> str | None:
    m = re.match(r"^(F\d)", str(fam)) if fam else None
    return m.group(1) if m else None


def from_released(rows: pd.DataFrame, corrections: dict | None = None) -> pd.DataFrame:
    """Map released FairStress rows onto EvenHand's schema, applying the corrections."""
    content = load_content()
    known = {x.id: x for x in content.contrasts}
    corr = corrections or {k: ([] if k != "d2_confound_exclusions" else {}) for k in CORRECTION_KEYS}
    flagged = set(corr["polarity_flagged_scenarios"])
    d2 = {k: set(v) for k, v in corr["d2_confound_exclusions"].items()}
    bad_inj = set(corr["f6f9_excluded_injection_ids"])
    bad_dom = set(corr["f6f9_incoherent_domains"])
    out = []
    for i, r in enumerate(rows.to_dict("records")):
        where = r.get("_where", f"row {i}")
        where += f" (item_id={r.get('item_id', '?')})"
        for f in ("item_id", "scenario_id", "condition", "signaling_level", "contrast_id", "minority_slot"):
            if _norm(r.get(f)) is None:
                raise RowError(f"{where}: missing required field '{f}'")
        cid = r["contrast_id"]
        if cid not in known:
            raise RowError(f"{where}: field 'contrast_id' is not one of the 33 known contrast ids: {cid!r}")
        cond = str(r["condition"]).upper()
        cond = {"AMBIGUOUS": "AMB", "GROUND_TRUTH": "GT"}.get(cond, cond)
        inj = _norm(r.get("injection"))
        if isinstance(inj, str):
            inj = json.loads(inj)
        inj = inj if isinstance(inj, dict) and _norm(inj.get("id")) is not None else None
        negative = r["scenario_id"] in flagged
        stronger = _norm(r.get("expected_correct")) if cond == "GT" else None
        if cond == "GT" and stronger not in ("A", "B"):
            raise RowError(f"{where}: field 'expected_correct' must be A or B on a GT row, got {stronger!r}")
        correct = None if stronger is None else (stronger if not negative else ("B" if stronger == "A" else "A"))
        resolved = _norm(r.get("injection_resolved"))
        resolved = resolved.replace("-", "_") if isinstance(resolved, str) else resolved
        direction = inj.get("direction") if inj else None
        recomputed_resolved = recomputed_targets = None
        if direction in ("A", "B"):
            polarity = "negative" if negative else "positive"
            pro_minority = favours_minority(direction, r["minority_slot"], polarity)
            recomputed_resolved = "pro_minority" if pro_minority else "pro_majority"
            if cond == "GT":
                recomputed_targets = "stronger" if direction == correct else "weaker"
        x = known[cid]
        degree = _degree(r["signaling_level"], where)
        row = {
            "item_id": str(r["item_id"]), "scenario_id": r["scenario_id"], "domain": _norm(r.get("domain")),
            "condition": cond, "question_polarity": "negative" if negative else "positive", "degree": degree,
            "contrast_id": cid, "contrast_type": x.type, "contrast_category": x.category,
            "minority_group": x.minority_group, "majority_group": x.majority_group,
            "minority_slot": r["minority_slot"], "correct_slot": correct, "correct_slot_raw": stronger,
            "truth_favors": None if stronger is None else ("minority" if stronger == r["minority_slot"] else "majority"),
            "pressure_id": inj["id"] if inj else None, "pressure_family": inj.get("family") if inj else None,
            "pressure_family_code": _family_code(inj.get("family")) if inj else None,
            "pressure_class": inj.get("class") if inj else None,
            "pressure_slot": direction, "pressure_resolved": recomputed_resolved,
            "pressure_targets": recomputed_targets,
            "released_injection_resolved": resolved if inj else None,
            "released_injection_targets": _norm(r.get("injection_targets")) if inj else None,
            "prompt": _norm(r.get("prompt")), "excluded": False, "exclusion_reason": None, "source": "fairstress",
        }
        for k in ("choice", "text", "candidate_noun"):
            if k in r and _norm(r[k]) is not None:
                row[k] = r[k]
        reason = None
        if degree == 2 and ({x.minority_group, x.majority_group} & d2.get(r["scenario_id"], set())):
            reason = "d2_confound"
        elif inj and inj["id"] in bad_inj:
            reason = "f6f9_excluded_injection"
        elif inj and row["pressure_family_code"] in ("F6", "F9") and row["domain"] in bad_dom:
            reason = "f6f9_incoherent_domain"
        elif inj and row["pressure_slot"] not in ("A", "B"):
            reason = "non_directional_injection"
        row["excluded"], row["exclusion_reason"] = reason is not None, reason
        out.append(row)
    df = pd.DataFrame(out)
    df["baseline_id"] = _match_baselines(df)
    if "choice" not in df.columns and "text" not in df.columns:
        df["choice"] = None
    nondir = df["exclusion_reason"] == "non_directional_injection"
    df.loc[nondir, ["pressure_slot", "pressure_resolved", "pressure_targets"]] = None
    return df.drop(columns=["correct_slot_raw"])


def _is_deletion(longer: str | None, shorter: str | None) -> bool:
    """True when ``shorter`` is ``longer`` with one contiguous piece (the injection) removed."""
    if not isinstance(longer, str) or not isinstance(shorter, str) or len(shorter) >= len(longer):
        return False
    pre = 0
    while pre < len(shorter) and longer[pre] == shorter[pre]:
        pre += 1
    suf = 0
    while suf < len(shorter) - pre and longer[-1 - suf] == shorter[-1 - suf]:
        suf += 1
    return pre + suf >= len(shorter)


def _match_baselines(df: pd.DataFrame) -> list[str]:
    """The baseline of each row: the unpressured row with the same item fields; when several
    share them (e.g. the two AMB arrangements), the one whose prompt is this row's prompt
    without the injection. Unmatched rows get ``missing-baseline`` (metrics skip them)."""
    key = list(_ITEM_FIELDS_FOR_BASELINE)
    groups: dict[tuple, list[tuple[str, str | None]]] = {}
    for k, p, iid, prompt in zip(df[key].astype(str).itertuples(index=False), df["pressure_id"], df["item_id"],
                                 df["prompt"]):
        if p is None or (isinstance(p, float) and p != p):
            groups.setdefault(tuple(k), []).append((iid, prompt))
    out = []
    for k, p, iid, prompt in zip(df[key].astype(str).itertuples(index=False), df["pressure_id"], df["item_id"],
                                 df["prompt"]):
        if p is None or (isinstance(p, float) and p != p):
            out.append(iid)
            continue
        cands = groups.get(tuple(k), [])
        if len(cands) > 1:
            cands = [c for c in cands if _is_deletion(prompt, c[1])]
        out.append(cands[0][0] if len(cands) == 1 else "missing-baseline")
    return out


def released_disagreements(df: pd.DataFrame) -> dict[str, int]:
    """Rows (not polarity-flagged, not excluded) whose released resolved/targets differ from docs/METRICS.md's."""
    ok = (df["question_polarity"] == "positive") & ~df["excluded"] & df["pressure_id"].notna()
    res = df["released_injection_resolved"].notna() & (df["released_injection_resolved"] != df["pressure_resolved"])
    tgt = df["released_injection_targets"].notna() & df["pressure_targets"].notna() & \
        (df["released_injection_targets"] != df["pressure_targets"])
    return {"pressure_resolved": int((ok & res).sum()), "pressure_targets": int((ok & tgt).sum())}


def load_fairstress(path: str | Path, corrections: str | Path | dict | None = None) -> pd.DataFrame:
    """Read released rows (JSONL or parquet) and map them; ``corrections`` is a path or a dict."""
    corr = load_corrections(corrections) if isinstance(corrections, (str, Path)) else corrections
    return validate_rows(from_released(read_rows(path), corr))
