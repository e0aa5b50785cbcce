"""The BBQ study (``kind: bbq``, ``evenhand bbq``): BBQ asked five ways on one model, how the measured
direction of bias depends on the asking. BBQ's data and scoring are the core's :mod:`evenhand.bbq`.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evenhand.inference.stats import RESAMPLES
from evenhand.bbq.data import load_bbq, render_mc, render_yes_no
from evenhand.bbq.scoring import score_bbq
from evenhand.models.loading import load_model, locate, resolve_spec
from evenhand.support.options import ConfigError, Rules, build, read_yaml
from evenhand.runs.rundir import RunDir, write_table_atomic
from evenhand.running.stages import LoadModel, Stage, FnStage, exists, open_run, run_stages

from ..base import Study, register, without_kind
from evenhand.vocab.prompts import model_text, uses_chat_template
from evenhand.engine.batching import left_pad
from evenhand.engine.scoring import label_token_ids
from evenhand.engine.registry import generate_texts
from evenhand.reporting.labels import group_name
from evenhand.reporting.plotting import COLUMN_WIDTH, paper_style, save
from .text import bbq_text

CONFIGURATIONS = {
    "mc_logprob": {"chat": False, "wording": "mc", "read": "logprob"},
    "mc_logprob_chat": {"chat": True, "wording": "mc", "read": "logprob"},
    "mc_generate": {"chat": True, "wording": "mc", "read": "generate"},
    "yn_logprob": {"chat": True, "wording": "yn", "read": "logprob"},
    "yn_generate": {"chat": True, "wording": "yn", "read": "generate"},
}
"""The five configurations, on the same sampled questions:

===============  ====  ==========  ==========================================================
name             chat  wording     answer read by
===============  ====  ==========  ==========================================================
mc_logprob       no    A/B/C       log-probability of each option letter (BBQ's usual way)
mc_logprob_chat  yes   A/B/C       the same, after the chat template
mc_generate      yes   A/B/C       greedy generation, letter parsed
yn_logprob       yes   yes/no x 3  P(yes) / (P(yes) + P(no)) per option; the largest wins
yn_generate      yes   yes/no x 3  greedy generation per option; share of "yes" (1/0), ties ->
                                   the larger P(yes) of the first generated token
===============  ====  ==========  ==========================================================
"""


@dataclass(frozen=True)
class BBQConfig:
    model: str
    output_dir: str
    data: str | None = None
    categories: tuple[str, ...] | None = None
    per_category: int = 60
    seed: int = 0
    configurations: tuple[str, ...] = tuple(CONFIGURATIONS)
    batch_size: int = 16
    max_new_tokens: int = 4
    resamples: int = RESAMPLES


RULES = Rules(tuple_choices={"configurations": tuple(CONFIGURATIONS)}, at_least_two=frozenset({"per_category"}),
              positive=frozenset({"batch_size", "max_new_tokens", "resamples"}))
"""The BBQ config's checks beyond the field types."""


def parse_config(raw: dict, where: str = "config") -> BBQConfig:
    """Validate a BBQ config mapping with the one config builder (errors name the file and the field;
    its ``kind:``, when present, is ``bbq``)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a BBQ config must be a mapping")
    try:
        return build(BBQConfig, without_kind(raw, "bbq"), rules=RULES)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def load_config(path: str | Path) -> BBQConfig:
    """A validated config from a YAML file (read by the one config reader,
    :func:`evenhand.support.options.read_yaml`)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"BBQ config {p} not found")
    return parse_config(read_yaml(p), str(p))


def sample_questions(df: pd.DataFrame, per_category: int, seed: int) -> pd.DataFrame:
    """``per_category`` rows per category, whole templates kept together, both context conditions balanced."""
    out = []
    for _, g in df.groupby("category", sort=True):
        rng = np.random.default_rng([seed, len(out)])
        parts = []
        for _, c in g.groupby("context_condition", sort=True):
            k = min(len(c), per_category // 2)
            parts.append(c.iloc[np.sort(rng.choice(len(c), k, replace=False))])
        out.append(pd.concat(parts))
    return pd.concat(out).reset_index(drop=True)


def _texts(lm, prompts: list[str], chat: bool) -> tuple[list[str], bool]:
    mode = "auto" if chat else "none"
    return [model_text(lm.tokenizer, p, mode) for p in prompts], not uses_chat_template(lm.tokenizer, mode)


def option_logprobs(lm, texts: list[str], options: list[list[str]], special: bool, batch_size: int) -> np.ndarray:
    """[len(texts), max options]: summed log-probability of each option as the continuation of its text."""
    import torch

    seqs, index = [], []
    for i, (t, opts) in enumerate(zip(texts, options)):
        for j, o in enumerate(opts):
            ctx, cont = label_token_ids(lm.tokenizer, t, o, special)
            seqs.append((ctx + cont, len(cont)))
            index.append((i, j))
    out = np.full((len(texts), max(len(o) for o in options)), -np.inf)
    for b in range(0, len(seqs), batch_size):
        chunk = seqs[b:b + batch_size]
        k = max(n for _, n in chunk)
        ids, mask, pos = left_pad([s for s, _ in chunk], lm.tokenizer.pad_token_id, lm.model.device)
        with torch.inference_mode():
            logits = lm.model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=k + 1).logits
        logp = torch.log_softmax(logits.float(), -1)
        for r, (seq, n) in enumerate(chunk):
            cont = seq[-n:]
            val = sum(float(logp[r, k - n + t_, cont[t_]]) for t_ in range(n))  # position j predicts L-k+j
            i, j = index[b + r]
            out[i, j] = val
    return out


_LETTER = re.compile(r"\b([ABC])\b")
_YES = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


def parse_letter(text: str) -> int:
    """0-2 for the first standalone A/B/C in ``text``, else -1."""
    m = _LETTER.search(text or "")
    return "ABC".index(m.group(1)) if m else -1


def parse_yes(text: str) -> float:
    """1.0 for an answer starting with yes, 0.0 for no, NaN otherwise."""
    m = _YES.match(text or "")
    return float("nan") if not m else float(m.group(1).lower() == "yes")


def answer_configuration(lm, rows: pd.DataFrame, name: str, batch_size: int = 16, max_new_tokens: int = 4) -> pd.DataFrame:
    """The answers of one configuration: ``answer_index`` (0-2, -1 = none) and what it was read from."""
    conf = CONFIGURATIONS[name]
    recs = rows.to_dict("records")
    out = pd.DataFrame({"uid": rows["uid"], "configuration": name})
    if conf["wording"] == "mc":
        texts, special = _texts(lm, [render_mc(r) for r in recs], conf["chat"])
        out["chat_template_applied"] = not special  # False when the tokenizer has no chat template
        if conf["read"] == "logprob":
            lp = option_logprobs(lm, texts, [["A", "B", "C"]] * len(texts), special, batch_size)
            out["answer_index"] = lp.argmax(1)
            out["detail"] = [json.dumps([round(float(v), 4) for v in r]) for r in lp]
        else:
            gen = []
            for b in range(0, len(texts), batch_size):
                gen += generate_texts(lm, texts[b:b + batch_size], special, max_new_tokens)
            out["answer_index"] = [parse_letter(g["text"]) for g in gen]
            out["detail"] = [g["text"] for g in gen]
        return out
    prompts = [render_yes_no(r, j) for r in recs for j in range(3)]
    texts, special = _texts(lm, prompts, conf["chat"])
    out["chat_template_applied"] = not special
    lp = option_logprobs(lm, texts, [["yes", "no"]] * len(texts), special, batch_size)
    p_yes = (np.exp(lp[:, 0]) / (np.exp(lp[:, 0]) + np.exp(lp[:, 1]))).reshape(-1, 3)
    if conf["read"] == "logprob":
        out["answer_index"] = p_yes.argmax(1)
        out["detail"] = [json.dumps([round(float(v), 4) for v in r]) for r in p_yes]
        return out
    gen = []
    for b in range(0, len(texts), batch_size):
        gen += generate_texts(lm, texts[b:b + batch_size], special, max_new_tokens)
    said = np.array([parse_yes(g["text"]) for g in gen]).reshape(-1, 3)
    answers = []
    for s, p in zip(said, p_yes):
        if np.isnan(s).all():
            answers.append(-1)
            continue
        yes = np.nan_to_num(s, nan=0.0)
        best = np.flatnonzero(yes == yes.max())
        answers.append(int(best[np.argmax(p[best])]) if yes.max() > 0 else -1)
    out["answer_index"] = answers
    out["detail"] = [json.dumps([g["text"] for g in gen[3 * i:3 * i + 3]]) for i in range(len(recs))]
    return out


def bbq_stages(cfg: BBQConfig, rows: pd.DataFrame, model: LoadModel, progress: bool = True) -> list[Stage]:
    """The model, one stage per configuration (done once its answers are written), the scores (its result:
    the scores table)."""
    def configuration(name: str) -> FnStage:
        def go(run: RunDir) -> None:
            if progress:
                print(f"BBQ: {name} on {len(rows)} questions", flush=True)
            f = run.configuration_answers(name)
            f.parent.mkdir(parents=True, exist_ok=True)
            write_table_atomic(f, answer_configuration(model(), rows, name, cfg.batch_size, cfg.max_new_tokens))
        return FnStage(name, go, exists(lambda r: r.configuration_answers(name)))

    def scores(run: RunDir) -> pd.DataFrame:
        answers = pd.concat([pd.read_parquet(run.configuration_answers(n)) for n in cfg.configurations],
                            ignore_index=True)
        write_table_atomic(run.answers_path, answers)
        joined = answers.merge(rows, on="uid", how="left")
        joined["answer_index"] = joined["answer_index"].where(joined["answer_index"] >= 0, None)
        per_cat = score_bbq(joined, by=("configuration", "category"), resamples=cfg.resamples, seed=cfg.seed)
        overall = score_bbq(joined, by=("configuration",), resamples=cfg.resamples, seed=cfg.seed).assign(category="all")
        table = pd.concat([overall, per_cat], ignore_index=True).assign(model=model().name)
        write_table_atomic(run.bbq_scores_path, table)
        write_table_atomic(run.bbq_scores_csv, table)
        bias_figure(table, run.bias_figure_stem)
        return table

    return [model, *map(configuration, cfg.configurations), FnStage("scores", scores)]


def run_bbq(cfg: BBQConfig, progress: bool = True) -> pd.DataFrame:
    """Run (or resume) every configuration; returns the scores table and writes every output.

    ``answers.parquet`` (one row per question x configuration, ``answer_index`` 0-2 or -1 unparsed;
    ``chat_template_applied``: a configuration that asks for the chat template runs without one when the tokenizer
    has none, and says so here), ``bbq_scores.parquet/.csv`` (BBQ's accuracy and bias scores with CIs over
    templates, per configuration and category) and ``bias_by_configuration.{pdf,svg,png}``. A configuration whose
    answers exist is skipped on a re-run."""
    spec = resolve_spec(cfg.model)
    locate(spec)
    rows = sample_questions(load_bbq(cfg.data, cfg.categories), cfg.per_category, cfg.seed)
    run = open_run(cfg.output_dir, {"kind": "bbq", **json.loads(json.dumps(asdict(cfg), default=str))},
                   n_questions=len(rows), categories=sorted(rows["category"].unique().tolist()))
    stages = bbq_stages(cfg, rows, LoadModel(lambda: load_model(spec)), progress)
    run_stages(run, stages)
    return stages[-1].result


def bias_figure(table: pd.DataFrame, stem: str | Path) -> list[Path]:
    """Bias score (ambiguous and disambiguated) by configuration with CIs and n, all categories pooled."""
    import matplotlib.pyplot as plt

    pal = paper_style()
    t = table[(table["category"] == "all") & table["metric"].isin(["bias_ambig", "bias_disambig"])]
    confs = list(dict.fromkeys(t["configuration"]))
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, COLUMN_WIDTH * 0.7))
    for k, metric in enumerate(("bias_ambig", "bias_disambig")):
        sub = t[t["metric"] == metric].set_index("configuration").reindex(confs)
        x = np.arange(len(confs)) + (k - 0.5) * 0.3
        v = sub["value"].to_numpy(float)
        err = np.vstack([v - sub["ci_low"].to_numpy(float), sub["ci_high"].to_numpy(float) - v])
        ax.errorbar(x, v, yerr=np.nan_to_num(err), fmt="o", color=pal[k], ms=3, elinewidth=0.7,
                    label={"bias_ambig": "Ambiguous", "bias_disambig": "Disambiguated"}[metric])
    ax.axhline(0, color="0.6", lw=0.6)
    ax.set_xticks(range(len(confs)), [group_name(c) for c in confs], rotation=30, ha="right")
    ax.set_ylabel("BBQ bias score")
    ax.legend(frameon=False, ncol=2, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    n = t["n"].dropna() if "n" in t.columns else []
    if len(n):
        ax.set_title(f"n = {int(n.min())}–{int(n.max())} answers per point; 95% CIs over templates", pad=16)
    return save(fig, stem)



@register
class BBQStudy(Study):
    """BBQ asked five ways on one model (:data:`CONFIGURATIONS`), scored as BBQ's authors define it."""

    kind = "bbq"

    def parse(self, data, where: str = "config") -> BBQConfig:
        return parse_config(dict(data), where)

    def stages(self, cfg: BBQConfig, progress: bool = True) -> list[Stage]:
        spec = resolve_spec(cfg.model)
        rows = sample_questions(load_bbq(cfg.data, cfg.categories), cfg.per_category, cfg.seed)
        return bbq_stages(cfg, rows, LoadModel(lambda: load_model(spec)), progress)

    def run(self, cfg: BBQConfig, progress: bool = True, backend: str = "local", **backend_options) -> pd.DataFrame:
        return run_bbq(cfg, progress=progress)

    def text(self, cfg: BBQConfig, result: pd.DataFrame) -> str:
        return (f"{bbq_text(result, cfg.model)}\n\nwrote {cfg.output_dir}/bbq_scores.parquet (+ .csv), "
                f"answers.parquet, bias_by_configuration.pdf/svg/png")

    def rows(self, output_dir: Path, resamples: int) -> pd.DataFrame:
        return pd.read_parquet(RunDir(output_dir).bbq_scores_path).assign(table="bbq")
