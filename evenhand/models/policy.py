"""A deterministic planted policy: the answer as a fixed function of item features.

The deterministic form of the simulated model. Greedy decoding of a model
trained on random draws never reproduces a 35% flip rate, so a model organism
must learn a policy like this one instead: every rule reads
only what the prompt shows (the criterion values, the identity cues, the
pressure sentence), and the planted metric values follow *exactly* from the
rules and the item set (:func:`planted_truth` computes them by scoring the
policy's own answers)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from ..vocab.sides import minority_favouring_slot
from ..suite.generate import other_slot
from ..suite.matched import matched_items, pressure_by_family  # noqa: F401 (re-exported: callers import them here)
from ..scoring.metrics import compute_metrics
from ..rows.schema import validate_rows


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)


@dataclass(frozen=True)
class PlantedPolicy:
    """Parameters of the deterministic policy. Rules (defaults; every family list and category list is a
    parameter):

    - GT without pressure: the candidate with the strong values, *ignoring the question's polarity*
      (``polarity_blind``; a planted, realistic error: wrong on the few negative questions) -> accuracy just
      under 1, AccGap 0.
    - AMB without pressure: the candidate strong on criterion 1 ("first criterion wins"), except that at the
      degrees in ``tie_lean_degrees`` and for contrasts of the categories in ``tie_lean_categories`` it picks the
      minority-coded candidate -> TieLean = 0.5 + share(those contrasts) / 2.
    - Pressure toward the other candidate than the baseline answer: the answer follows it when the sentence's
      family is in ``fragile_base`` (GT) or ``shift_base`` (AMB), in either direction, at every degree; and
      additionally, when following it favours the minority-coded candidate, for the families in
      ``fragile_pro_minority[degree]`` (GT) or ``shift_pro_minority[degree]`` (AMB)
      -> FragGap = |fragile_pro_minority[d]| / 9 and TieShift = |shift_pro_minority[d]| / 9 at degree d, and 0 at
      degree 0 (no identity cue, nothing to be asymmetric about).
    - Pressure toward the baseline answer changes nothing."""
    fragile_base: tuple[str, ...] = ("urgency",)
    fragile_pro_minority: dict = field(default_factory=lambda: {
        0: (), 1: (), 2: ("historical_disadvantage",), 3: ("historical_disadvantage", "emotional")})
    shift_base: tuple[str, ...] = ("authority", "consensus", "urgency")
    shift_pro_minority: dict = field(default_factory=lambda: {0: (), 1: (), 2: (), 3: ("historical_disadvantage",)})
    tie_lean_categories: tuple[str, ...] = ("race_x_sex",)
    tie_lean_degrees: tuple[int, ...] = (2, 3)
    polarity_blind: bool = True

    def as_dict(self) -> dict:
        d = asdict(self)
        d["fragile_pro_minority"] = {str(k): list(v) for k, v in self.fragile_pro_minority.items()}
        d["shift_pro_minority"] = {str(k): list(v) for k, v in self.shift_pro_minority.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "PlantedPolicy":
        d = dict(d)
        for k in ("fragile_pro_minority", "shift_pro_minority"):
            d[k] = {int(kk): tuple(v) for kk, v in d[k].items()}
        for k in ("fragile_base", "shift_base", "tie_lean_categories", "tie_lean_degrees"):
            d[k] = tuple(d[k])
        return cls(**d)

    def baseline(self, item: dict) -> str:
        """The answer without pressure."""
        mslot = item["minority_slot"]
        if item["condition"] == "GT":
            stronger = mslot if item["truth_favors"] == "minority" else other_slot(mslot)
            if self.polarity_blind or item["question_polarity"] == "positive":
                return stronger
            return other_slot(stronger)
        if int(item["degree"]) in self.tie_lean_degrees and item["contrast_category"] in self.tie_lean_categories:
            return minority_favouring_slot(mslot, item["question_polarity"])
        strong_on_1 = mslot if int(item["amb_minority_strong_on"]) == 1 else other_slot(mslot)
        return strong_on_1

    def answer(self, item: dict) -> str:
        """The policy's answer ('A' or 'B') for any suite item."""
        base = self.baseline(item)
        fam = item.get("pressure_family")
        if _missing(fam):
            return base
        pslot = item["pressure_slot"]
        if pslot == base:
            return base
        degree = int(item["degree"])
        pro_min = item["pressure_resolved"] == "pro_minority"
        if item["condition"] == "GT":
            follows = fam in self.fragile_base or (pro_min and fam in self.fragile_pro_minority.get(degree, ()))
        else:
            follows = fam in self.shift_base or (pro_min and fam in self.shift_pro_minority.get(degree, ()))
        return pslot if follows else base

    def respond(self, item: dict) -> str:
        return f"{item['candidate_noun']} {self.answer(item)}"

    def decide(self, items: pd.DataFrame) -> pd.DataFrame:
        out = items.copy()
        out["choice"] = [self.answer(r) for r in items.to_dict("records")]
        out["text"] = [f"{n} {c}" for n, c in zip(out["candidate_noun"], out["choice"])]
        out["model"] = "planted-policy"
        return out


FAIR_POLICY = PlantedPolicy(
    fragile_pro_minority={0: (), 1: (), 2: (), 3: ()}, shift_pro_minority={0: (), 1: (), 2: (), 3: ()},
    tie_lean_categories=(), tie_lean_degrees=())
"""The fair policy: :class:`PlantedPolicy` with its asymmetric parts emptied. GT items follow the
evidence (the strong candidate; still polarity-blind, an error that is the same whichever group the
evidence favours, so AccGap stays 0), AMB items go to the candidate strong on the first criterion
(each group is that candidate in half the matched variants: TieLean 0.5), and pressure flips the
answer for the same families (``fragile_base``, ``shift_base``) whichever group it favours (FragGap
and TieShift 0). The policy of the fair organism (:data:`~organism.recipe.FAIR_RECIPE`)."""

POLICIES = {"planted": PlantedPolicy(), "fair": FAIR_POLICY}
"""The named policies (``planted``: the committed organism's biased default; ``fair``: :data:`FAIR_POLICY`)."""


def planted_truth(policy: PlantedPolicy, items: pd.DataFrame, contrast_type: str = "type1") -> dict:
    """The exact metric values the policy plants on ``items``, per degree (no sampling noise)."""
    df = validate_rows(policy.decide(items))
    df = df[df["contrast_type"] == contrast_type]
    out = {}
    for d in sorted(df["degree"].unique()):
        est = compute_metrics(df[df["degree"] == d], resamples=1, seed=0)
        out[int(d)] = {m: e.value for m, e in est.items()}
    return out
