"""Weighted log-odds with an informative Dirichlet prior: planted words are found, symmetric, z-scored."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from probes.language import explanation_words, tokens, weighted_log_odds


def corpus(seed=0):
    rng = np.random.default_rng(seed)
    filler = "candidate record criteria weighed evaluation scores years experience stated decision".split()
    gi = [" ".join(rng.choice(filler, 12)) + " resilience obstacles" for _ in range(200)]
    gj = [" ".join(rng.choice(filler, 12)) + " evidence detailed" for _ in range(200)]
    return gi, gj


def test_planted_words_top_each_side_and_filler_is_not_significant():
    gi, gj = corpus()
    t = weighted_log_odds(gi, gj)
    assert set(t.head(2)["word"]) == {"resilience", "obstacles"}
    assert set(t.tail(2)["word"]) == {"evidence", "detailed"}
    mid = t[~t["word"].isin(["resilience", "obstacles", "evidence", "detailed"])]
    assert (mid["z"].abs() < 3.5).all()


def test_swapping_the_groups_negates_z():
    gi, gj = corpus(1)
    a = weighted_log_odds(gi, gj).set_index("word")["z"]
    b = weighted_log_odds(gj, gi).set_index("word")["z"]
    assert np.allclose(a.sort_index(), -b.sort_index())


def test_tokens_drop_stop_words():
    assert tokens("The candidate's Resilience and the evidence!") == ["candidate's", "resilience", "evidence"]


def test_explanation_words_from_responses():
    gi, gj = corpus(2)
    rows = [{"text": t + " Final answer: Candidate A", "choice": "A", "minority_slot": "A", "question_polarity":
             "positive", "condition": "GT", "correct_slot": "A", "excluded": False} for t in gi]
    rows += [{"text": t + " Final answer: Candidate B", "choice": "B", "minority_slot": "A", "question_polarity":
              "positive", "condition": "GT", "correct_slot": "A", "excluded": False} for t in gj]
    t = explanation_words(pd.DataFrame(rows))
    assert t.iloc[0]["word"] in {"resilience", "obstacles"} and "answer" not in set(t["word"])
    assert t.attrs["n_minority"] == 200
    with pytest.raises(ValueError, match="both sides"):
        explanation_words(pd.DataFrame(rows), correct_gt_only=True)  # every majority-favouring choice is wrong
