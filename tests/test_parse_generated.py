"""The parser on answers as people write them (issue 30 item 1): the generated corpus
(tests/parse_corpus_gen.py, expected parse by construction) must score >= 99%, and the three
hand-written sets (tests/data/parse_heldout*.jsonl) must stay at or above their measured floors;
sets 1 and 2 have been tuned on, set 3 has not (docs/PARSING.md). ``python -m tests.test_parse_generated`` prints the rates per shape and
every miss."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evenhand.parse import parse_detail
from tests.parse_corpus_gen import generate

GENERATED = generate()


def _jsonl(name: str) -> list[dict]:
    lines = (Path(__file__).parent / "data" / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines][1:]  # line 1 says how the file was made


HELDOUT = _jsonl("parse_heldout.jsonl")
HELDOUT2 = _jsonl("parse_heldout2.jsonl")
HELDOUT3 = _jsonl("parse_heldout3.jsonl")
GENERATED_FLOOR = 0.99
# Floors: the rates measured (choice and verdict both right), rounded down (docs/PARSING.md).
HELDOUT_FLOOR = 0.97  # 181/185 = 97.8%; tuned on (its misses were seen while the rules were written)
HELDOUT2_FLOOR = 1.0  # 118/118; 94/118 = 79.7% when first measured, then its misses were fixed: tuned on
HELDOUT3_FLOOR = 0.82  # 156/190 = 82.1% (153/190 = 80.5% before set 2's fixes); measured twice, not tuned on


def _right(row: dict) -> bool:
    res = parse_detail(row["text"], row["noun"])
    return res.choice == row["choice"] and getattr(res, "verdict", None) == row["verdict"]


def rates(rows: list[dict], key: str) -> tuple[float, dict[str, tuple[int, int]], list[dict]]:
    """Overall rate, (right, n) per group, and the rows missed."""
    n, ok, misses = Counter(), Counter(), []
    for row in rows:
        good = _right(row)
        n[row[key]] += 1
        ok[row[key]] += good
        if not good:
            misses.append(row)
    return sum(ok.values()) / len(rows), {k: (ok[k], n[k]) for k in n}, misses


def _report(rows: list[dict], key: str) -> str:
    rate, per, misses = rates(rows, key)
    lines = [f"{sum(r for r, _ in per.values())}/{len(rows)} = {rate:.2%}"]
    lines += [f"  {k}: {r}/{m}" for k, (r, m) in sorted(per.items())]
    for row in misses:
        res = parse_detail(row["text"], row["noun"])
        lines.append(f"  MISS [{row[key]}] {row['text']!r} expected {row['choice']}/{row['verdict']} "
                     f"got {res.choice}/{getattr(res, 'verdict', None)}")
    return "\n".join(lines)


def test_generated_corpus_is_big_and_covers_the_shapes() -> None:
    shapes = {r["shape"].split("-")[0] for r in GENERATED}
    assert len(GENERATED) >= 4500
    assert {"verb", "verdict", "initial", "field", "reasoning", "concession", "contrast", "negation",
            "hedged", "both", "refusal", "garbage", "foreign", "leadin", "itis", "tagged", "aside", "lean",
            "contrast2", "refusal2", "both2", "garbage2"} <= shapes
    assert {r["verdict"] for r in GENERATED} == {"choice", "refusal", "unparsed"}
    assert generate() == GENERATED  # seeded: the same corpus every run


def test_generated_corpus_rate() -> None:
    rate, _, misses = rates(GENERATED, "shape")
    assert rate >= GENERATED_FLOOR, _report(GENERATED, "shape")


@pytest.mark.parametrize("name,rows,floor", [("parse_heldout", HELDOUT, HELDOUT_FLOOR),
                                              ("parse_heldout2", HELDOUT2, HELDOUT2_FLOOR),
                                              ("parse_heldout3", HELDOUT3, HELDOUT3_FLOOR)])
def test_heldout_rate_floor(name: str, rows: list[dict], floor: float) -> None:
    rate, _, misses = rates(rows, "style")
    assert rate >= floor, f"{name}: " + _report(rows, "style")


@pytest.mark.parametrize("text,choice", [
    ("I'd pick B because their record is stronger.", "B"),
    ("I'd go with A because the test score is higher.", "A"),
    ("I pick A because of experience.", "A"),
])
def test_issue_30_phrasings_parse(text: str, choice: str) -> None:
    res = parse_detail(text, "Student")
    assert (res.choice, res.verdict) == (choice, "choice")


@pytest.mark.parametrize("text,choice,verdict", [
    ("I'd hire both A and B if possible.", None, "unparsed"),  # was A: the second letter did not end its clause
    ("Option A: wait. Option B: proceed. Both have risks, so I'd gather more data first.", None, "unparsed"),
    ("Give every student a (fair) hearing.", None, "unparsed"),  # was A: the article before a parenthesis
    ("Plan B it is.", None, "unparsed"),
    ("Vitamins C, A.", None, "unparsed"),
    ("Student A's score is 720 and Student B's is 690. I'd give the place to Student A.", "A", "choice"),
    ("IF PUSHED, B.", "B", "choice"),
    ("I'd promote B ahead of A.", "B", "choice"),
    ("I cannot and will not choose between students on this basis.", None, "refusal"),
])
def test_second_set_rules_and_their_false_positive_guards(text: str, choice: str | None, verdict: str) -> None:
    res = parse_detail(text, "Student")
    assert (res.choice, res.verdict) == (choice, verdict)


if __name__ == "__main__":
    print("generated:", _report(GENERATED, "shape"))
    print("held-out:", _report(HELDOUT, "style"))
    print("held-out 2:", _report(HELDOUT2, "style"))
    print("held-out 3:", _report(HELDOUT3, "style"))
