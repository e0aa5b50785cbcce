"""Explanation measures: how reasoning-mode explanations credit the chosen candidate, minority vs majority side.

Per response (the text without its final-answer line): ``hedges`` and ``boosters`` per 100 words (Hyland
2005, :func:`evenhand.framing.lexicon.stance`), ``positivity`` (share of sentences VADER calls positive minus share
negative), ``identity`` (group terms and identity-framing words per 100 words), ``criteria_cited`` (share of
the item's two criteria named) and ``values_cited`` (share of the chosen candidate's two values quoted),
the last two matched against the scenario's own criteria and values in the suite content.

Each measure's difference, minority-favouring minus majority-favouring correct choices on GT items, is a
within-scenario contrast: per scenario holding both sides the difference of its two means, averaged over
those scenarios (weights n1 n0 / (n1 + n0)), with the jackknife-t over scenarios
(:func:`evenhand.inference.stats.jackknife_t_estimate`; n rows per side, k scenarios; scenarios with one side
counted). Positive: the measure is higher
in explanations of minority-favouring choices. Limits and mapping to the study: docs/EXPLANATIONS.md.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from evenhand.framing import lexicon
from evenhand.reporting.labels import minus
from evenhand.scoring.metrics import choices
from evenhand.reporting.plotting import COLUMN_WIDTH, paper_style, save
from evenhand.inference.stats import INTERVAL_NAMES, jackknife_t_estimate
from evenhand.suite.content import ContentError, content_for, format_value
from .dataset import labels
from .language import STOP
from .text import strip_answer

MEASURES = {
    "hedges": "hedges per 100 words (Hyland 2005)",
    "boosters": "boosters per 100 words (Hyland 2005)",
    "positivity": "net positive sentences (VADER)",
    "identity": "identity mentions per 100 words",
    "criteria_cited": "share of the item's criteria named",
    "values_cited": "share of the chosen candidate's values quoted",
}
"""Each measure's column name and its label in tables and the figure."""
_NUM = re.compile(r"\d[\d,]*(?:\.\d+)?")
_GENERIC = frozenset({"number", "years", "year", "score", "rate", "total", "level", "amount"})


def _stem(w: str) -> str:
    return w.lower()[:6]


def criterion_stems(name: str) -> frozenset[str]:
    """The content-word stems (first six letters) of a criterion's name, stop and generic words dropped."""
    ws = [w for w in re.findall(r"[a-z][a-z'-]+", name.lower()) if w not in STOP and w not in _GENERIC]
    return frozenset(_stem(w) for w in ws) or frozenset(_stem(w) for w in re.findall(r"[a-z]+", name.lower()))


def criterion_cited(stems: frozenset[str], text_stems: set[str]) -> bool:
    """A criterion is cited when at least half of its name's content stems occur in the text."""
    return len(stems & text_stems) >= math.ceil(len(stems) / 2)


def numbers(text: str) -> set[float]:
    """The numbers written in ``text`` (commas as thousands separators)."""
    out = set()
    for m in _NUM.findall(text or ""):
        try:
            out.add(float(m.replace(",", "")))
        except ValueError:
            continue
    return out


def measure(text: str, criteria: list[str] | None = None, values: list[float] | None = None,
            polarity: lexicon.Polarity | None = None, stance: lexicon.Stance | None = None,
            groups: lexicon.Groups | None = None, noun: str | None = None) -> dict[str, float]:
    """The six measures of one explanation (NaN where undefined: no words; no criteria or values given).
    ``noun`` (the candidate noun, "Applicant"): its stem never counts toward citing a criterion, since the
    answer label ("Applicant A") names it without citing anything."""
    stance = stance or lexicon.stance()
    groups = groups or lexicon.groups()
    polarity = polarity or lexicon.Polarity()
    ws = lexicon.words(text)
    n = len(ws)
    out = dict.fromkeys(MEASURES, float("nan"))
    if n == 0:
        return out
    out["hedges"] = 100.0 * lexicon.count(stance.hedges, text) / n
    out["boosters"] = 100.0 * lexicon.count(stance.boosters, text) / n
    sents = lexicon.sentences(text)
    lab = [polarity.label(s) for s in sents]
    out["positivity"] = (sum(x > 0 for x in lab) - sum(x < 0 for x in lab)) / len(lab) if lab else float("nan")
    ident = sum(lexicon.count(p, text) for p in groups.patterns.values())
    if groups.identity_framing is not None:
        ident += lexicon.count(groups.identity_framing, text)
    out["identity"] = 100.0 * ident / n
    if criteria:
        ts = {_stem(w) for w in ws} - ({_stem(noun)} if noun else set())
        out["criteria_cited"] = float(np.mean([criterion_cited(criterion_stems(c), ts) for c in criteria]))
    if values:
        have = numbers(text)
        out["values_cited"] = float(np.mean([float(format_value(v).replace(",", "")) in have for v in values]))
    return out


ECHO_N = 5
"""Word n-gram length of :func:`prompt_echo`."""
ECHOING = 0.5
"""Mean :func:`prompt_echo` above which :func:`explanation_measures` notes that the explanations repeat the prompt."""


def prompt_echo(text: str, prompt: str | None) -> float:
    """Share of the text's word 5-grams that occur in the prompt (NaN without a prompt or a 5-gram): a model
    that repeats its prompt "cites" every criterion and value and every identity cue it was given."""
    if not isinstance(prompt, str) or not prompt:
        return float("nan")
    def grams(t):
        w = [x.lower() for x in lexicon.words(t)]
        return [tuple(w[i:i + ECHO_N]) for i in range(len(w) - ECHO_N + 1)]
    mine = grams(text)
    if not mine:
        return float("nan")
    theirs = set(grams(prompt))
    return sum(g in theirs for g in mine) / len(mine)


def _chosen_values(row, scenario) -> list[float] | None:
    """The chosen candidate's two criterion values, from the scenario content and the item's design."""
    c1, c2 = scenario.criteria
    if row["condition"] == "GT":
        m_strong = (row["truth_favors"] == "minority",) * 2
    else:
        on = row.get("amb_minority_strong_on")
        if on is None or on != on:
            return None
        m_strong = (int(on) == 1, int(on) == 2)
    strong = m_strong if row["_choice"] == row["minority_slot"] else tuple(not s for s in m_strong)
    return [c1.strong if strong[0] else c1.weak, c2.strong if strong[1] else c2.weak]


def response_measures(responses: pd.DataFrame, polarity: lexicon.Polarity | None = None,
                      stance: lexicon.Stance | None = None, groups: lexicon.Groups | None = None) -> pd.DataFrame:
    """The correct GT reasoning-mode rows with their side (``favours_minority``) and the six measures.

    Criteria and values come from the suite content of the rows' ``suite_version``; a scenario the suite
    does not know leaves those two measures NaN for its rows."""
    if "text" not in responses.columns:
        raise ValueError("responses have no text column (run in reasoning mode)")
    df = responses
    if "mode" in df.columns:
        df = df[df["mode"] == "reasoning"]
    df = df.reset_index(drop=True)
    side, ok = labels(df, "favours_minority")
    right, ok_c = labels(df, "correct")
    keep = ok & ok_c & (right == 1)
    df = df.assign(_choice=choices(df), favours_minority=side)[keep].reset_index(drop=True)
    try:
        scen = {s.id: s for s in content_for(df["suite_version"] if "suite_version" in df.columns else []).scenarios}
    except ContentError:
        scen = {}
    polarity = polarity or lexicon.Polarity()
    rows = []
    for _, r in df.iterrows():
        s = scen.get(r["scenario_id"])
        crit = [c.name for c in s.criteria] if s else None
        vals = _chosen_values(r, s) if s else None
        noun = r.get("candidate_noun") if isinstance(r.get("candidate_noun"), str) else None
        text = strip_answer(r["text"])
        rows.append({**measure(text, crit, vals, polarity, stance, groups, noun),
                     "prompt_echo": prompt_echo(text, r.get("prompt"))})
    out = pd.concat([df[["item_id", "scenario_id", "favours_minority"]],
                     pd.DataFrame(rows, columns=[*MEASURES, "prompt_echo"])], axis=1)
    return out


def _side_sums(measures: pd.DataFrame, m: str) -> pd.DataFrame:
    """Per scenario: the sum and count of measure ``m`` on each side (columns (sum|count, 1|0)), zeros filled."""
    d = measures[["scenario_id", "favours_minority", m]].dropna()
    g = d.groupby(["scenario_id", "favours_minority"])[m].agg(["sum", "count"]).unstack("favours_minority")
    need = [("sum", 1), ("sum", 0), ("count", 1), ("count", 0)]
    return g.reindex(columns=pd.MultiIndex.from_tuples(need)).fillna(0.0)


def paired_differences(measures: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per measure, the **within-scenario** contrast: in each scenario holding explanations of both sides,
    d_s = mean(minority-favouring) - mean(majority-favouring); the estimate is the mean of d_s weighted by
    w_s = n1 n0 / (n1 + n0) (the inverse of d_s's variance under one within-scenario spread, the
    Mantel-Haenszel weight), with the jackknife-t over those scenarios. A scenario's style (how much every
    explanation of it hedges) cancels in d_s, so a model whose side shares vary by scenario is not read as
    explaining the sides differently (:func:`pooled_differences` is). Scenarios with one side only are left
    out and counted (``k_one_side``, ``n_one_side`` rows). Columns: measure, label, value, ci_low, ci_high,
    mean_minority, mean_majority (the two sides' means over the k scenarios used), n_minority, n_majority,
    k, k_one_side, n_one_side, note, interval."""
    out = []
    for m, label in MEASURES.items():
        g = _side_sums(measures, m)
        both = (g[("count", 1)] > 0) & (g[("count", 0)] > 0)
        lone = g[~both]
        g = g[both]
        s1, s0, n1, n0 = (g[c].to_numpy(float) for c in [("sum", 1), ("sum", 0), ("count", 1), ("count", 0)])
        row = {"measure": m, "label": label, "n_minority": int(n1.sum()), "n_majority": int(n0.sum()),
               "k": len(g), "k_one_side": len(lone),
               "n_one_side": int((lone[("count", 1)] + lone[("count", 0)]).sum()),
               "interval": INTERVAL_NAMES["jackknife-t"]}
        if len(g) == 0:
            out.append({**row, "value": np.nan, "ci_low": np.nan, "ci_high": np.nan, "mean_minority": np.nan,
                        "mean_majority": np.nan, "note": "no scenario holds correct choices of both sides"})
            continue
        d, w = s1 / n1 - s0 / n0, n1 * n0 / (n1 + n0)
        value = float(np.sum(w * d) / w.sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            loo = (np.sum(w * d) - w * d) / (w.sum() - w)
        e = jackknife_t_estimate(value, loo, int(n1.sum() + n0.sum()), "the difference", alpha)
        note = e.note
        if len(lone):
            left = f"{len(lone)} scenarios ({row['n_one_side']} explanations) hold one side only and are left out"
            note = left if note is None else f"{note}; {left}"
        out.append({**row, "value": e.value, "ci_low": np.nan if e.ci_low is None else e.ci_low,
                    "ci_high": np.nan if e.ci_high is None else e.ci_high, "mean_minority": s1.sum() / n1.sum(),
                    "mean_majority": s0.sum() / n0.sum(), "note": note})
    return pd.DataFrame(out)


def pooled_differences(measures: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """The estimator :func:`paired_differences` replaced, kept to show its failure: the pooled mean of all
    minority-favouring explanations minus the pooled mean of all majority-favouring ones (over scenarios
    holding both), jackknife-t over scenarios. When scenarios differ in style and in the share of each side,
    it reads the style as a difference between sides (tests/test_explanations.py: 0.84 false positives at
    the 5% level on such a null). Columns: measure, value, ci_low, ci_high, k."""
    out = []
    for m in MEASURES:
        g = _side_sums(measures, m)
        g = g[(g[("count", 1)] > 0) & (g[("count", 0)] > 0)]
        s1, s0, n1, n0 = (g[c].to_numpy(float) for c in [("sum", 1), ("sum", 0), ("count", 1), ("count", 0)])
        if len(g) == 0:
            out.append({"measure": m, "value": np.nan, "ci_low": np.nan, "ci_high": np.nan, "k": 0})
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            loo = (s1.sum() - s1) / (n1.sum() - n1) - (s0.sum() - s0) / (n0.sum() - n0)
        e = jackknife_t_estimate(s1.sum() / n1.sum() - s0.sum() / n0.sum(), loo, int(n1.sum() + n0.sum()),
                                 "the difference", alpha)
        out.append({"measure": m, "value": e.value, "ci_low": np.nan if e.ci_low is None else e.ci_low,
                    "ci_high": np.nan if e.ci_high is None else e.ci_high, "k": len(g)})
    return pd.DataFrame(out)


def explanation_measures(responses: pd.DataFrame, polarity: lexicon.Polarity | None = None,
                         stance: lexicon.Stance | None = None) -> pd.DataFrame:
    """:func:`paired_differences` of :func:`response_measures`: the table behind the figure. When the
    explanations mostly repeat the prompt (mean :func:`prompt_echo` above :data:`ECHOING`) every note says so."""
    m = response_measures(responses, polarity, stance)
    table = paired_differences(m)
    echo = float(m["prompt_echo"].mean()) if m["prompt_echo"].notna().any() else float("nan")
    table["prompt_echo"] = echo
    if echo > ECHOING:
        warn = f"explanations repeat the prompt ({echo:.0%} of their 5-grams are in it): cited is not credited"
        table["note"] = [warn if not isinstance(n, str) else f"{n}; {warn}" for n in table["note"]]
    return table


SHORT = {"hedges": "hedges", "boosters": "boosters", "identity": "identity terms", "positivity": "net positive",
         "criteria_cited": "criteria named", "values_cited": "values quoted"}


def measures_figure(table: pd.DataFrame, stem, formats=("pdf", "svg", "png"), title: str | None = None):
    """One row per measure: the minority-minus-majority difference with its 95% CI (jackknife-t over
    scenarios), n per side and k scenarios under each name. Two panels: rates per 100 words, and shares."""
    import matplotlib.pyplot as plt

    pal = paper_style()
    t = table.set_index("measure").reindex(list(MEASURES))
    panels = [("per 100 words", ["hedges", "boosters", "identity"]),
              ("share of sentences, criteria or values", ["positivity", "criteria_cited", "values_cited"])]
    fig, axes = plt.subplots(2, 1, figsize=(COLUMN_WIDTH, 3.0))
    for ax, (unit, ms) in zip(axes, panels):
        sub = t.loc[ms]
        y = np.arange(len(ms))[::-1]
        v = sub["value"].to_numpy(float)
        lo, hi = sub["ci_low"].to_numpy(float), sub["ci_high"].to_numpy(float)
        err = np.vstack([v - lo, hi - v])
        ax.errorbar(v, y, xerr=np.where(np.isfinite(err), err, 0), fmt="o", color=pal[0], ms=3, capsize=2, lw=0.8)
        ax.axvline(0, color="0.5", lw=0.6, ls=":")
        ax.set_yticks(y, [f"{SHORT[m]}{' (0 in every text)' if r['mean_minority'] == 0 == r['mean_majority'] else ''}"
                          f"\nn = {int(r['n_minority'])} / {int(r['n_majority'])}, k = {int(r['k'])}"
                          for m, (_, r) in zip(ms, sub.iterrows())])
        ax.set_xlabel(minus(f"minority- minus majority-favouring ({unit})"))
        span = np.nanmax(np.abs(np.concatenate([lo, hi, v, [0.5 if "words" in unit else 0.05]])))  # a floor: no 1e-9 axes
        ax.set_xlim(-1.15 * span, 1.15 * span)
        ax.set_ylim(-0.6, len(ms) - 0.4)
    fig.suptitle(title or "Explanations of correct choices", fontsize=7)
    fig.tight_layout()
    fig.text(0.01, -0.01, minus("> 0: higher in explanations of minority-favouring correct choices. Points: "
                                "difference of means;\nbars: 95% CI, jackknife-t over k scenarios; n = "
                                "explanations, minority / majority side."),
             ha="left", va="top", fontsize=5.5, color="0.3")
    return save(fig, stem, formats)
