"""The parser on answers as people write them (issue 30 item 1): the generated corpus
(tests/parse_corpus_gen.py, expected parse by construction) must score >= 99%, and the held-out
set (tests/data/parse_heldout.jsonl, written by hand, not used to tune rules) must stay at or
above its measured floor. ``python -m tests.test_parse_generated`` prints the rates per shape and
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
GENERATED_FLOOR = 0.99
# Floors: the rates measured (choice and verdict both right) with the issue-30 rules, rounded down.
# Before them (choice only; no verdict existed): 132/185 = 71.4% and 89/118 = 75.4%.
HELDOUT_FLOOR = 0.97  # 180/185 = 97.3%; this set's misses were seen while the rules were written
HELDOUT2_FLOOR = 0.79  # 94/118 = 79.7%; written after the rules, measured once, not tuned on


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
                                              ("parse_heldout2", HELDOUT2, HELDOUT2_FLOOR)])
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


if __name__ == "__main__":
    print("generated:", _report(GENERATED, "shape"))
    print("held-out:", _report(HELDOUT, "style"))
    print("held-out 2:", _report(HELDOUT2, "style"))
