"""Activations described in words (a Patchscope, Ghandeharioun et al. 2024) and the probe's label read off them.

A residual vector (a cached site at the decision token) is written into a target prompt at a residual site
and token position (default: the few-shot identity prompt :data:`IDENTITY_PROMPT`, at its last token, the
``?``) inside one nnsight generation; the model's greedy continuation is the description (the vectors are
read by the one activation reader, :func:`read_vectors`). The label is
read off the descriptions three ways: by a **reader** (an LLM judge, :mod:`evenhand.framing.judge`, asked which
candidate the description says the model favours: the study's reading, the headline, on AMB items only),
by rules (a description naming one candidate yields that candidate's label, :func:`rule_choice`) and by
the text baseline's TF-IDF + logistic classifier on the probes' grouped folds (:func:`probes.text.fit_text`),
named ``decodability``: whether the label can be decoded from the text at all, not whether the text says
it. Each is scored beside the linear probe at the same site, the evidence baseline, a shuffled-label
control and chance, with CIs over scenarios (:func:`verbalize_table`).
More in docs/guide/probes.md, "Activations described in words".
"""
from __future__ import annotations

import re
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evenhand.engine.reader import read_batches
from evenhand.framing.judge import VERBALIZATION, Judge, ask
from evenhand.models.loading import LoadedModel, load_model
from evenhand.models.sites import SITE_RE, Site, SiteError, module, resolve
from evenhand.runs.rundir import RunDir, write_table_atomic
from evenhand.vocab.sides import favours_minority
from evenhand.inference.stats import RESAMPLES
from .dataset import ProbeDataset, from_run
from .logistic import FoldResult, ProbeOptions, fit_sites
from .scores import PAIRED_INTERVAL, POINT_INTERVAL, accuracy_ci, auroc_ci, majority_baseline, paired_drop_ci
from .sweep import condition_text, site_layer
from .text import fit_text

IDENTITY_PROMPT = "cat -> cat; 1135 -> 1135; hello -> hello; ?"
"""The Patchscopes few-shot identity prompt: the model continues the pattern by restating what the patched
token (the last, ``?``) holds."""
RULE_LABELS = ("favours_minority", "amb_side", "correct", "departed", "pressure_followed")
"""The labels the rules can read: each is a function of the row's chosen slot."""
DESCRIPTION_TOKENS = {"token_pattern": r"(?u)\b\w+\b", "lowercase": False}
"""How the classifier reads a description's words: as the text baseline, except that one-letter words count
and case is kept, so ``B`` (a slot) is a word and ``A`` (a slot) is not ``a`` (an article)."""
SLOT_NOUNS = ("candidate", "option", "slot")
NOT_AFTER_ARTICLE = ("or", "and", "is", "was", "has", "had", "should", "would", "will", "gets", "wins", "vs",
                     "versus", "than")
"""Lower-case words after which a capital ``A`` is a slot, not the article (``A or B``, ``A is stronger``)."""
"""Words that, before a capital A or B, name a slot (besides the item's own ``candidate_noun``)."""


@dataclass(frozen=True)
class VerbalizeOptions:
    """How activations are described."""
    target_prompt: str = IDENTITY_PROMPT
    """The prompt the vector is patched into (default: the Patchscopes few-shot identity prompt)."""
    position: int = -1
    """Token of the target prompt that receives the vector (negative counts from the end; -1: the last, '?')."""
    target_site: str | None = None
    """Residual site of the target that receives it: embed, blocks.L.resid_pre or blocks.L.resid_post (default: the source site)."""
    max_new_tokens: int = 8
    """Tokens of greedy continuation kept as the description."""
    batch_size: int = 32
    """Descriptions generated per batch."""

    def __post_init__(self):
        if not isinstance(self.target_prompt, str) or not self.target_prompt.strip():
            raise ValueError("target_prompt must be a non-empty string")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")


# --- the patch -----------------------------------------------------------------------------------------

def patch_site(model, name: str) -> Site:
    """The module output that holds residual site ``name`` (``blocks.L.resid_pre`` is layer L - 1's output,
    or the embedding's for L = 0); other sites are not a residual stream and are refused."""
    m = SITE_RE.match(name or "")
    if m and m.group(3) == "resid_pre":
        layer = int(m.group(2))
        resolve(model, name)  # the layer's range is checked
        return resolve(model, "embed" if layer == 0 else f"blocks.{layer - 1}.resid_post")
    if m and (name == "embed" or m.group(3) == "resid_post"):
        return resolve(model, name)
    raise SiteError(f"target_site {name!r}: a patch target is a residual site: embed, blocks.L.resid_pre or "
                    f"blocks.L.resid_post")


def target_ids(tokenizer, prompt: str, position: int) -> tuple[list[int], int]:
    """The target prompt's token ids (the tokenizer's special tokens added) and the patched position."""
    ids = list(tokenizer(prompt)["input_ids"])
    pos = position + len(ids) if position < 0 else position
    if not 0 <= pos < len(ids):
        raise ValueError(f"position {position} is outside the target prompt's {len(ids)} tokens")
    return ids, pos


def _traced(lm: LoadedModel):
    from nnsight import TransformersModel  # deferred: heavy
    return TransformersModel(lm.model, tokenizer=lm.tokenizer)


def _as_rows(lm: LoadedModel, vectors, what: str):
    import torch  # deferred: heavy
    v = torch.as_tensor(np.asarray(vectors) if not isinstance(vectors, torch.Tensor) else vectors)
    width = int(lm.model.config.get_text_config().hidden_size)
    if v.ndim != 2 or v.shape[1] != width:
        raise ValueError(f"{what}: vectors must be (rows, {width}); got shape {tuple(v.shape)}")
    return v.to(device=lm.model.device, dtype=lm.model.dtype)


def read_vectors(lm: LoadedModel, ids: Sequence[Sequence[int]], site: str, position: int = -1,
                 batch_size: int = 1):
    """Site ``site``'s value at token ``position`` of each token sequence ``ids``, as a (rows, width) tensor in
    the model's dtype, read by the one activation reader (:func:`evenhand.engine.reader.read_batches`: forward
    hooks, batches that halve on out-of-memory). ``batch_size`` 1 (the default) is one unpadded forward pass
    per sequence; a larger batch is left-padded, which moves values by float rounding only."""
    import torch  # deferred: heavy
    seqs = [list(s) for s in ids]
    for k, s in enumerate(seqs):
        if not -len(s) <= position < len(s):
            raise ValueError(f"position {position} is outside sequence {k}'s {len(s)} tokens")

    def pick(h, idx):  # row k holds seqs[idx[k]] in its last positions (left padding)
        width = h.shape[1]
        return [h[k, width - len(seqs[j]) + position if position >= 0 else width + position]
                for k, j in enumerate(idx)]

    rows = read_batches(lm, seqs, [site], batch_size, pick)
    return torch.as_tensor(np.stack([r[site] for r in rows])).to(device=lm.model.device, dtype=lm.model.dtype)


def patched_logits(lm: LoadedModel, ids: Sequence[int], site: str, position: int, vectors):
    """The next-token logits after ``ids`` with each row of ``vectors`` written at residual ``site`` and token
    ``position`` (one row of logits per vector): the patch of :func:`describe`, without generating."""
    import torch  # deferred: heavy
    v = _as_rows(lm, vectors, "patched_logits")
    where = patch_site(lm.model, site)
    traced = _traced(lm)
    inp = torch.tensor([list(ids)] * len(v), device=lm.model.device)
    with torch.inference_mode(), traced.trace(input_ids=inp):
        module(traced, where).output[:, position, :] = v
        logits = traced.output.logits[:, -1, :].save()
    return logits


def describe(lm: LoadedModel, vectors, site: str, opts: VerbalizeOptions = VerbalizeOptions(),
             progress: bool = False) -> list[str]:
    """One description per row of ``vectors`` (values of ``site``): each written into ``opts.target_prompt`` at
    ``opts.target_site`` (default ``site``) and ``opts.position`` on the first forward pass of a greedy
    generation of ``opts.max_new_tokens`` tokens, whose decoded continuation is returned."""
    import torch  # deferred: heavy
    from tqdm.auto import tqdm  # deferred: heavy
    where = patch_site(lm.model, opts.target_site or site)
    ids, pos = target_ids(lm.tokenizer, opts.target_prompt, opts.position)
    v = _as_rows(lm, vectors, f"describe {site}")
    traced = _traced(lm)
    tok = lm.tokenizer
    eos = getattr(lm.model.generation_config, "eos_token_id", None) or tok.eos_token_id
    out: list[str] = []
    bar = tqdm(total=len(v), unit="item", disable=not progress, desc=f"verbalize[{site}]", dynamic_ncols=True)
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*generation flags are not valid.*")
        for lo in range(0, len(v), opts.batch_size):
            rows = v[lo:lo + opts.batch_size]
            inp = torch.tensor([ids] * len(rows), device=lm.model.device)
            with traced.generate(input_ids=inp, attention_mask=torch.ones_like(inp), do_sample=False,
                                 max_new_tokens=opts.max_new_tokens, pad_token_id=tok.pad_token_id,
                                 eos_token_id=eos) as tracer:
                for _ in tracer.iter[0]:  # the prompt's forward pass only; later steps see new tokens
                    module(traced, where).output[:, pos, :] = rows
                gen = tracer.result.save()
            out += [t.strip() for t in tok.batch_decode(gen[:, len(ids):], skip_special_tokens=True)]
            bar.update(len(rows))
    bar.close()
    return out


# --- reading the label off a description ----------------------------------------------------------------

def _name_words(names) -> dict[str, list[str]]:
    """Per slot, the candidate's full name and each of its words that the other slot's name lacks."""
    if not isinstance(names, Mapping):
        return {}
    full = {s: str(names.get(s) or "").strip() for s in ("A", "B")}
    parts = {s: {w for w in re.findall(r"\w+", full[s]) if len(w) > 2} for s in ("A", "B")}
    return {s: ([full[s]] if full[s] else []) + sorted(parts[s] - parts["B" if s == "A" else "A"]) for s in ("A", "B")}


def rule_choice(description: str, noun: str | None = None, names: Mapping | None = None) -> str | None:
    """The slot (``A``/``B``) a description names, or None when it names neither or both.

    A slot is named by the item's candidate noun (or :data:`SLOT_NOUNS`) before its letter (``Applicant B``,
    any case of the noun), by the capital letter standing alone as a word (except ``A`` before a lower-case
    word not in :data:`NOT_AFTER_ARTICLE`, the article), or by the candidate's name (its full name, or a word
    of it the other name lacks; whole words, any case)."""
    text = description if isinstance(description, str) else ""
    nouns = {n.lower() for n in SLOT_NOUNS} | ({noun.lower()} if isinstance(noun, str) and noun else set())
    found = set()
    for m in re.finditer(r"(?<![\w'])([AB])(?![\w'])", text):
        before = re.findall(r"\w+", text[:m.start()])
        named = bool(before) and before[-1].lower() in nouns
        nxt = re.match(r"\s+([a-z]\w*)", text[m.end():])
        article = m.group(1) == "A" and nxt is not None and nxt.group(1) not in NOT_AFTER_ARTICLE
        if named or not article:
            found.add(m.group(1))
    for slot, words in _name_words(names).items():
        if any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", text, re.IGNORECASE) for w in words):
            found.add(slot)
    return found.pop() if len(found) == 1 else None


def label_from_choice(meta: pd.DataFrame, choice: Sequence, label: str) -> np.ndarray:
    """The label each row would have, had the model chosen ``choice`` (``A``/``B``; None: undecided -> NaN)."""
    if label not in RULE_LABELS:
        raise ValueError(f"the rules read a chosen slot; label {label!r} is not a function of it "
                         f"(rules read: {', '.join(RULE_LABELS)})")
    c = np.asarray(list(choice), dtype=object)
    if label in ("favours_minority", "amb_side"):
        val = favours_minority(c, meta["minority_slot"].to_numpy(object), meta["question_polarity"].to_numpy(object))
    elif label in ("correct", "departed"):
        val = (c == meta["correct_slot"].to_numpy(object)) ^ (label == "departed")
    else:
        val = c == meta["pressure_slot"].to_numpy(object)
    out = np.asarray(val, dtype=np.float64)
    out[np.array([x not in ("A", "B") for x in c])] = np.nan
    return out


def rule_predictions(ds: ProbeDataset, descriptions: Sequence[str]) -> tuple[list, np.ndarray]:
    """(the slot each description names, the label it implies: NaN where it names none)."""
    meta = ds.meta
    nouns = meta["candidate_noun"].tolist() if "candidate_noun" in meta.columns else [None] * len(meta)
    names = meta["names"].tolist() if "names" in meta.columns else [None] * len(meta)
    picked = [rule_choice(d, n, nm) for d, n, nm in zip(descriptions, nouns, names)]
    return picked, label_from_choice(meta, picked, ds.label)


# --- scores ---------------------------------------------------------------------------------------------

def _hits(res: FoldResult, y: np.ndarray) -> np.ndarray:
    return ((res.prob >= 0.5) == (y == 1)).astype(np.float64)


def reader_choices(ds: ProbeDataset, descriptions: Sequence[str], reader: Judge) -> list[str | None]:
    """The slot (``A``/``B``) ``reader`` says each description has the model favour (None: neither or no
    answer), asked :data:`evenhand.framing.judge.VERBALIZATION` with the item's candidate labels ("Applicant A")."""
    meta = ds.meta
    nouns = meta["candidate_noun"].tolist() if "candidate_noun" in meta.columns else [None] * len(meta)
    fields = [{"label_a": f"{n or 'Candidate'} A", "label_b": f"{n or 'Candidate'} B",
               "description": str(d).replace('"', "'")} for d, n in zip(descriptions, nouns)]
    picked, _ = ask(reader, VERBALIZATION, fields)
    return [p if p in ("A", "B") else None for p in picked]


def headline_rows(ds: ProbeDataset) -> np.ndarray:
    """The rows the verbalization headline is computed on: AMB items (where the design does not predict the
    side the model takes; on GT items the evidence baseline predicts it at 92-100%). All False when the
    dataset has no ``condition``."""
    meta = ds.meta
    return (meta["condition"] == "AMB").to_numpy() if "condition" in meta.columns else np.zeros(len(meta), bool)


def verbalize_table(ds: ProbeDataset, descriptions: Mapping[str, Sequence[str]], opts: ProbeOptions = ProbeOptions(),
                    resamples: int = RESAMPLES, shuffles: int = 10, reader: Judge | None = None) -> pd.DataFrame:
    """The label read off each site's ``descriptions`` (the reader; rules; decodability) beside the linear probe
    on the same site, the evidence baseline, the shuffled-label control and chance: accuracies with
    cluster-bootstrap CIs, differences with jackknife-t CIs, all over ``ds.groups`` (scenarios).

    The headline (with ``reader``, a judge): ``verbal_reader`` ``verbalized`` on the AMB rows only (column
    ``rows`` "AMB"), the share of descriptions the reader says favour the side the model chose (a description
    it reads as naming neither counts as not verbalized), beside ``linear_probe`` and ``evidence`` accuracy on
    the same rows; ``named`` is the share it reads as naming a side. Every other row has ``rows`` "all".
    ``decodability`` is the TF-IDF + logistic classifier (can the label be decoded from the text). A rule
    that names no candidate scores one half (a coin flip); ``rules_coverage`` is the share that name one. The
    control is the classifier refitted on ``shuffles`` seeded permutations of the labels, each row's hits
    averaged: a check that nothing but the descriptions carries the label (it sits at or a little below 50%:
    on few rows, cross-validation anti-learns labels unrelated to the inputs)."""
    y, g = np.asarray(ds.y).astype(int), np.asarray(ds.groups)
    n, k, seed = len(y), len(np.unique(g)), opts.seed
    half = np.full(n, 0.5)
    has_design = ds.design is not None and ds.design.shape[1] > 0
    evidence = _hits(fit_sites([ds.design], y, g, opts)[0], y) if has_design else None
    permuted = [np.random.default_rng([seed, j]).permutation(y) for j in range(shuffles)]
    base = {"label": ds.label, "condition": condition_text(ds.filters)}
    rows: list[dict] = []

    def row(site, method, metric, est, interval, rows_="all", **extra):
        rows.append({"site": site, "layer": site_layer(site), "method": method, "metric": metric, "value": est.value,
                     "ci_low": est.ci_low, "ci_high": est.ci_high, "n": est.n, "clusters": est.clusters,
                     "interval": interval, "rows": rows_, **base, **extra})

    def fixed(site, method, value, **extra):
        rows.append({"site": site, "layer": site_layer(site), "method": method, "metric": "accuracy", "value": value,
                     "ci_low": np.nan, "ci_high": np.nan, "n": n, "clusters": k, "interval": "none", "rows": "all",
                     **base, **extra})

    for site, descs in descriptions.items():
        descs = list(descs)
        if len(descs) != n:
            raise ValueError(f"descriptions of {site}: {len(descs)} for {n} rows")
        if site not in ds.features:
            raise ValueError(f"site {site!r} is not in the dataset; its sites: {', '.join(ds.sites)}")
        extra = {"distinct_descriptions": len(set(descs))}
        probe = fit_sites([ds.features[site]], y, g, opts)[0]
        probe_hit = _hits(probe, y)
        clf = fit_text(descs, y, g, opts, strip=False, tokens=DESCRIPTION_TOKENS)
        clf_hit = _hits(clf, y)
        shuffled_hit = np.mean([_hits(fit_text(descs, yp, g, opts, strip=False, tokens=DESCRIPTION_TOKENS), yp)
                                for yp in permuted], axis=0)
        acc = {"linear_probe": probe_hit, "decodability": clf_hit, "shuffled_control": shuffled_hit}
        for method, hit in acc.items():
            row(site, method, "accuracy", accuracy_ci(hit, g, resamples, seed), POINT_INTERVAL, **extra)
        row(site, "linear_probe", "auroc", auroc_ci(probe.prob, y, g, resamples, seed), POINT_INTERVAL, **extra)
        row(site, "decodability", "auroc", auroc_ci(clf.prob, y, g, resamples, seed), POINT_INTERVAL, **extra)
        if evidence is not None:
            acc["evidence"] = evidence
            row(site, "evidence", "accuracy", accuracy_ci(evidence, g, resamples, seed), POINT_INTERVAL, **extra)
        if ds.label in RULE_LABELS:
            _, implied = rule_predictions(ds, descs)
            named = ~np.isnan(implied)
            rule_hit = np.where(named, implied == y, 0.5)
            acc["verbal_rules"] = rule_hit
            row(site, "verbal_rules", "accuracy", accuracy_ci(rule_hit, g, resamples, seed), POINT_INTERVAL, **extra)
            row(site, "verbal_rules", "rules_coverage", accuracy_ci(named, g, resamples, seed), POINT_INTERVAL,
                **extra)
            if named.any():
                row(site, "verbal_rules", "accuracy_named", accuracy_ci(rule_hit[named], g[named], resamples, seed),
                    POINT_INTERVAL, **extra)
        if reader is not None and ds.label in RULE_LABELS:
            implied = label_from_choice(ds.meta, reader_choices(ds, descs, reader), ds.label)
            said = np.where(np.isnan(implied), 0.0, implied == y)
            acc["verbal_reader"] = said
            row(site, "verbal_reader", "verbalized", accuracy_ci(said, g, resamples, seed), POINT_INTERVAL, **extra)
            amb = headline_rows(ds)
            if amb.any():
                on = {"verbal_reader": said, "linear_probe": probe_hit, "evidence": evidence}
                for method, hit in on.items():
                    if hit is not None:
                        metric = "verbalized" if method == "verbal_reader" else "accuracy"
                        row(site, method, metric, accuracy_ci(hit[amb], g[amb], resamples, seed), POINT_INTERVAL,
                            rows_="AMB", **extra)
                named = (~np.isnan(implied)).astype(float)
                row(site, "verbal_reader", "named", accuracy_ci(named[amb], g[amb], resamples, seed),
                    POINT_INTERVAL, rows_="AMB", **extra)
        fixed(site, "majority_baseline", majority_baseline(y), **extra)
        fixed(site, "chance", 0.5, **extra)
        pairs = [("verbal_reader", "linear_probe"), ("verbal_reader", "chance"),
                 ("decodability", "linear_probe"), ("decodability", "evidence"),
                 ("verbal_rules", "linear_probe"), ("decodability", "chance"), ("verbal_rules", "chance"),
                 ("shuffled_control", "chance"), ("linear_probe", "chance")]
        for a, b in pairs:
            if a in acc and (b in acc or b == "chance"):
                est = paired_drop_ci(acc[a], acc.get(b, half), g, resamples, seed)
                row(site, f"{a} - {b}", "accuracy_difference", est, PAIRED_INTERVAL, **extra)
    return pd.DataFrame(rows)


# --- a run ----------------------------------------------------------------------------------------------

def default_site(sites: Sequence[str]) -> str:
    """The middle ``resid_post`` site among ``sites`` (the first site when none is a ``resid_post``)."""
    post = sorted((s for s in sites if s.endswith(".resid_post")), key=site_layer)
    if not post:
        return list(sites)[0]
    return post[(len(post) - 1) // 2]


def unknown_tokens(tokenizer, ids: Sequence[int]) -> int:
    """How many of ``ids`` are the tokenizer's unknown token."""
    unk = getattr(tokenizer, "unk_token_id", None)
    return sum(1 for i in ids if unk is not None and i == unk)


def verbalize_run(run_dir: str | Path, out_dir: str | Path, sites: Sequence[str] | None = None,
                  label: str = "favours_minority", filters: dict | None = None,
                  options: VerbalizeOptions = VerbalizeOptions(), probe_opts: ProbeOptions = ProbeOptions(),
                  resamples: int = RESAMPLES, lm: LoadedModel | None = None, progress: bool = False,
                  reader: Judge | None = None) -> pd.DataFrame:
    """Describe the cached vectors of a run's rows at ``sites`` (default: :func:`default_site` of the cached
    ones) with the run's model (or ``lm``), score them (:func:`verbalize_table`; ``reader``: the judge asked
    which candidate each description says the model favours) and write ``out_dir``'s
    ``verbalize.parquet``, ``verbalize.csv``, ``descriptions.parquet`` and ``manifest.json``."""
    t0 = time.perf_counter()
    run = RunDir(run_dir)
    if sites is None:
        from evenhand.running.activations import ActivationCache
        sites = [default_site([s for s in ActivationCache(run.activations).sites if "@" not in s])]
    ds = from_run(run_dir, label, list(sites), filters, probe_opts)
    lm = lm or load_model(run.model_spec())
    ids, pos = target_ids(lm.tokenizer, options.target_prompt, options.position)
    descriptions, seconds = {}, {}
    for s in ds.sites:
        t = time.perf_counter()
        descriptions[s] = describe(lm, ds.features[s], s, options, progress)
        seconds[s] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    table = verbalize_table(ds, descriptions, probe_opts, resamples, reader=reader)
    score_seconds = round(time.perf_counter() - t, 3)
    out = RunDir(out_dir)
    out.path.mkdir(parents=True, exist_ok=True)
    desc = pd.concat([pd.DataFrame({"item_id": ds.meta["item_id"], "scenario_id": ds.groups, "site": s,
                                    "description": d, "label": ds.y,
                                    "rule_choice": rule_predictions(ds, d)[0] if label in RULE_LABELS else None})
                      for s, d in descriptions.items()], ignore_index=True)
    write_table_atomic(out.verbalize_table, table)
    write_table_atomic(out.verbalize_csv, table)
    write_table_atomic(out.descriptions_path, desc)
    table.attrs["seconds"] = round(time.perf_counter() - t0, 3)
    out.write_manifest({
        "kind": "verbalize", "run_dir": str(run_dir), "label": label, "filters": ds.filters, "sites": ds.sites,
        "n": len(ds), "clusters": int(len(np.unique(ds.groups))), "model": lm.name, "options": asdict(options),
        "target_tokens": len(ids), "patched_position": pos, "target_unknown_tokens": unknown_tokens(lm.tokenizer, ids),
        "probe_options": asdict(probe_opts), "resamples": resamples,
        "reader": None if reader is None else {"name": getattr(reader, "name", "custom"),
                                               "prompt": VERBALIZATION.version},
        "intervals": {"accuracy, auroc, rules_coverage": POINT_INTERVAL, "accuracy_difference": PAIRED_INTERVAL},
        "seconds": {"describe": seconds, "score": score_seconds, "total": table.attrs["seconds"]}})
    return table
