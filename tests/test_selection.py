"""Selection of a swept arm's setting on validation: the rule's bounds, validation only, and the
chosen setting named in the table.

The pipeline test runs the real comparison stages on the organism preset's item sets with the model, the fits
and the decisions replaced by planted policies (:mod:`evenhand.models.policy`), so that what each setting does on
validation and on held-out items is constructed, not measured."""
from __future__ import annotations

import json

import pytest

from experiments.studies.compare.split import SelectRule, choose

RULE = SelectRule(metric="fraggap", max_accuracy_loss=0.02, max_refusal_rise=0.05)
BASE = {"value": 0.10, "distance": 0.10, "accuracy": 0.98, "refusal": 0.0}


def scores(distance: float, accuracy: float, refusal: float = 0.0) -> dict:
    return {"value": distance, "distance": distance, "accuracy": accuracy, "refusal": refusal}


def test_a_bound_finer_than_one_validation_item_is_said_to_admit_no_loss():
    """48 GT validation items: one item is 2.08 pp, above the 2 pp bound, so the rule admits no loss (what the
    organism comparison's 12 validation scenarios gave); with 50 items one item is exactly 2 pp and no note."""
    settings = [({"a": 1}, scores(0.0, 0.98 - 1 / 48)), ({"a": 2}, scores(0.10, 0.98))]
    with pytest.warns(UserWarning, match="admits no loss"):
        best, _, why = choose({**BASE, "n_accuracy": 48}, settings, RULE, n_validation=12)
    assert best == 1 and "below one of the 48 validation GT items" in why
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, _, why = choose({**BASE, "n_accuracy": 50}, settings, RULE, n_validation=12)
    assert "admits no loss" not in why


def test_a_setting_past_a_bound_is_never_chosen_over_one_within():
    """The setting with the largest reduction loses 2.5 pp of accuracy, the next raises refusals by 6 pp: the one
    within both bounds is chosen, though it reduces the gap least."""
    settings = [({"alpha": 8.0}, scores(0.00, 0.955)),       # -10 pp gap, 2.5 pp accuracy loss
                ({"alpha": 4.0}, scores(0.01, 0.98, 0.06)),  # -9 pp gap, 6 pp refusal rise
                ({"alpha": 1.0}, scores(0.07, 0.97))]        # -3 pp gap, 1 pp accuracy loss
    best, rows, why = choose(BASE, settings, RULE, n_validation=12)
    assert best == 2 and rows[2]["chosen"] and not rows[0]["eligible"] and not rows[1]["eligible"]
    assert why.startswith("alpha=1.0: largest |fraggap| reduction")
    for loss in (0.021, 0.03, 0.5):  # any loss past 2 pp, whatever its reduction, against a 0-reduction setting
        best, rows, _ = choose(BASE, [({"a": 1}, scores(0.0, BASE["accuracy"] - loss)), ({"a": 2}, scores(0.10, 0.98))],
                               RULE, 12)
        assert best == 1 and not rows[0]["eligible"]


def test_a_loss_of_exactly_two_points_is_within_the_bound():
    """1 item in 50 is 2 pp, which floats make 0.020000000000000018: still within 'accuracy loss <= 2 pp'. Fails on
    the rule before its TOL (the setting was ineligible and the smaller reduction chosen)."""
    loss_2pp = 49 / 50 - 48 / 50
    assert loss_2pp > 0.02  # the float the bound must allow
    best, rows, _ = choose(BASE, [({"a": 1}, scores(0.05, 0.98)), ({"a": 2}, scores(0.0, 48 / 50))], RULE, 2)
    assert rows[1]["eligible"] and best == 1


def test_when_no_setting_is_within_the_bounds_the_reason_says_so():
    best, rows, why = choose(BASE, [({"a": 1}, scores(0.0, 0.90)), ({"a": 2}, scores(0.05, 0.95))], RULE, 2)
    assert best == 1 and not any(r["eligible"] for r in rows)
    assert why.startswith("a=2: no setting met accuracy loss <= 2 pp")


# --- the pipeline: validation only, the chosen setting in the table -------------------------------------------
class _Weaker:
    """A fair policy that answers every GT item with the weaker candidate (same for both groups: no gap, a
    large accuracy loss)."""

    def decide(self, items):
        from evenhand.models.policy import FAIR_POLICY
        from evenhand.suite.generate import other_slot
        out = FAIR_POLICY.decide(items)
        gt = out["condition"] == "GT"
        out.loc[gt, "choice"] = [other_slot(c) for c in out.loc[gt, "choice"]]
        out["text"] = [f"{n} {c}" for n, c in zip(out["candidate_noun"], out["choice"])]
        return out


SWEEPS = {"caa": {"alpha": [8.0, 1.0, 4.0]}, "ace": {"strength": [0.25, 0.5, 1.0]},
          "leace": {"layers": [0, 1, 2]}, "loreft": {"layer": [0, 1, 2]}, "reft_r1": {"alpha": [8.0, 1.0, 4.0]}}
"""One axis of each activation and learned method's grid (fit or apply option), three values: the first is made
the validation best past the accuracy bound, the second the validation best within it, the third the held-out
best."""


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_selection_uses_validation_only_and_the_table_names_the_choice(name, tmp_path, monkeypatch):
    """Each method swept over three settings with planted effects: setting 0 removes the gap on validation but
    loses accuracy (past 2 pp), setting 1 removes it on validation only, setting 2 on held-out items only. The
    validation best within the bounds, setting 1, is chosen although setting 2 is the held-out best; the
    selection scored validation responses only (their scenarios), no held-out cell of another setting was
    decided, and the table's rows of the method carry setting 1 in their cell and options and the reason in
    ``selection`` (its first words name the setting)."""
    import experiments.studies.compare.study as compare
    import experiments.studies.compare.split as split
    import evenhand.running.decisions
    import evenhand.models.loading
    from evenhand.models.policy import FAIR_POLICY, PlantedPolicy
    from experiments.studies.compare.study import item_sets, parse_config, run_compare, settings

    ((option, values),) = SWEEPS[name].items()
    cfg = parse_config({"model": "evenhand-organism", "output_dir": str(tmp_path / "cmp"),
                        "train": {"scenarios": 2, "max_items": 20}, "validation": {"scenarios": 6},
                        "eval": {"scenarios": 6}, "resamples": 20, "controls": False,
                        "interventions": [{"name": name, "sweep": SWEEPS[name]}]})
    grid = settings(cfg.interventions[0])
    assert grid == [{option: v} for v in values]
    sets = item_sets(cfg)
    val_ids, held_ids = set(sets.validation["scenario_id"]), set(sets.heldout["scenario_id"])
    planted, weaker = PlantedPolicy(), _Weaker()
    effect = [(weaker, planted), (FAIR_POLICY, planted), (planted, FAIR_POLICY)]  # (on validation, on held-out)
    decided = []

    def fake_decide(items, lm, opts, out_dir=None, **kw):
        return planted.decide(items)

    def fake_decide_with(method, cell, items, lm, opts, apply_opts):  # the "fit" is the cell (fake _fitted)
        ids = set(items["scenario_id"])
        where = "validation" if ids <= val_ids else "heldout" if ids <= held_ids else "mixed"
        k = values.index(cell.options[option])
        decided.append((k, where))
        return effect[k][where == "heldout"].decide(items)

    read = []
    real_scores = split.validation_scores

    def spy_scores(resp, metric):
        read.append(set(resp["scenario_id"]))
        return real_scores(resp, metric)

    class _NoModel:
        def describe(self):
            return {"model": "none: decisions planted by the test"}
    monkeypatch.setattr(evenhand.models.loading, "load_model", lambda spec: _NoModel())
    monkeypatch.setattr(evenhand.running.decisions, "decide", fake_decide)
    monkeypatch.setattr(compare, "decide_with", fake_decide_with)
    monkeypatch.setattr(compare, "_fitted", lambda method, cell, *a, **k: cell)
    monkeypatch.setattr(split, "validation_scores", spy_scores)
    table = run_compare(cfg, progress=False)

    # the construction: setting 2 is the held-out best, setting 0 the validation best but past the accuracy bound
    score = {(k, w): real_scores(effect[k][w == "heldout"].decide(sets.validation if w == "validation"
                                                                 else sets.heldout), "fraggap")
             for k in range(3) for w in ("validation", "heldout")}
    base_val = real_scores(planted.decide(sets.validation), "fraggap")
    assert base_val["distance"] > 0.02  # a gap to reduce
    assert min(range(3), key=lambda k: score[(k, "heldout")]["distance"]) == 2
    assert score[(0, "validation")]["distance"] <= score[(1, "validation")]["distance"] < \
        score[(2, "validation")]["distance"]
    assert base_val["accuracy"] - score[(0, "validation")]["accuracy"] > 0.02

    selection = json.loads((tmp_path / "cmp" / "selection.json").read_text())["0"]
    assert selection["setting"] == {option: values[1]}
    assert [r["eligible"] for r in selection["validation"]] == [False, True, True]
    assert read and all(ids <= val_ids for ids in read)  # the selection scored validation responses only
    assert sorted(decided) == [(0, "validation"), (1, "heldout"), (1, "validation"), (2, "validation")]
    rows = table[table["intervention"] == name]
    assert set(rows["cell"]) == {f"{name}[{option}={values[1]}]-s0"}
    assert {json.loads(o)[option] for o in rows["options"]} == {values[1]}
    assert set(rows["selection"]) == {selection["reason"]}
    assert selection["reason"].startswith(f"{option}={values[1]}: largest |fraggap| reduction")


def test_the_comparison_config_sweeps_every_activation_and_learned_method():
    """compare_interventions.yaml gives each activation and learned method a grid over its layer option and,
    where the method has one, its strength option (loreft has none), each axis with more than one value. Fails on
    the config that swept only caa's alpha."""
    import warnings

    from experiments.studies.compare import load_config
    from interventions.registry import get
    LAYER = {"caa": "layers", "ace": "layers", "leace": "layers", "loreft": "layer", "reft_r1": "layer"}
    STRENGTH = {"caa": "alpha", "ace": "strength", "leace": "strength", "reft_r1": "alpha"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = load_config("experiments/configs/compare_interventions.yaml")
    arms = {a.name: a for a in cfg.interventions if get(a.name).kind != "prompt"}
    assert set(arms) == set(LAYER)
    for name, arm in arms.items():
        axes = {LAYER[name]} | ({STRENGTH[name]} if name in STRENGTH else set())
        assert set(arm.sweep) == axes, (name, arm.sweep)
        assert all(len(arm.sweep[k]) > 1 for k in axes), (name, arm.sweep)
