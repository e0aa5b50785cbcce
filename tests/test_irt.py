"""Item response theory (docs/IRT.md) on a simulated population with planted 2PL parameters: the fit recovers
them, the IRT core ranks held-out models better than a stratified random core (and a random core in its place
fails the same check), adaptive intervals cover the planted abilities, adaptive testing resumes, the core keeps
the balance constraints and whole baseline groups, and the commands run end to end."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("girth")

from evenhand.irt.adaptive import AdaptiveOptions, adaptive_test, bank_of, shrunk_discrimination  # noqa: E402
from evenhand.irt.fit import correctness, response_matrix  # noqa: E402
from evenhand.irt.select import balance_cells, select_core  # noqa: E402
from evenhand.irt.validation import (adaptive_coverage, compare_cores, core_wins, fitted_on_population,  # noqa: E402
                                     linking, recovery)
from evenhand.suite import items as suite_items  # noqa: E402
from evenhand.suite.generate import other_slot  # noqa: E402
from experiments.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def population():
    """smoke's type1 items (512; 256 GT) and 300 simulated models: the fitted table and the planted items."""
    return fitted_on_population(suite_items("smoke", contrast_types=["type1"]), 300, seed=0)


def test_fit_recovers_planted_parameters(population):
    table, _ = population
    rec = recovery(table)
    assert rec["items"] == 256 and rec["r_a"] >= 0.9 and rec["r_b"] >= 0.9, rec
    # the check fails on a fit that does not follow the responses: the same values, shuffled over the items
    broken = table.copy()
    ok = broken["a"].notna().to_numpy()
    for k, c in enumerate(("a", "b")):
        broken.loc[ok, c] = np.random.default_rng(k).permutation(broken.loc[ok, c].to_numpy())
    rec = recovery(broken)
    assert rec["r_a"] < 0.5 and rec["r_b"] < 0.5, rec


def test_irt_core_ranks_models_better_than_a_random_core(population):
    table, planted = population
    won = compare_cores(table, planted, n_items=160, n_test=60, replications=20)
    assert core_wins(won), won
    # the failing case: a core chosen at random in the IRT core's place does not pass the same check
    lost = compare_cores(table, planted, n_items=160, n_test=60, replications=20, champion="random")
    assert not core_wins(lost), lost
    assert won["gain"].mean() > lost["gain"].mean()


@pytest.fixture(scope="module")
def smoke_population():
    """all of smoke (1,024 items; 512 GT), 300 simulated models, 10 bootstrap resamples (the SEs the shrunk
    discriminations need): the adaptive setting of docs/IRT.md's validation table."""
    return fitted_on_population(suite_items("smoke"), 300, seed=0, bootstrap=10)


def test_adaptive_intervals_cover_planted_abilities_at_the_nominal_rate(smoke_population):
    table, _ = smoke_population
    n = 500
    floor = 0.95 - 2 * np.sqrt(0.95 * 0.05 / n)  # nominal within 2 Monte Carlo SEs (SE 0.0097 at 500 models)
    truth = table.assign(a=table["a_true"], b=table["b_true"], a_se=0.0, b_se=0.0)
    assert linking(truth) == pytest.approx((1.0, 0.0)) and linking(table) != pytest.approx((1.0, 0.0))
    shrunk = adaptive_coverage(table, n)  # the default: shrunk discriminations, prior SD 3
    assert shrunk["coverage"] >= floor and shrunk["r_theta"] > 0.85, shrunk
    fitted = adaptive_coverage(table, n, AdaptiveOptions(discrimination="fitted"))  # marginal ML: fine as fitted
    assert fitted["coverage"] >= floor and fitted["mean_items"] < shrunk["mean_items"], fitted
    planted = adaptive_coverage(truth, n)
    assert planted["coverage"] >= floor, planted
    # the failing cases: discriminations inflated as joint ML inflates them at tens of runs (x1.3: docs/IRT.md,
    # "Recovery") used as fitted, and an overconfident prior (SD 0.2), give intervals that miss too often
    inflated = adaptive_coverage(table.assign(a=table["a"] * 1.3), n, AdaptiveOptions(discrimination="fitted"))
    assert inflated["coverage"] < floor, inflated
    narrow = adaptive_coverage(table, n, AdaptiveOptions(prior_sd=0.2))
    assert narrow["coverage"] < 0.6, narrow


def test_adaptive_coverage_holds_outside_the_fitted_population(smoke_population):
    """The bank is fitted on abilities N(0, 1); new models are often stronger or more spread out, and differ by
    scenario. With the default prior (SD 3) the 95% intervals cover at least 0.93 of 200 models of each: stronger
    N(1.5, 0.5), all at +2.5, wider N(0, 2), and with a model x scenario effect of SD 0.7. The failing case: a
    prior that believes the old population (SD 0.5) pulls the +2.5 models toward 0 and misses."""
    from evenhand.irt.simulate import Population
    table, _ = smoke_population
    pops = {"stronger": Population(theta_mean=1.5, theta_sd=0.5), "at +2.5": Population(theta_mean=2.5, theta_sd=0.01),
            "wider": Population(theta_sd=2.0), "interacting": Population(interaction_sd=0.7)}
    for name, pop in pops.items():
        r = adaptive_coverage(table, 200, population=pop, seed=1)
        assert r["coverage"] >= 0.93, (name, r)
    tight = adaptive_coverage(table, 200, AdaptiveOptions(prior_sd=0.5), population=pops["at +2.5"], seed=1)
    assert tight["coverage"] < 0.8 and tight["bias"] < -0.2, tight


def test_shrunk_discrimination_undoes_the_selection_bias(smoke_population):
    """Estimates with known noise: the true discrimination regressed on the estimate has slope var(a) / (var(a)
    + se^2), well below 1 (the largest estimates, which maximum information picks, are too large); shrunk, 1.
    The marginal-ML fit's prior already shrinks: its slope is near 1 and shrinking it again overshoots."""
    rng = np.random.default_rng(0)
    a = np.exp(rng.normal(0.0, 0.5, 4000))
    se = np.full_like(a, 0.3)
    est = a + rng.normal(0.0, 0.3, a.size)
    slope_fitted, slope_shrunk = np.polyfit(est, a, 1)[0], np.polyfit(shrunk_discrimination(est, se), a, 1)[0]
    assert slope_fitted < 0.9 and 0.9 < slope_shrunk < 1.1, (slope_fitted, slope_shrunk)
    table, _ = smoke_population
    bank = bank_of(table)
    fit, truth = bank["a"].to_numpy(), bank["a_true"].to_numpy() / linking(table)[0]  # on the fitted scale
    assert 0.9 < np.polyfit(fit, truth, 1)[0] < 1.1
    assert np.polyfit(shrunk_discrimination(fit, bank["a_se"].to_numpy()), truth, 1)[0] > 1.1
    assert shrunk_discrimination(est, np.zeros_like(est)) == pytest.approx(est)  # known exactly: nothing to shrink
    assert np.allclose(shrunk_discrimination(est, np.full_like(est, 10.0)), est.mean())  # noise only: the mean
    with pytest.raises(ValueError, match="a_se"):
        adaptive_test(bank.drop(columns="a_se"), _responder(0.0, []))


def test_linking_corrects_the_difficulties_for_their_estimation_noise():
    rng = np.random.default_rng(0)
    true = rng.normal(0.0, 1.0, 4000)
    fitted = 0.9 * true - 0.1 + rng.normal(0.0, 0.3, 4000)  # the fitted scale plus estimation noise of SD 0.3
    table = pd.DataFrame({"b": fitted, "b_true": true, "b_se": 0.3})
    A, B = linking(table)
    assert A == pytest.approx(0.9, abs=0.02) and B == pytest.approx(-0.1, abs=0.02), (A, B)
    # the failing case: without the SEs (mean-sigma on the noisy difficulties) the slope is inflated
    assert linking(table.drop(columns="b_se"))[0] > 0.93


def _responder(theta: float, calls: list):
    def answer(item):
        calls.append(item["item_id"])
        p = 1 / (1 + np.exp(-item["a"] * (theta - item["b"])))
        u = (sum(map(ord, item["item_id"])) % 997) / 997  # deterministic: a resumed run answers alike
        return item["correct_slot"] if u < p else other_slot(item["correct_slot"])
    return answer


def test_adaptive_stops_at_target_se_or_budget_and_resumes(population, tmp_path):
    table, _ = population
    bank = bank_of(table)
    state = adaptive_test(bank, _responder(0.5, []), AdaptiveOptions(target_se=0.3, budget=200, discrimination="fitted"))
    assert state["stopped"] == "target_se" and state["ability"]["theta_sd"] <= 0.3
    early = state["ability"]["n_items"]
    assert early < 12  # the failing case of the next check: without min_items the target SE stops it sooner
    state = adaptive_test(bank, _responder(0.5, []), AdaptiveOptions(target_se=0.3, budget=200, min_items=12,
                                                                         discrimination="fitted"))
    assert state["stopped"] == "target_se" and state["ability"]["n_items"] == 12
    state = adaptive_test(bank, _responder(0.5, []), AdaptiveOptions(target_se=0.01, budget=7, discrimination="fitted"))
    assert state["stopped"] == "budget" and state["ability"]["n_items"] == 7
    # items asked are the most informative at the current MAP: the first is the bank's most informative at 0
    first = (bank["a"] ** 2 / (2 + np.exp(bank["a"] * bank["b"]) + np.exp(-bank["a"] * bank["b"]))).idxmax()
    assert state["answered"][0]["item_id"] == bank["item_id"][first]

    path = tmp_path / "adaptive.json"
    opts = AdaptiveOptions(target_se=0.01, budget=12, discrimination="fitted")  # the fixture has no SEs
    whole = adaptive_test(bank, _responder(-0.3, []), opts)
    calls: list = []
    answer = _responder(-0.3, calls)

    def dies_after_five(item):
        if len(calls) == 5:
            raise KeyboardInterrupt
        return answer(item)
    with pytest.raises(KeyboardInterrupt):
        adaptive_test(bank, dies_after_five, opts, state_path=path)
    assert len(json.loads(path.read_text())["answered"]) == 5
    resumed = adaptive_test(bank, answer, opts, state_path=path)
    assert len(calls) == 12, "a resumed run asks only the items not yet answered"
    assert [r["item_id"] for r in resumed["answered"]] == [r["item_id"] for r in whole["answered"]]
    assert resumed["ability"] == whole["ability"]
    with pytest.raises(ValueError, match="other settings"):
        adaptive_test(bank, answer, AdaptiveOptions(budget=3, discrimination="fitted"), state_path=path)


def _groups_whole(items: pd.DataFrame, ids: list[str]) -> bool:
    core = items[items["item_id"].isin(ids)]
    need = items[items["baseline_id"].isin(set(core["baseline_id"]))]
    return len(need) == len(core)


def test_core_keeps_every_cell_and_whole_baseline_groups(population):
    table, _ = population
    for method in ("information", "random"):
        ids, summary = select_core(table, 200, (-1, 1), method, seed=3)
        assert len(ids) <= 200 and summary["cells"] == summary["cells_in_table"] == balance_cells(table).nunique()
        assert set(balance_cells(table[table["item_id"].isin(ids)])) == set(balance_cells(table))
        assert _groups_whole(table, ids)
    info, _ = select_core(table, 200, (-1, 1), "information")
    assert _groups_whole(table, info) and not _groups_whole(table, info[1:]), "the group check fails on a cut group"
    assert select_core(table, 200)[1]["mean_information"] > select_core(table, 200, method="random")[1]["mean_information"]
    with pytest.raises(ValueError, match="--items 20 is too few.*takes 116 items"):
        select_core(table, 20)


def test_response_matrix_scores_gt_rows_and_leaves_amb_out():
    items = suite_items("smoke", n=40)
    gt = items["condition"] == "GT"
    right = items.assign(choice=items["correct_slot"])
    wrong = items.assign(choice=[other_slot(c) for c in items["correct_slot"]])
    refuses = items.assign(choice=None, text="I can't decide this.")
    assert correctness(right).tolist() == [1] * gt.sum()
    assert correctness(wrong).tolist() == [0] * gt.sum() and correctness(refuses).tolist() == [0] * gt.sum()
    pressured = gt & items["pressure_id"].notna()
    assert pressured.any()  # a pressured GT item scores 1 when the correct answer was kept
    table, Y = response_matrix([right, wrong.iloc[1:]], ["r", "w"])
    assert (table["condition"] == "AMB").any() and not table.loc[table["condition"] == "AMB", "in_2pl"].any()
    dropped = items["item_id"].iloc[0]
    assert dropped not in Y.index and Y.shape == (gt.sum() - int(gt.iloc[0]), 2)
    assert (Y["r"] == 1).all() and (Y["w"] == 0).all()
    first_gt = items.index[gt][0]
    flagged = right.assign(excluded=[i == first_gt for i in items.index])  # an excluded item stays out
    assert items["item_id"][first_gt] not in correctness(flagged).index and len(correctness(flagged)) == gt.sum() - 1


def test_commands_end_to_end(tmp_path, capsys):
    items_file = tmp_path / "items.parquet"
    suite_items("smoke", contrast_types=["type1"], degrees=[0]).to_parquet(items_file)  # 128 items
    sim, fit, core = tmp_path / "sim", tmp_path / "fit", tmp_path / "core.parquet"
    assert main(["irt", "simulate", "--out", str(sim), "--models", "5", "--subset", str(items_file)]) == 0
    runs = sorted(str(p) for p in sim.glob("m*"))
    assert main(["irt", "fit", *runs, "--out", str(fit), "--bootstrap", "2"]) == 0
    it = pd.read_parquet(fit / "irt_items.parquet")
    assert {"a", "b", "a_se", "b_se", "a_lo", "b_hi", "in_2pl"} <= set(it.columns) and it["a_se"].notna().any()
    assert json.loads((fit / "manifest.json").read_text())["status"] == "done"
    assert main(["irt", "core", "--fit", str(fit), "--items", "60", "--out", str(core), "--theta=-1,1"]) == 0
    chosen = suite_items(str(core))  # the core is usable where a subset name goes
    assert 28 <= len(chosen) <= 60 and _groups_whole(it, chosen["item_id"].tolist())
    assert main(["irt", "adapt", "--fit", str(fit), "--out", str(tmp_path / "ad"), "--simulate-theta", "0.5"]) == 0
    first = json.loads((tmp_path / "ad" / "adaptive.json").read_text())
    capsys.readouterr()
    assert main(["irt", "adapt", "--fit", str(fit), "--out", str(tmp_path / "ad"), "--simulate-theta", "0.5",
                 "--json"]) == 0  # a rerun finds the stage done and reports the saved state
    assert json.loads(capsys.readouterr().out)["theta_map"] == first["ability"]["theta_map"]
    assert main(["irt", "fit", runs[0], "--out", str(tmp_path / "one")]) == 2
    assert main(["irt", "core", "--fit", str(fit), "--items", "5", "--out", str(core)]) == 2
    assert main(["irt", "adapt", "--fit", str(fit), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "at least 2 runs" in err and "--items 5 is too few" in err and "exactly one of --model" in err


def test_simulated_amb_answers_follow_the_planted_lean_and_shift():
    from evenhand.irt.simulate import plant_items, simulated_rows
    from evenhand.scoring.metrics import compute_metrics
    items = suite_items("smoke", contrast_types=["type1"])
    planted = plant_items(items)
    for lean in (1.0, 0.0):  # every AMB baseline favours the minority-coded candidate, or none does
        assert compute_metrics(simulated_rows(items, planted, 0.0, lean=lean), metrics=["tielean"])["tielean"].value == lean
    for smin, smaj in ((1.0, 0.0), (0.0, 1.0)):  # all pressure of one direction followed, none of the other
        rows = simulated_rows(items, planted, 0.0, lean=0.5, shift_min=smin, shift_maj=smaj)
        shift = compute_metrics(rows, metrics=["tieshift"])["tieshift"].value
        assert shift == smin - smaj, shift
    # the failing case: a lean of 0.5 (the simulator ignoring the planted lean) is far from both
    rows = simulated_rows(items, planted, 0.0, lean=0.5)
    assert 0.2 < compute_metrics(rows, metrics=["tielean"])["tielean"].value < 0.8


@pytest.mark.slow  # real weights: the organism (1.7 MB) through torch; the callable path is covered above
def test_adapt_runs_the_organism_through_the_decide_path(tmp_path, capsys):
    items_file = tmp_path / "items.parquet"
    suite_items("smoke", contrast_types=["type1"], degrees=[0]).to_parquet(items_file)
    sim, fit = tmp_path / "sim", tmp_path / "fit"
    assert main(["irt", "simulate", "--out", str(sim), "--models", "4", "--subset", str(items_file)]) == 0
    assert main(["irt", "fit", *sorted(str(p) for p in sim.glob("m*")), "--out", str(fit), "--bootstrap", "0"]) == 0
    with pytest.warns(UserWarning, match="trained on suite version 1"):
        assert main(["irt", "adapt", "--fit", str(fit), "--out", str(tmp_path / "ad"), "--model", "evenhand-organism",
                     "--device", "cpu", "--budget", "3", "--target-se", "0.01", "--discrimination", "fitted"]) == 0
    state = json.loads((tmp_path / "ad" / "adaptive.json").read_text())
    assert state["stopped"] == "budget" and len(state["answered"]) == 3
    assert all(r["choice"] in ("A", "B", None) for r in state["answered"])


def test_marginal_ml_recovers_at_thirty_runs_where_jml_does_not():
    """30 runs x 512 GT items (smoke): the default fit (marginal ML, log a ~ N(0, 0.5)) has r(b) >= 0.85 and at
    most 3% of discriminations at a bound; girth's joint ML on the same responses fails the same check
    (r(b) 0.77, 15% at the bound of 4: docs/IRT.md, "Recovery")."""
    items = suite_items("smoke")
    mml, _ = fitted_on_population(items, 30, seed=0)
    rec = recovery(mml)
    assert rec["items"] >= 500 and rec["r_b"] >= 0.85 and rec["at_bound"] <= 0.03, rec
    assert 0.85 <= rec["a_ratio"] <= 1.15, rec  # no inflation of the discriminations
    jml, _ = fitted_on_population(items, 30, seed=0, method="jml")
    bad = recovery(jml)
    assert bad["r_b"] < 0.85 or bad["at_bound"] > 0.03, bad


def test_marginal_ml_matches_girth_twopl_mml():
    """Parity: without the prior, our EM equals girth's marginal ML (the reference) on a well-conditioned matrix
    (60 items x 400 runs); with the prior the estimates stay close (the prior only pulls log a toward 0)."""
    import girth

    from evenhand.irt.mml import MMLOptions, twopl_mml
    rng = np.random.default_rng(3)
    a, b, th = np.exp(rng.normal(0, 0.4, 60)), rng.normal(0, 0.8, 60), rng.normal(0, 1, 400)
    Y = (rng.random((60, 400)) < 1 / (1 + np.exp(-a[:, None] * (th - b[:, None])))).astype(int)
    ref = girth.twopl_mml(Y)
    ours = twopl_mml(Y, MMLOptions(a_prior_sd=0))
    assert np.abs(ours["a"] - np.asarray(ref["Discrimination"])).max() < 0.06
    assert np.abs(ours["b"] - np.ravel(ref["Difficulty"])).max() < 0.05
    assert ours["converged"] and not ours["at_bound"].any()
    # the check can fail: a fit that ignores the responses' slopes (every a fixed at 1) is far from girth's
    flat = twopl_mml(Y, MMLOptions(a_prior_sd=1e-4))
    assert np.abs(flat["a"] - np.asarray(ref["Discrimination"])).max() > 0.2


def test_fit_methods_are_named_and_checked():
    from evenhand.irt.fit import fit_2pl
    with pytest.raises(ValueError, match="method must be one of mml, jml"):
        fit_2pl(np.zeros((3, 3)), method="bayes")
