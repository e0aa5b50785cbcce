"""The text baseline: the probe's label predicted from the model's written reasoning alone.

TF-IDF features (word 1-2-grams, fitted inside each training fold only) and an
L2 logistic regression with C chosen by inner cross-validation, with exactly the
outer and inner folds of the activation probes (:func:`probes.logistic.grouped_folds`
on the same groups and seed), so the two are comparable row for row.
The final-answer line is removed from each text before fitting
(``strip_answer``): the baseline measures what the explanation says, not the
letter it ends with.
"""
from __future__ import annotations

import re

import numpy as np

from .logistic import FoldResult, ProbeOptions, plan_fits, select_C

_FINAL = re.compile(r"final answer\s*:.*$", re.IGNORECASE | re.DOTALL)


def strip_answer(text: str) -> str:
    """The text without its ``Final answer: ...`` tail."""
    return _FINAL.sub("", text if isinstance(text, str) else "").strip()


def fit_text(texts: list[str], y: np.ndarray, groups: np.ndarray, opts: ProbeOptions = ProbeOptions(),
             strip: bool = True, tokens: dict | None = None) -> FoldResult:
    """Out-of-fold P(label = 1) from TF-IDF + logistic regression, nested grouped CV. ``tokens``: further
    ``TfidfVectorizer`` arguments on how words are read (``token_pattern``, ``lowercase``)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    docs = np.array([strip_answer(t) if strip else (t or "") for t in texts], dtype=object)
    y = np.asarray(y).astype(int)
    groups = np.asarray(groups)
    if len(docs) != len(y) or len(y) != len(groups):
        raise ValueError("texts, labels and groups differ in length")
    if len(np.unique(y)) < 2:
        raise ValueError("text-baseline labels have a single class")
    outer, fits = plan_fits(groups, opts)

    def fit(mask, C):
        vec = TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True, **(tokens or {}))
        try:
            Xtr = vec.fit_transform(docs[mask])
        except ValueError:  # every training text empty
            return None, None
        clf = LogisticRegression(C=C, max_iter=opts.max_iter)
        if len(np.unique(y[mask])) < 2:
            return None, None
        return vec, clf.fit(Xtr, y[mask])

    def predict(model, rows):
        vec, clf = model
        if clf is None:
            return np.full(int(rows.sum()), float(y.mean()))
        return clf.predict_proba(vec.transform(docs[rows]))[:, 1]

    prob = np.zeros(len(y))
    chosen = []
    for f in range(outer.max() + 1):
        inner = [m for (ff, i, m) in fits if ff == f and i >= 0]
        acc = np.zeros(len(opts.Cs))
        for c, C in enumerate(opts.Cs):
            for m in inner:
                test = (outer != f) & ~m
                acc[c] += ((predict(fit(m, C), test) >= 0.5) == y[test]).mean() / len(inner)
        C = opts.Cs[select_C(acc, opts.Cs)]
        chosen.append(C)
        prob[outer == f] = predict(fit(outer != f, C), outer == f)
    return FoldResult(prob, outer, chosen)
