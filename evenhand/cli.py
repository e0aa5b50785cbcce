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
        from .runs import _atomic
        with _atomic(Path(a.out)) as (fh, _):
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
    from .metrics import compare
    from .report import compare_table
    from .schema import load_rows
    result = compare(load_rows(a.base), load_rows(a.other), contrast_type=a.contrast_type, resamples=a.resamples,
                     seed=a.seed)
    print(json.dumps(result, indent=2) if a.json else compare_table(result))
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
    from experiments.config import load_config
    from experiments.runner import run_config

    from .report import score_table
    cfg = load_config(a.config)
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
    from .runs import write_table_atomic
    out, spec, items, lm = _prepare(a)
    opts = DecideOptions(mode=a.mode, batch_size=a.batch_size, max_new_tokens=a.max_new_tokens,
                         reasoning_max_new_tokens=a.reasoning_max_new_tokens, chat_template=spec.chat_template)
    table = decide(items, lm, opts, out_dir=out)
    write_table_atomic(out / "responses.parquet", table)
    answered = table["choice"].notna().mean()
    print(f"{len(table):,} responses in {out / 'responses.parquet'} ({answered:.1%} with an A/B choice); "
          f"score them with `evenhand score {out / 'responses.parquet'}`")
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


def _demo(a) -> int:
    from .models.simulated import PlantedBias
    from .report import score_table
    from .simulate import simulate_run
    bias = PlantedBias()
    print("EvenHand demo: the simulated model with planted biases answers the smoke subset;\n"
          "the metrics are measured from its text answers and shown beside the planted truth.\n")
    run, report = simulate_run(a.out, "smoke", 0, 0, bias, "stochastic", 1000)
    print(score_table(report, truth={d: bias.truth(d) for d in range(4)}))
    print(f"\nrun directory: {run.path} (manifest.json, responses.parquet, metrics.json)")
    print("The smoke subset is small (about 1K items): CIs are wide by design. "
          "`evenhand simulate --subset core` gives tight ones.")
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
    s = sub.add_parser("compare", help="paired comparison of two runs on the same items")
    s.add_argument("base")
    s.add_argument("other")
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
    s = sub.add_parser("run", help="run a YAML config: suite -> decisions -> metrics (-> cache)")
    s.add_argument("config")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
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
    s.set_defaults(fn=_decide)
    s = sub.add_parser("cache", help="activation cache only (resumable)")
    model_args(s)
    s.add_argument("--sites", nargs="+", default=["residual"])
    s.add_argument("--cache-dtype", default="float16", choices=["float16", "float32"])
    s.add_argument("--name-mean", action="store_true")
    s.add_argument("--engine", default="nnsight", choices=["nnsight", "transformer_lens"])
    s.set_defaults(fn=_cache)
    s = sub.add_parser("demo", help="the main job on the embedded default")
    s.add_argument("--out", default="runs/demo")
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
    except (RowError, ContentError, RunError, ModelLoadError, KeyError, ValueError, TypeError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"evenhand: error: {msg}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
