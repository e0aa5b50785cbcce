"""A simulated decision model with planted, known biases.

It answers suite items with text (so the parser and the whole pipeline run on it) from a policy whose metric values
are known exactly (:class:`PlantedBias`, :class:`SimulatedModel`)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..parsing.parse import PARSE_FIELDS, parse_fields
from ..vocab.sides import minority_favouring_slot
from ..suite.generate import other_slot, stable_hash
from . import scenario_effects as fx

_SDS = ("scenario_sd", "scenario_contrast_sd")


@dataclass(frozen=True)
class PlantedBias:
    """Planted policy parameters (fractions). Asymmetric parts are the degree-3 values.

    At degree ``d`` each asymmetric part is scaled by ``degree_scale[d]`` (default 0, 1/3, 2/3, 1), so degree 0 is
    fair and degree 3 carries the planted values (``g`` below):

    - GT baseline: correct with probability ``accuracy +/- acc_gap*g/2`` (plus when the truth favours the
      minority-coded candidate) -> AccGap = g*acc_gap.
    - AMB baseline: favours the minority with probability ``p = 0.5 + g*(tie_lean - 0.5)``, plus ``position_bias``
      when the slot that favours the minority is A and minus it when it is B -> TieLean = p, and P(choose A) is
      raised by the position bias in both arrangements.
    - GT pressure toward the weaker candidate: a correct baseline flips with probability
      ``flip_neutral + g*(flip_pro_minority - flip_neutral)`` under pro-minority pressure (likewise pro-majority)
      -> FragGap = g*(fpm - fpj). Pressure toward the stronger candidate corrects a wrong baseline with
      probability ``recover``.
    - AMB pressure against the baseline's side: shifts with probability
      ``shift_neutral + g*(shift_to_minority - shift_neutral)`` (pro-minority) or the majority analogue
      -> TieShift = g*(stm - stj).
    - Refusal with probability ``refusal`` on any item, independently.
    - Scenario effects (``scenario_sd``, ``scenario_contrast_sd``; default 0, off): a random intercept per scenario
      and per scenario x contrast on the logit of every probability above, signed toward the minority-coded
      candidate (:mod:`evenhand.models.scenario_effects`), so items of a scenario are correlated. :meth:`truth`
      is then the expectation over the effects."""
    accuracy: float = 0.95
    acc_gap: float = 0.04
    tie_lean: float = 0.62
    position_bias: float = 0.05
    flip_neutral: float = 0.15
    flip_pro_minority: float = 0.35
    flip_pro_majority: float = 0.15
    recover: float = 0.5
    shift_neutral: float = 0.30
    shift_to_minority: float = 0.45
    shift_to_majority: float = 0.30
    refusal: float = 0.02
    degree_scale: tuple[float, float, float, float] = (0.0, 1 / 3, 2 / 3, 1.0)
    scenario_sd: float = 0.0
    """SD of the per-scenario random intercept (logit scale); 0: no scenario effects."""
    scenario_contrast_sd: float = 0.0
    """SD of the per-(scenario, contrast) random intercept (logit scale); 0: none."""

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():
            if k in _SDS:
                if not (math.isfinite(v) and v >= 0):
                    raise ValueError(f"PlantedBias.{k} must be a finite number >= 0, got {v}")
            elif k != "degree_scale" and not 0.0 <= v <= 1.0:
                raise ValueError(f"PlantedBias.{k} must be in [0, 1], got {v}")
        if len(self.degree_scale) != 4:
            raise ValueError("PlantedBias.degree_scale needs one value per degree 0-3")
        hi = self.accuracy + self.acc_gap / 2
        lean = max(self.tie_lean, 1 - self.tie_lean)
        if hi > 1 or self.accuracy - self.acc_gap / 2 < 0 or lean + self.position_bias > 1:
            raise ValueError("PlantedBias: accuracy +/- acc_gap/2 and tie_lean +/- position_bias must stay in [0, 1]")

    @property
    def effect_sd(self) -> float:
        """The SD of an item's total scenario effect ``u_s + v_sc`` (logit scale)."""
        return math.hypot(self.scenario_sd, self.scenario_contrast_sd)

    def truth(self, degree: int) -> dict[str, float]:
        """The exact population value of each metric at a degree (GT truth and slots balanced).

        With scenario effects: the expectation over them, by quadrature (:mod:`.scenario_effects`)."""
        g = self.degree_scale[degree]
        if self.effect_sd > 0:
            return self._truth_with_effects(g)
        return {
            "accuracy": self.accuracy, "accgap": g * self.acc_gap, "tielean": 0.5 + g * (self.tie_lean - 0.5),
            "fraggap": g * (self.flip_pro_minority - self.flip_pro_majority),
            "tieshift": g * (self.shift_to_minority - self.shift_to_majority), "refusal": self.refusal,
            "flip_pro_minority": self.flip_neutral + g * (self.flip_pro_minority - self.flip_neutral),
            "flip_pro_majority": self.flip_neutral + g * (self.flip_pro_majority - self.flip_neutral),
        }

    def _truth_with_effects(self, g: float) -> dict[str, float]:
        lean = 0.5 + g * (self.tie_lean - 0.5)
        v = fx.planted_values({
            "acc_min": self.accuracy + g * self.acc_gap / 2, "acc_maj": self.accuracy - g * self.acc_gap / 2,
            "lean_hi": lean + self.position_bias, "lean_lo": lean - self.position_bias,
            "flip_min": self.flip_neutral + g * (self.flip_pro_minority - self.flip_neutral),
            "flip_maj": self.flip_neutral + g * (self.flip_pro_majority - self.flip_neutral),
            "shift_min": self.shift_neutral + g * (self.shift_to_minority - self.shift_neutral),
            "shift_maj": self.shift_neutral + g * (self.shift_to_majority - self.shift_neutral),
            "refusal": self.refusal}, self.effect_sd)
        return {
            "accuracy": (v["acc_min"] + v["acc_maj"]) / 2, "accgap": v["acc_min"] - v["acc_maj"],
            "tielean": v["tielean"], "fraggap": v["flip_min"] - v["flip_maj"],
            "tieshift": v["shift_min"] - v["shift_maj"], "refusal": v["refusal"],
            "flip_pro_minority": v["flip_min"], "flip_pro_majority": v["flip_maj"],
        }

    def icc(self, degree: int = 0) -> dict[str, float]:
        """The intra-class correlations the scenario effects produce: latent (logit scale) for items of
        one scenario and of one scenario and contrast, and observed (0/1 scale) for an AMB baseline
        item's "favours the minority" at ``degree`` (without the position bias)."""
        lean = 0.5 + self.degree_scale[degree] * (self.tie_lean - 0.5)
        out = fx.latent_icc(self.scenario_sd, self.scenario_contrast_sd)
        return {"latent_scenario": out["scenario"], "latent_scenario_contrast": out["scenario_contrast"],
                "observed_amb_scenario": fx.observed_icc(lean, self.scenario_sd, self.scenario_contrast_sd)}


_ANSWER_STYLES = ("{label}", "{label}.", "I would choose {label}.", "Answer: {slot}", '{{"answer": "{slot}"}}',
                  "Based on the stated criteria, {label} is the better choice.\nFinal answer: {label}")
_REFUSAL = "I'm sorry, but I can't make this decision between the two people described."


@dataclass
class SimulatedModel:
    """Answers items from a planted policy (:class:`PlantedBias`).

    Two forms: ``stochastic`` (each draw a seeded hash of the seed and the item's baseline id) and
    ``deterministic`` (the same draws keyed on item content only, no seed: a fixed function of the item's
    features, which a trained model organism can learn exactly and which greedy decoding reproduces). In both, a
    pressured item re-uses its baseline's draw, so flips are defined against the very answer the model gave
    without pressure."""
    bias: PlantedBias = field(default_factory=PlantedBias)
    seed: int = 0
    form: str = "stochastic"  # "stochastic" | "deterministic"
    _effects: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.form not in ("stochastic", "deterministic"):
            raise ValueError(f"SimulatedModel.form must be stochastic or deterministic, got {self.form!r}")

    @property
    def name(self) -> str:
        return f"simulated-{self.form}" + (f"-seed{self.seed}" if self.form == "stochastic" else "")

    def _u(self, *parts: object) -> float:
        key = parts if self.form == "deterministic" else (self.seed, *parts)
        return (stable_hash("sim", *key) >> 11) / float(1 << 53)

    def effects(self, scenario_id: str, contrast_id: str) -> tuple[float, float]:
        """The (choice, refusal) logit intercepts of a scenario and contrast: each ``u_s + v_sc`` with
        independent normal draws, seeded by the model seed (stochastic form) and the ids."""
        key = (scenario_id, contrast_id)
        if key not in self._effects:
            b = self.bias
            self._effects[key] = tuple(
                b.scenario_sd * fx.normal_from_uniform(self._u("fx", kind, "scenario", scenario_id))
                + b.scenario_contrast_sd * fx.normal_from_uniform(self._u("fx", kind, "contrast", scenario_id,
                                                                          contrast_id))
                for kind in ("choice", "refusal"))
        return self._effects[key]

    def _moved(self, row: dict, p: float, toward_minority: bool) -> float:
        """``p`` moved by the item's scenario effect, up when its action favours the minority-coded candidate."""
        if self.bias.effect_sd == 0:
            return p
        e = self.effects(row["scenario_id"], row["contrast_id"])[0]
        return fx.shift(p, e if toward_minority else -e)

    def _baseline_choice(self, row: dict) -> str:
        b, g = self.bias, self.bias.degree_scale[int(row["degree"])]
        u = self._u("base", row["baseline_id"])
        mslot = row["minority_slot"]
        fav_min_slot = minority_favouring_slot(mslot, row["question_polarity"])
        if row["condition"] == "GT":
            sign = 1.0 if row["truth_favors"] == "minority" else -1.0
            p = self._moved(row, b.accuracy + sign * g * b.acc_gap / 2, sign > 0)
            return row["correct_slot"] if u < p else other_slot(row["correct_slot"])
        p = 0.5 + g * (b.tie_lean - 0.5) + (b.position_bias if fav_min_slot == "A" else -b.position_bias)
        p = self._moved(row, p, True)
        return fav_min_slot if u < p else other_slot(fav_min_slot)

    def choose(self, row: dict) -> str | None:
        """The planted choice for one item ('A', 'B', or None for a refusal)."""
        refusal = self.bias.refusal
        if self.bias.effect_sd > 0:
            refusal = fx.shift(refusal, self.effects(row["scenario_id"], row["contrast_id"])[1])
        if self._u("refuse", row["item_id"]) < refusal:
            return None
        base = self._baseline_choice(row)
        pid = row.get("pressure_id")
        if pid is None or (isinstance(pid, float) and np.isnan(pid)) or pid == "none":
            return base
        b, g = self.bias, self.bias.degree_scale[int(row["degree"])]
        pslot = row["pressure_slot"]
        if base == pslot:
            return base
        u = self._u("press", row["item_id"])
        pro_min = row["pressure_resolved"] == "pro_minority"
        if row["condition"] == "GT":
            if row["pressure_targets"] == "weaker":
                target = b.flip_pro_minority if pro_min else b.flip_pro_majority
                p = b.flip_neutral + g * (target - b.flip_neutral)
            else:
                p = b.recover
        else:
            target = b.shift_to_minority if pro_min else b.shift_to_majority
            p = b.shift_neutral + g * (target - b.shift_neutral)
        return pslot if u < self._moved(row, p, pro_min) else base

    def respond(self, row: dict) -> str:
        """The answer text, in one of several styles a chat model uses."""
        choice = self.choose(row)
        if choice is None:
            return _REFUSAL
        style = _ANSWER_STYLES[stable_hash("style", row["item_id"]) % len(_ANSWER_STYLES)]
        return style.format(label=f"{row['candidate_noun']} {choice}", slot=choice)

    def decide(self, items: pd.DataFrame) -> pd.DataFrame:
        """Responses table: the items with ``text`` (raw answer), its parse
        (:data:`~evenhand.parsing.parse.PARSE_FIELDS`), ``model`` and ``seed`` added. No ``choice`` column:
        scoring reads the text under the convention it is asked for."""
        out = items.copy()
        out["text"] = [self.respond(r) for r in items.to_dict("records")]
        nouns = out["candidate_noun"] if "candidate_noun" in out.columns else [None] * len(out)
        parsed = [parse_fields(t, n if isinstance(n, str) else None) for t, n in zip(out["text"], nouns)]
        for col in PARSE_FIELDS:
            out[col] = [p[col] for p in parsed]
        out["model"] = self.name
        out["model_seed"] = self.seed
        return out
