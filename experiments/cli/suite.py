"""`evenhand suite ...`: counts, export, one item, the datasheet, validation and the FairStress import."""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from .common import json_flag, progress_flag


def _suite_stats(a) -> int:
    from evenhand.suite.datasheet import suite_stats  # deferred: keeps the CLI's start fast
    from evenhand.suite.content import load_content  # deferred: keeps the CLI's start fast
    st = suite_stats(a.subset, a.seed, load_content(a.suite))
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
    from evenhand.support.messages import writable_file
    from evenhand.suite.export import items_for, write_items
    writable_file(a.out)
    t0 = time.perf_counter()
    n = write_items(items_for(a.subset, a.seed, a.suite), a.out, a.limit)
    print(f"wrote {n:,} items of {a.subset!r} (seed {a.seed}) to {a.out} in {time.perf_counter() - t0:.1f}s")
    return 0


def _suite_show(a) -> int:
    from evenhand.suite.content import load_content  # deferred: keeps the CLI's start fast
    from evenhand.suite.generate import item_by_id  # deferred: keeps the CLI's start fast
    item = item_by_id(a.item_id, load_content(a.suite))
    if a.json:
        print(json.dumps(item, indent=2, ensure_ascii=False))
        return 0
    print(item.pop("prompt"))
    print("-" * 72)
    for k, v in item.items():
        print(f"{k:<24} {v}")
    return 0


def _suite_datasheet(a) -> int:
    from evenhand.suite.content import load_content
    from evenhand.suite.datasheet import datasheet
    if a.out:
        from evenhand.support.messages import writable_file
        writable_file(a.out)
    text = datasheet(load_content(a.suite))
    if a.out:
        from evenhand.runs.rundir import atomic_path
        with atomic_path(Path(a.out)) as tmp:
            Path(tmp).write_text(text)
        print(f"wrote {a.out}")
    else:
        print(text, end="")
    return 0


def _suite_validate(a) -> int:
    from tqdm.auto import tqdm

    from evenhand.suite.content import load_content, validate_content  # deferred: keeps the CLI's start fast
    from evenhand.suite.validate import check_item, iter_sample, problems_by_check, validate_suite
    if a.own:
        return _suite_validate_own(a)
    t0 = time.perf_counter()
    content = load_content(a.suite)
    problems = validate_content(content)
    if a.sample:
        item_problems: list[str] = []
        n = 0
        for item in tqdm(iter_sample(a.sample, a.seed, content), total=a.sample, unit="item", desc="validate",
                         disable=a.quiet, dynamic_ncols=True):
            n += 1
            item_problems.extend(check_item(item, content))
        what = (f"a stratified sample of {n:,} rendered items (seed {a.seed}; strata scenario x degree x "
                f"contrast type x condition)")
    else:
        n, item_problems = validate_suite(content, full=a.full)
        what = f"{n:,} rendered items"
    for p in problems + item_problems[:50]:
        print(p)
    if item_problems:
        by = problems_by_check(item_problems)
        print("item problems by check: " + "; ".join(f"{k}: {v['problems']:,} in {v['scenarios']} scenario(s)"
                                                     for k, v in by.items()))
    total = len(problems) + len(item_problems)
    print(f"suite {content.version}: content checked; {what} checked in {time.perf_counter() - t0:.1f}s; "
          f"{total} problem(s)")
    return 1 if total else 0


def _suite_new(a) -> int:
    """`evenhand suite new FILE.yaml`: the commented template of a suite of one's own (never over a file)."""
    from evenhand.support.messages import writable_file
    from evenhand.suite.own import OWN_SUFFIXES, TEMPLATE
    path = Path(a.file)
    if path.suffix.lower() not in OWN_SUFFIXES:
        raise ValueError(f"{path}: a scenario file ends in .yaml (or .yml)")
    if path.exists():
        raise ValueError(f"{path} exists: name a new file (nothing was written)")
    writable_file(str(path))
    path.write_text(TEMPLATE, encoding="utf-8")
    print(f"wrote {path}: edit its scenarios, check them with `evenhand suite validate --own {path}`, decide them "
          f"with `--subset {path}`")
    return 0


def _suite_validate_own(a) -> int:
    from evenhand.suite.own import own_items
    t0 = time.perf_counter()
    items = own_items(a.own, seed=a.seed)  # raises ContentError listing every problem
    print(f"{a.own}: suite {items['suite_version'].iat[0]}: {items['scenario_id'].nunique()} scenario(s), "
          f"{len(items):,} items (4 degrees x 4 condition variants x 2 slots, each baseline with 9 pressure families "
          f"x 2 directions), every item checked in {time.perf_counter() - t0:.1f}s; 0 problems")
    return 0


def _suite_import(a) -> int:
    from evenhand.runs.rundir import write_table_atomic
    from evenhand.rows.fairstress import load_fairstress, released_disagreements
    from evenhand.support.messages import writable_file
    writable_file(a.out)
    df = load_fairstress(a.rows, a.corrections)
    write_table_atomic(Path(a.out), df)
    ex = df["exclusion_reason"].value_counts().to_dict()
    print(f"wrote {len(df):,} rows to {a.out}; excluded: {ex or 'none'}; negative-polarity scenarios: "
          f"{df.loc[df['question_polarity'] == 'negative', 'scenario_id'].nunique()}")
    print(f"pressured rows without a matching baseline: {(df['baseline_id'] == 'missing-baseline').sum():,}; "
          f"released fields differing from docs/METRICS.md (resolved/targets on positive questions, "
          f"favored_group_truth on GT rows): {released_disagreements(df)}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `suite` command group to the top-level subparsers ``sub``."""
    suite = sub.add_parser("suite", help="the decision suite").add_subparsers(dest="suite_command", required=True)

    def version_flag(p: argparse.ArgumentParser) -> None:
        p.add_argument("--suite", default=None, metavar="VERSION",
                       help="suite version: 1 or 2 (default: the current version, 2)")
    s = suite.add_parser("stats", help="counts of the suite (and of a subset)")
    s.add_argument("--subset", choices=["smoke", "core"], help="also count this subset")
    s.add_argument("--seed", type=int, default=0, help="seed of the stratified subset")
    json_flag(s)
    version_flag(s)
    s.set_defaults(fn=_suite_stats)
    s = suite.add_parser("export", help="write a subset's items to JSONL or parquet")
    s.add_argument("--subset", required=True, choices=["smoke", "core", "full"], help="the items written")
    s.add_argument("--out", required=True, help="FILE.jsonl or FILE.parquet")
    s.add_argument("--seed", type=int, default=0, help="seed of the stratified subset")
    s.add_argument("--limit", type=int, default=None,
                   help="stop after the first N items in the subset's order (a model command's --limit instead "
                        "spreads N items across scenarios)")
    version_flag(s)
    s.set_defaults(fn=_suite_export)
    s = suite.add_parser("show", help="one item's prompt and fields")
    s.add_argument("item_id", help="an item id (the item_id column of a responses or items file)")
    json_flag(s)
    version_flag(s)
    s.set_defaults(fn=_suite_show)
    s = suite.add_parser("datasheet", help="the generated datasheet (Markdown)")
    s.add_argument("--out", help="write it to this file (default: print it)")
    version_flag(s)
    s.set_defaults(fn=_suite_datasheet)
    s = suite.add_parser("validate", help="check the content and rendered items")
    s.add_argument("--full", action="store_true", help="also every cell's baseline (slow)")
    s.add_argument("--sample", type=int, default=None, metavar="N",
                   help="check a stratified random sample of N items (scenario x degree x contrast type x "
                        "condition) instead of the fixed selection")
    s.add_argument("--seed", type=int, default=0, help="seed of --sample")
    progress_flag(s, "no progress bar")
    version_flag(s)
    s.add_argument("--own", metavar="FILE.yaml", default=None,
                   help="check a scenario file of your own instead (`evenhand suite new`): the content checks and "
                        "every rendered item (seed --seed)")
    s.set_defaults(fn=_suite_validate)
    s = suite.add_parser("new", help="write a commented template of scenarios of your own (FILE.yaml)",
                         description="Write a commented template of a suite of your own: scenarios in the suite's "
                                     "format, rendered into every degree, condition and pressure family by "
                                     "`--subset FILE.yaml` (decide, run configs, eh.suite.items).")
    s.add_argument("file", help="the new file (.yaml); an existing file is never overwritten")
    s.set_defaults(fn=_suite_new)
    s = suite.add_parser("import-fairstress", help="map released FairStress rows onto EvenHand's schema")
    s.add_argument("rows", help="released rows, .jsonl or .parquet")
    s.add_argument("--corrections", help="the maintainers' corrections JSON (the layout of Ai2's "
                   "fairstress_corrections.json; D2 groups named as the released rows name them)")
    s.add_argument("--out", required=True, help="FILE.jsonl or FILE.parquet")
    s.set_defaults(fn=_suite_import)
