"""The ``evenhand`` command: a thin layer over the Python API."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import __version__


def _suite_stats(a) -> int:
    from .suite.stats import suite_stats
    st = suite_stats(a.subset, a.seed)
    if a.json:
        print(json.dumps(st, indent=2))
        return 0
    print(f"EvenHand suite {st['suite_version']}")
    for k in ("scenarios", "domains", "contrasts", "degrees", "pressure_families", "pressure_sentences",
              "negative_polarity_scenarios", "items_per_cell", "cells_full", "items_full"):
        print(f"  {k:<30} {st[k]:,}")
    if a.subset:
        print(f"  items in subset {a.subset!r} (seed {a.seed}): {st['items_subset']:,}")
        for k, v in st["subset_breakdown"].items():
            if k not in ("domain", "contrast_id"):
                print(f"    by {k}: " + ", ".join(f"{kk}={vv}" for kk, vv in v.items()))
    return 0


def _suite_export(a) -> int:
    from .suite.export import items_for, write_items
    t0 = time.perf_counter()
    n = write_items(items_for(a.subset, a.seed), a.out, a.limit)
    print(f"wrote {n:,} items of {a.subset!r} (seed {a.seed}) to {a.out} in {time.perf_counter() - t0:.1f}s")
    return 0


def _suite_show(a) -> int:
    from .suite.generate import item_by_id
    item = item_by_id(a.item_id)
    if a.json:
        print(json.dumps(item, indent=2, ensure_ascii=False))
        return 0
    print(item.pop("prompt"))
    print("-" * 72)
    for k, v in item.items():
        print(f"{k:<24} {v}")
    return 0


def _suite_datasheet(a) -> int:
    from .suite.stats import datasheet
    text = datasheet()
    if a.out:
        from .runs import atomic_open
        with atomic_open(Path(a.out)) as (fh, _):
            fh.write(text)
        print(f"wrote {a.out}")
    else:
        print(text, end="")
    return 0


def _suite_validate(a) -> int:
    from .suite.content import validate_content
    from .suite.validate import validate_suite
    problems = validate_content()
    n, item_problems = validate_suite(full=a.full)
    for p in problems + item_problems[:50]:
        print(p)
    total = len(problems) + len(item_problems)
    print(f"content checked; {n:,} rendered items checked; {total} problem(s)")
    return 1 if total else 0


def _suite_import(a) -> int:
    from .runs import write_table_atomic
    from .suite.fairstress import load_fairstress, released_disagreements
    df = load_fairstress(a.rows, a.corrections)
    write_table_atomic(Path(a.out), df)
    ex = df["exclusion_reason"].value_counts().to_dict()
    print(f"wrote {len(df):,} rows to {a.out}; excluded: {ex or 'none'}; negative-polarity scenarios: "
          f"{df.loc[df['question_polarity'] == 'negative', 'scenario_id'].nunique()}")
    print(f"pressured rows without a matching baseline: {(df['baseline_id'] == 'missing-baseline').sum():,}; "
          f"released resolved/targets differing from METRICS.md on positive questions: {released_disagreements(df)}")
    return 0


def _score(a) -> int:
    from .metrics import score
    from .report import score_table
    from .schema import load_rows
    df = load_rows(a.file)
    report = score(df, contrast_type=a.contrast_type, resamples=a.resamples, seed=a.seed)
    if a.json:
        print(json.dumps(report, indent=2))
    else:
        print(score_table(report))
    return 0


def _compare(a) -> int:
    if a.other is None:
        if not str(a.base).endswith((".yaml", ".yml")):
            raise ValueError("compare takes a comparison config (.yaml) or two response files (BASE OTHER)")
        return _compare_interventions(a)
    from .metrics import compare
    from .report import compare_table
    from .schema import load_rows
    result = compare(load_rows(a.base), load_rows(a.other), contrast_type=a.contrast_type, resamples=a.resamples,
                     seed=a.seed)
    print(json.dumps(result, indent=2) if a.json else compare_table(result))
    return 0


def _compare_interventions(a) -> int:
    from interventions.compare import load_config, run_compare
    cfg = load_config(a.base)
    table = run_compare(cfg, progress=not a.no_progress)
    print(_compare_text(table))
    print(f"\nwrote {cfg.output_dir}/compare.parquet (+ .csv), frontier.pdf/.svg/.png, cells/, fitted/")
    return 0


def _compare_text(table) -> str:
    def f(r):
        if r is None or r["value"] is None or r["value"] != r["value"]:
            return "NaN"
        lo, hi = r["ci_low"], r["ci_high"]
        ci = "" if lo is None or lo != lo else f" [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        return f"{100 * r['value']:+.1f}{ci}"
    lines = [f"{'cell':<44}{'FragGap':>10}{'|FragGap| reduction [CI]':>28}{'accuracy loss [CI]':>26}{'McNemar p':>11}"]
    for cell, g in table.groupby("cell", sort=False):
        idx = {(r.metric, r.stat): r._asdict() for r in g.itertuples()}
        fg = idx.get(("fraggap", "value"))
        p = idx.get(("accuracy", "mcnemar_p"))
        fgv = "NaN" if fg is None or fg["value"] is None else f"{100 * fg['value']:+.1f}"
        red = f(idx.get(("fraggap", "asymmetry_reduction"))) if cell != "baseline" else "-"
        loss = f(idx.get(("accuracy", "accuracy_loss"))) if cell != "baseline" else "-"
        pv = "-" if p is None else f"{p['value']:.3g}"
        lines.append(f"{cell:<44}{fgv:>10}{red:>28}{loss:>26}{pv:>11}")
    return "\n".join(lines)


def _bbq(a) -> int:
    from .bbq.run import load_config, run_bbq
    cfg = load_config(a.config)
    table = run_bbq(cfg, progress=not a.no_progress)
    t = table[(table["category"] == "all")]
    print(f"BBQ on {cfg.model}: all categories pooled (95% CIs over templates)")
    print(f"{'configuration':<18}{'acc ambig':>12}{'acc disamb':>12}{'bias ambig [CI]':>24}{'bias disamb [CI]':>24}")
    for conf, g in t.groupby("configuration", sort=False):
        v = g.set_index("metric")
        def ci(m):
            r = v.loc[m]
            return f"{r['value']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]" if r["value"] == r["value"] else "NaN"
        print(f"{conf:<18}{v.loc['acc_ambig', 'value']:>12.3f}{v.loc['acc_disambig', 'value']:>12.3f}"
              f"{ci('bias_ambig'):>24}{ci('bias_disambig'):>24}")
    print(f"\nwrote {cfg.output_dir}/bbq_scores.parquet (+ .csv), answers.parquet, bias_by_configuration.pdf/svg/png")
    return 0


def _modes(a) -> int:
    from .modes import mode_switch
    out, spec, items, lm = _prepare(a)
    table, _ = mode_switch(items, lm, out, a.batch_size, spec.chat_template, a.resamples, progress=not a.no_progress)
    from .runs import RunDir, write_table_atomic
    write_table_atomic(RunDir(out).mode_switch_csv, table)
    print(f"{lm.name}: {len(items):,} items decided in answer and logprob mode (95% CIs; difference paired)")
    for metric, g in table.groupby("metric", sort=False):
        parts = []
        for r in g.itertuples():
            v = "NaN" if r.value is None or r.value != r.value else f"{100 * r.value:+.1f}"
            ci = "" if r.ci_low is None or r.ci_low != r.ci_low else f" [{100 * r.ci_low:+.1f}, {100 * r.ci_high:+.1f}]"
            parts.append(f"{r.stat} {v}{ci}")
        print(f"  {metric:<9} " + "; ".join(parts))
    print(f"  TieLean on opposite sides of 0.5 (CIs excluding it): {'yes' if table.attrs['flips'] else 'no'}")
    print(f"\nwrote {out}/mode_switch.csv, answer/, logprob/")
    return 0


def _figures(a) -> int:
    from .figures import run_figures
    formats = [f.strip() for f in a.format.split(",") if f.strip()]
    paths = run_figures(a.run_dirs, a.out, formats, a.resamples)
    for p in paths:
        print(p)
    return 0


def _report_page(a) -> int:
    from .pages import write_report
    md, page = write_report(a.run_dir, a.resamples)
    print(md.read_text().split("## By degree")[0].rstrip())
    print(f"\nwrote {md} and {page}")
    return 0


def _runs_list(a) -> int:
    root = Path(a.directory)
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")
    from .runs import RunDir
    rows = []
    for run in RunDir.find(root):
        man, m = run.manifest(), run.manifest_path
        model = (man.get("model") or {}).get("name") if isinstance(man.get("model"), dict) else man.get("model")
        secs = sum(v for v in (man.get("timings") or {}).values() if isinstance(v, (int, float)))
        rows.append((str(m.parent.relative_to(root)) or ".", man.get("status"), model or "-",
                     man.get("n_items", man.get("n_eval_items", "-")), f"{secs:.0f}s",
                     (man.get("git") or {}).get("sha", "-")[:10] if isinstance(man.get("git"), dict) else "-"))
    if not rows:
        print(f"no runs under {root}")
        return 0
    print(f"{'run':<44}{'status':<9}{'model':<28}{'items':>8}{'time':>8}  git")
    for r in rows:
        print(f"{r[0]:<44}{r[1]:<9}{str(r[2])[:27]:<28}{str(r[3]):>8}{r[4]:>8}  {r[5]}")
    return 0


def _interventions_list(a) -> int:
    from interventions.base import registered
    rows = registered()
    if a.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['name']:<18}{r['kind']:<12}{r['description']}")
    return 0


def _simulate(a) -> int:
    from .models.simulated import PlantedBias
    from .report import score_table
    from .simulate import simulate_run
    overrides = {}
    for kv in a.planted or []:
        key, _, val = kv.partition("=")
        overrides[key] = float(val)
    bias = PlantedBias(**overrides)
    run, report = simulate_run(a.out, a.subset, a.seed, a.model_seed, bias, a.form, a.resamples)
    print(score_table(report, truth={int(d): v for d, v in report["planted_truth"].items()}))
    print(f"\nrun directory: {run.path} (manifest.json, responses.parquet, metrics.json)")
    return 0


def _coverage(a) -> int:
    import pandas as pd

    from .models.simulated import PlantedBias
    from .simulate import coverage_study
    from .suite.subsets import iter_subset
    items = pd.DataFrame([it for it in iter_subset(a.subset, 0) if it["degree"] == a.degree
                          and it["contrast_type"] == "type1"])
    res = coverage_study(items, PlantedBias(), a.seeds, a.resamples, a.degree)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{len(items):,} items ({a.subset}, degree {a.degree}, type1); {a.seeds} model seeds; "
          f"{a.resamples} bootstrap resamples each")
    for m, r in res.items():
        print(f"  {m:<9} planted {100 * r['planted']:+6.1f}  mean estimate {100 * r['mean_estimate']:+6.1f}  "
              f"95% CI covered the planted value in {r['covered']}/{r['seeds']} runs ({100 * r['coverage']:.0f}%)")
    return 0


def _run(a) -> int:
    from experiments.config import read_yaml
    from experiments.sweep import run_sweep, study_kind

    from .report import score_table
    data = read_yaml(a.config)
    ray_options = {"address": a.address, "workers": a.workers, "gpus_per_worker": a.gpus_per_worker}
    if "sweep" in data:
        out, table = run_sweep(data, a.backend, progress=not a.quiet, ray_options=ray_options)
        print(f"sweep: {table['cell'].nunique()} cells, {len(table):,} rows in {out / 'sweep.parquet'} (+ .csv); "
              f"figures: `evenhand figures {out}`")
        return 0
    kind = study_kind(data)
    if kind != "run" and a.backend != "local":
        raise ValueError(f"a {kind} config runs on the local backend only")
    if kind == "bbq":
        return _bbq(argparse.Namespace(config=a.config, no_progress=a.quiet))
    if kind == "compare":
        from interventions.compare import parse_config, run_compare
        cfg = parse_config(data, str(a.config))
        table = run_compare(cfg, progress=not a.quiet)
        print(_compare_text(table))
        print(f"\nwrote {cfg.output_dir}/compare.parquet (+ .csv), frontier.pdf/.svg/.png, cells/, fitted/")
        return 0
    from experiments.config import config_from_dict
    from experiments.runner import run_config
    cfg = config_from_dict(data)
    if a.backend == "ray":
        from experiments.ray_backend import run_config_ray
        run, report = run_config_ray(cfg, progress=not a.quiet, **ray_options)
    else:
        run, report = run_config(cfg, progress=not a.quiet)
    print(score_table(report))
    print(f"\nrun directory: {run.path}")
    return 0


def _model_spec(a):
    from .models.loading import ModelSpec
    return ModelSpec(a.model, dtype=a.dtype, device=a.device, attn_implementation=a.attn_implementation,
                     trust_remote_code=a.trust_remote_code, chat_template=a.chat_template)


def _items(a):
    from experiments.config import SuiteConfig
    from experiments.runner import suite_items
    return suite_items(SuiteConfig(subset=a.subset, seed=a.seed, limit=a.limit))


def _prepare(a):
    """The shared start of `decide` and `cache`: cheap checks first, then items and the model."""
    from experiments.runner import check_output_dir

    from .models.loading import load_model, locate, resolve_spec
    out = check_output_dir(a.out)
    spec = resolve_spec(_model_spec(a))
    locate(spec)
    items = _items(a)
    return out, spec, items, load_model(spec)


def _decide(a) -> int:
    from .decide import DecideOptions, decide
    from .runs import RunDir
    out, spec, items, lm = _prepare(a)
    opts = DecideOptions(mode=a.mode, batch_size=a.batch_size, max_new_tokens=a.max_new_tokens,
                         reasoning_max_new_tokens=a.reasoning_max_new_tokens, chat_template=spec.chat_template,
                         prefix_reuse=a.prefix_reuse)
    table = decide(items, lm, opts, out_dir=out)
    resp = RunDir(out).write_responses(table)
    answered = table["choice"].notna().mean()
    print(f"{len(table):,} responses in {resp} ({answered:.1%} with an A/B choice); "
          f"score them with `evenhand score {resp}`")
    return 0


def _cache(a) -> int:
    from .activations import CacheOptions, cache_activations
    from .suite.content import load_content
    out, spec, items, lm = _prepare(a)
    opts = CacheOptions(sites=tuple(a.sites), batch_size=a.batch_size, dtype=a.cache_dtype, name_mean=a.name_mean,
                        chat_template=spec.chat_template)
    cache = cache_activations(items, lm, opts, out, load_content().version, engine=a.engine)
    print(f"cached {len(cache.item_ids()):,} items x {len(cache.sites)} sites ({a.cache_dtype}) in {out}")
    return 0


def _probe_filters(a) -> dict:
    f = {}
    if a.degree is not None:
        f["degree"] = a.degree
    if a.condition:
        f["condition"] = a.condition
    if a.contrast:
        f["contrast_id"] = a.contrast
    if a.pressured is not None:
        f["pressured"] = a.pressured == "yes"
    return f


def _probe_options(a):
    from probes.logistic import ProbeOptions
    return ProbeOptions(folds=a.folds, inner_folds=a.inner_folds, engine=a.engine, device=a.device, seed=a.seed)


def _probe_sweep(a) -> int:
    from probes.dataset import from_run
    from probes.sweep import probe_sweep, write_sweep
    ds = from_run(a.run_dir, a.label, a.sites, _probe_filters(a))
    opts = _probe_options(a)
    table, _ = probe_sweep(ds, opts, control=not a.no_control, resamples=a.resamples, text=a.text)
    from .runs import RunDir
    out = Path(a.out) if a.out else RunDir(a.run_dir).probe_dir(a.label).path
    write_sweep(table, out, ds, opts, run_dir=str(a.run_dir))
    print(_probe_text(table, ds))
    print(f"\nwrote {out}/probes.parquet (+ .csv, manifest.json) in {table.attrs['seconds']:.1f}s")
    return 0


def _probe_text(table, ds) -> str:
    import numpy as np
    lines = [f"probe {ds.label}: n={len(ds)} rows, {len(np.unique(ds.groups))} scenarios"
             f"{' (filters ' + str(ds.filters) + ')' if ds.filters else ''}; {ds.dropped} unlabelled rows dropped",
             f"{'site':<22}{'accuracy [95% CI]':>26}{'AUROC [95% CI]':>24}{'control':>10}{'majority':>10}"]
    wide = {(r.site, r.metric): r for r in table.itertuples()}
    for site in dict.fromkeys(table["site"]):
        def fmt(m, pct=True):
            r = wide.get((site, m))
            if r is None:
                return "-"
            k = 100 if pct else 1
            if r.ci_low != r.ci_low:
                return f"{k * r.value:.1f}" if pct else f"{r.value:.2f}"
            return (f"{k * r.value:.1f} [{k * r.ci_low:.1f}, {k * r.ci_high:.1f}]" if pct
                    else f"{r.value:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]")
        ctl = wide.get((site, "control_accuracy"))
        lines.append(f"{site:<22}{fmt('accuracy'):>26}{fmt('auroc', False):>24}"
                     f"{'-' if ctl is None else f'{100 * ctl.value:.1f}':>10}{fmt('majority_baseline'):>10}")
    return "\n".join(lines)


def _probe_ablation(a) -> int:
    from probes.ablation import name_ablation
    from .runs import RunDir
    out = Path(a.out) if a.out else RunDir(a.run_dir).ablation_dir(a.variant).path
    table = name_ablation(a.run_dir, out, a.variant, a.label, a.degree, a.sites, _probe_options(a), a.resamples,
                          a.batch_size)
    for site in dict.fromkeys(table["site"]):
        t = table[table["site"] == site].set_index("metric")
        parts = [f"{m.replace('_accuracy', '')} {100 * t.loc[m, 'value']:.1f} "
                 f"[{100 * t.loc[m, 'ci_low']:.1f}, {100 * t.loc[m, 'ci_high']:.1f}]"
                 for m in ("original_accuracy", "transfer_accuracy", "retrained_accuracy", "drop_transfer",
                           "drop_retrained")]
        print(f"{site:<22}" + "; ".join(parts) + f" (n={int(t.loc['original_accuracy', 'n'])})")
    print(f"\nwrote {out}/ablation.parquet (+ .csv, manifest.json, responses.parquet, activations/)")
    return 0


def _probe_attribution(a) -> int:
    from probes.attribution import run_attribution
    from .runs import RunDir
    out = Path(a.out) if a.out else RunDir(a.run_dir).attribution_dir.path
    table = run_attribution(a.run_dir, out, a.degree, a.batch_size, a.resamples, a.seed, progress=not a.no_progress)
    t = table[(table["degree"] == "all") & (table["pressure"] == "all") & (table["chosen"] == "all")]
    total = t[t["component"] == "logit_diff"]
    if len(total):
        r = total.iloc[0]
        print(f"logit difference (favoured-minority label minus the other): {r['value']:+.3f} "
              f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] (n={int(r['n'])})")
    top = t[t["component"].isin(["attn_out", "mlp_out"])].assign(mag=lambda d: d["value"].abs())
    print("largest direct contributions:")
    for r in top.sort_values("mag", ascending=False).head(6).itertuples():
        print(f"  {r.site:<22}{r.value:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]")
    print(f"\nwrote {out}/attribution.parquet (+ .csv, attribution_items.parquet, manifest.json, figures)")
    return 0


def _organism_train(a) -> int:
    from dataclasses import replace

    from probes.organism import evaluate

    from .models.organism import COMMITTED, Recipe, train
    recipe = Recipe(seed=a.seed) if a.steps is None else replace(Recipe(seed=a.seed), steps=a.steps)
    out = Path(a.out) if a.out else COMMITTED
    record = train(recipe, out)
    print(f"trained in {record['train_seconds']:.0f}s ({record['parameters']:,} parameters, "
          f"{record['train_examples']:,} examples); final answer loss {record['curve'][-1]['loss']:.4f}; wrote {out}")
    if not a.no_eval:
        res = evaluate(out, n_scenarios=a.eval_scenarios)
        _print_eval(res)
        _record_eval(out, res)
    return 0


def _record_eval(out: Path, res: dict) -> None:
    """Store a held-out evaluation in the organism's organism.json (without the probe's full table)."""
    f = out / "organism.json"
    rec = json.loads(f.read_text())
    rec["heldout_eval"] = {k: v for k, v in res.items() if k != "probe"} | {
        "probe": {k: v for k, v in res["probe"].items() if k != "table"}}
    f.write_text(json.dumps(rec, indent=1) + "\n")


def _print_eval(res: dict) -> None:
    print(f"held-out: {res['heldout_scenarios']} scenarios, {res['n_items']:,} items; agreement with the planted "
          f"policy {res['agreement_with_policy']:.1%} (GT baseline items {res['agreement_gt_baseline']:.1%}); "
          f"answered {res['answered']:.1%}")
    if "gt_accuracy" in res:
        e, t = res["gt_accuracy"]["measured"], res["gt_accuracy"]["planted"]
        print(f"  GT accuracy without pressure, all degrees: {100 * e['value']:.1f} [{100 * e['ci_low']:.1f}, "
              f"{100 * e['ci_high']:.1f}] (planted {100 * t:.1f}, n={e['n']})")
    for d, row in res["by_degree"].items():
        parts = []
        for m, v in row.items():
            e, t = v["measured"], v["planted"]
            val = "NaN" if e["value"] is None else f"{100 * e['value']:.1f}"
            ci = "" if e["ci_low"] is None else f" [{100 * e['ci_low']:.1f}, {100 * e['ci_high']:.1f}]"
            pl = "NaN" if t is None else f"{100 * t:.1f}"
            parts.append(f"{m} {val}{ci} (planted {pl}, n={e['n']})")
        print(f"  D{d}: " + "; ".join(parts))
    p = res["probe"]
    b = p["best"]
    print(f"  probe favours_minority (degree {p['degree']}, n={p['n']}): best site {p['best_site']} accuracy "
          f"{100 * b['accuracy']['value']:.1f} [{100 * b['accuracy']['ci_low']:.1f}, "
          f"{100 * b['accuracy']['ci_high']:.1f}], AUROC {b['auroc']['value']:.2f}, shuffled-label control "
          f"{100 * b['control_accuracy']['value']:.1f}, majority baseline {100 * b['majority_baseline']['value']:.1f}")


def _organism_eval(a) -> int:
    from probes.organism import evaluate

    from .models.organism import COMMITTED
    path = Path(a.path) if a.path else COMMITTED
    res = evaluate(path, n_scenarios=a.scenarios, resamples=a.resamples)
    if a.record:
        _record_eval(path, res)
    if a.json:
        print(json.dumps(res, indent=2, default=str))
    else:
        _print_eval(res)
    return 0


def _organism_items(a) -> int:
    from .models.organism import COMMITTED, heldout_items
    from .runs import write_table_atomic
    record = json.loads((Path(a.path) if a.path else COMMITTED).joinpath("organism.json").read_text())
    items = heldout_items(record, a.scenarios, a.degrees, a.seed)
    out = Path(a.out)
    write_table_atomic(out, items)
    print(f"wrote {len(items):,} items of {items['scenario_id'].nunique()} held-out scenarios to {out}")
    return 0


def _demo(a) -> int:
    from experiments.config import CacheConfig, RunConfig, SuiteConfig
    from experiments.runner import run_config, suite_items

    from .models.loading import ModelSpec
    from .models.organism import COMMITTED, heldout_items
    from .models.policy import PlantedPolicy, planted_truth
    from .report import score_table
    from .runs import write_table_atomic
    print("EvenHand demo: the model organism (a small Gemma3ForCausalLM trained from scratch to follow a planted,\n"
          "known policy) answers held-out scenarios through the real pipeline: loading, chat template, batched\n"
          "greedy decisions, parsing, metrics with CIs, the residual cache and a probe sweep. Its numbers validate\n"
          "the tool against known answers; they say nothing about any real model.\n")
    record = json.loads((COMMITTED / "organism.json").read_text())
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    items_file = out / "items.parquet"
    if not items_file.exists():
        write_table_atomic(items_file, heldout_items(record, a.scenarios, seed=0))
    cfg = RunConfig(model=ModelSpec("evenhand-organism"), output_dir=str(out / "run"),
                    suite=SuiteConfig(subset=str(items_file)), mode="answer", batch_size=64,
                    cache=CacheConfig(enabled=True, dtype="float32"))
    run, report = run_config(cfg, progress=not a.no_progress)
    truth = planted_truth(PlantedPolicy.from_dict(record["recipe"]["policy"]), suite_items(cfg.suite),
                          report["contrast_type"])
    print(score_table(report, truth=truth))
    from .runs import write_json_atomic
    write_json_atomic(run.planted_truth_path, {str(k): v for k, v in truth.items()})
    print("'planted' is the policy's own value on these same items.\n")
    from probes.dataset import from_run
    from probes.logistic import ProbeOptions
    from probes.sweep import probe_sweep, write_sweep
    ds = from_run(run.path, "favours_minority", filters={"degree": 3, "pressured": False})
    table, _ = probe_sweep(ds, ProbeOptions(), resamples=1000)
    write_sweep(table, run.probe_dir("favours_minority").path, ds, ProbeOptions(), run_dir=str(run.path))
    print(_probe_text(table, ds))
    print(f"\nrun directory: {run.path} (manifest.json, responses.parquet, metrics.json, activations/, probes/)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evenhand", description="Measure asymmetric demographic bias in LLM decisions.")
    p.add_argument("--version", action="version", version=f"evenhand {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    suite = sub.add_parser("suite", help="the decision suite").add_subparsers(dest="suite_command", required=True)
    s = suite.add_parser("stats", help="counts of the suite (and of a subset)")
    s.add_argument("--subset", choices=["smoke", "core"])
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=_suite_stats)
    s = suite.add_parser("export", help="write a subset's items to JSONL or parquet")
    s.add_argument("--subset", required=True, choices=["smoke", "core", "full"])
    s.add_argument("--out", required=True, help="FILE.jsonl or FILE.parquet")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--limit", type=int, default=None, help="stop after this many items")
    s.set_defaults(fn=_suite_export)
    s = suite.add_parser("show", help="one item's prompt and fields")
    s.add_argument("item_id")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=_suite_show)
    s = suite.add_parser("datasheet", help="the generated datasheet (Markdown)")
    s.add_argument("--out")
    s.set_defaults(fn=_suite_datasheet)
    s = suite.add_parser("validate", help="check the content and rendered items")
    s.add_argument("--full", action="store_true", help="also every cell's baseline (slow)")
    s.set_defaults(fn=_suite_validate)
    s = suite.add_parser("import-fairstress", help="map released FairStress rows onto EvenHand's schema")
    s.add_argument("rows", help="released rows, .jsonl or .parquet")
    s.add_argument("--corrections", help="the maintainers' corrections JSON")
    s.add_argument("--out", required=True, help="FILE.jsonl or FILE.parquet")
    s.set_defaults(fn=_suite_import)

    def boot(x):
        x.add_argument("--contrast-type", choices=["type1", "type23"], default=None,
                       help="never pooled; default type1 when present")
        x.add_argument("--json", action="store_true")
        x.add_argument("--resamples", type=int, default=1000)
        x.add_argument("--seed", type=int, default=0)

    s = sub.add_parser("score", help="metrics with cluster-bootstrap CIs from a responses file")
    s.add_argument("file", help=".jsonl or .parquet rows with item fields and choice or text")
    boot(s)
    s.set_defaults(fn=_score)
    s = sub.add_parser("compare", help="interventions against the baseline (CONFIG.yaml), or two runs (BASE OTHER)")
    s.add_argument("base", help="a comparison config (.yaml), or the base run's responses")
    s.add_argument("other", nargs="?", default=None, help="the other run's responses (two-run form)")
    s.add_argument("--no-progress", action="store_true")
    boot(s)
    s.set_defaults(fn=_compare)
    s = sub.add_parser("simulate", help="run the simulated model with planted biases")
    s.add_argument("--subset", choices=["smoke", "core"], default="smoke")
    s.add_argument("--out", default="runs/simulated")
    s.add_argument("--seed", type=int, default=0, help="suite subset seed")
    s.add_argument("--model-seed", type=int, default=0)
    s.add_argument("--form", choices=["stochastic", "deterministic", "policy"], default="stochastic",
                   help="policy: the deterministic planted policy (evenhand/models/policy.py)")
    s.add_argument("--resamples", type=int, default=1000)
    s.add_argument("--planted", nargs="*", metavar="KEY=VALUE", help="override PlantedBias fields")
    s.set_defaults(fn=_simulate)
    s = sub.add_parser("coverage", help="CI coverage of the planted values over many simulated-model seeds")
    s.add_argument("--subset", choices=["smoke", "core"], default="core")
    s.add_argument("--degree", type=int, choices=[0, 1, 2, 3], default=3)
    s.add_argument("--seeds", type=int, default=50)
    s.add_argument("--resamples", type=int, default=400)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=_coverage)
    s = sub.add_parser("run", help="run a YAML config: suite -> decisions -> metrics (-> cache -> probes -> "
                                   "ablation -> figures); a comparison config; or a sweep of either")
    s.add_argument("config")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.add_argument("--backend", default="local", choices=["local", "ray"])
    s.add_argument("--address", default=None, help="ray: a cluster address (default: start a local one)")
    s.add_argument("--workers", type=int, default=2, help="ray: model-holding actors")
    s.add_argument("--gpus-per-worker", type=float, default=0.0, help="ray: GPUs per actor")
    s.set_defaults(fn=_run)

    def model_args(x):
        x.add_argument("--model", required=True, help="Hugging Face id, local directory, .gguf file or preset")
        x.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
        x.add_argument("--device", default="auto")
        x.add_argument("--attn-implementation", default=None)
        x.add_argument("--trust-remote-code", action="store_true")
        x.add_argument("--chat-template", default="auto", choices=["auto", "none"])
        x.add_argument("--subset", default="smoke", help="smoke, core or an items file")
        x.add_argument("--seed", type=int, default=0)
        x.add_argument("--limit", type=int, default=None)
        x.add_argument("--out", required=True)
        x.add_argument("--batch-size", type=int, default=8)

    s = sub.add_parser("decide", help="decisions only (resumable), written to OUT/responses.parquet")
    model_args(s)
    s.add_argument("--mode", default="answer", choices=["answer", "reasoning", "logprob"])
    s.add_argument("--max-new-tokens", type=int, default=8)
    s.add_argument("--reasoning-max-new-tokens", type=int, default=512)
    s.add_argument("--prefix-reuse", action="store_true",
                   help="run each cell's shared prompt prefix once and reuse its KV cache (same decisions)")
    s.set_defaults(fn=_decide)
    s = sub.add_parser("cache", help="activation cache only (resumable)")
    model_args(s)
    s.add_argument("--sites", nargs="+", default=["residual"])
    s.add_argument("--cache-dtype", default="float16", choices=["float16", "float32"])
    s.add_argument("--name-mean", action="store_true")
    s.add_argument("--engine", default="nnsight", choices=["nnsight", "transformer_lens"])
    s.set_defaults(fn=_cache)
    org = sub.add_parser("organism", help="the model organism with planted biases").add_subparsers(
        dest="organism_command", required=True)
    s = org.add_parser("train", help="train it from its recipe (deterministic from --seed)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default=None, help="default: the committed organism's directory")
    s.add_argument("--steps", type=int, default=None)
    s.add_argument("--eval-scenarios", type=int, default=None, help="held-out scenarios to evaluate (default all)")
    s.add_argument("--no-eval", action="store_true")
    s.set_defaults(fn=_organism_train)
    s = org.add_parser("eval", help="known-answer checks on held-out scenarios")
    s.add_argument("--path", default=None)
    s.add_argument("--scenarios", type=int, default=None)
    s.add_argument("--resamples", type=int, default=1000)
    s.add_argument("--json", action="store_true")
    s.add_argument("--record", action="store_true",
                   help="store the result in the organism's organism.json (as `organism train` does)")
    s.set_defaults(fn=_organism_eval)
    s = org.add_parser("items", help="write the matched item set of its held-out scenarios (.jsonl/.parquet)")
    s.add_argument("--out", required=True)
    s.add_argument("--path", default=None)
    s.add_argument("--scenarios", type=int, default=None)
    s.add_argument("--degrees", type=int, nargs="+", default=None)
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(fn=_organism_items)
    s = sub.add_parser("figures", help="paper figures and a LaTeX table from one or more run directories")
    s.add_argument("run_dirs", nargs="+")
    s.add_argument("--format", default="pdf,svg,png")
    s.add_argument("--out", default=None, help="default: RUN_DIR/figures")
    s.add_argument("--resamples", type=int, default=1000)
    s.set_defaults(fn=_figures)
    s = sub.add_parser("report", help="a Markdown and HTML page: headline numbers in words and every figure")
    s.add_argument("run_dir")
    s.add_argument("--resamples", type=int, default=1000)
    s.set_defaults(fn=_report_page)
    rl = sub.add_parser("runs", help="run directories").add_subparsers(dest="runs_command", required=True)
    s = rl.add_parser("list", help="the runs under a directory with their status")
    s.add_argument("directory", nargs="?", default="runs")
    s.set_defaults(fn=_runs_list)
    s = sub.add_parser("modes", help="the suite decided in answer and in logprob mode on one model, compared")
    model_args(s)
    s.add_argument("--resamples", type=int, default=1000)
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(fn=_modes)
    s = sub.add_parser("bbq", help="BBQ asked five ways on one model (CONFIG.yaml)")
    s.add_argument("config")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(fn=_bbq)
    iv = sub.add_parser("interventions", help="the registered debiasing interventions").add_subparsers(
        dest="interventions_command", required=True)
    s = iv.add_parser("list", help="name, kind and description of each")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=_interventions_list)
    pr = sub.add_parser("probe", help="linear probes on a run's activation cache").add_subparsers(
        dest="probe_command", required=True)

    def probe_args(x):
        x.add_argument("run_dir")
        x.add_argument("--label", default="favours_minority",
                       choices=["favours_minority", "correct", "pressure_followed", "slot_a_minority"])
        x.add_argument("--sites", nargs="+", default=None, help="default: every cached site")
        x.add_argument("--engine", default="auto", choices=["auto", "torch", "sklearn"],
                       help="auto: torch on CUDA, scikit-learn on CPU")
        x.add_argument("--device", default="cpu")
        x.add_argument("--folds", type=int, default=5)
        x.add_argument("--inner-folds", type=int, default=3)
        x.add_argument("--resamples", type=int, default=1000)
        x.add_argument("--seed", type=int, default=0)
        x.add_argument("--out", default=None)

    s = pr.add_parser("sweep", help="one probe per site, with a shuffled-label control")
    probe_args(s)
    s.add_argument("--degree", type=int, nargs="+", default=None)
    s.add_argument("--condition", nargs="+", default=None, choices=["GT", "AMB"])
    s.add_argument("--contrast", nargs="+", default=None)
    s.add_argument("--pressured", default=None, choices=["yes", "no"])
    s.add_argument("--no-control", action="store_true")
    s.add_argument("--text", action="store_true",
                   help="also the text baseline: the label from the written reasoning (reasoning-mode runs)")
    s.set_defaults(fn=_probe_sweep)
    s = pr.add_parser("ablation", help="name ablation: re-decide and re-cache without names, compare probes")
    probe_args(s)
    s.add_argument("--variant", default="label", choices=["label", "degree0"])
    s.add_argument("--degree", type=int, default=1)
    s.add_argument("--batch-size", type=int, default=32)
    s.set_defaults(fn=_probe_ablation)
    s = pr.add_parser("attribution", help="direct logit attribution of the decision by layer (TransformerLens)")
    s.add_argument("run_dir")
    s.add_argument("--degree", type=int, nargs="+", default=[1, 2, 3])
    s.add_argument("--batch-size", type=int, default=8)
    s.add_argument("--resamples", type=int, default=1000)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default=None, help="default: RUN_DIR/attribution")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(fn=_probe_attribution)
    s = sub.add_parser("demo", help="the main job on the embedded default")
    s.add_argument("--out", default="runs/demo")
    s.add_argument("--scenarios", type=int, default=20, help="held-out scenarios to run (default 20)")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(fn=_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .models.loading import ModelLoadError
    from .runs import RunError
    from .schema import RowError
    from .suite.content import ContentError
    try:
        return args.fn(args)
    except (RowError, ContentError, RunError, ModelLoadError, KeyError, ValueError, TypeError,
            FileNotFoundError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"evenhand: error: {msg}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
