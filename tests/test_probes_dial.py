"""The probe study of the fair organism with the bias dial (issue 19, item 5), and the probe-only refresh of
an organism's probe record."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from probes.logistic import ProbeOptions

BIG = 120.0
"""A dial strength that plants a large degree-3 FragGap on the fair organism."""
FAST = ProbeOptions(folds=3, inner_folds=2, Cs=(0.01, 0.1, 1.0))
SITE = "blocks.1.resid_post"
"""The input of the edited layer (the dial reads there, at the answer's noun)."""


def _record(tmp_path):
    f = tmp_path / "organism.json"
    f.write_text(json.dumps({"recipe": {}, "heldout_eval": {"gt_accuracy": {"measured": {"value": 0.9}},
                                                            "probe": {"best": {"control_accuracy": 0.53}}}}))
    return f


def test_probe_only_record_replaces_the_probe_part_alone(tmp_path):
    """`organism eval --probe-only --record` keeps the known-answer numbers; a full result (the constructed
    case where the check fails) replaces them."""
    from organism.evaluation import record_eval
    f = _record(tmp_path)
    record_eval(tmp_path, {"probe": {"best": {"gain": 0.06}, "table": [1, 2]}})
    ev = json.loads(f.read_text())["heldout_eval"]
    assert ev["gt_accuracy"]["measured"]["value"] == 0.9
    assert ev["probe"] == {"best": {"gain": 0.06}}
    record_eval(tmp_path, {"probe": {"best": {"gain": 0.06}}, "answered": 1.0})
    assert "gt_accuracy" not in json.loads(f.read_text())["heldout_eval"]


def _value(study: pd.DataFrame, target: str, beta: float, metric: str, site: str = SITE) -> float:
    t = study[(study["target"] == target) & (study["beta"] == beta) & (study["site"] == site)]
    return float(t.loc[t["metric"] == metric, "value"].iloc[0])


def labels_move(study: pd.DataFrame, target: str, low: float, high: float, by: float = 0.02) -> bool:
    """Whether the share of ``target``'s rows labelled 1 is at least ``by`` higher at beta ``high``."""
    rate = study[study["target"] == target].groupby("beta")["positive_rate"].first()
    return bool(rate[high] >= rate[low] + by)


def design_catches_up(study: pd.DataFrame, target: str, low: float, high: float, by: float = 0.1) -> bool:
    """Whether what the design adds to the activations (design+activations minus activations alone) is at
    least ``by`` larger at beta ``high`` than at ``low``."""
    def lead(b):
        return _value(study, target, b, "combined_accuracy") - _value(study, target, b, "accuracy")
    return lead(high) >= lead(low) + by


@pytest.fixture(scope="module")
def study():
    """The probe study at beta 0 and BIG on 6 held-out scenarios' degree-3 items (912 items), one site."""
    from organism.probe import dial_probe_study
    from organism.recipe import FAIR_V1  # its thresholds were set on v1; on the retrained organism see the closing note of issue 33
    return dial_probe_study([0.0, BIG], FAIR_V1, n_scenarios=6, degrees=(3,), targets=("amb_side", "departed"), sites=(SITE,),
                            opts=FAST, resamples=300)


def test_the_dial_moves_the_probed_labels(study):
    """The labels are the dialled organism's: it chooses the minority-coded side of a tie and departs from
    the evidence more often with the dial on."""
    assert labels_move(study, "amb_side", 0.0, BIG)
    assert labels_move(study, "departed", 0.0, BIG)


def nothing_added(study: pd.DataFrame, target: str, beta: float) -> bool:
    """Whether ``target``'s gain over the evidence baseline at beta ``beta`` is not detectably above 0."""
    t = study[(study["target"] == target) & (study["metric"] == "gain") & (study["beta"] == beta)
              & (study["site"] == SITE)]
    return float(t["ci_low"].iloc[0]) <= 0.0


def test_dial_off_the_activations_add_nothing_to_departures(study):
    """The fair organism departs from the evidence where the design says it does (pressure it follows,
    the same for both groups): with the dial off the gain of design+activations over the design is not
    above 0. The constructed case where the check fails: the same table with that gain's CI moved above 0."""
    assert nothing_added(study, "departed", 0.0)
    planted = study.copy()
    row = (planted["target"] == "departed") & (planted["metric"] == "gain") & (planted["beta"] == 0)
    planted.loc[row, ["value", "ci_low", "ci_high"]] = [0.10, 0.05, 0.15]
    assert not nothing_added(planted, "departed", 0.0)


def test_the_decision_token_misses_the_edit_and_the_design_supplies_it(study):
    """The edit acts at the answer's noun, after the cached position (the last prompt token, where the fit
    holds <a, m> at 0), so activations alone predict the dialled departures worse than the design plus
    activations does, by far more than with the dial off: the design carries the dial's gate. (The
    AMB-side gain over the evidence baseline is not asserted to grow: it does not, on 6 or 12 scenarios;
    docs/results/organism_probes.md, "Probes on the dialled organism".)"""
    assert design_catches_up(study, "departed", 0.0, BIG)


def test_the_checks_fail_when_both_arms_have_the_dial_off(study):
    """The constructed case: the dial-off arm relabelled as the dial-on arm (the dial at beta 0 on both)."""
    off = study[study["beta"] == 0]
    both_off = pd.concat([off, off.assign(beta=BIG)], ignore_index=True)
    for target in ("amb_side", "departed"):
        assert not labels_move(both_off, target, 0.0, BIG)
        assert not design_catches_up(both_off, target, 0.0, BIG)


def test_dial_probe_text_prints_every_target_and_beta(study):
    """`evenhand organism dial-probe` prints, per target and beta, the rows and each site's line with the gain."""
    from experiments.cli.formatting import dial_probe_text
    text = dial_probe_text(study)
    for target in ("amb_side", "departed"):
        for beta in (0, BIG):
            assert f"{target} at beta {beta:g}:" in text
    gain = study[(study["target"] == "departed") & (study["beta"] == BIG) & (study["metric"] == "gain")].iloc[0]
    assert f"{100 * gain['value']:+.1f} [{100 * gain['ci_low']:+.1f}, {100 * gain['ci_high']:+.1f}]" in text
