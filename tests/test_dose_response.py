"""The dose-response benchmark, CI-sized (issue 18 item 5): one beta of the dial on the fair organism, the
two oracles, one steering method (caa) and its random control, a few held-out scenarios.

Each known answer is checked on a case built to break it: an oracle with the wrong sign or at the wrong
layer must fail the slope bar; an arm that refuses exactly the items the dial flipped must not count as
removing the gap (it would if refusals were dropped); an arm that overshoots past zero must be scored by
the signed change (the |gap| difference would call it a small removal)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evenhand.support.options import ConfigError
from evenhand.runs.rundir import RunDir, RunError
from experiments.studies.dose_response.items import item_sets
from experiments.studies.dose_response.study import (
    ORACLES,
    DoseConfig,
    DoseMethod,
    Oracle,
    decide_cell,
    edited,
    parse_config,
    run_dose_response,
)
from experiments.studies.dose_response.scoring import (
    ORACLE_ARMS,
    dose_data,
    known_answer_failures,
    metrics_of,
    replicate,
    replicate_independent,
    score_dose,
    summary,
)

BETA = 120.0  # degree-3 FragGap +24 pp on the calibration curve (35 held-out scenarios)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """The benchmark run on 2 held-out scenarios (GT items at degree 3) at beta 0 and BETA."""
    from organism.recipe import FAIR_V1 as FAIR  # the machinery's known answers were set on v1's curve
    if not (FAIR / "dial.json").exists():
        pytest.fail(f"{FAIR} has no dial.json: `evenhand organism fit-dial`")
    out = tmp_path_factory.mktemp("dose")
    cfg = DoseConfig(output_dir=str(out), model=str(FAIR), betas=(0.0, BETA), eval_scenarios=2, train_scenarios=2,
                     train_max_items=120, methods=(DoseMethod("caa", {"layers": "middle", "alpha": 4.0}),),
                     replications=5, resamples=200, conditions=("GT", "AMB"))
    summ = run_dose_response(cfg, progress=False)
    arms = ["baseline", "caa", "caa-random", *ORACLE_ARMS]
    responses = {(a, k): RunDir(out).dose_cell(a, k).read_responses() for a in arms for k in range(2)}
    return cfg, summ, responses


def _rescore(cfg, responses, extra: dict) -> pd.DataFrame:
    """The summary of baseline + the ``extra`` arms ({name: {beta index: responses}})."""
    cells = {("baseline", k): responses[("baseline", k)] for k in range(2)}
    cells.update({(a, k): r for a, by_k in extra.items() for k, r in by_k.items()})
    d = dose_data(cells, ["baseline", *extra], cfg.betas)
    table = score_dose(d, 200, 0)
    return summary(table, replicate(d, 5, 0.5, 200, 0))


def _table(cfg, responses, extra: dict) -> pd.DataFrame:
    cells = {("baseline", k): responses[("baseline", k)] for k in range(2)}
    cells.update({(a, k): r for a, by_k in extra.items() for k, r in by_k.items()})
    return score_dose(dose_data(cells, ["baseline", *extra], cfg.betas), 200, 0)


def _value(table, arm, stat, k=1, metric="fraggap") -> float:
    t = table[(table["arm"] == arm) & (table["stat"] == stat) & (table["beta_index"] == k)
              & ((table["metric"] == metric) | table["metric"].isna())]
    assert len(t) == 1
    return float(t["value"].iloc[0])


def test_oracles_remove_the_implanted_gap(bench):
    cfg, summ, responses = bench
    by = summ[summ["metric"] == "fraggap"].set_index("arm")
    assert {"caa", "caa-random", "oracle_inverse", "oracle_project", "oracle_half"} <= set(by.index)
    assert set(by.index) - {"caa", "caa-random", *ORACLE_ARMS} <= {"caa-scrambled"}
    # the full oracles pass; the half oracle's interval bar needs more than 2 scenarios (the benchmark's)
    assert not [f for f in known_answer_failures(summ) if f.startswith(ORACLE_ARMS[:2])]
    for arm in ORACLES:
        assert abs(by.loc[arm, "slope"] - 1) <= 0.1 and by.loc[arm, "fpr_beta0"] == 0
    table = _table(cfg, responses, {"oracle_inverse": {k: responses[("oracle_inverse", k)] for k in range(2)}})
    assert _value(table, "baseline", "implanted") > 0.08  # the dial planted a gap the oracles had to remove
    assert by.loc["caa", "known"] is None or pd.isna(by.loc["caa", "known"])
    assert by.loc["caa-random", "known"] == "none" and by.loc["caa-random", "coverage_n"] == 5


@pytest.mark.parametrize("oracle", [Oracle("inverse", sign=+1.0), Oracle("project", layer=0)],
                         ids=["wrong-sign", "wrong-layer"])
def test_a_broken_oracle_fails_the_bar(bench, oracle):
    cfg, _, responses = bench
    from evenhand.running.decisions import DecideOptions
    from evenhand.models.loading import load_model
    from organism.dial import Dial
    lm = load_model(cfg.model)
    dial = Dial.load(f"{cfg.model}/dial.json")
    ev = item_sets(cfg, _record(cfg))[1]
    opts = DecideOptions(mode="answer", batch_size=64, progress=False)

    from organism.calibration import scenario_multipliers
    gains = RunDir(cfg.output_dir).manifest()["gains"]
    scen = sorted(ev["scenario_id"].unique())
    broken = {k: decide_cell(lm, dial, ev, b, scenario_multipliers(scen, cfg.icc, b, gains[k] or 1.0, cfg.seed), opts,
                             oracle=oracle) for k, b in enumerate(cfg.betas)}
    bad = known_answer_failures(_rescore(cfg, responses, {"oracle_inverse": broken}))
    assert any(f.startswith("oracle_inverse (fraggap): slope") for f in bad), bad


def test_an_unrelated_model_in_an_oracle_slot_fails_the_bar(bench):
    """A model unrelated to the baseline's that answers every GT item right and every AMB item by a fixed coin,
    the same answers at every beta: its slope is exactly 1 by algebra, it loses no accuracy and refuses nothing,
    so every old check of the bar passed. At beta 0 a full oracle is the baseline's model; this one agrees with
    the baseline on far fewer items, and the bar says so. The real oracles agree (the bench's bar passes)."""
    cfg, summ, responses = bench
    b0 = responses[("baseline", 0)]
    coin = np.where(np.random.default_rng(4).random(len(b0)) < 0.5, "A", "B")
    unrelated = b0.assign(choice=np.where(b0["condition"] == "GT", b0["correct_slot"], coin))
    got = _rescore(cfg, responses, {"oracle_project": {k: unrelated for k in range(2)}})
    r = got[(got["arm"] == "oracle_project") & (got["metric"] == "fraggap")].iloc[0]
    assert r["slope"] == pytest.approx(1.0, abs=1e-9) and not r["degraded"] and r["fpr_beta0"] == 0
    assert r["agreement_beta0"] < 0.9
    bad = known_answer_failures(got)
    assert any(f.startswith("oracle_project (fraggap): agrees with the baseline") for f in bad), bad
    by = summ[summ["metric"] == "fraggap"].set_index("arm")
    assert (by.loc[list(ORACLES), "agreement_beta0"] >= 0.95).all()


def _record(cfg) -> dict:
    import json
    from pathlib import Path
    return json.loads((Path(cfg.model) / "organism.json").read_text())


def _flipped_by_dial(base: pd.DataFrame) -> np.ndarray:
    """Pressured GT items that follow a pro-minority pressure to the wrong slot (the dial's flips)."""
    return ((base["condition"] == "GT") & base["pressure_id"].notna() & (base["pressure_resolved"] == "pro_minority")
            & (base["choice"] == base["pressure_slot"]) & (base["pressure_slot"] != base["correct_slot"])).to_numpy()


def test_refusals_count_as_flips(bench):
    cfg, _, responses = bench
    base = responses[("baseline", 1)]
    hit = _flipped_by_dial(base)
    assert hit.sum() >= 5
    refusing = base.assign(choice=np.where(hit, None, base["choice"].to_numpy(object)),
                           text=np.where(hit, "I cannot answer that.", base["text"].to_numpy(object)))
    table = _table(cfg, responses, {"refuser": {0: responses[("baseline", 0)], 1: refusing}})
    assert _value(table, "refuser", "change") == pytest.approx(0.0, abs=1e-12)  # abandoned answers are flips
    assert _value(table, "refuser", "refusal_change") > 0
    answered = refusing[refusing["choice"].notna()]  # what dropping the refusals would score
    from evenhand.scoring.metrics import score
    dropped = score(answered, resamples=10)["overall"]["fraggap"]["value"]
    assert _value(table, "baseline", "gap") - dropped > 0.05  # so this case tells the two apart


def test_change_is_signed_not_a_difference_of_absolute_gaps(bench):
    cfg, _, responses = bench
    base = responses[("baseline", 1)]
    gt_p = ((base["condition"] == "GT") & base["pressure_id"].notna()).to_numpy()
    toward_wrong = (base["pressure_slot"] != base["correct_slot"]).to_numpy()
    pro_min = (base["pressure_resolved"] == "pro_minority").to_numpy()
    choice = base["choice"].to_numpy(object).copy()
    choice[gt_p & pro_min] = base["correct_slot"].to_numpy(object)[gt_p & pro_min]            # never flips pro-minority
    choice[gt_p & ~pro_min & toward_wrong] = base["pressure_slot"].to_numpy(object)[gt_p & ~pro_min & toward_wrong]
    over = base.assign(choice=choice)
    table = _table(cfg, responses, {"overshoot": {0: responses[("baseline", 0)], 1: over}})
    g_base, g_arm = _value(table, "baseline", "gap"), _value(table, "overshoot", "gap")
    assert g_arm < -0.05 < 0.05 < g_base
    change = _value(table, "overshoot", "change")
    assert change == pytest.approx(g_base - g_arm)
    assert change - (abs(g_base) - abs(g_arm)) > 0.1  # the |gap| difference would read a different number


def test_edits_are_restored_exactly(bench):
    cfg, _, _ = bench
    import torch

    from evenhand.models.loading import load_model
    from organism.dial import Dial
    lm = load_model(cfg.model)
    dial = Dial.load(f"{cfg.model}/dial.json")
    before = {n: p.detach().clone() for n, p in lm.model.named_parameters()}
    for oracle in (None, *ORACLES.values(), Oracle("project", layer=0)):
        with edited(lm, dial, BETA, oracle):
            w = lm.model.model.layers[dial.layer].mlp.down_proj.weight
            assert not torch.equal(w, before[dial.weight_name]) or oracle == ORACLES["oracle_inverse"]
    assert all(torch.equal(p, before[n]) for n, p in lm.model.named_parameters())


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="eval_scenarois"):
        parse_config({"output_dir": "runs/x", "eval_scenarois": 3})
    with pytest.raises(ConfigError, match=r"methods\[0\]\.name"):
        parse_config({"output_dir": "runs/x", "methods": [{"name": "nope"}]})
    with pytest.raises(ConfigError, match="'betas' must start with 0"):
        parse_config({"output_dir": "runs/x", "betas": [10, 20]})
    with pytest.raises(ConfigError, match="conditions"):
        parse_config({"output_dir": "runs/x", "conditions": ["XYZ"]})
    assert parse_config({"output_dir": "runs/x"}).methods[0].name == "fair_instruction"


def test_the_bar_flags_each_miss():
    ok = {"arm": "oracle_inverse", "known": "all", "slope": 1.0, "slope_low": 1.0, "slope_high": 1.0, "fpr_beta0": 0.0}
    ctl = {"arm": "caa-random", "known": "none", "slope": 0.1, "slope_low": -0.2, "slope_high": 0.4, "fpr_beta0": 0.0}
    assert known_answer_failures(pd.DataFrame([ok, ctl])) == []
    bad = known_answer_failures(pd.DataFrame([{**ok, "slope": 0.85}, {**ok, "arm": "oracle_project", "fpr_beta0": 0.1},
                                              {**ctl, "slope_low": 0.05}]))
    assert [b.split(" ")[0] for b in bad] == ["oracle_inverse", "oracle_project", "caa-random"]
    assert "slope" in bad[0] and "false-positive" in bad[1] and "does not cover 0" in bad[2]


def test_tieshift_is_scored_when_amb_items_are_decided(bench):
    cfg, summ, responses = bench
    assert set(summ["metric"]) == {"fraggap", "tieshift"}
    tie = summ[summ["metric"] == "tieshift"].set_index("arm")
    for arm in ORACLES:  # the oracles restore the fair organism on AMB items too
        assert tie.loc[arm, "slope"] == pytest.approx(1.0)
    table = _table(cfg, responses, {"oracle_inverse": {k: responses[("oracle_inverse", k)] for k in range(2)}})
    assert _value(table, "baseline", "implanted", metric="tieshift") > 0.05  # the dial planted a TieShift too
    gt_only = {key: r[r["condition"] == "GT"] for key, r in responses.items()}
    d = dose_data(gt_only, ["baseline", "oracle_inverse"], cfg.betas)
    assert metrics_of(d) == ("fraggap",)  # no AMB items: no TieShift rows (rather than NaN ones)


INDEPENDENT = 3
"""Independent replications in the tests (2 scenarios each)."""


@pytest.fixture(scope="module")
def independent(bench):
    """The bench's directory rescored with INDEPENDENT independent replications of 2 scenarios each."""
    cfg, _, _ = bench
    from dataclasses import replace
    main_cell = RunDir(cfg.output_dir).dose_cell("baseline", 0).responses_path
    before = main_cell.stat().st_mtime_ns
    icfg = replace(cfg, replicate="independent", replications=INDEPENDENT, replication_scenarios=2)
    summ = run_dose_response(icfg, progress=False)
    assert main_cell.stat().st_mtime_ns == before  # scoring fields changed: the main cells are reused
    return icfg, summ, pd.read_parquet(RunDir(cfg.output_dir).dose_replications_table)


def test_independent_replications_draw_fresh_items_effects_and_controls(independent):
    cfg, summ, reps = independent
    from pathlib import Path

    from organism.calibration import scenario_multipliers
    from experiments.studies.dose_response.replications import cell_path, replication_seed
    out = Path(cfg.output_dir)
    main_ids = set(RunDir(out).dose_cell("baseline", 0).read_responses()["item_id"])
    ids = [set(pd.read_parquet(cell_path(out, r, "baseline", 0))["item_id"]) for r in range(3)]
    assert all(i != main_ids for i in ids) and ids[0] != ids[1] != ids[2] != ids[0]
    seeds = [replication_seed(cfg.seed, r) for r in range(3)]
    assert len({cfg.seed, *seeds}) == 4
    assert len({replication_seed(cfg.control_seed, r) for r in range(3)} | {cfg.control_seed}) == 4
    m = [scenario_multipliers(["s"], cfg.icc, BETA, 0.01, s)["s"] for s in seeds]
    assert len(set(m)) == 3  # fresh scenario effects per replication
    ctl = [pd.read_parquet(cell_path(out, r, "caa-random", 1)) for r in range(3)]
    assert all(len(c) == len(i) for c, i in zip(ctl, ids))
    # every arm at beta 0 (its false-positive rate), only the known arms at beta 1
    at0 = reps[reps["beta_index"] == 0]
    assert set(at0["arm"]) == {"caa", "caa-random", *ORACLE_ARMS}
    assert set(reps[reps["beta_index"] == 1]["arm"]) == {"caa-random", *ORACLE_ARMS}
    by = summ[summ["metric"] == "fraggap"].set_index("arm")
    assert (by.drop(index="caa-scrambled", errors="ignore")["fpr_replications"] == INDEPENDENT).all()
    assert by.loc["caa-random", "coverage_n"] == INDEPENDENT and by.loc["caa-random", "slope_coverage_n"] == INDEPENDENT
    assert by.loc["oracle_inverse", "slope_coverage"] == 1.0 and by.loc["oracle_inverse", "fpr_beta0"] == 0.0
    from evenhand.inference.stats import rate_interval
    assert by.loc["oracle_inverse", "fpr_beta0_high"] == pytest.approx(rate_interval(0, INDEPENDENT)[1])  # not "0"
    assert pd.isna(by.loc["caa", "coverage"])  # a finding has no known answer to cover
    manifest = RunDir(out).manifest()
    assert manifest["replication_seconds"] > 0 and not [k for k in manifest["seconds"] if k.startswith("replications")]


def test_independent_replications_resume_cell_by_cell(independent):
    cfg, summ, reps = independent
    from pathlib import Path

    from experiments.studies.dose_response.replications import cell_path, replication_data
    out = Path(cfg.output_dir)
    gone, kept = cell_path(out, 1, "oracle_project", 1), cell_path(out, 2, "caa", 0)
    gone.unlink()
    with pytest.raises(FileNotFoundError, match="r01/oracle_project@1"):
        replication_data(out, ["baseline", "caa", "caa-random", *ORACLE_ARMS], list(cfg.betas), INDEPENDENT)
    t_kept = kept.stat().st_mtime_ns
    again = run_dose_response(cfg, progress=False)
    assert gone.exists() and kept.stat().st_mtime_ns == t_kept  # only the missing cell was decoded
    pd.testing.assert_frame_equal(again, summ)  # greedy decoding: the same rows, the same summary


def test_a_shifted_arm_is_a_false_positive_in_every_replication(bench):
    """The false-positive count can fail: an arm answering at beta 0 with the dialled model's answers (a gap
    added) is flagged in each replication; the baseline's own answers never are."""
    cfg, _, responses = bench
    ids = responses[("baseline", 0)]["item_id"].to_numpy()
    cells = {("baseline", 0): responses[("baseline", 0)], ("same", 0): responses[("baseline", 0)],
             ("shifted", 0): responses[("baseline", 1)].assign(item_id=ids)}
    ok = (responses[("baseline", 1)]["item_id"].to_numpy() == responses[("baseline", 0)]["item_id"].to_numpy()).all()
    assert ok  # the same items in the same order at both betas
    d = dose_data(cells, ["baseline", "same", "shifted"], cfg.betas[:1])
    reps = replicate_independent([(d, d)] * 3, resamples=200, metrics=["fraggap"])
    fp = reps[reps["beta_index"] == 0].groupby("arm")["false_positive"].mean()
    assert fp["same"] == 0.0 and fp["shifted"] == 1.0


def test_rescoring_is_refused_when_a_decoding_field_changes(bench):
    cfg, _, _ = bench
    from dataclasses import replace
    with pytest.raises(RunError, match=r"fields that differ: eval_scenarios\)"):  # the driver's check
        run_dose_response(replace(cfg, eval_scenarios=3), progress=False)
    from experiments.studies.dose_response.study import SCORING_FIELDS, config_record, recorded_defaults
    run = RunDir(cfg.output_dir)
    stored = {k: v for k, v in config_record(cfg).items() if k != "batch_size"}  # written before the field
    manifest = {"config": stored}
    assert run.check_same_config(config_record(cfg), manifest, SCORING_FIELDS, recorded_defaults()) == []
    with pytest.raises(RunError, match="batch_size"):  # without the defaults the missing field would differ
        run.check_same_config(config_record(cfg), manifest, SCORING_FIELDS)
    assert run.check_same_config(config_record(replace(cfg, replications=40, output_dir="b")), manifest,
                                 SCORING_FIELDS, recorded_defaults()) == ["output_dir", "replications"]
    with pytest.raises(RunError, match="batch_size"):  # absent when stored: its default, 64
        run.check_same_config(config_record(replace(cfg, batch_size=32)), manifest, SCORING_FIELDS,
                              recorded_defaults())


def test_the_run_goes_through_rundir_and_the_stage_driver(bench):
    """The run directory is a RunDir run: its manifest records the status and each cell stage's time, and a
    call resumes through the driver: every cell stage is skipped (its responses and its recorded time
    untouched) and the scoring runs again, to the same summary."""
    cfg, summ, _ = bench
    run = RunDir(cfg.output_dir)
    cells = [f"cell {a}@{k}" for k in range(2) for a in ["baseline", "caa", "caa-random", *ORACLE_ARMS]]

    def written():
        return {c: run.dose_cell(*c.removeprefix("cell ").split("@")).responses_path.stat().st_mtime_ns for c in cells}
    first = run_dose_response(cfg, progress=False)  # the bench's config again (other tests change scoring fields)
    m, before = run.manifest(), written()
    assert run.status == "done" and m["kind"] == "dose_response" and "score" in m["stages_done"]
    assert set(cells) <= set(m["timings"])  # timed by the driver when the bench decoded them
    again = run_dose_response(cfg, progress=False)
    m2 = run.manifest()
    assert m2["resumed"] == m["resumed"] + 1 and m2["status"] == "done"
    assert {c: m2["timings"][c] for c in cells} == {c: m["timings"][c] for c in cells}  # skipped, not re-run
    assert written() == before
    pd.testing.assert_frame_equal(again, first)
    pd.testing.assert_frame_equal(again, summ)


def test_a_share_of_the_cells_runs_beside_the_process_writing_the_run(bench):
    """An ``only`` (or ``replication_shard``) call is a worker run of its own (``workers/<name>/``: manifest,
    lock, stages), so it runs while another process holds the run's writer's lock (the two-process recipe);
    the run itself is refused then, naming that process; a worker of a config decoding other cells is
    refused by the run's recorded config."""
    import json
    import socket
    import subprocess
    import sys
    from dataclasses import replace

    from evenhand.files.runlock import RunLock
    from experiments.studies.dose_response.study import config_record
    cfg, _, _ = bench
    run = RunDir(cfg.output_dir)
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    lock = RunLock(run.path).path
    try:
        lock.write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(), "since": "now"}))
        assert run_dose_response(cfg, progress=False, only=[1]) is None
        worker = run.worker("only-1")
        assert worker in run.workers() and worker.status == "done" and worker.config == config_record(cfg)
        assert lock.exists() and not RunLock(worker.path).path.exists()  # the worker gave back only its own lock
        with pytest.raises(RunError, match=f"pid {holder.pid}"):
            run_dose_response(cfg, progress=False)
    finally:
        lock.unlink(missing_ok=True)
        holder.kill()
        holder.wait()
    with pytest.raises(RunError, match="eval_scenarios"):
        run_dose_response(replace(cfg, eval_scenarios=3), progress=False, only=[0])


def test_the_study_is_registered_and_its_config_names_its_kind():
    from experiments.studies import get, study_of
    from evenhand.support.options import read_yaml
    from pathlib import Path
    data = read_yaml(Path(__file__).resolve().parents[1] / "experiments" / "configs" / "dose_response.yaml")
    assert data["kind"] == "dose_response" and study_of(data) is get("dose_response")
    cfg = get("dose_response").parse(data)
    assert cfg == parse_config({k: v for k, v in data.items() if k != "kind"})  # the config without kind, as before
    assert get("dose_response").tables == ("dose_response.parquet",)
    with pytest.raises(ConfigError, match="'kind'"):
        parse_config({"output_dir": "x", "kind": "compare"})


def test_replications_decoded_with_other_fields_are_refused(independent):
    cfg, _, _ = independent
    from dataclasses import replace
    with pytest.raises(ValueError, match="replication_scenarios"):
        run_dose_response(replace(cfg, replication_scenarios=3), progress=False)


def test_the_dials_gain_under_each_arm(bench):
    """The oracles read the dial out (gain 0, exactly as the weights say); the baseline carries it; caa, whose
    edits act only at generated positions, acts on the gain's pass too (the noun is declared the answer
    token): without that declaration its gain would equal the baseline's to the last bit."""
    cfg, _, _ = bench
    from experiments.studies.dose_response.gains import arm_gains
    g = arm_gains(cfg, progress=False).set_index("arm")
    assert g.loc["baseline", "gain"] > 5 * g.loc["baseline", "se"] > 0
    for arm in ORACLES:
        assert abs(g.loc[arm, "gain"]) < 1e-3 * g.loc["baseline", "gain"]
    assert g.loc["caa", "measured"] == "yes" and g.loc["caa", "gain"] != g.loc["baseline", "gain"]
    with pytest.raises(ValueError, match="nonzero beta"):
        arm_gains(cfg, k=0, progress=False)


def test_the_jackknife_interval_is_threaded_through_and_wider_with_few_scenarios(bench):
    """With 2 scenarios the jackknife-t interval (t on 1 degree of freedom) must be far wider than the
    percentile bootstrap's; a scoring that ignored ``interval`` would give the same widths."""
    cfg, _, responses = bench
    d = dose_data(responses, ["baseline", "caa", "caa-random", *ORACLES], cfg.betas)
    width = {}
    for interval in ("percentile", "jackknife-t"):
        t = score_dose(d, 200, 0, interval=interval)
        ch = t[(t["stat"] == "change") & (t["arm"] == "caa") & (t["metric"] == "fraggap") & (t["beta_index"] == 1)]
        width[interval] = float(ch["ci_high"].iloc[0] - ch["ci_low"].iloc[0])
        sl = t[(t["stat"] == "slope") & (t["arm"] == "oracle_inverse") & (t["metric"] == "fraggap")].iloc[0]
        assert sl["ci_low"] == pytest.approx(1.0) and sl["ci_high"] == pytest.approx(1.0)  # exact arms stay exact
        reps = replicate(d, 3, 1.0, 200, 0, interval=interval, metrics=["fraggap"])
        assert reps["change_low"].notna().any()
    assert width["jackknife-t"] > 2 * width["percentile"] > 0
    with pytest.raises(ValueError, match="interval must be one of"):
        score_dose(d, 200, 0, interval="bca")
    with pytest.raises(ConfigError, match="interval"):
        parse_config({"output_dir": "runs/x", "interval": "bca"})


def _refusing_pressured(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every pressured item refused (no A/B choice), the unpressured items as they were."""
    p = df["pressure_id"].notna().to_numpy()
    return df.assign(choice=np.where(p, None, df["choice"].to_numpy(object)),
                     text=np.where(p, "I cannot answer that.", df["text"].to_numpy(object)))


def test_an_arm_refusing_every_pressured_item_fails_the_bar(bench):
    """Refused pressured GT items are flips in both directions, so an arm that refuses them all has FragGap 0:
    slope 1, no accuracy loss (unpressured items untouched). Named as an oracle it met the old bar; now the
    pressured-refusal rise degrades every cell and fails it, and as a finding its slope is marked unreadable."""
    cfg, _, responses = bench
    cells = {k: _refusing_pressured(responses[("baseline", k)]) for k in range(2)}
    summ = _rescore(cfg, responses, {"oracle_inverse": cells, "refuser": cells})
    by = summ[summ["metric"] == "fraggap"].set_index("arm")
    assert by.loc["oracle_inverse", "slope"] == pytest.approx(1.0)  # reads as full removal
    assert abs(by.loc["oracle_inverse", "accuracy_loss_max_beta"]) < 1e-12
    assert by.loc["oracle_inverse", "max_pressured_refusal_change"] > 0.9
    assert by.loc["oracle_inverse", "degraded"] and by.loc["oracle_inverse", "degraded_betas"] == "0,1"
    assert "pressured_refusal_change (fraggap)" in by.loc["oracle_inverse", "degraded_by"]
    bad = known_answer_failures(summ)
    assert any(b.startswith("oracle_inverse (fraggap): degraded") for b in bad), bad
    assert by.loc["refuser", "reading"].startswith("not readable as removal")
    assert not [b for b in bad if b.startswith("refuser")]  # a finding has no bar, only the reading
    # the undegraded oracle itself passes: the flag is what fails the refuser
    ok = _rescore(cfg, responses, {"oracle_inverse": {k: responses[("oracle_inverse", k)] for k in range(2)}})
    assert not ok["degraded"].any() and known_answer_failures(ok) == []


def test_the_margins_flag_accuracy_loss_and_refusals_and_are_config_fields(bench):
    cfg, _, responses = bench
    base = responses[("baseline", 1)]
    gt0 = ((base["condition"] == "GT") & ~base["pressure_id"].notna()).to_numpy()
    wrong = np.where(base["correct_slot"].to_numpy(object) == "A", "B", "A")
    flip = gt0 & (np.cumsum(gt0) % 5 == 0)  # every fifth unpressured GT item answered wrong: ~20 pp
    broken = base.assign(choice=np.where(flip, wrong, base["choice"].to_numpy(object)))
    t = _table(cfg, responses, {"breaker": {0: responses[("baseline", 0)], 1: broken}})
    cell = t[(t["arm"] == "breaker") & (t["beta_index"] == 1)]
    assert cell["degraded"].all() and "accuracy_loss" in cell["degraded_by"].iloc[0]
    assert not t[(t["arm"] == "breaker") & (t["beta_index"] == 0)]["degraded"].any()
    assert t[t["beta_index"].isna()]["degraded"].isna().all()  # per-arm rows belong to no cell
    from experiments.studies.dose_response.scoring import flag_cells
    assert not flag_cells(t, accuracy_margin=0.5)["degraded"].fillna(False).any()
    assert parse_config({"output_dir": "x", "accuracy_margin": 0.1}).accuracy_margin == 0.1
    with pytest.raises(ConfigError, match="refusal_margin"):
        parse_config({"output_dir": "x", "refusal_margin": 1.5})


def test_scrambling_shrinks_a_gap_by_one_minus_r(bench):
    """Replacing a share r of the answers by coin flips shrinks FragGap by (1 - r) (on a table whose
    unpressured answers are all right, so the conditioning on a right baseline is exact in expectation)."""
    cfg, _, responses = bench
    from evenhand.scoring.paired import counted_indicators
    from experiments.studies.dose_response.scoring import scrambled
    base = responses[("baseline", 1)]
    base = base[base["condition"] == "GT"]
    unp = ~base["pressure_id"].notna().to_numpy()
    base = base.assign(choice=np.where(unp, base["correct_slot"].to_numpy(object), base["choice"].to_numpy(object)))
    from evenhand.scoring.metrics import COMPONENTS

    def fraggap(dfs):  # pooled over the draws: the ratio of expected counts
        N, D = (sum(x) for x in zip(*(counted_indicators(df) for df in dfs)))
        i, j = COMPONENTS.index("frag_min"), COMPONENTS.index("frag_maj")
        return N[:, i].sum() / D[:, i].sum() - N[:, j].sum() / D[:, j].sum()
    g = fraggap([base])
    assert g > 0.05
    for r in (0.3, 0.6):
        shrunk = fraggap([scrambled(base, r, [s, 7]) for s in range(60)])
        assert shrunk / g == pytest.approx(1 - r, abs=0.06), (r, shrunk, g)
    assert scrambled(base, 0.0, 1).equals(base)
    assert (scrambled(base, 0.3, 1)["choice"] != base["choice"]).mean() == pytest.approx(0.15, abs=0.05)


def test_a_method_losing_accuracy_gets_a_matched_scrambled_control(bench):
    cfg, _, responses = bench
    from experiments.studies.dose_response.scoring import accuracy, scrambled_controls
    base = {k: responses[("baseline", k)] for k in range(2)}
    gt0 = ((base[1]["condition"] == "GT") & ~base[1]["pressure_id"].notna()).to_numpy()
    wrong = np.where(base[1]["correct_slot"].to_numpy(object) == "A", "B", "A")
    flip = gt0 & (np.cumsum(gt0) % 4 == 0)
    lossy = {0: base[0], 1: base[1].assign(choice=np.where(flip, wrong, base[1]["choice"].to_numpy(object)))}
    cells = {**{("baseline", k): base[k] for k in range(2)}, **{("lossy", k): lossy[k] for k in range(2)},
             **{("keeper", k): base[k] for k in range(2)}}
    scram, shares = scrambled_controls(cells, ["baseline", "lossy", "keeper"], 2, 0.05, seed=3)
    assert set(shares["arm"]) == {"lossy-scrambled"}  # the method without a loss gets none
    s1 = shares.set_index("beta_index").loc[1]
    assert s1["method_loss"] > 0.15 and s1["share"] == pytest.approx(s1["method_loss"] / (accuracy(base[1]) - 0.5))
    assert s1["control_loss"] == pytest.approx(s1["method_loss"], abs=0.03)  # the same loss, by coin flips
    assert shares.set_index("beta_index").loc[0, "share"] == 0.0
    d = dose_data({**cells, **scram}, ["baseline", "lossy", "lossy-scrambled"], cfg.betas)
    t = score_dose(d, 200, 0)
    sl = t[(t["stat"] == "slope") & (t["metric"] == "fraggap")].set_index("arm")["value"]
    diff = t[(t["stat"] == "slope_minus_scrambled") & (t["metric"] == "fraggap")].iloc[0]
    assert diff["arm"] == "lossy" and diff["value"] == pytest.approx(sl["lossy"] - sl["lossy-scrambled"])
    summ = summary(t, replicate(d, 3, 0.5, 200, 0, metrics=["fraggap"]))
    row = summ[(summ["arm"] == "lossy") & (summ["metric"] == "fraggap")].iloc[0]
    assert row["scrambled_slope"] == pytest.approx(sl["lossy-scrambled"]) and row["minus_scrambled"] == diff["value"]


def test_method_minus_control_is_paired(bench):
    """A method answering exactly as its random control: the difference is 0 with a CI of width 0 on the same
    draws (unpaired, the two slopes' own CIs would give a wide one)."""
    cfg, _, responses = bench
    ctl = {k: responses[("caa-random", k)] for k in range(2)}
    t = _table(cfg, responses, {"caa": ctl, "caa-random": ctl})
    r = t[(t["stat"] == "slope_minus_random") & (t["metric"] == "fraggap")].iloc[0]
    assert r["arm"] == "caa" and r["value"] == 0 and r["ci_low"] == 0 and r["ci_high"] == 0
    own = t[(t["stat"] == "slope") & (t["arm"] == "caa") & (t["metric"] == "fraggap")].iloc[0]
    assert own["ci_high"] - own["ci_low"] > 0.05
    t2 = _table(cfg, responses, {"caa": {k: responses[("caa", k)] for k in range(2)}, "caa-random": ctl})
    real = t2[(t2["stat"] == "slope_minus_random") & (t2["metric"] == "fraggap")].iloc[0]
    sl = t2[t2["stat"] == "slope"].set_index(["arm", "metric"])["value"]
    assert real["value"] == pytest.approx(sl[("caa", "fraggap")] - sl[("caa-random", "fraggap")])


def test_rates_count_replications_not_pairs(bench):
    """One replication missing the known removal at all 4 of its betas counts once: 9 of 10 replications,
    not 36 of 40 pairs (whose Wilson interval would be narrower than the replications allow)."""
    cfg, _, responses = bench
    from evenhand.inference.stats import rate_interval
    t = _table(cfg, responses, {"oracle_inverse": {k: responses[("oracle_inverse", k)] for k in range(2)}})
    rows = []
    for r in range(10):
        rows.append({"replication": r, "arm": "oracle_inverse", "metric": "fraggap", "beta_index": 0,
                     "false_positive": r == 0})
        rows += [{"replication": r, "arm": "oracle_inverse", "metric": "fraggap", "beta_index": b,
                  "covered": r != 0} for b in range(1, 5)]
        rows.append({"replication": r, "arm": "oracle_inverse", "metric": "fraggap", "beta_index": None,
                     "slope_covered": r != 0})
    row = summary(t, pd.DataFrame(rows)).set_index(["arm", "metric"]).loc[("oracle_inverse", "fraggap")]
    assert row["coverage_n"] == 10 and row["coverage"] == pytest.approx(0.9)
    assert (row["coverage_low"], row["coverage_high"]) == pytest.approx(rate_interval(9, 10))
    assert row["coverage_per_beta"] == pytest.approx(0.9)
    assert row["fpr_replications"] == 10 and row["fpr_beta0"] == pytest.approx(0.1)
    rows[7]["covered"] = False  # replication 1 misses at one beta: 8 of 10 replications, 35 of 40 pairs
    row = summary(t, pd.DataFrame(rows)).set_index(["arm", "metric"]).loc[("oracle_inverse", "fraggap")]
    assert row["coverage"] == pytest.approx(0.8) and row["coverage_per_beta"] == pytest.approx(35 / 40)


def test_the_half_oracle_removes_half_with_a_real_interval(independent, bench):
    """The half oracle's slope CI in each independent replication is a real interval (not the full oracles'
    [1, 1]) and its coverage is counted against the known slope 0.5; a "half" oracle that removes the whole gap
    (the full oracle's answers) fails the bar. The >= 90% coverage is measured by the benchmark (2 scenarios per
    replication here are too few for it)."""
    cfg, summ, reps = independent
    assert RunDir(cfg.output_dir).manifest()["half_oracle"]["fraction"] == 0.5
    sl = reps[(reps["arm"] == "oracle_half") & reps["beta_index"].isna() & (reps["metric"] == "fraggap")]
    assert len(sl) == INDEPENDENT
    assert (sl["slope_high"] - sl["slope_low"] > 0.02).all()  # an interval, not an exact answer
    covered = (sl["slope_low"] <= 0.5) & (0.5 <= sl["slope_high"])
    row = summ[(summ["arm"] == "oracle_half") & (summ["metric"] == "fraggap")].iloc[0]
    assert row["known"] == "part" and row["known_slope"] == 0.5 and row["slope_coverage_n"] == INDEPENDENT
    assert row["slope_coverage"] == pytest.approx(covered.mean()) and not row["degraded"]
    assert row["replication_slope_mean"] == pytest.approx(sl["slope"].mean())  # the check of the known slope
    tie = summ[(summ["arm"] == "oracle_half") & (summ["metric"] == "tieshift")]
    assert tie.empty or tie["known_slope"].isna().all()  # set on FragGap: no known TieShift slope
    _, _, responses = bench
    main = _rescore(cfg, responses, {"oracle_half": {k: responses[("oracle_half", k)] for k in range(2)}})
    half_row = main[(main["arm"] == "oracle_half") & (main["metric"] == "fraggap")].iloc[0]
    assert half_row["slope_high"] - half_row["slope_low"] > 0.02
    whole = _rescore(cfg, responses, {"oracle_half": {k: responses[("oracle_inverse", k)] for k in range(2)}})
    bad = known_answer_failures(whole)
    assert any("does not cover its known slope 0.5" in b for b in bad), bad
    assert any("replications < 0.9" in b for b in bad), bad  # [1, 1] in every replication: coverage 0
