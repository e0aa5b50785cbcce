"""The modes study (``kind: modes``, ``evenhand modes``): one model, one item set, decided in ``logprob``
and in ``answer`` mode.

FairStress found that the direction of a measured lean can flip with the way a
benchmark asks. :func:`mode_switch` decides the items both ways (a run directory
with a manifest; resumable: ``OUT/answer/`` and ``OUT/logprob/``), scores each, and compares them on the
same items with the paired jackknife-t interval of :func:`evenhand.scoring.metrics.compare`
(``logprob`` minus ``answer``). :func:`switch_rows` turns that into a tidy
table (``OUT/mode_switch.csv``): per mode TieLean and AccGap (and accuracy, FragGap, TieShift) with CIs,
and the paired difference with its CI; ``flips`` says whether the two modes'
TieLean lie on opposite sides of 0.5 with CIs that exclude it. Every interval is the jackknife-t, so the
study takes no bootstrap resamples or seed (a config that sets them is refused).
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from evenhand.support.messages import warn_unparseable
from evenhand.running.decisions import DecideOptions, decide
from evenhand.scoring.metrics import INTERVAL, compare, score
from evenhand.inference.stats import INTERVAL_NAMES
from evenhand.models.loading import ModelSpec, locate, resolve_spec
from evenhand.support.options import Rules, build
from evenhand.runs.rundir import RunDir, write_table_atomic
from evenhand.rows.schema import validate_rows
from evenhand.running.stages import LoadModel, Stage, FnStage, finished_with, open_run, run_stages

from ..base import JACKKNIFE_ONLY, Study, register, without_kind, without_unused
from ..common import check_output_dir
from ..run.config import suite_items
from ..run.config import SuiteConfig
from evenhand.engine.registry import load
from .text import modes_text

JACKKNIFE_WHY = (f"both modes' 95% CIs and their paired differences are the {INTERVAL_NAMES[INTERVAL]}, which "
                 f"resamples nothing")
"""Why a modes config's bootstrap fields are refused."""
METRICS = ("tielean", "accgap", "accuracy", "fraggap", "tieshift")
MODES = ("answer", "logprob")


def mode_stages(items: pd.DataFrame, model: LoadModel, batch_size: int = 16, chat_template: str = "auto",
                progress: bool = True) -> list[Stage]:
    """The model, the decisions in each mode (``OUT/<mode>/``, skipped once written) and the comparison
    (writes ``mode_switch.csv``; its result is (tidy table, raw comparison))."""
    def decide_in(mode: str) -> FnStage:
        def go(run: RunDir) -> pd.DataFrame:
            d = run.mode_dir(mode)
            d.path.mkdir(parents=True, exist_ok=True)
            table = decide(items, model(), DecideOptions(mode=mode, batch_size=batch_size, chat_template=chat_template,
                                                         progress=progress), out_dir=d.path)
            d.write_responses(table)
            warn_unparseable(table, run, part=f"{mode} mode")
            return table
        return FnStage(mode, go, finished_with(lambda r: r.mode_dir(mode).responses_path))

    modes = [decide_in(m) for m in MODES]

    def compared(run: RunDir) -> tuple[pd.DataFrame, dict]:
        resp = {s.name: validate_rows(s.result if s.result is not None else run.mode_dir(s.name).read_responses())
                for s in modes}
        reports = {m: score(r) for m, r in resp.items()}
        cmp = compare(resp["answer"], resp["logprob"])
        table = switch_rows(reports, cmp)
        write_table_atomic(run.mode_switch_csv, table)
        return table, {"reports": reports, "compare": cmp}

    return [model, *modes, FnStage("compare", compared)]


def mode_switch(items: pd.DataFrame, lm, out_dir: str | Path, batch_size: int = 16, chat_template: str = "auto",
                progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Decide ``items`` in both modes with the loaded model ``lm``; returns (tidy table, raw comparison).
    ``out_dir`` is a run directory (:mod:`evenhand.running.stages`): a mode whose responses are written is skipped
    on a rerun."""
    ids = hashlib.sha256("\n".join(map(str, items["item_id"])).encode()).hexdigest()[:16]
    run = open_run(out_dir, {"kind": "mode_switch", "model": asdict(lm.spec), "chat_template": chat_template,
                             "n_items": len(items), "items_sha256": ids},
                   n_items=len(items), batch_size=batch_size)
    stages = mode_stages(items, LoadModel(lambda: lm), batch_size, chat_template, progress)
    run_stages(run, stages)
    return stages[-1].result


def switch_rows(reports: dict, cmp: dict) -> pd.DataFrame:
    rows = []
    for metric in METRICS:
        for mode in ("answer", "logprob"):
            e = reports[mode]["overall"][metric]
            rows.append({"metric": metric, "stat": mode, **{k: e.get(k) for k in ("value", "ci_low", "ci_high", "n")}})
        d = cmp["difference"][metric]
        rows.append({"metric": metric, "stat": "logprob_minus_answer",
                     **{k: d.get(k) for k in ("value", "ci_low", "ci_high", "n")}})
    table = pd.DataFrame(rows)
    a = reports["answer"]["overall"]["tielean"]
    b = reports["logprob"]["overall"]["tielean"]

    def side(e):
        if e.get("ci_low") is None or e.get("ci_high") is None:
            return 0
        return 1 if e["ci_low"] > 0.5 else (-1 if e["ci_high"] < 0.5 else 0)
    table.attrs["flips"] = bool(side(a) * side(b) == -1)
    return table


@dataclass(frozen=True)
class ModesConfig:
    """A mode comparison: one model on a suite subset, decided in answer and in logprob mode."""
    model: ModelSpec
    """A model id, path or preset, or a mapping of ModelSpec fields."""
    output_dir: str
    """The run directory (``answer/``, ``logprob/``, ``mode_switch.csv``)."""
    suite: SuiteConfig = field(default_factory=SuiteConfig)
    """Which items."""
    batch_size: int | None = DecideOptions.batch_size
    """Items per batch (absent: from the CUDA device's free memory, 8 elsewhere)."""


RULES = Rules(choices={"model.dtype": ("auto", "float32", "bfloat16", "float16"),
                       "model.chat_template": ("auto", "none")},
              tuple_choices={"suite.degrees": (0, 1, 2, 3), "suite.contrast_types": ("type1", "type23")},
              positive=frozenset({"batch_size", "suite.limit"}))
"""The modes config's checks beyond the field types."""


@dataclass(frozen=True)
class ModesResult:
    """What a mode comparison returns: its table, the raw comparison, the model's name and the items."""
    table: pd.DataFrame
    raw: dict
    model: str
    n_items: int
    output_dir: Path


@register
class ModesStudy(Study):
    """The suite decided in answer and in logprob mode on one model, compared item by item."""

    kind = "modes"

    def parse(self, data, where: str = "config") -> ModesConfig:
        data = without_unused(without_kind(data, self.kind), JACKKNIFE_ONLY, JACKKNIFE_WHY)
        return build(ModesConfig, data, rules=RULES)

    def stages(self, cfg: ModesConfig, progress: bool = True) -> list[Stage]:
        spec = resolve_spec(cfg.model)
        return mode_stages(suite_items(cfg.suite), LoadModel(lambda: load(spec, "hf")), cfg.batch_size,
                           spec.chat_template, progress)

    def run(self, cfg: ModesConfig, progress: bool = True, backend: str = "local", **backend_options) -> ModesResult:
        spec = resolve_spec(cfg.model)
        locate(spec)  # a missing or damaged model fails before the output directory is made
        out = check_output_dir(cfg.output_dir)
        items = suite_items(cfg.suite)
        lm = load(spec, "hf")
        table, raw = mode_switch(items, lm, out, cfg.batch_size, spec.chat_template, progress=progress)
        return ModesResult(table, raw, lm.name, len(items), out)

    def text(self, cfg: ModesConfig, result: ModesResult) -> str:
        return (f"{modes_text(result.table, result.model, result.n_items)}\n\n"
                f"wrote {result.output_dir}/mode_switch.csv, answer/, logprob/")

    def rows(self, output_dir: Path, resamples: int) -> pd.DataFrame:
        return pd.read_csv(RunDir(output_dir).mode_switch_csv).assign(table="modes")
