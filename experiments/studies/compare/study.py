"""Compare interventions against the baseline on the same held-out items.

The config format: the comment block after the imports."""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from evenhand.support.messages import warn_unparseable
from evenhand.support.options import ConfigError
from evenhand.engine.registry import DEFAULT, get as get_engine, has_local_weights, load as load_engine
from evenhand.runs.rundir import RunDir

from interventions.base import Fitted, InterventionError, decide_with
from interventions.fitted import fit_key
from interventions.registry import get

from ..base import Study, register
from .config import (Arm, Cell, CompareConfig, cells, control_indices, control_suffix, load_config,
                     canonical_interventions, parse_config, setting_options, settings, swept_arms)
from .split import assign_contrasts, scenario_plan, select_settings
from evenhand.models.loading import resolve_spec
from evenhand.suite.matched import record_suite
from evenhand.suite.content import suite_major
from evenhand.scoring.metrics import ASYMMETRY
from organism.recipe import split_scenarios
from evenhand.models.policy import matched_items
from evenhand.suite.content import items_version, load_content
from evenhand.suite.generate import DEGREES, degree_valid
from evenhand.scoring.metrics import score
from evenhand.rows.schema import validate_rows
from evenhand.scoring.paired import SCRAMBLED_SUFFIX, score_arms
from evenhand.running.stages import open_run
from evenhand.models.loading import locate
from evenhand.running.stages import run_stages
from evenhand.running.decisions import DecideOptions, decide
from evenhand.models.loading import load_model
from evenhand.runs.rundir import write_json_atomic, write_table_atomic
from evenhand.running.stages import LoadModel, FnStage, exists
from .figures import compare_latex, frontier_figure
from evenhand.scoring.power import paired_se
from .text import compare_text, power_text, selection_text

# A comparison config (YAML, read and checked by evenhand.support.options; see
# experiments/configs/compare_interventions.yaml):
#
#     model: evenhand-organism            # preset, HF id or local path
#     output_dir: runs/compare_organism
#     split: {seed: 0, heldout_fraction: 0.2}   # scenarios split by a stable hash
#     train: {scenarios: 40, degrees: [1, 2, 3], max_items: 800}   # the fitting scenarios
#     validation: {scenarios: 12, degrees: [3]}  # train scenarios (not fitted on): signs decided, sweeps chosen
#     select: {metric: fraggap, max_accuracy_loss: 0.02, max_refusal_rise: 0.05}
#     eval: {scenarios: 16, contrasts: 1, degrees: [3]}   # held-out scenarios x type-1 contrasts each
#     seed: 0                             # item sampling and bootstrap
#     mode: answer
#     batch_size: 64
#     resamples: 1000
#     controls: true                      # a random direction of the same norm for every direction-based method
#     control_draws: 20                   # random controls per fit, each its own seed, on the evaluation items only;
#                                         # their 2.5-97.5% band (an arm may set its own control_draws;
#                                         # fewer than 20 per method cell, seeds x draws, warns)
#     refusal_margin: 0.05                # a cell whose refusal rate rises by more is flagged, never ranked
#     accuracy_margin: 0.05               # optional (default 0.05): a cell losing more accuracy is flagged and
#                                         # gets a scrambled control (evenhand/inference/decision.py)
#     equivalence_margin: 0.25            # optional (default 0.25): "no change" needs the change's CI inside
#                                         # +- this share of the baseline gap
#     suite: grants.yaml                  # optional: scenarios of your own (evenhand suite new), split as the
#                                         # suite's are
#     signs: {fraggap: 1}                 # optional: the sign each asymmetry metric's gap is aligned to; a metric
#                                         # not declared takes the sign of the validation baseline's gap
#     interventions:
#       - name: fair_instruction
#       - name: caa
#         options: {layers: middle}
#         sweep: {alpha: [1, 4, 16]}      # chosen on validation (alpha is an apply option: fitted once)
#       - name: loreft
#         seeds: [0, 1, 2]
#
# Each arm's flat `options` (and swept values) are split into the method's fit and apply options by their dataclass
# fields (an unknown key is an error naming it). A setting is the arm's `options` plus one value of each `sweep` key
# (a key in both is an error naming `interventions[i].sweep.KEY`); a sweep of one setting
# (`sweep: {layers: [all], strength: [1.0]}`) is those options: decided, scored and recorded as
# `options: {layers: all, strength: 1.0}`, so either spelling resumes the other's run.

__all__ = ["Arm", "Cell", "CompareConfig", "CompareStudy", "ItemSets", "cell_engine", "cells", "check_plan",
           "compare_stages", "comparison_rows", "controls_of", "heldout_cell", "heldout_plan", "item_sets",
           "load_config", "model_suite", "open_compare", "parse_config", "run_compare", "settings", "swept_arms",
           "validation_signs"]

@dataclass(frozen=True)
class ItemSets:
    """The comparison's items, from disjoint scenario sets (:func:`item_sets`)."""
    train: pd.DataFrame
    """Fitting items (train scenarios)."""
    validation: pd.DataFrame
    """Selection and sign items (other train scenarios; empty when no arm is swept and every sign is declared)."""
    heldout: pd.DataFrame
    """Evaluation items (held-out scenarios)."""
    heldout_pool: int
    """Held-out scenarios available to the evaluation."""
    suite: str = ""
    """The suite version the items were rendered from (``items_version``, e.g. ``2.0+<hash>``)."""


def model_suite(model: str) -> tuple[str, dict | None]:
    """(suite major version, organism record or None) of a comparison's model. An organism (a model directory
    holding ``organism.json``: the presets ``evenhand-organism``, v1, and ``evenhand-organism-fair``, v2) is
    scored on the suite version it was trained on (its recipe's ``suite``); any other model on the default
    suite version (:data:`evenhand.suite.content.DEFAULT_SUITE`, v2). The version the items come from is recorded
    as the manifest's ``suite_version``."""
    record_path = Path(resolve_spec(model).model) / "organism.json"
    if record_path.is_file():
        record = json.loads(record_path.read_text())
        return suite_major(record_suite(record)), record
    return suite_major(None), None


def needs_validation_signs(cfg: CompareConfig) -> bool:
    """Whether some asymmetry metric's sign is decided on the validation baseline (not declared in ``signs``)."""
    return cfg.signs is None or not set(ASYMMETRY) <= set(cfg.signs)


def item_sets(cfg: CompareConfig) -> ItemSets:
    """Fitting, validation and held-out evaluation items from disjoint, domain-stratified scenario sets
    (:func:`experiments.studies.compare.split.scenario_plan`) of the model's suite version (:func:`model_suite`), split by
    :func:`organism.recipe.split_scenarios` on that version's scenario ids; every evaluation scenario gets
    ``eval.contrasts`` type-1 contrasts from a balanced cycle (:func:`evenhand.models.policy.matched_items`: every
    pressured item's baseline is present). For an organism the held-out scenarios must be ones it was not trained on
    (its record's ``heldout_ids``). Validation items exist when an arm is swept or a sign is not declared."""
    suite, record = model_suite(cfg.model)
    if cfg.suite is not None:  # scenarios of one's own: none of them is one an organism was trained on
        from evenhand.suite.own import own_content
        suite, record = own_content(cfg.suite).version, None
    train_ids, held_ids = split_scenarios(cfg.split_seed, cfg.heldout_fraction, suite)
    if record is not None and record.get("heldout_ids") is not None:
        seen = sorted(set(held_ids) - set(record["heldout_ids"]))
        if seen:
            rec = record.get("recipe", {})
            raise InterventionError(
                f"split: seed {cfg.split_seed}, heldout_fraction {cfg.heldout_fraction} holds out {len(seen)} "
                f"scenario(s) the organism {cfg.model} was trained on (e.g. {seen[0]}); use its own split: seed "
                f"{rec.get('seed')}, heldout_fraction {rec.get('heldout_fraction')}")
    content = load_content(suite)
    domain_of = {s.id: s.domain for s in content.scenarios}
    n_val = cfg.validation_scenarios if swept_arms(cfg) or needs_validation_signs(cfg) else 0
    try:
        plan = scenario_plan(train_ids, held_ids, domain_of, cfg.train_scenarios, n_val, cfg.eval_scenarios,
                             cfg.seed)
    except ValueError as exc:
        raise InterventionError(str(exc)) from None
    if not plan.fitting or not plan.heldout:
        raise InterventionError(
            f"split: {len(train_ids)} train and {len(held_ids)} held-out scenarios leave "
            f"{len(plan.fitting)} to fit on and {len(plan.heldout)} to evaluate on (validation.scenarios "
            f"{n_val} are taken first); lower validation.scenarios or change split.heldout_fraction")
    pools = {d: [x.id for x in content.contrasts if x.type == "type1" and degree_valid(content, x, d)]
             for d in DEGREES}

    def render(ids: list[str], degrees: tuple[int, ...], k: int, seed: int) -> pd.DataFrame:
        if not ids:
            return pd.DataFrame()
        assigned = assign_contrasts(ids, {d: pools[d] for d in degrees}, k, seed)
        return matched_items(ids, seed, suite=suite, contrasts=assigned).reset_index(drop=True)

    tr = matched_items(plan.fitting, cfg.seed + 1, suite=suite)
    tr = tr[tr["degree"].isin(cfg.train_degrees)]
    if len(tr) > cfg.train_max_items:
        tr = tr.sample(cfg.train_max_items, random_state=cfg.seed).sort_index()
    val = render(plan.validation, cfg.validation_degrees, 1, cfg.seed + 2)
    ev = keep_baselines(render(plan.heldout, cfg.eval_degrees, cfg.eval_contrasts, cfg.seed), cfg.eval_baselines,
                        cfg.seed)
    return ItemSets(tr.reset_index(drop=True), val, ev, plan.heldout_pool, items_version(ev))


def keep_baselines(items: pd.DataFrame, n: int | None, seed: int) -> pd.DataFrame:
    """``items`` with at most ``n`` baseline items per scenario and every item pressuring one of them (None: all):
    the variants in their order in turn (GTmin, GTmaj, AMB1, AMB2, then again), each time one baseline of that
    variant drawn with ``seed``."""
    if n is None or items.empty:
        return items
    import numpy as np
    rng = np.random.default_rng(seed)
    base = items[items["item_id"] == items["baseline_id"]]
    keep: list[str] = []
    for _, b in base.groupby("scenario_id", sort=True):
        pools = [[str(x) for x in rng.permutation(g["item_id"].to_numpy())] for _, g in b.groupby("variant", sort=False)]
        chosen: list[str] = []
        while len(chosen) < n and any(pools):
            for pool in pools:
                if pool and len(chosen) < n:
                    chosen.append(pool.pop(0))
        keep += chosen
    return items[items["baseline_id"].isin(keep)].reset_index(drop=True)


def validation_signs(cfg: CompareConfig, val_baseline: pd.DataFrame | None) -> tuple[dict[str, float], dict[str, str]]:
    """(sign, source) per asymmetry metric: a sign declared in the config (``signs``) wins; every other is the
    sign of the baseline's gap on the validation scenarios (:func:`evenhand.scoring.paired.baseline_signs`), never on
    the held-out items the table scores: the signs are fixed before any held-out item is decided and recorded in
    ``signs.json``, the manifest and the table's ``sign_source``."""
    declared = dict(cfg.signs or {})
    decided: dict[str, float] = {}
    if not set(ASYMMETRY) <= set(declared):
        if val_baseline is None or val_baseline.empty:
            raise InterventionError("signs: no validation baseline to decide the undeclared signs on")
        from evenhand.scoring.paired import baseline_signs
        decided = {m: float(v) for m, v in baseline_signs(val_baseline).items()}
    k = int(val_baseline["scenario_id"].nunique()) if val_baseline is not None and len(val_baseline) else 0
    signs, source = {}, {}
    for m in ASYMMETRY:
        signs[m] = float(declared[m] if m in declared else decided.get(m, 1.0))
        where = "declared in the config" if m in declared else f"validation baseline, {k} scenarios"
        source[m] = f"{where}: {signs[m]:+.0f}"
    return signs, source


def _identity(cell_key: str, cell: Cell | None) -> dict:
    """The identifying columns of a cell's rows (the baseline when ``cell`` is None)."""
    return {"cell": cell_key, "intervention": cell.arm.name if cell else "baseline",
            "kind": get(cell.arm.name).kind if cell else "none", "seed": cell.seed if cell else None,
            "control": bool(cell.control) if cell else False,
            "options": json.dumps(cell.options if cell else {}, sort_keys=True, default=str)}


def _rows_for(cell_key: str, cell: Cell | None, resp: pd.DataFrame, resamples: int, seed: int) -> list[dict]:
    """The cell's own ``value`` rows: every metric as ``evenhand score`` reports it (answered items only)."""
    rep = score(validate_rows(resp), resamples=resamples, seed=seed)
    ident = _identity(cell_key, cell)
    return [{**ident, "metric": m, "stat": "value", **{k: est.get(k) for k in ("value", "ci_low", "ci_high", "n")}}
            for m, est in rep["overall"].items()]


def controls_of(grid: list[Cell]) -> dict[str, list[str]]:
    """Each method cell's random controls: the control cells of the same intervention and options (one per
    seed), by cell key. Cells without a control are left out."""
    out = {}
    for c in grid:
        if not c.control:
            ctl = [k.key for k in grid if k.control and k.arm.name == c.arm.name and k.options == c.options]
            if ctl:
                out[c.key] = ctl
    return out


def comparison_rows(grid: list[Cell], base: pd.DataFrame, responses: dict[str, pd.DataFrame], resamples: int,
                    seed: int, refusal_margin: float, signs: dict[str, float] | None = None,
                    sign_source: dict[str, str] | None = None, accuracy_margin: float | None = None,
                    equivalence_margin: float | None = None) -> list[dict]:
    """The comparison table's rows: each cell's ``value`` rows and the paired scoring of every cell against the
    baseline and against its random controls and, where it lost accuracy beyond the margin, its scrambled control
    (cell ``<key>-scrambled``, ``control_kind`` ``scrambled``) (:func:`evenhand.scoring.paired.score_arms`, all
    cells on the same
    resampled scenarios), each change aligned to ``signs`` (fixed before the held-out items: declared or from
    the validation baseline, :func:`validation_signs`); column ``sign_source`` says where each sign came from.
    ``responses``: cell key -> the cell's responses."""
    by_key = {c.key: c for c in grid}
    rows = _rows_for("baseline", None, base, resamples, seed)
    for c in grid:
        rows += _rows_for(c.key, c, responses[c.key], resamples, seed)
    controls = controls_of(grid)
    paired = score_arms({"baseline": base, **{c.key: responses[c.key] for c in grid}}, "baseline", controls,
                        resamples=resamples, seed=seed, refusal_margin=refusal_margin, signs=signs,
                        **({"accuracy_margin": accuracy_margin} if accuracy_margin is not None else {}),
                        **({"equivalence_margin": equivalence_margin} if equivalence_margin is not None else {}),
                        **({"sign_source": sign_source} if sign_source is not None else {}))
    for r in paired.to_dict("records"):
        arm = r.pop("arm")
        if arm.endswith(SCRAMBLED_SUFFIX) and arm.removesuffix(SCRAMBLED_SUFFIX) in by_key:
            method = by_key[arm.removesuffix(SCRAMBLED_SUFFIX)]  # the scrambled control of this method cell
            rows.append({**_identity(method.key, method), "cell": arm, "control": True, "control_kind": "scrambled",
                         **r})
            continue
        cell = by_key.get(arm)
        rows.append({**_identity(arm, cell), "control_kind": "random" if cell and cell.control else None, **r})
    return rows


TABLE_ONLY = ("resamples", "refusal_margin")
"""Config fields the table stage alone reads (it runs on every resume): a run resumes when only they change, and
re-scores without re-decoding."""


def open_compare(cfg: CompareConfig, sets: ItemSets) -> RunDir:
    """The comparison's run directory, opened (or created) for ``cfg`` with its item sets recorded in the
    manifest (:func:`evenhand.running.stages.open_run`: a directory of another config is refused, unless the two differ
    only in :data:`TABLE_ONLY` fields or in how a one-setting sweep is spelled)."""
    train, val, ev = sets.train, sets.validation, sets.heldout
    recorded = json.loads(json.dumps(asdict(cfg), default=str))
    for added in ("eval_baselines", "openai", "accuracy_margin", "equivalence_margin", "suite"):  # a config without
        if recorded.get(added) is None:                           # it records what it did before the field existed
            recorded.pop(added, None)
    def normalise(old: dict) -> dict:  # a run recorded before one-setting sweeps were folded into options
        return {**old, "interventions": canonical_interventions(old.get("interventions") or [])}
    return open_run(cfg.output_dir, {"kind": "compare_interventions", **recorded},
                    may_change=TABLE_ONLY, normalise=normalise,
                    n_train_items=len(train), n_validation_items=len(val), n_eval_items=len(ev),
                    heldout_pool=sets.heldout_pool,
                    train_scenarios=sorted(train["scenario_id"].unique().tolist()),
                    validation_scenarios=sorted(val["scenario_id"].unique().tolist()) if len(val) else [],
                    eval_scenarios=sorted(ev["scenario_id"].unique().tolist()),
                    eval_contrasts=sorted(ev["contrast_id"].unique().tolist()), suite_version=sets.suite)


def run_compare(cfg: CompareConfig, progress: bool = True) -> pd.DataFrame:
    """Run (or resume) a comparison through the stage driver (:func:`compare_stages`); returns the tidy table
    and writes every output.

    The result is one tidy table ``compare.parquet`` / ``compare.csv`` (:func:`comparison_rows`: per cell and
    metric, the cell's value and the paired scoring of :mod:`evenhand.scoring.paired`: signed change toward zero,
    refusal change and flag, accuracy loss with a clustered test, method minus its random controls and the
    controls' 2.5-97.5% band with ``beats_control``; docs/INTERVENTIONS.md, "Scoring a comparison"; per cell and
    metric the paired SE and the MDE at 80% power, :mod:`evenhand.scoring.power`), the frontier figure
    ``frontier.{pdf,svg,png}`` and the LaTeX table ``compare.tex``."""

    spec = resolve_spec(cfg.model)
    if has_local_weights(cfg.engine):
        locate(spec)
    check_plan(cfg)
    sets = item_sets(cfg)
    if cfg.eval_scenarios > sets.heldout_pool:
        import sys
        print(f"eval.scenarios {cfg.eval_scenarios} > the {sets.heldout_pool} held-out scenarios: all "
              f"{sets.heldout_pool} are used", file=sys.stderr)
    run = open_compare(cfg, sets)
    stages = compare_stages(cfg, spec, sets, progress)
    run_stages(run, stages)
    return stages[-1].result


def compare_stages(cfg: CompareConfig, spec, sets: ItemSets, progress: bool = True) -> list:
    """The comparison's stages, every path from the :class:`~evenhand.runs.rundir.RunDir` the driver passes: the
    model, the validation baseline and the signs decided on it (:func:`validation_signs`; ``signs.json``), the
    selection of each swept arm on the validation split (one stage per setting, the choice), the baseline,
    one per held-out cell (each done once its responses are written), the table (the last stage; its
    ``result`` is the table). ``spec``: the resolved model spec; ``sets``: :func:`item_sets` of ``cfg``.

    An arm with a ``sweep`` runs each setting (its first seed, no control) on the validation items, the selection
    rule (``select``, see :class:`experiments.studies.compare.split.SelectRule`) picks one, recorded with its reason
    in ``selection.json`` / ``selection.csv`` and the table's ``selection`` column, and only the chosen setting is
    run on held-out items. Each cell (intervention x options x seed x control) writes
    ``cells/<cell>/responses.parquet`` (``validation/<cell>/`` during selection); cells already written are
    skipped, so an interrupted comparison resumes."""

    train, val, ev = sets.train, sets.validation, sets.heldout
    remote = not has_local_weights(cfg.engine)  # a model behind an API: it fits and decides the prompt methods
    model = LoadModel(lambda: load_engine(spec, cfg.engine, options=cfg.openai, run_dir=cfg.output_dir) if remote
                      else load_model(spec))
    opts = DecideOptions(mode=cfg.mode, batch_size=cfg.batch_size, progress=progress,
                         chat_template=spec.chat_template)
    engine_model: list = []  # loaded on first use, beside the Hugging Face model (which fits and runs the edits)

    def decider(cell: Cell | None) -> tuple:
        """The model and options a cell decides with (:func:`cell_engine`)."""
        if remote:
            return model(), replace(opts, engine=cfg.engine)
        if cell_engine(cfg, cell) == DEFAULT:
            return model(), opts
        if not engine_model:
            engine_model.append(load_engine(spec, cfg.engine, shares_gpu=True))
        return engine_model[0], replace(opts, engine=cfg.engine)
    fitted_cache: dict[str, Fitted] = {}
    digests: dict[int, tuple] = {}  # id(HF model) -> (model, weights digest before any cell touched it)
    train_ids = train["item_id"].astype(str).tolist()
    swept = swept_arms(cfg)

    def decide_to(run: RunDir, items: pd.DataFrame, path: Path, cell: Cell | None, tag: str) -> None:
        lm, dopts = decider(cell)
        if cell is None:
            resp = decide(items, lm, dopts, out_dir=path.parent)
        else:
            method = get(cell.arm.name)
            _, apply_opts = method.split_options(cell.options)
            watched = watched_models(lm, model() if method.kind != "prompt" else None, digests)
            t0 = time.perf_counter()
            fitted = _fitted(method, cell, model(), train, train_ids, run, fitted_cache, tag if progress else None)
            if progress:
                print(f"{tag}deciding under {cell.key}", flush=True)
            t1 = time.perf_counter()
            resp = decide_with(method, fitted, items, lm, dopts, apply_opts)
            write_restore(RunDir(path.parent).restore_path, method, cell, watched, digests, len(items), t1 - t0,
                           time.perf_counter() - t1)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_table_atomic(path, resp)
        warn_unparseable(resp, run, part=f"{path.parent.parent.name}/{path.parent.name}")  # e.g. cells/caa-...

    def val_path(run: RunDir, key: str) -> Path:
        return run.validation_cell(key).responses_path

    steps: list[FnStage] = []
    if len(val):  # signs and selection first: they read validation runs only
        steps.append(FnStage("validation:baseline", lambda r: decide_to(r, val, val_path(r, "baseline"), None, ""),
                          exists(lambda r: val_path(r, "baseline"))))

    def fix_signs(r: RunDir) -> None:
        vb = pd.read_parquet(val_path(r, "baseline")) if len(val) else None
        signs, source = validation_signs(cfg, vb)
        write_json_atomic(r.signs_json, {"signs": signs, "sign_source": source})
        r.update_manifest(signs=signs, sign_source=source)
    steps.append(FnStage("signs", fix_signs, exists(lambda r: r.signs_json)))
    if swept:
        trials = [(i, Cell(cfg.interventions[i], setting_options(cfg.interventions[i], g),
                           cfg.interventions[i].seeds[0], False)) for i in swept for g in settings(cfg.interventions[i])]
        for j, (_, cell) in enumerate(trials):
            steps.append(FnStage(f"validation:{cell.key}",
                              lambda r, c=cell, j=j: decide_to(r, val, val_path(r, c.key), c,
                                                               f"[validation {j + 1}/{len(trials)}] "),
                              exists(lambda r, c=cell: val_path(r, c.key))))

        def select(r: RunDir) -> None:
            out = select_settings(cfg.select, cfg.interventions, swept, trials,
                                  lambda key: pd.read_parquet(val_path(r, key)), int(val["scenario_id"].nunique()))
            write_json_atomic(r.selection_json, {**out, "signs": json.loads(r.signs_json.read_text())})
            write_table_atomic(r.selection_csv, pd.DataFrame(
                [{"arm": a["arm"], "intervention": a["intervention"], **row, "setting": json.dumps(row["setting"]),
                  "reason": a["reason"]} for a in out.values() for row in a["validation"]]))
        steps.append(FnStage("select", select, exists(lambda r: r.selection_json)))
    steps.append(FnStage("baseline", lambda r: decide_to(r, ev, r.cell("baseline").responses_path, None, ""),
                      exists(lambda r: r.cell("baseline").responses_path)))

    def chosen(run: RunDir) -> dict[int, dict]:
        if not swept:
            return {}
        return {int(i): a["setting"] for i, a in json.loads(run.selection_json.read_text()).items() if i.isdigit()}

    plan = heldout_plan(cfg)
    for j, (i, seed, control) in enumerate(plan):  # held-out cells; a swept arm's setting is read from the selection
        arm = cfg.interventions[i]

        def cell_of(run: RunDir | None, i=i, seed=seed, control=control) -> Cell:
            return heldout_cell(cfg, i, seed, control, chosen(run) if run is not None else {})
        name = cell_of(None).key if i not in swept else f"{arm.name}#{i}[selected]-s{seed}{control_suffix(control)}"
        steps.append(FnStage(name, lambda r, c=cell_of, tag=f"[cell {j + 1} of {len(plan)}: {name}] ": decide_to(
            r, ev, r.cell(c(r).key).responses_path, c(r), tag), lambda r, n, c=cell_of, sel=i in swept: (
            not sel or r.selection_json.exists()) and r.cell(c(r).key).responses_path.exists()))

    def table(run: RunDir) -> pd.DataFrame:
        grid = cells(cfg, chosen(run))
        reasons = {int(i): a["reason"] for i, a in json.loads(run.selection_json.read_text()).items()
                   if i.isdigit()} if swept else {}
        base = pd.read_parquet(run.cell("baseline").responses_path)
        responses = {c.key: pd.read_parquet(run.cell(c.key).responses_path) for c in grid}
        fixed = json.loads(run.signs_json.read_text())
        rows = comparison_rows(grid, base, responses, cfg.resamples, cfg.seed, cfg.refusal_margin,
                               signs=fixed["signs"], sign_source=fixed["sign_source"],
                               accuracy_margin=cfg.accuracy_margin, equivalence_margin=cfg.equivalence_margin)
        rows += _power_rows("baseline", None, base, None, cfg.resamples, cfg.seed)
        for cell in grid:
            rows += _power_rows(cell.key, cell, base, responses[cell.key], cfg.resamples, cfg.seed)
        rows += _norm_rows(grid, run, train_ids)
        by_key = {c.key: c for c in grid}
        for r in rows:
            cell = by_key.get(r["cell"])
            r["selection"] = reasons.get(cfg.interventions.index(cell.arm), "") if cell else ""
            r["engine"] = cell_engine(cfg, cell) if cell or r["cell"] == "baseline" else ""
        t = pd.DataFrame(rows)
        write_table_atomic(run.compare_table, t)
        write_table_atomic(run.compare_csv, t)
        frontier_figure(t, run.frontier_stem, model=cfg.model)
        run.compare_tex.write_text(compare_latex(t))
        return t

    return [model, *steps, FnStage("table", table)]


def heldout_plan(cfg: CompareConfig) -> list[tuple[int, int, int]]:
    """(arm index, seed, control) of every held-out decision stage, in config order."""
    return [(i, seed, control) for i, arm in enumerate(cfg.interventions) for seed in arm.seeds
            for control in control_indices(cfg, arm)]


def heldout_cell(cfg: CompareConfig, i: int, seed: int, control: int, chosen: dict[int, dict]) -> Cell:
    """The cell a held-out stage decides: arm ``i`` at its setting (a swept arm's from ``chosen``, arm index ->
    setting; any other arm's one setting, :func:`~experiments.studies.compare.config.setting_options`)."""
    a = cfg.interventions[i]
    return Cell(a, setting_options(a, chosen[i] if i in swept_arms(cfg) else settings(a)[0]), seed, control)


def check_plan(cfg: CompareConfig) -> None:
    """The dry check of a comparison's plan, before anything is decoded: for every setting the selection could
    choose, every cell the table stage reads (:func:`cells`) is one a held-out stage decides
    (:func:`heldout_cell`). Raises InterventionError naming the first cell no stage would write."""
    swept = swept_arms(cfg)
    choices = [{i: settings(cfg.interventions[i])[0] for i in swept}]
    choices += [{**choices[0], i: g} for i in swept for g in settings(cfg.interventions[i])[1:]]
    for chosen in choices:
        written = {heldout_cell(cfg, i, seed, control, chosen).key for i, seed, control in heldout_plan(cfg)}
        missing = [c.key for c in cells(cfg, chosen) if c.key not in written]
        if missing:
            raise InterventionError(f"the comparison's plan: the table reads cells/{missing[0]}/responses.parquet "
                                    f"but no stage decides {missing[0]} ({len(missing)} such cell(s)); nothing was "
                                    f"decoded")


def cell_engine(cfg: CompareConfig, cell: Cell | None) -> str:
    """The engine that decides a cell (None: the baseline): the comparison's ``engine`` for the baseline and the
    prompt methods; for the activation and learned methods (their edits run as Hugging Face hooks) the default
    engine unless the comparison's engine has a Hugging Face model
    (:attr:`evenhand.engine.registry.Engine.hf_model`)."""
    if cell is not None and get(cell.arm.name).kind != "prompt" and not get_engine(cfg.engine).hf_model:
        return DEFAULT
    return cfg.engine


def _power_rows(cell_key: str, cell: Cell | None, base: pd.DataFrame, resp: pd.DataFrame | None, resamples: int,
                seed: int) -> list[dict]:
    """Per power metric, the paired SE and the MDE at 80% power (:func:`evenhand.scoring.power.paired_se`): from the
    cell's paired difference with the baseline, or for the baseline from itself alone (its stated assumption)."""
    ident = _identity(cell_key, cell)
    rows = []
    for m, p in paired_se(base, resp, resamples=resamples, seed=seed).items():
        for stat, v in (("paired_se", p.se), ("mde", p.mde)):
            rows.append({**ident, "metric": m, "stat": stat, "value": v, "ci_low": None, "ci_high": None,
                         "n": p.n_scenarios, "note": p.assumption})
    return rows


def _norm_rows(grid: list[Cell], run: RunDir, train_ids: list[str]) -> list[dict]:
    """One ``operator_norm`` row per site of every eraser cell (``ace``, ``leace`` and their random controls):
    the spectral norm of the map's linear part (:func:`interventions.steered.eraser_norms`), read from the
    cell's saved fit, so that a method and its controls are seen to move activations by comparable amounts."""
    from interventions.steered import eraser_norms  # deferred: pulls in torch
    rows = []
    for c in grid:
        if c.arm.name not in ("ace", "leace"):
            continue
        fdir = run.fitted_dir(c.fit_dir(train_ids))
        if not (fdir / "fitted.json").exists():
            continue
        for site, norm in eraser_norms(Fitted.load(fdir)).items():
            rows.append({**_identity(c.key, c), "metric": site, "stat": "operator_norm", "value": float(norm)})
    return rows


def watched_models(lm, fit_lm, digests: dict[int, tuple]) -> list:
    """The Hugging Face models a cell decides (``lm``) and fits (``fit_lm``) on, each with its weights digest
    (:func:`interventions.model_state.weights_digest`) taken the first time a cell uses it."""
    from interventions.model_state import weights_digest
    out = []
    for m in (getattr(lm, "model", None), getattr(fit_lm, "model", None)):
        if hasattr(m, "named_parameters") and all(m is not w for w in out):
            if id(m) not in digests:
                digests[id(m)] = (m, weights_digest(m))
            out.append(m)
    return out


def write_restore(path: Path, method, cell: Cell, watched: list, digests: dict[int, tuple], n_items: int,
                   fit_s: float, decide_s: float) -> None:
    """``restore.json`` of a cell: whether every watched model's weights are bit-identical to when it was loaded
    (a full digest; the base class's hook and parameter check ran on every fit and ``apply`` and raised on any
    difference), the hooks left on it, and the cell's fit and decision seconds. A difference raises after the
    record is written."""
    from evenhand.runs.rundir import write_json_atomic
    from interventions.model_state import weights_digest
    checks = []
    for m in watched:
        after = weights_digest(m)
        hooks = sum(len(getattr(mod, k, {}) or {}) for mod in m.modules()
                    for k in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks"))
        checks.append({"model": type(m).__name__, "digest_before": digests[id(m)][1], "digest_after": after,
                       "bit_identical": after == digests[id(m)][1], "hooks_after": hooks})
    exact = all(c["bit_identical"] for c in checks) if checks else None
    write_json_atomic(path, {"cell": cell.key, "intervention": method.name, "kind": method.kind,
                             "restored_bit_exactly": exact, "checks": checks,
                             "base_class_check": method.kind != "prompt", "items": n_items,
                             "fit_seconds": round(fit_s, 3), "decide_seconds": round(decide_s, 3)})
    if exact is False:
        raise InterventionError(f"{cell.key}: the model's weights differ from when it was loaded ({path})")


def _fitted(method, cell: Cell, lm, train: pd.DataFrame, train_ids: list[str], run: RunDir,
            cache: dict[str, Fitted], progress: str | None) -> Fitted:
    """The cell's fit: from memory, from the run's ``fitted/<fit dir>`` (checked against the fit key), or fitted
    and saved.

    A fit is cached under its fit key (a hash of the fit options, the seed and the train item ids) in
    ``fitted/<name>-<key>/``, so a swept fit option gets one fit per value and a swept apply option reuses one fit.
    A random control (of a direction-based method) is derived from the method's own fit (fitted first if needed),
    in ``fitted/<name>-<key>-random/``."""
    name = cell.fit_dir(train_ids)
    if name in cache:
        return cache[name]
    fit_opts, _ = method.split_options(cell.options)
    key = fit_key(method.name, fit_opts, cell.seed, train_ids)
    fdir = run.fitted_dir(name)
    if (fdir / "fitted.json").exists():
        fitted = Fitted.load(fdir)
        if fitted.key != key or fitted.name != method.name or (fitted.control == "random") != bool(cell.control):
            raise InterventionError(f"{fdir} holds a fit with another key ({fitted.key[:16]}), not {key[:16]}")
    elif cell.control:
        own = _fitted(method, Cell(cell.arm, cell.options, cell.seed, 0), lm, train, train_ids, run, cache,
                      progress)
        fitted = method.random_control(own, cell.control_seed)
        fitted.save(fdir)
    else:
        if progress is not None:
            print(f"{progress}fitting {name}", flush=True)
        fitted = method.fit(lm, train, fit_opts, seed=cell.seed, progress=progress is not None)
        fitted.save(fdir)
    cache[name] = fitted
    return fitted


@register
class CompareStudy(Study):
    """The interventions comparison as a study (``kind: compare``): :func:`parse_config`,
    :func:`compare_stages`, :func:`run_compare`, and the text ``evenhand compare CONFIG`` prints."""

    kind = "compare"
    tables = (RunDir("").compare_table.name,)

    def parse(self, data, where: str = "config") -> CompareConfig:
        return parse_config(dict(data), where)

    def stages(self, cfg: CompareConfig, progress: bool = True) -> list:
        return compare_stages(cfg, resolve_spec(cfg.model), item_sets(cfg), progress)

    def run(self, cfg: CompareConfig, progress: bool = True, backend: str = "local", **backend_options) -> pd.DataFrame:
        if backend not in self.backends:
            raise ConfigError(f"a comparison runs on the {' or '.join(self.backends)} backend, not {backend!r}")
        return run_compare(cfg, progress=progress)

    def text(self, cfg: CompareConfig, result: pd.DataFrame) -> str:
        """One line per cell (:func:`.text.compare_text`), the chosen settings, the power block and the files
        written."""
        blocks = [compare_text(result)] + [b for b in (selection_text(result), power_text(result)) if b]
        blocks.append(f"wrote {cfg.output_dir}/compare.parquet (+ .csv), frontier.pdf/.svg/.png, cells/, fitted/")
        return "\n\n".join(blocks)
