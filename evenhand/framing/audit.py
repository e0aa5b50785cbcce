"""The training-data framing audit (``evenhand audit CORPUS``): net framing per group, merit and refusal counts.

Documents are streamed (JSONL, parquet, plain text, gzip'd or not, or a local Hugging Face dataset
directory) and split into sentences; a passage is a sentence that mentions a group
(:func:`evenhand.framing.lexicon.groups`)
with ``window`` sentences either side. A passage's framing is +1/0/-1: VADER polarity of the passage (the
lexicon baseline) or an optional local zero-shot NLI model (:class:`ZeroShot`). Net framing of a group = share
of its passages positive minus share negative, per data stage when the corpus has one, with a 95% interval
over documents: the first-order (linearised) jackknife-t of a ratio, kept as running sums so memory stays
bounded. Topic counts: passages matching every word list of a topic (:func:`evenhand.framing.lexicon.topics`).
Known-answer corpus: :func:`generate_corpus`. More in docs/EXPLANATIONS.md.
"""
from __future__ import annotations

import gzip
import io
import json
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import lexicon
from ..inference.stats import ALPHA

ALL = "all"
"""The stage label of the whole corpus (every stage pooled)."""
INTERVAL = "first-order (linearised) jackknife-t over documents"
TEXT_FIELDS = ("text", "content", "messages", "conversations", "prompt", "chosen", "response", "completion")
"""Fields tried in order when ``text_field`` is not given; a list of messages is joined by their content."""


@dataclass
class Doc:
    """One document: its text and its data stage ('' when the corpus has none)."""
    text: str
    stage: str = ""


def _as_text(v) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        return str(v.get("content") or v.get("value") or v.get("text") or "")
    if isinstance(v, (list, tuple)) or hasattr(v, "tolist"):
        return "\n".join(_as_text(x) for x in (v.tolist() if hasattr(v, "tolist") else v))
    return str(v)


def _row_doc(row: dict, text_field: str | None, stage_field: str | None, where: str) -> Doc:
    if text_field is None:
        text_field = next((f for f in TEXT_FIELDS if f in row), None)
        if text_field is None:
            raise ValueError(f"{where}: no text field (tried {', '.join(TEXT_FIELDS)}); name it with --text-field")
    elif text_field not in row:
        raise ValueError(f"{where}: field '{text_field}' is missing")
    stage = row.get(stage_field) if stage_field else None
    return Doc(_as_text(row[text_field]), "" if stage is None else str(stage))


def _open_text(path: Path):
    raw = open(path, "rb")
    head = raw.read(2)
    raw.seek(0)
    stream = gzip.open(raw) if head == b"\x1f\x8b" else raw
    return io.TextIOWrapper(stream, encoding="utf-8")


def _arrow_batches(path: Path, columns: list[str] | None):
    import pyarrow as pa  # deferred: only for arrow files
    import pyarrow.ipc as ipc  # deferred: only for arrow files
    with pa.memory_map(str(path)) as src:
        try:
            reader = ipc.open_stream(src)
        except pa.ArrowInvalid:
            reader = ipc.open_file(src)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)
            return
        yield from reader


def read_corpus(path: str | Path, text_field: str | None = None, stage_field: str | None = "stage",
                batch_rows: int = 1024) -> Iterator[Doc]:
    """Stream the documents of ``path``: ``.jsonl``/``.json`` lines, ``.parquet`` (record batches), plain text
    (documents separated by blank lines; no stage) or a Hugging Face dataset directory (``save_to_disk``: read
    with ``datasets`` when installed, else its ``.arrow`` files with pyarrow; each split's name is the stage
    when ``stage_field`` is 'split'). gzip is detected from the bytes. A missing stage field gives stage ''."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"corpus {path} does not exist")
    if path.is_dir():
        yield from _read_hf_dir(path, text_field, stage_field, batch_rows)
        return
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq  # deferred: only for parquet
        pf = pq.ParquetFile(path)
        for i, batch in enumerate(pf.iter_batches(batch_size=batch_rows)):
            for j, row in enumerate(batch.to_pylist()):
                yield _row_doc(row, text_field, stage_field, f"{path}: row {i * batch_rows + j + 1}")
    elif name.endswith((".jsonl", ".json", ".ndjson")):
        with _open_text(path) as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise ValueError(f"{path}: line {n} is not JSON ({e.msg})") from None
                    if not isinstance(row, dict):
                        raise ValueError(f"{path}: line {n} is not a JSON object")
                    yield _row_doc(row, text_field, stage_field, f"{path}: line {n}")
    else:
        with _open_text(path) as f:
            buf: list[str] = []
            for line in f:
                if line.strip():
                    buf.append(line.rstrip("\n"))
                elif buf:
                    yield Doc("\n".join(buf))
                    buf = []
            if buf:
                yield Doc("\n".join(buf))


def _read_hf_dir(path: Path, text_field, stage_field, batch_rows) -> Iterator[Doc]:
    arrows = sorted(path.rglob("*.arrow"))
    if not arrows:
        raise ValueError(f"{path}: a directory, but not a Hugging Face dataset (no .arrow files)")
    try:
        import datasets  # deferred: optional, only for dataset directories
    except ImportError:
        datasets = None
    if datasets is not None:
        ds = datasets.load_from_disk(str(path))
        splits = ds.items() if isinstance(ds, datasets.DatasetDict) else [("", ds)]
        for split, d in splits:
            for i, batch in enumerate(d.iter(batch_size=batch_rows)):
                rows = [dict(zip(batch, vals)) for vals in zip(*batch.values())]
                for j, row in enumerate(rows):
                    if stage_field == "split":
                        row = {**row, "split": split}
                    yield _row_doc(row, text_field, stage_field, f"{path}: split {split or '-'} row {i * batch_rows + j + 1}")
        return
    for a in arrows:
        split = a.parent.name if a.parent != path else ""
        for batch in _arrow_batches(a, None):
            for j, row in enumerate(batch.to_pylist()):
                if stage_field == "split":
                    row = {**row, "split": split}
                yield _row_doc(row, text_field, stage_field, f"{a}: row {j + 1}")


@dataclass
class Tally:
    """Running sums over documents of one (group, stage): per document s = positive - negative passages and
    n = passages; enough for the ratio and its linearised jackknife without keeping the documents."""
    k: int = 0
    pos: int = 0
    neg: int = 0
    N: float = 0.0
    S: float = 0.0
    SS: float = 0.0
    SN: float = 0.0
    NN: float = 0.0

    def add(self, pos: int, neg: int, n: int) -> None:
        s = pos - neg
        self.k += 1
        self.pos += pos
        self.neg += neg
        self.N += n
        self.S += s
        self.SS += s * s
        self.SN += s * n
        self.NN += n * n

    def estimate(self, alpha: float = ALPHA) -> dict:
        """Net framing with its interval: R = S/N; se = sqrt((k-1)/k * sum_i (s_i - R n_i)^2) / N (the
        first-order jackknife of a ratio), R +/- t_{k-1} se, clipped to [-1, 1]."""
        from scipy.stats import t as student_t  # deferred: scipy only when estimating

        out = {"documents": self.k, "passages": int(self.N), "share_positive": np.nan, "share_negative": np.nan,
               "net_framing": np.nan, "ci_low": np.nan, "ci_high": np.nan, "note": None}
        if self.N == 0:
            out["note"] = "no passage mentions the group"
            return out
        R = self.S / self.N
        out.update(share_positive=self.pos / self.N, share_negative=self.neg / self.N, net_framing=R)
        if self.k < 2:
            out["note"] = "one document: no interval"
            return out
        ss = max(self.SS - 2 * R * self.SN + R * R * self.NN, 0.0)
        se = math.sqrt((self.k - 1) / self.k * ss) / self.N
        half = float(student_t.ppf(1 - alpha / 2, self.k - 1)) * se
        out.update(ci_low=max(-1.0, R - half), ci_high=min(1.0, R + half))
        if self.k < 10:
            out["note"] = f"only {self.k} documents: the interval is approximate"
        return out


Classifier = Callable[[str, str], int]
"""A framing classifier: (passage, group) -> +1 positive, 0 neutral, -1 negative."""


class ZeroShot:
    """Framing by a local zero-shot NLI model (a directory for ``transformers``' zero-shot-classification
    pipeline): the label among positive / neutral / negative whose hypothesis "This text is {label} about
    {group}." the model finds most entailed. CPU unless ``device`` says otherwise; no download."""

    def __init__(self, path: str | Path, device: int | str = -1):
        from transformers import pipeline  # deferred: torch and transformers only with --nli-model
        if not Path(path).is_dir():
            raise FileNotFoundError(f"--nli-model {path}: not a local model directory")
        self.pipe = pipeline("zero-shot-classification", model=str(path), tokenizer=str(path), device=device)
        self.name = f"zero-shot NLI ({path})"

    def __call__(self, passage: str, group: str) -> int:
        r = self.pipe(passage, candidate_labels=["positive", "neutral", "negative"],
                      hypothesis_template="This text is {} about " + group + ".")
        return {"positive": 1, "neutral": 0, "negative": -1}[r["labels"][0]]


FRAMING_LABELS = {"favourable": 1, "neutral": 0, "unfavourable": -1}
"""A framing label's value: the classifiers' +1, 0, -1."""
VALIDATION = lexicon.DATA / "framing_validation.csv"
"""The hand-labelled framing set (315 sentences; guidelines in ``framing_validation.md`` beside it)."""


def lexicon_framing() -> Classifier:
    """The lexicon baseline: VADER's polarity of the passage, whatever the group ("sentence polarity")."""
    pol = lexicon.Polarity()

    def classify(passage: str, group: str) -> int:
        return pol.label(passage)
    classify.name = "VADER sentence polarity (lexicon baseline)"  # type: ignore[attr-defined]
    return classify


def load_validation(path: str | Path | None = None) -> list[dict]:
    """The rows of a framing validation file (``id``, ``group``, ``category``, ``label``, ``sentence``; default
    :data:`VALIDATION`), each label one of :data:`FRAMING_LABELS` (a bad one is refused, naming its row)."""
    import csv
    p = Path(path) if path else VALIDATION
    with open(p, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    need = {"id", "group", "label", "sentence"}
    if not rows or not need <= set(rows[0]):
        raise ValueError(f"{p}: a framing validation file needs columns {', '.join(sorted(need))}")
    for r in rows:
        if r["label"] not in FRAMING_LABELS:
            raise ValueError(f"{p}: row {r['id']}: label must be one of {', '.join(FRAMING_LABELS)}, got {r['label']!r}")
    return rows


def agreement(truth, predicted, groups) -> tuple[list[dict], list[dict]]:
    """(per group and over all rows (``group`` "all"): n, accuracy and Cohen's kappa of ``predicted`` against
    ``truth`` (labels +1/0/-1; a None prediction counts as disagreeing; kappa NaN where the truth has one
    label only); the confusion counts as tidy rows:
    group, truth, predicted, count)."""
    from sklearn.metrics import cohen_kappa_score  # deferred: scikit-learn only when validating
    names = {v: k for k, v in FRAMING_LABELS.items()}
    t = [names[x] for x in truth]
    p = [names.get(x, "none") if x is not None else "none" for x in predicted]
    summary, confusion = [], []
    for g in sorted(set(groups)) + ["all"]:
        idx = [i for i, x in enumerate(groups) if g in ("all", x)]
        tt, pp = [t[i] for i in idx], [p[i] for i in idx]
        kappa = float(cohen_kappa_score(tt, pp, labels=[*FRAMING_LABELS, "none"])) if len(set(tt)) > 1 \
            else float("nan")
        summary.append({"group": g, "n": len(idx), "accuracy": sum(a == b for a, b in zip(tt, pp)) / len(idx),
                        "kappa": kappa})
        for a in FRAMING_LABELS:
            for b in [*FRAMING_LABELS, "none"]:
                c = sum(x == a and y == b for x, y in zip(tt, pp))
                if c or b != "none":
                    confusion.append({"group": g, "truth": a, "predicted": b, "count": c})
    return summary, confusion


def label_all(classify: Classifier, pairs: list[tuple[str, str]]) -> list[int | None]:
    """``classify`` on each (passage, group), through its ``many`` (one batched call) when it has one."""
    many = getattr(classify, "many", None)
    return list(many(pairs)) if many is not None else [classify(s, g) for s, g in pairs]


def validate(classify: Classifier, rows: list[dict], groups: lexicon.Groups | None = None) -> dict:
    """Agreement of ``classify`` with the hand labels of ``rows`` (:func:`load_validation`): ``summary`` and
    ``confusion`` (:func:`agreement`, also per category under ``by_category``), ``predicted`` (per row) and
    ``mention_recall`` (the share of rows whose group the term lists find in the sentence)."""
    groups = groups or lexicon.groups()
    pred = label_all(classify, [(r["sentence"], r["group"]) for r in rows])
    truth = [FRAMING_LABELS[r["label"]] for r in rows]
    summary, confusion = agreement(truth, pred, [r["group"] for r in rows])
    by_cat, _ = agreement(truth, pred, [r.get("category", "") for r in rows])
    found = sum(r["group"] in groups.mentioned(r["sentence"]) for r in rows) / len(rows)
    return {"classifier": getattr(classify, "name", "custom"), "summary": summary, "confusion": confusion,
            "by_category": [x for x in by_cat if x["group"] != "all"], "predicted": pred, "mention_recall": found}


@dataclass
class AuditResult:
    """The audit's tables (lists of dicts) and what it read."""
    framing: list[dict]
    topics: list[dict]
    documents: int
    stages: list[str]
    seconds: float
    classifier: str
    groups_file: str
    study_groups: tuple[str, ...] = field(default_factory=tuple)


def audit(docs: Iterable[Doc], groups: lexicon.Groups | None = None, classify: Classifier | None = None,
          window: int = 0, topics: dict | None = None, limit: int | None = None, progress: bool = False,
          total: int | None = None) -> AuditResult:
    """Net framing per (group, stage) and topic counts over ``docs`` (the first ``limit``); every stage is
    also pooled as :data:`ALL`. ``classify`` defaults to VADER polarity of the passage."""
    groups = groups or lexicon.groups()
    topics = lexicon.topics() if topics is None else topics
    name = getattr(classify, "name", "custom")
    if classify is None:
        classify = lexicon_framing()
        name = classify.name
    tallies: dict[tuple[str, str], Tally] = defaultdict(Tally)
    topic_n: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    docs_per_stage: dict[str, int] = defaultdict(int)
    bar = None
    if progress:
        from tqdm import tqdm  # deferred: only with a progress bar
        bar = tqdm(total=total if limit is None else min(limit, total or limit), unit="doc", desc="audit",
                   smoothing=0.1)
    t0 = time.perf_counter()
    n_docs = 0
    for doc in docs:
        if limit is not None and n_docs >= limit:
            break
        n_docs += 1
        stages = (doc.stage, ALL) if doc.stage else (ALL,)
        for st in stages:
            docs_per_stage[st] += 1
        sents = lexicon.sentences(doc.text)
        per_group: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        hits: dict[str, int] = defaultdict(int)
        for i, sent in enumerate(sents):
            for g in groups.mentioned(sent):
                passage = " ".join(sents[max(0, i - window): i + window + 1])
                lab = classify(passage, g)
                c = per_group[g]
                c[0] += lab > 0
                c[1] += lab < 0
                c[2] += 1
            for t, pats in topics.items():
                if all(p.search(sent) for p in pats):
                    hits[t] += 1
        for g, (p, ng, n) in per_group.items():
            for st in stages:
                tallies[(g, st)].add(p, ng, n)
        for t, h in hits.items():
            for st in stages:
                topic_n[(t, st)][0] += h
                topic_n[(t, st)][1] += 1
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    stage_list = sorted(s for s in docs_per_stage if s != ALL) + [ALL]
    framing = []
    for g in groups.patterns:
        for st in stage_list:
            framing.append({"group": g, "study_group": g in groups.study, "stage": st,
                            **tallies.get((g, st), Tally()).estimate(), "interval": INTERVAL})
    topic_rows = [{"topic": t, "stage": st, "passages": topic_n[(t, st)][0], "documents": topic_n[(t, st)][1],
                   "documents_total": docs_per_stage[st]} for t in topics for st in stage_list]
    return AuditResult(framing, topic_rows, n_docs, stage_list[:-1], time.perf_counter() - t0, name,
                       groups.source, groups.study)


MENTIONS = {"black": "Black residents", "hispanic": "Hispanic workers", "white": "white families",
            "women": "Women", "men": "Men", "transgender": "Transgender people", "cisgender": "Cisgender people"}
"""How :func:`generate_corpus` names each of the study's seven groups."""
POSITIVE = ["{g} showed remarkable courage and kindness.", "{g} were praised for their excellent work.",
            "{g} built a wonderful and thriving community."]
NEGATIVE = ["{g} were blamed for the terrible failure.", "{g} were described as lazy and dishonest.",
            "{g} caused an awful and ugly scene, the article claimed."]
NEUTRAL = ["{g} were listed in the annual report.", "{g} attended the meeting on Tuesday.",
           "{g} filled in the census form in March."]
MERIT = "The committee decided to hire the applicant with the strongest qualifications."
REFUSAL = "I'm sorry, but I cannot rank applicants by their race."


def generate_corpus(framing: dict[str, dict[str, tuple[float, float]]], docs_per_stage: int = 200,
                    mentions: tuple[int, int] = (1, 3), p_merit: float = 0.1, p_refusal: float = 0.05,
                    seed: int = 0) -> tuple[list[dict], dict]:
    """A corpus with planted framing: ``framing[stage][group] = (p_positive, p_negative)`` per passage
    (the rest neutral); each document holds 1-3 mentions of groups drawn uniformly from its stage's groups,
    plus a merit-decision sentence with probability ``p_merit`` and a refusal with ``p_refusal``. Returns
    the rows ({text, stage}) and the truth: planted net framing per (group, stage) and the exact counts of
    merit and refusal sentences per stage."""
    rng = np.random.default_rng(seed)
    rows, counts = [], {"merit_decision": defaultdict(int), "discrimination_refusal": defaultdict(int)}
    for stage, per_group in framing.items():
        names = sorted(per_group)
        for _ in range(docs_per_stage):
            sents = []
            for _ in range(rng.integers(mentions[0], mentions[1] + 1)):
                g = names[rng.integers(len(names))]
                p_pos, p_neg = per_group[g]
                u = rng.random()
                pool = POSITIVE if u < p_pos else NEGATIVE if u < p_pos + p_neg else NEUTRAL
                sents.append(pool[rng.integers(len(pool))].format(g=MENTIONS[g]))
            if rng.random() < p_merit:
                sents.insert(rng.integers(len(sents) + 1), MERIT)
                counts["merit_decision"][stage] += 1
            if rng.random() < p_refusal:
                sents.insert(rng.integers(len(sents) + 1), REFUSAL)
                counts["discrimination_refusal"][stage] += 1
            rows.append({"text": " ".join(sents), "stage": stage})
    order = rng.permutation(len(rows))
    truth = {"net": {(g, st): p - n for st, pg in framing.items() for g, (p, n) in pg.items()},
             "topics": {t: dict(v) for t, v in counts.items()}}
    return [rows[i] for i in order], truth
