"""`evenhand audit CORPUS`: net framing of each group and the merit/refusal topic counts of a training corpus,
written as tidy tables (framing.csv, topics.csv) with a manifest (docs/EXPLANATIONS.md). `evenhand audit
validate`: the framing classifiers' agreement with the hand-labelled set (the lexicon always; a judge with
--judge-model)."""
from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from evenhand import __version__

from .common import BARS_ONLY, progress, progress_flag


def _count_docs(path: Path) -> int | None:
    """The number of documents when cheap to know (parquet metadata), else None (the bar shows a rate)."""
    if path.is_file() and path.name.lower().endswith(".parquet"):
        import pyarrow.parquet as pq  # deferred: only for parquet
        return pq.ParquetFile(path).metadata.num_rows
    return None


def _classifier(a):
    """The framing classifier the flags ask for: an LLM judge (--judge-model), a zero-shot NLI model
    (--nli-model), or None (the lexicon baseline)."""
    if a.judge_model and a.nli_model:
        raise ValueError("--judge-model and --nli-model: give one framing classifier")
    if a.judge_model:
        from evenhand.framing.judge import JudgeFraming, load_judge  # deferred: loads an engine
        return JudgeFraming(load_judge(a.judge_model, a.engine, a.device))
    if a.nli_model:
        from evenhand.framing import audit as au  # deferred: keeps the CLI's start fast
        return au.ZeroShot(a.nli_model)
    return None


def _validate(a) -> int:
    import pandas as pd  # deferred: keeps the CLI's start fast

    from evenhand.framing import audit as au  # deferred: keeps the CLI's start fast
    from evenhand.files.atomic import write_json_atomic  # deferred: keeps the CLI's start fast
    from evenhand.runs.rundir import write_table_atomic  # deferred: keeps the CLI's start fast
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = au.load_validation(a.set)
    classifiers = [au.lexicon_framing()] + ([c] if (c := _classifier(a)) is not None else [])
    per_row = pd.DataFrame(rows)
    summary, confusion, manifest = [], [], {}
    for c in classifiers:
        r = au.validate(c, rows)
        tag = "lexicon" if c is classifiers[0] else "judge"
        per_row[tag] = r["predicted"]
        summary += [{"classifier": r["classifier"], **x} for x in r["summary"]]
        summary += [{"classifier": r["classifier"], **x, "group": f"category:{x['group']}"} for x in r["by_category"]]
        confusion += [{"classifier": r["classifier"], **x} for x in r["confusion"]]
        manifest[tag] = {"classifier": r["classifier"], "unread_replies": getattr(c, "unread", None)}
    write_table_atomic(out / "validation_rows.csv", per_row)
    write_table_atomic(out / "agreement.csv", pd.DataFrame(summary))
    write_table_atomic(out / "confusion.csv", pd.DataFrame(confusion))
    write_json_atomic(out / "validate_manifest.json", {
        "command": "audit validate", "evenhand": __version__, "set": str(a.set or au.VALIDATION), "rows": len(rows),
        "mention_recall": r["mention_recall"], "classifiers": manifest,
        "judge_prompt": getattr(getattr(classifiers[-1], "prompt", None), "version", None),
        "finished": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    s = pd.DataFrame(summary)
    print(f"{len(rows)} hand-labelled sentences; the term lists find the group in {r['mention_recall']:.1%}")
    print(s[~s["group"].str.startswith("category:")].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"agreement.csv, confusion.csv, validation_rows.csv in {out}", file=sys.stderr)
    return 0


def _audit(a) -> int:
    import pandas as pd  # deferred: keeps the CLI's start fast

    from evenhand.framing import audit as au  # deferred: keeps the CLI's start fast
    from evenhand.framing import lexicon  # deferred: keeps the CLI's start fast
    from evenhand.files.atomic import write_json_atomic  # deferred: keeps the CLI's start fast
    from evenhand.runs.rundir import write_table_atomic  # deferred: keeps the CLI's start fast

    if a.corpus == "validate":
        return _validate(a)
    if a.window < 0:
        raise ValueError(f"--window must be 0 or more, got {a.window}")
    if a.limit is not None and a.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {a.limit}")
    corpus = Path(a.corpus)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    groups = lexicon.groups(a.groups)
    topics = lexicon.topics(a.topics)
    classify = _classifier(a)
    docs = au.read_corpus(corpus, a.text_field, a.stage_field)
    r = au.audit(docs, groups, classify, a.window, topics, a.limit, progress(a), _count_docs(corpus))
    framing, topic_table = pd.DataFrame(r.framing), pd.DataFrame(r.topics)
    write_table_atomic(out / "framing.csv", framing)
    write_table_atomic(out / "topics.csv", topic_table)
    write_json_atomic(out / "audit_manifest.json", {
        "command": "audit", "evenhand": __version__, "corpus": str(corpus), "documents": r.documents,
        "stages": r.stages, "text_field": a.text_field, "stage_field": a.stage_field, "window": a.window,
        "limit": a.limit, "classifier": r.classifier, "groups_file": r.groups_file, "study_groups": list(r.study_groups),
        "topics_file": str(a.topics or lexicon.DATA / "corpus_topics.yaml"), "interval": au.INTERVAL,
        "seconds": round(r.seconds, 3), "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "tables": ["framing.csv", "topics.csv"]})
    show = framing[framing["study_group"] | a.all_groups]
    cols = ["group", "stage", "passages", "documents", "net_framing", "ci_low", "ci_high"]
    print(f"{r.documents:,} documents in {r.seconds:.1f} s ({r.documents / max(r.seconds, 1e-9):,.0f} doc/s); "
          f"framing by {r.classifier}; 95% CI: {au.INTERVAL}")
    print(show[cols].to_string(index=False, float_format=lambda v: f"{v:+.3f}"))
    print(topic_table.to_string(index=False))
    print(f"tables and manifest in {out}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `audit` to the top-level subparsers ``sub``."""
    s = sub.add_parser("audit", help="net framing of each group in a training corpus, and merit/refusal counts",
                       description="Stream a corpus (JSONL, parquet or plain text, gzip'd or not, or a local Hugging "
                                   "Face dataset directory), find the sentences that mention each group, classify "
                                   "their framing, and write net framing (share positive minus share negative) per "
                                   "group and stage with 95%% CIs over documents, plus counts of passages about "
                                   "merit-based decisions and refusals of discriminatory requests.")
    s.add_argument("corpus", help="a .jsonl/.json/.parquet/.txt file (optionally .gz) or a dataset directory; "
                                  "'validate': the framing classifiers' agreement with the hand-labelled set")
    s.add_argument("--out", required=True, help="output directory: framing.csv, topics.csv, audit_manifest.json")
    s.add_argument("--text-field", default=None,
                   help="the field holding the text (default: the first of text, content, messages, conversations, "
                        "prompt, chosen, response, completion; a list of messages is joined)")
    s.add_argument("--stage-field", default="stage",
                   help="the field naming the data stage (default 'stage'; 'split' for a dataset directory's splits; "
                        "rows without it have no stage)")
    s.add_argument("--groups", default=None,
                   help="a group term file (format: evenhand/framing/lexicon_data/group_terms.yaml, the default)")
    s.add_argument("--topics", default=None,
                   help="a topic pattern file (format: evenhand/framing/lexicon_data/corpus_topics.yaml, the default)")
    s.add_argument("--window", type=int, default=0,
                   help="sentences either side of a mention that belong to its passage (default 0)")
    s.add_argument("--nli-model", default=None,
                   help="a local zero-shot NLI model directory to classify framing instead of VADER polarity")
    s.add_argument("--judge-model", default=None,
                   help="label each mention's framing toward its group with this model as an LLM judge (prompt "
                        "evenhand.framing.judge.FRAMING; any --engine) instead of VADER sentence polarity")
    s.add_argument("--engine", default="hf", help="the judge's engine: hf, vllm, openai or one registered")
    s.add_argument("--device", default=None, help="the judge's device (hf engine; default auto)")
    s.add_argument("--set", default=None,
                   help="validate: a hand-labelled file (default evenhand/framing/lexicon_data/framing_validation.csv)")
    s.add_argument("--limit", type=int, default=None, help="read at most N documents (default all)")
    s.add_argument("--all-groups", action="store_true",
                   help="print every group, not only the study's seven (the tables always hold all)")
    progress_flag(s, BARS_ONLY)
    s.set_defaults(fn=_audit)
