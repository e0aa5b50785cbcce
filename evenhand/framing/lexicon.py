"""Word lists and the sentence polarity that the explanation measures and the corpus audit share.

The lists are data files in ``evenhand/framing/lexicon_data/`` (each says its source): Hyland's (2005) hedges and
boosters, the group term lists (the study's seven groups and the suite's contrast groups, with the identity
words of explanations) and the audit's topic patterns. Matching is case-insensitive on whole words; an entry
ending in ``*`` matches any ending; a group's adjectives ("black", "older") count only before a person noun.

Polarity is VADER (Hutto & Gilbert 2014, the ``vaderSentiment`` package, extra ``audit``): a sentence is
positive at compound >= 0.05, negative at <= -0.05 (the authors' thresholds), else neutral. VADER was chosen
over a trained classifier because it is a maintained, documented, rule-based lexicon that runs on a CPU with
no weights and gives the same answer everywhere; its limits: docs/EXPLANATIONS.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

DATA = Path(__file__).resolve().parent / "lexicon_data"
POS, NEG = 0.05, -0.05
"""VADER's thresholds on the compound score: positive at or above POS, negative at or below NEG."""
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d[\d,]*(?:\.\d+)?")
_SENT = re.compile(r"(?<=[.!?])\s+|\n+")


def words(text: str) -> list[str]:
    """The word and number tokens of ``text``."""
    return _WORD.findall(text or "")


def sentences(text: str) -> list[str]:
    """``text`` split after ., ! or ? followed by white space, and at line breaks; empty pieces dropped."""
    return [s.strip() for s in _SENT.split(text or "") if s.strip()]


def _entry(term: str) -> str:
    term = term.strip().lower()
    star = term.endswith("*")
    body = r"\s+".join(re.escape(w) for w in term.rstrip("*").split())
    return body + (r"[\w'-]*" if star else "")


def pattern(terms, adjectives=(), nouns=()) -> re.Pattern:
    """One case-insensitive regex matching any of ``terms`` as whole words (longest first), or any of
    ``adjectives`` followed by one of ``nouns`` with at most one word between."""
    alts = [_entry(t) for t in sorted(set(terms), key=len, reverse=True)]
    if adjectives and nouns:
        adj = "|".join(_entry(a) for a in sorted(set(adjectives), key=len, reverse=True))
        noun = "|".join(_entry(n) for n in sorted(set(nouns), key=len, reverse=True))
        alts.insert(0, rf"(?:{adj})\s+(?:[a-z'-]+\s+)?(?:{noun})")
    if not alts:
        raise ValueError("a term list is empty")
    return re.compile(r"(?<![\w-])(?:" + "|".join(alts) + r")(?![\w-])", re.IGNORECASE)


def count(pat: re.Pattern, text: str) -> int:
    """Non-overlapping matches of ``pat`` in ``text``."""
    return sum(1 for _ in pat.finditer(text or ""))


def _yaml(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping")
    return data


@dataclass(frozen=True)
class Stance:
    """Hyland's hedges and boosters, compiled."""
    hedges: re.Pattern
    boosters: re.Pattern
    source: str


@lru_cache(maxsize=None)
def stance(path: str | None = None) -> Stance:
    """The hedge and booster lists (default ``lexicon_data/hedges_boosters.yaml``)."""
    p = Path(path) if path else DATA / "hedges_boosters.yaml"
    d = _yaml(p)
    for key in ("hedges", "boosters", "source"):
        if not d.get(key):
            raise ValueError(f"{p}: field '{key}' is missing or empty")
    return Stance(pattern(d["hedges"]), pattern(d["boosters"]), str(d["source"]))


@dataclass(frozen=True)
class Groups:
    """Group term lists: ``patterns`` (group -> regex), which groups are the study's seven, the suite
    profiles each covers, and the identity-framing words of explanations."""
    patterns: dict[str, re.Pattern]
    study: tuple[str, ...]
    profiles: dict[str, tuple[str, ...]]
    identity_framing: re.Pattern | None
    source: str

    def mentioned(self, text: str) -> list[str]:
        """The groups ``text`` mentions, in list order."""
        return [g for g, p in self.patterns.items() if p.search(text)]


@lru_cache(maxsize=None)
def groups(path: str | None = None) -> Groups:
    """The group term lists (default ``lexicon_data/group_terms.yaml``; the file format is described at its
    top). A group with neither terms nor adjectives is refused, naming it."""
    p = Path(path) if path else DATA / "group_terms.yaml"
    d = _yaml(p)
    nouns = d.get("person_nouns") or []
    pats, profiles, study = {}, {}, []
    for section in ("study_groups", "suite_groups"):
        for name, g in (d.get(section) or {}).items():
            if not isinstance(g, dict) or not (g.get("terms") or g.get("adjectives")):
                raise ValueError(f"{p}: group '{name}' in '{section}' has no 'terms' or 'adjectives'")
            if name in pats:
                raise ValueError(f"{p}: group '{name}' is listed twice")
            pats[name] = pattern(g.get("terms") or [], g.get("adjectives") or [], nouns)
            profiles[name] = tuple(g.get("profiles") or ())
            if section == "study_groups":
                study.append(name)
    if not pats:
        raise ValueError(f"{p}: no groups ('study_groups' or 'suite_groups')")
    framing = d.get("identity_framing")
    return Groups(pats, tuple(study), profiles, pattern(framing) if framing else None, str(p))


@lru_cache(maxsize=None)
def topics(path: str | None = None) -> dict[str, tuple[re.Pattern, ...]]:
    """The audit's topics: name -> one regex per word list, all of which a sentence must match."""
    p = Path(path) if path else DATA / "corpus_topics.yaml"
    out = {}
    for name, lists in _yaml(p).items():
        if not isinstance(lists, dict) or not lists:
            raise ValueError(f"{p}: topic '{name}' must map list names to word lists")
        out[name] = tuple(pattern(v) for v in lists.values())
    return out


class Polarity:
    """Sentence polarity by VADER. ``lexicon``: a word -> valence mapping that replaces VADER's own (tests
    flip it to show that the measures notice)."""

    def __init__(self, lexicon: dict[str, float] | None = None):
        try:
            from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer  # deferred: optional extra
        except ImportError as e:
            raise ImportError("sentence polarity needs the vaderSentiment package: pip install "
                              "'evenhand[audit]' (or vaderSentiment==3.3.2)") from e
        self.analyzer = SentimentIntensityAnalyzer()
        if lexicon is not None:
            self.analyzer.lexicon = dict(lexicon)
        self.name = "vader" if lexicon is None else "vader (custom lexicon)"

    def compound(self, sentence: str) -> float:
        """VADER's compound score in [-1, 1]."""
        return float(self.analyzer.polarity_scores(sentence)["compound"])

    def label(self, sentence: str) -> int:
        """+1 positive, -1 negative, 0 neutral (thresholds :data:`POS`, :data:`NEG`)."""
        c = self.compound(sentence)
        return 1 if c >= POS else -1 if c <= NEG else 0

    def flipped(self) -> Polarity:
        """The same analyzer with every valence negated (a broken variant for tests)."""
        return Polarity({w: -v for w, v in self.analyzer.lexicon.items()})
