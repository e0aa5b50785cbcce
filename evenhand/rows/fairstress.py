"""Loader for the released FairStress rows, mapped onto EvenHand's item schema.

Released field names (JSONL or parquet), as Ai2 ships them: ``item_id``, ``domain``,
``scenario_id``, ``condition`` (GT/AMB), ``signaling_level`` (0-3), ``contrast_id``,
``contrast_category``, ``minority_group``/``majority_group`` (group strings such as
``black_male``), ``minority_slot``, ``favored_group_truth`` (a group string on GT rows,
``none`` on AMB rows), ``expected_correct`` (GT only: the stronger candidate's label,
``"Candidate B"``), ``has_injection``, ``injection`` (``{id, family, class, direction}`` with
direction ``pro_A``/``pro_B``; null for the baseline), ``injection_resolved``,
``injection_targets``, ``prompt``. Our earlier forms are read too: a bare ``A``/``B`` for
``expected_correct`` and ``injection.direction``, ``D3`` for the level, rows without the group
fields. Any field value outside these is an error naming the row, the field and the value."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from .fairstress_groups import check_d2_groups, released_group
from .schema import RowError, read_rows, validate_rows
from ..vocab.sides import favours_minority
from ..suite.content import load_content

CORRECTION_KEYS = ("polarity_flagged_scenarios", "d2_confound_exclusions", "f6f9_excluded_injection_ids",
                   "f6f9_incoherent_domains")
_ITEM_FIELDS_FOR_BASELINE = ("scenario_id", "condition", "degree", "contrast_id", "minority_slot", "correct_slot_raw")
_LABEL = re.compile(r"(?:([A-Za-z][\w-]*(?: [A-Za-z][\w-]*)*) )?([AB])")
_DIRECTION = {"A": "A", "B": "B", "pro_A": "A", "pro_B": "B"}
_NO_DIRECTION = {None, "none", "neutral"}
_CHOICE_INSTRUCTION = re.compile(r'"([A-Za-z][\w -]*?) A"\s+or\s+"\1 B"')


def load_corrections(path: str | Path) -> dict:
    """Read and check the corrections JSON (all four keys required; D2 groups named as the released rows name them)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RowError(f"{path}: cannot read corrections JSON: {exc}") from None
    check_corrections(data, str(path))
    return data


def check_corrections(data: dict, source: str = "corrections") -> None:
    """Raise :class:`RowError` when ``data`` is not a corrections mapping (keys, types, group strings)."""
    for k in CORRECTION_KEYS:
        if k not in data:
            raise RowError(f"{source}: corrections file is missing key '{k}'")
    if not isinstance(data["d2_confound_exclusions"], dict):
        raise RowError(f"{source}: 'd2_confound_exclusions' must map scenario id -> list of group strings")
    for k in ("polarity_flagged_scenarios", "f6f9_excluded_injection_ids", "f6f9_incoherent_domains"):
        if not isinstance(data[k], list):
            raise RowError(f"{source}: '{k}' must be a list")
    check_d2_groups(data["d2_confound_exclusions"], source)


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


def _stronger_slot(v, where: str) -> str:
    """The slot of a released ``expected_correct``: ``"Candidate B"`` (Ai2's form) or ``"B"`` (ours)."""
    m = _LABEL.fullmatch(v.strip()) if isinstance(v, str) else None
    if not m:
        raise RowError(f"{where}: field 'expected_correct' must be a candidate label such as 'Candidate A' or "
                       f"'Candidate B' (or A or B) on a GT row, got {v!r}")
    return m.group(2)


def _injection(r: dict, where: str) -> tuple[dict | None, str | None]:
    """The row's injection (None without one) and the slot it argues for (None when it argues for no slot)."""
    inj = _norm(r.get("injection"))
    if isinstance(inj, str):
        inj = json.loads(inj)
    inj = inj if isinstance(inj, dict) and _norm(inj.get("id")) is not None else None
    has = _norm(r.get("has_injection"))
    if isinstance(has, str):
        if has.strip().lower() not in ("true", "false", "1", "0"):
            raise RowError(f"{where}: field 'has_injection' must be true or false, got {has!r}")
        has = has.strip().lower() in ("true", "1")
    if has is not None and bool(has) != (inj is not None):
        raise RowError(f"{where}: field 'has_injection' is {has!r} but the row "
                       f"{'has no' if inj is None else 'has an'} injection")
    if inj is None:
        return None, None
    direction = _norm(inj.get("direction"))
    cls = _norm(inj.get("class"))
    if direction in _DIRECTION:
        if cls not in (None, "directional"):
            raise RowError(f"{where}: field 'injection.class' is {cls!r} but 'injection.direction' is {direction!r}")
        return inj, _DIRECTION[direction]
    if direction in _NO_DIRECTION and cls != "directional":
        return inj, None
    raise RowError(f"{where}: field 'injection.direction' must be pro_A or pro_B (or A or B) on a directional "
                   f"injection, got {direction!r}")


def _noun(r: dict, label: str | None) -> str | None:
    """The candidate noun: the row's own, else the prompt's closing instruction
    (``Answer with only "Employee A" or "Employee B"``), else the label's."""
    if _norm(r.get("candidate_noun")) is not None:
        return r["candidate_noun"]
    prompt = _norm(r.get("prompt"))
    found = _CHOICE_INSTRUCTION.findall(prompt) if isinstance(prompt, str) else []
    if found:
        return found[-1]
    m = _LABEL.fullmatch(label.strip()) if isinstance(label, str) else None
    return m.group(1) if m and m.group(1) else None


def _truth_side(v, groups: dict[str, str], ours: dict[str, str], where: str) -> str | None:
    """``favored_group_truth`` as ``minority``/``majority`` (None when absent)."""
    if v is None or v == "none":
        return None
    for side in ("minority", "majority"):
        if v in (groups[side], ours[side]):
            return side
    raise RowError(f"{where}: field 'favored_group_truth' must be {groups['minority']!r} or {groups['majority']!r} "
                   f"(the row's two groups) on a GT row, got {v!r}")


def from_released(rows: pd.DataFrame, corrections: dict | None = None) -> pd.DataFrame:
    """Map released FairStress rows onto EvenHand's schema, applying the corrections.

    Mapping: degree = signaling_level; pressure_id/family/class = injection id/family/class; pressure_slot =
    the slot of injection.direction. ``expected_correct`` marks the candidate who is stronger on the criteria,
    so ``truth_favors`` follows from it and ``minority_slot``; the group strings are checked against the
    contrast through :data:`.fairstress_groups.AI2_GROUPS`. ``pressure_resolved`` and ``pressure_targets`` are
    recomputed from the slots and the (corrected) polarity exactly as docs/METRICS.md defines them (who is
    *favoured*; whether following the pressure gives the wrong answer); the released
    ``injection_resolved``/``injection_targets`` are kept as ``released_injection_resolved``/
    ``released_injection_targets`` and ``favored_group_truth`` as ``released_truth_favors``, and
    :func:`released_disagreements` counts rows where they differ.

    Corrections (the maintainers' JSON published with the reference scorer), applied as Ai2's scorer applies
    them (docs/metrics/rows.md, "Importing the released rows"):

    - ``polarity_flagged_scenarios``: these scenarios ask a negative question; their GT rows get the other
      slot as ``correct_slot`` (the released correctness negated), and all their rows get
      ``question_polarity = negative`` (the announcement's "favouring", where Ai2 changes GT rows only);
    - ``d2_confound_exclusions``: scenario id -> released group strings; a degree-2 row of that scenario
      whose minority or majority group (as the released rows name it) is listed is excluded;
    - ``f6f9_excluded_injection_ids`` and ``f6f9_incoherent_domains``: a row is excluded when its injection
      id is listed *and* its domain is listed (at every degree); neither list excludes anything alone.

    Excluded rows stay in the table with ``excluded = True`` and an ``exclusion_reason`` (``d2_confound``,
    ``f6f9_incoherent_domain``, ``non_directional_injection``); metrics skip them.
    """
    content = load_content()
    known = {x.id: x for x in content.contrasts}
    corr = corrections or {k: ([] if k != "d2_confound_exclusions" else {}) for k in CORRECTION_KEYS}
    check_corrections(corr)
    flagged = set(corr["polarity_flagged_scenarios"])
    d2 = check_d2_groups(corr["d2_confound_exclusions"], "corrections")
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
        x = known[cid]
        ours = {"minority": x.minority_group, "majority": x.majority_group}
        groups = {side: released_group(_norm(r.get(f"{side}_group")), cid, side, ours[side], where)
                  for side in ("minority", "majority")}
        cond = str(r["condition"]).upper()
        cond = {"AMBIGUOUS": "AMB", "GROUND_TRUTH": "GT"}.get(cond, cond)
        inj, direction = _injection(r, where)
        negative = r["scenario_id"] in flagged
        label = _norm(r.get("expected_correct")) if cond == "GT" else None
        stronger = _stronger_slot(label, where) if cond == "GT" else None
        correct = None if stronger is None else (stronger if not negative else ("B" if stronger == "A" else "A"))
        released_truth = _truth_side(_norm(r.get("favored_group_truth")), groups, ours, where) if cond == "GT" else None
        resolved = _norm(r.get("injection_resolved"))
        resolved = resolved.replace("-", "_") if isinstance(resolved, str) else resolved
        recomputed_resolved = recomputed_targets = None
        if direction is not None:
            polarity = "negative" if negative else "positive"
            pro_minority = favours_minority(direction, r["minority_slot"], polarity)
            recomputed_resolved = "pro_minority" if pro_minority else "pro_majority"
            if cond == "GT":
                recomputed_targets = "stronger" if direction == correct else "weaker"
        degree = _degree(r["signaling_level"], where)
        domain = _norm(r.get("domain"))
        row = {
            "item_id": str(r["item_id"]), "scenario_id": r["scenario_id"], "domain": domain,
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
            "released_truth_favors": released_truth,
            "prompt": _norm(r.get("prompt")), "excluded": False, "exclusion_reason": None, "source": "fairstress",
        }
        noun = _noun(r, label)
        if noun is not None:
            row["candidate_noun"] = noun
        for k in ("choice", "text"):
            if k in r and _norm(r[k]) is not None:
                row[k] = r[k]
        if inj and inj["id"] in bad_inj and bad_dom and domain is None:
            raise RowError(f"{where}: field 'domain' is missing; it decides whether the corrections' "
                           f"f6f9 rule excludes injection {inj['id']!r}")
        reason = None
        if degree == 2 and (set(groups.values()) & d2.get(r["scenario_id"], frozenset())):
            reason = "d2_confound"
        elif inj and inj["id"] in bad_inj and domain in bad_dom:
            reason = "f6f9_incoherent_domain"
        elif inj and direction is None:
            reason = "non_directional_injection"
        row["excluded"], row["exclusion_reason"] = reason is not None, reason
        out.append(row)
    df = pd.DataFrame(out)
    df["baseline_id"] = _match_baselines(df)
    if "choice" not in df.columns and "text" not in df.columns:
        df["choice"] = None
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
    without the injection. Unmatched rows get ``missing-baseline`` (metrics skip them). The baseline is found
    by matching every item field except the injection, never by editing ids."""
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
    """Non-excluded rows whose released fields differ from docs/METRICS.md's: ``pressure_resolved`` and
    ``pressure_targets`` on pressured rows of positive questions (on negative ones they differ by design), and
    ``truth_favors`` (the released ``favored_group_truth`` against ``expected_correct``) on GT rows."""
    kept = ~df["excluded"]
    ok = (df["question_polarity"] == "positive") & kept & df["pressure_id"].notna()
    res = df["released_injection_resolved"].notna() & (df["released_injection_resolved"] != df["pressure_resolved"])
    tgt = df["released_injection_targets"].notna() & df["pressure_targets"].notna() & \
        (df["released_injection_targets"] != df["pressure_targets"])
    truth = df["released_truth_favors"].notna() & (df["released_truth_favors"] != df["truth_favors"])
    return {"pressure_resolved": int((ok & res).sum()), "pressure_targets": int((ok & tgt).sum()),
            "truth_favors": int((kept & truth).sum())}


def load_fairstress(path: str | Path, corrections: str | Path | dict | None = None) -> pd.DataFrame:
    """Read released rows (JSONL or parquet) and map them; ``corrections`` is a path or a dict."""
    corr = load_corrections(corrections) if isinstance(corrections, (str, Path)) else corrections
    return validate_rows(from_released(read_rows(path), corr))
