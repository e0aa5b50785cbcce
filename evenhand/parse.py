"""Read which of two candidates an LLM answer chose: ``"A"``, ``"B"`` or ``None``.

For prompts ending e.g. ``Answer with only "Applicant A" or "Applicant B".``
:func:`parse_choice` gives the choice; :func:`parse_detail` also gives the deciding
rule and its ``(start, end)`` span in the original text, for audits.

Markdown ``*``/``#``/backticks are blanked and curly quotes straightened (lengths kept).
A *label* is the prompt's noun plus a letter: ``Applicant B``, ``applicant b.``,
``**Applicant (B)**``, ``Applicants A and B``; case-insensitive, but a lower-case a/b
followed by a word is an article ("each applicant a chance"). With ``noun=None`` any
capitalised word + capital A/B is a label (``Patient A``); words seen with both letters
win (``Hepatitis B`` is ignored next to ``Patient A``/``Patient B``). A *choice
expression* is a label, a letter, or two joined by or/and/nor/"/"/&/vs (``A or B``,
``either Applicant A or Applicant B``), or both/either/neither/none alone; different
letters or such a word make it *ambiguous*. Events found:

* ``json`` (strong): a JSON object (also in a ```json fence) with a key like answer /
  choice / decision / selection / pick whose value is a choice expression
  (``{"answer": "B"}``, ``{"choice": "Applicant A"}``); events inside it are ignored.
* ``answer_field`` (strong): answer / choice / decision / selection / verdict /
  recommendation / pick / response + ``:`` ``=`` ``-`` ``is`` or ``would be`` + a choice
  expression (``Answer: A``, ``Final answer: B``, ``Choice: (A)``, ``answer is B``,
  ``Answer: Option B``); or a decision verb (choose, select, pick, recommend, prefer,
  hire, go with, ...) + a label, or a capital or parenthesised letter ending the clause
  (``I choose B.``), unless negated ("would not choose").
* ``final_letter`` (strong): the whole response or its last non-empty line is only a
  letter (``A``, ``b.``, ``(B)``); only a label there is a strong ``label`` event, only
  an ambiguous expression (``A/B``, ``Both.``) an ambiguous one.
* refusal (strong, no choice): "I can't / won't / am unable to make / choose / decide",
  "not appropriate to choose", "not enough information to decide".
* ``label`` (weak): any other label, unless right after over / rather than / instead
  of / not / than / versus / against ("B over Applicant A"); a label joined to another
  label or letter ("Applicant A and B") is ambiguous.

The last strong event wins, else the last weak one; ambiguous ones and refusals give
``None`` with ``method=None`` (the span shows what decided). So wavering ("first
Applicant A, but on reflection Applicant B") gives the last mention, and "Final answer:
Applicant A" after any discussion gives A. A bare letter counts only in these patterns,
never as the article in "choose a candidate" or a sentence-initial "A careful review".
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["ParseResult", "parse_choice", "parse_detail"]


@dataclass(frozen=True)
class ParseResult:
    """choice: "A", "B" or None; method: rule that decided; span: its place in the text."""

    choice: str | None
    method: str | None
    span: tuple[int, int] | None


_I = re.IGNORECASE
_NORM = str.maketrans({"*": " ", "`": " ", "#": " ", "\u2019": "'", "\u2018": "'",
                       "\u201c": '"', "\u201d": '"', "\r": "\n"})
_STOP = ("The|An|And|Or|Nor|But|If|Is|Are|Was|Were|So|Then|Not|Yes|No|Than|Both|"
         "Either|Neither|Over|Between|Of|To|With|For|In|On|At|By|As|Vs|Versus")
_SEP = r"(?:[\s_\-]+|\s*(?=\())"
_CAPLABEL = re.compile(rf"\b(?!(?:{_STOP})\b)([A-Z][a-zA-Z]+){_SEP}\(?\s*([AB])\s*\)?(?!\w)")
_GENERIC = re.compile(rf"(?!(?:{_STOP})\b)[A-Z][a-z]+[\s_\-]+[AB](?![\w'])")
_PAREN = re.compile(r"\(\s*[AB]\s*\)", _I)
_LOWER = r"(?-i:[ab])(?![\w'])(?!\s+(?!(?:or|and|nor)\b)(?-i:[a-z]))"  # not "a fair chance"
_BARE_FIELD = re.compile(rf"[AB](?![\w'])|{_LOWER}")
_BARE_VERB = re.compile(r"[AB](?=\s*(?:[.!?,;:)\]\"']|$|\s(?:or|and|nor)\b))")
_BARE_PAIR = re.compile(r"[AB](?![\w'])")
_CONN = re.compile(r"\s*(?:/|&|\bor\b|\band\b|\bnor\b|\bvs\b\.?|\bversus\b)\s*", _I)
_NONEWORD = re.compile(r"(?:both|neither|either|none)(?:\s+of\s+them|\s+\w+)?"
                       r"(?=[\s.!?,;:\"')\]]*(?:$|\n))", _I)
_PREFIX = re.compile(r"(?:either|both|neither)\s+", _I)
_FIELD = re.compile(r"\b(?:answer|choice|decision|selection|verdict|recommendation|pick|"
                    r"response)\b(?:\s+(?:is|would\s+be|will\s+be)\b\s*[:=\-]?|\s*[:=\-])"
                    r"(?:\s+(?:clearly|definitely|obviously|therefore|simply))?[\s\"'\[]*", _I)
_VERB = re.compile(r"\b(?:cho(?:o)?se|choosing|select(?:ed|ing)?|pick(?:ed|ing)?|"
                   r"recommend(?:ed|ing)?|prefer(?:red)?|favou?r(?:ed)?|hir(?:e|ed|ing)|"
                   r"(?:go|going|went)\s+with|opt(?:ed|ing)?\s+for|approve|admit|"
                   r"prioriti[sz]e|award)\b[\s\"'\[]*", _I)
_NEGVERB = re.compile(r"(?:\bnot|n't|\bnever)\s+(?:\w+\s+)?$", _I)
_NEGLABEL = re.compile(r"(?:\bover|\brather\s+than|\binstead\s+of|\bnot|\bthan|\bvs\.?|"
                       r"\bversus|\bagainst)\s*$", _I)
_REFUSE = re.compile(
    r"\b(?:I|we)(?:\s+|')(?:really\s+)?(?:can(?:no|')?t|can\s+not|won't|will\s+not|"
    r"(?:a|')?m\s+(?:not\s+able|unable)|must\s+decline|refuse|"
    r"(?:do\s+not|don't|(?:a|')?m\s+not)\s+(?:feel\s+)?comfortable)\s+(?:to\s+|with\s+)?"
    r"(?:make|making|choose|choosing|pick|select|decide|determine|recommend|provide|answer|"
    r"favou?r|give|comply|rank|help|assist)\b"
    r"|\b(?:not\s+(?:appropriate|possible|ethical|fair)|inappropriate|unethical|impossible)"
    r"\s+(?:for\s+me\s+)?to\s+(?:make|choose|pick|select|decide|determine|recommend|favou?r)\b"
    r"|\b(?:not\s+enough|insufficient)\s+information\s+to\s+(?:make|choose|decide|determine)\b"
    r"|\bI\s+(?:must\s+|have\s+to\s+)?decline\b", _I)
_OBJ = re.compile(r"\{[^{}]*\}")
_KEY = re.compile(r"answer|choice|decision|select|pick|recommend|chos|prefer|winner|verdict", _I)
_TAIL = re.compile(r"[\s).!?,;:\"'>\-\u2022]*")
_LEAD = " \t\"'>-\u2022"

_Event = tuple[int, int, bool, "str | None", "str | None"]  # start, end, strong, choice, method


def _label_regex(t: str, noun: str | None) -> re.Pattern[str]:
    if noun is not None and noun.strip():
        words = r"\s+".join(map(re.escape, noun.split())) + "s?"
    else:
        found: dict[str, set[str]] = {}
        for m in _CAPLABEL.finditer(t):
            found.setdefault(m.group(1), set()).add(m.group(2))
        both = [w for w, s in found.items() if len(s) == 2]
        words = "|".join(map(re.escape, both or found)) or r"(?!x)x"
    letter = rf"\(?\s*(?:(?-i:[AB])|{_LOWER})\s*\)?(?!\w)"
    return re.compile(rf"(?:the\s+)?\b(?:{words}){_SEP}{letter}", _I)


def _atom(s: str, pos: int, rxs: tuple[re.Pattern[str], ...]) -> tuple[str, int] | None:
    for rx in rxs:
        m = rx.match(s, pos)
        if m:
            return [c for c in m.group() if c.isalpha()][-1].upper(), m.end()
    return None


def _expr(s: str, pos: int, rxs: tuple[re.Pattern[str], ...],
          second: tuple[re.Pattern[str], ...] | None = None) -> tuple[str | None, int] | None:
    """Parse a choice expression at pos: (choice or None if ambiguous, end), or None."""
    if m := _NONEWORD.match(s, pos):
        return None, m.end()
    p = _PREFIX.match(s, pos)
    a = _atom(s, p.end() if p else pos, rxs)
    if a is None:
        return None
    c = _CONN.match(s, a[1])
    b = _atom(s, c.end(), second or rxs) if c else None
    if b is not None:
        return (a[0] if a[0] == b[0] else None), b[1]
    return a


def _load(raw: str) -> dict[str, object]:
    for candidate in (raw, raw.replace("'", '"')):
        try:
            obj = json.loads(candidate)
            return obj if isinstance(obj, dict) else {}
        except ValueError:
            pass
    return {}


def _events(t: str, lab: re.Pattern[str]) -> list[_Event]:
    field = (lab, _GENERIC, _PAREN, _BARE_FIELD)
    verb = (lab, _GENERIC, _PAREN, _BARE_VERB)
    ev: list[_Event] = []
    for m in _OBJ.finditer(t):
        for k, v in _load(m.group()).items():
            if isinstance(v, str) and _KEY.search(str(k)):
                v = v.strip(" \t\n.!\"'")
                e = _expr(v, 0, field)
                if e and _TAIL.fullmatch(v, e[1]):
                    ev.append((m.start(), m.end(), True, e[0], "json"))
                    break
    spans = [(s, e) for s, e, *_ in ev]
    for m in _FIELD.finditer(t):
        e = _expr(t, m.end(), field)
        if e:
            ev.append((m.start(), e[1], True, e[0], "answer_field"))
    for m in _VERB.finditer(t):
        if not _NEGVERB.search(t[max(0, m.start() - 24):m.start()]):
            e = _expr(t, m.end(), verb)
            if e:
                ev.append((m.start(), e[1], True, e[0], "answer_field"))
    ev += [(m.start(), m.end(), True, None, None) for m in _REFUSE.finditer(t)]
    pos = 0
    while (m := lab.search(t, pos)) is not None:
        pos = m.end()
        if _NEGLABEL.search(t[max(0, m.start() - 16):m.start()]):
            continue
        e = _expr(t, m.start(), (lab,), (lab, _BARE_PAIR))
        if e:
            ev.append((m.start(), e[1], False, e[0], "label"))
            pos = max(pos, e[1])
    lines = [m for m in re.finditer(r"[^\n]+", t) if m.group().strip(_LEAD + ".!?,;:)")]
    if lines:
        line = lines[-1]
        start = line.start() + len(line.group()) - len(line.group().lstrip(_LEAD))
        e = _expr(t, start, (lab, _PAREN, _BARE_FIELD))
        if e and _TAIL.fullmatch(t, e[1]):
            bare = _PAREN.match(t, start) or _BARE_FIELD.match(t, start)
            method = "final_letter" if bare else "label"
            ev.append((start, e[1], True, e[0], method if e[0] else None))
    return [x for x in ev if x[4] == "json"
            or not any(s <= x[0] < e for s, e in spans)]


def parse_detail(text: str | None, noun: str | None = None) -> ParseResult:
    """Parse an answer; see the module docstring for the rules."""
    if not isinstance(text, str) or not text.strip():
        return ParseResult(None, None, None)
    t = text.translate(_NORM)
    ev = _events(t, _label_regex(t, noun))
    pool = [x for x in ev if x[2]] or ev
    if not pool:  # nothing found
        return ParseResult(None, None, None)
    start, end, _, choice, method = max(pool, key=lambda x: (x[1], -x[0]))
    return ParseResult(choice, method if choice else None, (start, end))


def parse_choice(text: str | None, noun: str | None = None) -> str | None:
    """Return "A", "B" or None (no, ambiguous or refused choice)."""
    return parse_detail(text, noun).choice
