"""Explanation language: which words tell minority-favouring explanations from majority-favouring ones.

Weighted log-odds ratio with an informative Dirichlet prior (Monroe, Colaresi
& Quinn 2008, "Fightin' Words", eq. 22): for word w, groups i and j with counts
y and totals n, prior counts alpha (the background corpus scaled to
``prior_total`` pseudo-counts) and alpha_0 = sum(alpha),

    delta_w = log((y_wi + a_w) / (n_i + a_0 - y_wi - a_w)) - log((y_wj + a_w) / (n_j + a_0 - y_wj - a_w))
    var(delta_w) ~= 1 / (y_wi + a_w) + 1 / (y_wj + a_w)
    z_w = delta_w / sqrt(var)

Positive z: more typical of group i (explanations of choices favouring the minority-coded candidate)."""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd
from .dataset import labels
from .text import strip_answer
from evenhand.reporting.labels import minus
from evenhand.reporting.plotting import COLUMN_WIDTH, paper_style, save

_TOKEN = re.compile(r"[a-z][a-z'-]+")
STOP = frozenset("""a an the and or but if of to in on for with at by from as is are was were be been being it its this
that these those he she they them his her their there here who whom which what when where why how not no so than then
too very can could should would will may might must do does did has have had i you we our your my me us""".split())


def tokens(text: str) -> list[str]:
    """Lower-case word tokens without stop words."""
    return [t for t in _TOKEN.findall((text or "").lower()) if t not in STOP]


def weighted_log_odds(group_i: Iterable[str], group_j: Iterable[str], background: Iterable[str] | None = None,
                      prior_total: float = 1000.0, min_count: int = 3) -> pd.DataFrame:
    """Monroe et al.'s z-scored log-odds for each word (documents are strings). Sorted by z, descending."""
    ci = Counter(w for d in group_i for w in tokens(d))
    cj = Counter(w for d in group_j for w in tokens(d))
    cb = Counter(w for d in background for w in tokens(d)) if background is not None else ci + cj
    vocab = sorted(w for w in set(ci) | set(cj) if ci[w] + cj[w] >= min_count)
    if not vocab:
        return pd.DataFrame(columns=["word", "count_i", "count_j", "delta", "z"])
    b_total = sum(cb[w] for w in vocab) or 1
    a = np.array([max(cb[w], 0.5) / b_total * prior_total for w in vocab])
    a0 = a.sum()
    yi = np.array([ci[w] for w in vocab], float)
    yj = np.array([cj[w] for w in vocab], float)
    ni, nj = yi.sum(), yj.sum()
    delta = (np.log((yi + a) / (ni + a0 - yi - a)) - np.log((yj + a) / (nj + a0 - yj - a)))
    z = delta / np.sqrt(1 / (yi + a) + 1 / (yj + a))
    out = pd.DataFrame({"word": vocab, "count_i": yi.astype(int), "count_j": yj.astype(int), "delta": delta, "z": z})
    return out.sort_values("z", ascending=False).reset_index(drop=True)


def explanation_words(responses: pd.DataFrame, correct_gt_only: bool = False, prior_total: float = 1000.0,
                      min_count: int = 3) -> pd.DataFrame:
    """Words of explanations favouring the minority-coded (i) vs the majority-coded (j) candidate.

    :func:`weighted_log_odds` applied to reasoning-mode responses (the final-answer line removed,
    :func:`probes.text.strip_answer`); ``correct_gt_only``: only correct choices on GT items."""
    if "text" not in responses.columns:
        raise ValueError("responses have no text column (run in reasoning mode)")
    y, ok = labels(responses, "favours_minority")
    if correct_gt_only:
        c, okc = labels(responses, "correct")
        ok = ok & okc & (c == 1)
    texts = [strip_answer(t) for t in responses["text"].tolist()]
    gi = [t for t, yy, k in zip(texts, y, ok) if k and yy == 1]
    gj = [t for t, yy, k in zip(texts, y, ok) if k and yy == 0]
    if not gi or not gj:
        raise ValueError("explanation words need explanations on both sides")
    table = weighted_log_odds(gi, gj, texts, prior_total, min_count)
    table.attrs.update(n_minority=len(gi), n_majority=len(gj))
    return table


def words_figure(table: pd.DataFrame, stem, k: int = 12, formats=("pdf", "svg", "png")):
    """The ``k`` most distinctive words of each side, by z; the title gives the explanations of each side
    (n, from :func:`explanation_words`'s ``attrs``) when the table carries them."""
    import matplotlib.pyplot as plt

    pal = paper_style()
    top = pd.concat([table.head(k), table.tail(k)]).drop_duplicates("word").sort_values("z")
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 0.13 * len(top) + 0.6))
    ax.barh(top["word"], top["z"], color=[pal[0] if z > 0 else pal[1] for z in top["z"]])
    ax.axvline(1.96, color="0.6", ls=":", lw=0.6)
    ax.axvline(-1.96, color="0.6", ls=":", lw=0.6)
    ax.set_xlabel(minus("z (weighted log-odds): > 0 minority-favouring, < 0 majority-favouring"))
    n_i, n_j = table.attrs.get("n_minority"), table.attrs.get("n_majority")
    if n_i is not None and n_j is not None:
        ax.set_title(f"Explanation words: n = {n_i} minority-favouring, {n_j} majority-favouring")
    fig.tight_layout()
    fig.text(0.01, -0.01, minus("Dotted: |z| = 1.96."), ha="left", va="top", fontsize=5.5, color="0.3")
    return save(fig, stem, formats)
