"""`evenhand audit CORPUS`: net framing of each group and the merit/refusal topic counts of a training corpus,
written as tidy tables (framing.csv, topics.csv) with a manifest (docs/EXPLANATIONS.md)."""
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


def _audit(a) -> int:
    import pandas as pd  # deferred: keeps the CLI's start fast

    from evenhand import audit as au  # deferred: keeps the CLI's start fast
    from evenhand import lexicon  # deferred: keeps the CLI's start fast
    from evenhand.atomic import write_json_atomic  # deferred: keeps the CLI's start fast
    from evenhand.runs import write_table_atomic  # deferred: keeps the CLI's start fast

    if a.window < 0:
        raise ValueError(f"--window must be 0 or more, got {a.window}")
    if a.limit is not None and a.limit < 1:
        raise ValueError(f"--limit must be at least 1, got {a.limit}")
    corpus = Path(a.corpus)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    groups = lexicon.groups(a.groups)
    topics = lexicon.topics(a.topics)
    classify = au.ZeroShot(a.nli_model) if a.nli_model else None
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
    s.add_argument("corpus", help="a .jsonl/.json/.parquet/.txt file (optionally .gz) or a dataset directory")
    s.add_argument("--out", required=True, help="output directory: framing.csv, topics.csv, audit_manifest.json")
    s.add_argument("--text-field", default=None,
                   help="the field holding the text (default: the first of text, content, messages, conversations, "
                        "prompt, chosen, response, completion; a list of messages is joined)")
    s.add_argument("--stage-field", default="stage",
                   help="the field naming the data stage (default 'stage'; 'split' for a dataset directory's splits; "
                        "rows without it have no stage)")
    s.add_argument("--groups", default=None,
                   help="a group term file (format: evenhand/lexicon_data/group_terms.yaml, the default)")
    s.add_argument("--topics", default=None,
                   help="a topic pattern file (format: evenhand/lexicon_data/corpus_topics.yaml, the default)")
    s.add_argument("--window", type=int, default=0,
                   help="sentences either side of a mention that belong to its passage (default 0)")
    s.add_argument("--nli-model", default=None,
                   help="a local zero-shot NLI model directory to classify framing instead of VADER polarity")
    s.add_argument("--limit", type=int, default=None, help="read at most N documents (default all)")
    s.add_argument("--all-groups", action="store_true",
                   help="print every group, not only the study's seven (the tables always hold all)")
    progress_flag(s, BARS_ONLY)
    s.set_defaults(fn=_audit)
