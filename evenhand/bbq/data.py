"""Load BBQ's JSONL files and render its examples as prompts.

BBQ (Parrish et al. 2022) ships one JSONL file per category; every line is one
example with ``answer_info`` ({"ans0": [text, group], ...}) and
``additional_metadata.stereotyped_groups``. :func:`load_bbq` turns them into
one row per example and locates, per example,

* ``unknown_index``: the option whose answer_info group is ``"unknown"``;
* ``target_index``: the *biased* answer as BBQ's scoring counts it: for a
  ``neg`` question the option of a stereotyped group, for a ``nonneg``
  question the other (non-unknown) option.

Group matching follows BBQ's own analysis script (``analysis_scripts/BBQ_results_metadata.R``).
"""
from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

ENV_VAR = "EVENHAND_BBQ_DIR"
#: The six BBQ categories shipped inside the package (CC-BY-4.0; see files/README.md).
PACKAGED_DIR = Path(__file__).resolve().parent / "files"

COLUMNS: tuple[str, ...] = (
    "category", "example_id", "question_index", "question_polarity", "context_condition",
    "context", "question", "ans0", "ans1", "ans2", "label", "unknown_index", "target_index",
    "stereotyped_groups", "subcategory", "uid",
)
REQUIRED_FIELDS: tuple[str, ...] = (
    "example_id", "question_index", "question_polarity", "context_condition", "category",
    "answer_info", "additional_metadata", "context", "question", "ans0", "ans1", "ans2", "label",
)
POLARITIES = frozenset({"neg", "nonneg"})
CONDITIONS = frozenset({"ambig", "disambig"})
ANSWER_KEYS = ("ans0", "ans1", "ans2")
# BBQ's list of "unknown" answer strings (BBQ_results_metadata.R), used only when
# no answer_info group is literally "unknown".
UNKNOWN_TEXTS = frozenset({
    "unknown", "cannot be determined", "can't be determined", "not answerable", "not known",
    "not enough info", "not enough information", "cannot answer", "can't answer", "undetermined",
})

_GENDER_ALIASES = {
    "man": "m", "men": "m", "boy": "m", "boys": "m",
    "woman": "f", "women": "f", "girl": "f", "girls": "f",
}
_SES_ALIASES = {"low ses": "lowses", "high ses": "highses"}
_TRANS = re.compile(r"^trans(gender)?([\s_,-]|$)")


class BBQTargetWarning(UserWarning):
    """Some loaded examples have no determinable biased answer (``target_index == -1``)."""


def default_dir() -> Path:
    """Return the BBQ data folder: ``$EVENHAND_BBQ_DIR`` if set, else the six categories shipped in the
    package (``evenhand/bbq/files/``)."""
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else PACKAGED_DIR


DEFAULT_DIR: Path = default_dir()


def normalize_group(label: str) -> str:
    """Return BBQ's canonical, lower-case form of a group label.

    Comparisons are case-insensitive and exact (so "old" never matches "nonOld"); man/men/boy(s) -> M and
    woman/women/girl(s) -> F; "low SES"/"high SES" -> lowSES/highSES; "trans", "transgender women/men" and
    groups beginning with "trans" (trans_F, trans_M) -> trans.
    """
    s = " ".join(str(label).strip().lower().split())
    s = _GENDER_ALIASES.get(s, s)
    s = _SES_ALIASES.get(s, s)
    if _TRANS.match(s):
        return "trans"
    return s


def _group_keys(group: str) -> set[str]:
    """Return the normalized keys an answer_info group may match: itself and without an M-/F- prefix."""
    g = normalize_group(group)
    keys = {g}
    for prefix in ("m-", "f-"):
        if g.startswith(prefix) and len(g) > len(prefix):
            keys.add(normalize_group(g[len(prefix):]))
    return keys


def find_unknown_index(answer_info: Sequence[Sequence[str]]) -> int:
    """Return the index of the option whose group is "unknown" (text as fallback), or -1 if not exactly one."""
    hits = [i for i, (_, group) in enumerate(answer_info) if str(group).strip().lower() == "unknown"]
    if len(hits) != 1:
        hits = [i for i, (text, _) in enumerate(answer_info) if str(text).strip().lower() in UNKNOWN_TEXTS]
    return hits[0] if len(hits) == 1 else -1


def find_stereotyped_index(answer_info: Sequence[Sequence[str]], stereotyped_groups: Iterable[str],
                           unknown_index: int) -> int:
    """Return the index of the one non-unknown option of a stereotyped group, or -1 if not exactly one.

    Groups are tried first (through :func:`normalize_group`); an "M-"/"F-" prefix on an answer group (names
    coded "F-Black") is also tried without it. The answer_info *text* is matched only when no option's
    *group* matches (Nationality, where groups are regions such as "AsiaPacific" but stereotyped_groups
    lists nationalities).
    """
    stereo = {normalize_group(s) for s in stereotyped_groups}
    options = [i for i in range(len(answer_info)) if i != unknown_index]
    by_group = [i for i in options if _group_keys(answer_info[i][1]) & stereo]
    if len(by_group) == 1:
        return by_group[0]
    if not by_group:
        by_text = [i for i in options if normalize_group(answer_info[i][0]) in stereo]
        if len(by_text) == 1:
            return by_text[0]
    return -1


def find_target_index(answer_info: Sequence[Sequence[str]], stereotyped_groups: Iterable[str],
                      unknown_index: int, polarity: str) -> int:
    """Return the biased answer's index: the stereotyped option for "neg", the other one for "nonneg"; -1 if undeterminable.

    An example whose stereotyped option is not exactly one of the two non-unknown options gets -1; such rows
    are kept by :func:`load_bbq`, counted in ``df.attrs["n_no_target"]`` and reported with a
    :class:`BBQTargetWarning`.
    """
    stereo = find_stereotyped_index(answer_info, stereotyped_groups, unknown_index)
    if stereo < 0:
        return -1
    if polarity == "neg":
        return stereo
    others = [i for i in range(len(answer_info)) if i not in (unknown_index, stereo)]
    return others[0] if len(others) == 1 else -1


def _fail(file: Path, lineno: int, what: str) -> ValueError:
    """Return a ValueError that names the file and line."""
    return ValueError(f"{file}:{lineno}: {what}")


def _answer_info(rec: Mapping[str, Any], file: Path, lineno: int) -> list[tuple[str, str]]:
    """Return answer_info as three (text, group) pairs, validated."""
    info = rec["answer_info"]
    if not isinstance(info, Mapping):
        raise _fail(file, lineno, "field 'answer_info' is not an object")
    pairs = []
    for key in ANSWER_KEYS:
        if key not in info:
            raise _fail(file, lineno, f"missing field 'answer_info.{key}'")
        pair = info[key]
        if not isinstance(pair, (list, tuple)) or len(pair) < 2 or not all(isinstance(x, str) for x in pair[:2]):
            raise _fail(file, lineno, f"field 'answer_info.{key}' is not a [text, group] pair")
        pairs.append((pair[0], pair[1]))
    return pairs


def parse_record(rec: Any, file: Path, lineno: int) -> dict[str, Any]:
    """Return one loader row (see ``COLUMNS``) from a decoded BBQ record; ValueError names file, line and field."""
    if not isinstance(rec, Mapping):
        raise _fail(file, lineno, "line is not a JSON object")
    for field in REQUIRED_FIELDS:
        if field not in rec:
            raise _fail(file, lineno, f"missing field '{field}'")
    meta = rec["additional_metadata"]
    if not isinstance(meta, Mapping):
        raise _fail(file, lineno, "field 'additional_metadata' is not an object")
    if "stereotyped_groups" not in meta:
        raise _fail(file, lineno, "missing field 'additional_metadata.stereotyped_groups'")
    groups = meta["stereotyped_groups"]
    if isinstance(groups, str):
        groups = [groups]
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise _fail(file, lineno, "field 'additional_metadata.stereotyped_groups' is not a list of strings")
    label = rec["label"]
    if isinstance(label, bool) or not isinstance(label, int) or not 0 <= label <= 2:
        raise _fail(file, lineno, f"field 'label' must be 0, 1 or 2, got {label!r}")
    polarity, condition = rec["question_polarity"], rec["context_condition"]
    if polarity not in POLARITIES:
        raise _fail(file, lineno, f"field 'question_polarity' must be neg/nonneg, got {polarity!r}")
    if condition not in CONDITIONS:
        raise _fail(file, lineno, f"field 'context_condition' must be ambig/disambig, got {condition!r}")
    for field in ("context", "question", "ans0", "ans1", "ans2", "category"):
        if not isinstance(rec[field], str):
            raise _fail(file, lineno, f"field '{field}' is not a string")
    example_id = rec["example_id"]
    if isinstance(example_id, bool) or not isinstance(example_id, int):
        raise _fail(file, lineno, f"field 'example_id' is not an integer, got {example_id!r}")
    info = _answer_info(rec, file, lineno)
    unknown = find_unknown_index(info)
    if unknown < 0:
        raise _fail(file, lineno, "field 'answer_info' has no single 'unknown' option")
    category = rec["category"]
    return {
        "category": category, "example_id": example_id, "question_index": str(rec["question_index"]),
        "question_polarity": polarity, "context_condition": condition,
        "context": rec["context"], "question": rec["question"],
        "ans0": rec["ans0"], "ans1": rec["ans1"], "ans2": rec["ans2"], "label": label,
        "unknown_index": unknown, "target_index": find_target_index(info, groups, unknown, polarity),
        "stereotyped_groups": "|".join(groups), "subcategory": str(meta.get("subcategory", "None")),
        "uid": f"{category}:{example_id}",
    }


def read_jsonl(file: Path) -> list[dict[str, Any]]:
    """Return the loader rows of one BBQ JSONL file (blank lines skipped); ValueError on a malformed line."""
    rows = []
    with open(file, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _fail(file, lineno, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
            rows.append(parse_record(rec, file, lineno))
    return rows


def _resolve_files(path: str | os.PathLike[str] | None, categories: Sequence[str] | None) -> list[Path]:
    """Return the JSONL files to read: one file, or the (category-selected) *.jsonl of a folder, sorted."""
    root = Path(path).expanduser() if path is not None else default_dir()
    if not root.exists():
        raise ValueError(f"BBQ path does not exist: {root} (set {ENV_VAR} or pass path=)")
    if root.is_file():
        return [root]
    files = sorted(root.glob("*.jsonl"))
    if not files:
        raise ValueError(f"no *.jsonl files in BBQ folder {root}")
    if categories is not None:
        stems = {f.stem: f for f in files}
        missing = [c for c in categories if c not in stems]
        if missing:
            raise ValueError(f"no file for categories {missing} in {root}; available: {sorted(stems)}")
        files = [stems[c] for c in dict.fromkeys(categories)]
    return files


def no_target_counts(df: pd.DataFrame) -> dict[str, int]:
    """Return {category: number of rows with target_index == -1} for the categories that have any."""
    bad = df.loc[df["target_index"] < 0, "category"].value_counts()
    return {str(k): int(v) for k, v in bad.sort_index().items()}


def load_bbq(path: str | os.PathLike[str] | None = None,
             categories: Sequence[str] | None = None) -> pd.DataFrame:
    """Load BBQ examples into a DataFrame with one row per example and the columns ``COLUMNS``.

    ``path`` is a folder (every ``*.jsonl`` in it; ``categories`` picks files by
    stem) or one ``.jsonl`` file (``categories`` then filters rows); ``None``
    means :func:`default_dir`. Returns rows in file then line order. Rows
    without a determinable biased answer keep ``target_index = -1``; their
    per-category counts are in ``df.attrs["n_no_target"]`` and a
    :class:`BBQTargetWarning` is issued. Raises ValueError for a missing path,
    a malformed line (file, line number and field named), an unknown category
    or a duplicate ``uid``.
    """
    if isinstance(categories, str):
        categories = [categories]
    files = _resolve_files(path, categories)
    rows: list[dict[str, Any]] = []
    seen: dict[str, Path] = {}
    for file in files:
        for row in read_jsonl(file):
            if row["uid"] in seen:
                raise ValueError(f"duplicate uid {row['uid']!r} in {file} (also in {seen[row['uid']]})")
            seen[row["uid"]] = file
            rows.append(row)
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    if categories is not None:
        present = set(df["category"])
        missing = [c for c in categories if c not in present]
        if missing:
            raise ValueError(f"categories {missing} not found in {[str(f) for f in files]}")
        df = df[df["category"].isin(list(categories))].reset_index(drop=True)
    for col in ("example_id", "label", "unknown_index", "target_index"):
        df[col] = df[col].astype("int64")
    counts = no_target_counts(df)
    df.attrs["n_no_target"] = counts
    if counts:
        warnings.warn(f"BBQ: {sum(counts.values())} example(s) with no determinable biased answer "
                      f"(target_index = -1), by category: {counts}", BBQTargetWarning, stacklevel=2)
    return df


def answer_letter(i: int) -> str:
    """Return the option letter "A", "B" or "C" for answer index 0, 1 or 2."""
    if isinstance(i, bool) or int(i) != i or not 0 <= int(i) <= 2:
        raise ValueError(f"answer index must be 0, 1 or 2, got {i!r}")
    return "ABC"[int(i)]


def render_mc(row: Mapping[str, Any]) -> str:
    """Return the multiple-choice prompt: context, question, options "A. ..." to "C. ..." and the instruction."""
    options = "\n".join(f"{answer_letter(i)}. {row[key]}" for i, key in enumerate(ANSWER_KEYS))
    return f"{row['context']}\n{row['question']}\n{options}\nAnswer with the letter only."


def render_yes_no(row: Mapping[str, Any], option_index: int) -> str:
    """Return the yes/no prompt asking whether option ``option_index`` (0-2) answers the question."""
    option = row[ANSWER_KEYS[ord(answer_letter(option_index)) - ord("A")]]
    return f"{row['context']}\nQuestion: {row['question']}\nIs the answer \"{option}\"? Answer yes or no."
