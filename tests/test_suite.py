"""The decision suite: content rules, counts, determinism, validation, subsets, export."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from evenhand.suite.content import load_content, validate_content
from evenhand.suite.generate import (Cell, count_full, degree_valid, item_by_id, iter_items, parse_item_id,
                                     render_item)
from evenhand.suite.datasheet import datasheet, suite_stats
from evenhand.suite.subsets import iter_subset, subset_size
from evenhand.suite.validate import check_item, validate_suite

ROOT = Path(__file__).resolve().parents[1]


def test_content_is_valid():
    assert validate_content() == []


def test_counts_meet_the_design():
    st = suite_stats()
    assert st["scenarios"] >= 300 and st["domains"] >= 29
    assert st["contrasts"] == 33 and st["contrasts_type1"] == 26 and st["contrasts_type23"] == 7
    assert st["degrees"] == 4 and st["pressure_families"] == 9 and st["pressure_sentences"] >= 78
    assert st["items_full"] >= 10_000_000
    assert 3 <= st["negative_polarity_scenarios"] <= 10
    assert sum(v["items"] for v in st["by_degree"].values()) == st["items_full"]
    assert sum(v["items"] for v in st["by_domain"].values()) == st["items_full"]
    assert sum(v["items"] for v in st["by_contrast"].values()) == st["items_full"]


def test_full_product_enumeration_matches_the_count_on_a_prefix():
    from evenhand.suite.generate import DEGREES, cell_valid, items_per_cell
    c = load_content()
    s0 = c.scenarios[0]  # v2 scenarios may exclude contrasts, so count this scenario's own cells
    per_scenario = 4 * 2 * items_per_cell(c) * sum(cell_valid(c, s0, x, d) for x in c.contrasts for d in DEGREES)
    assert per_scenario == count_full(c) // len(c.scenarios) or any(s.excluded_contrasts for s in c.scenarios)
    first = s0.id
    n = 0
    for item in iter_items(c):
        if item["scenario_id"] != first:
            break
        n += 1
    assert n == per_scenario


def test_rendered_items_validate():
    checked, problems = validate_suite()
    assert checked > 50_000 and problems == []


def test_validator_catches_a_wrong_correct_slot(smoke_items):
    item = smoke_items[smoke_items["condition"] == "GT"].iloc[0].to_dict()
    assert check_item(item) == []
    bad = dict(item, correct_slot="B" if item["correct_slot"] == "A" else "A")
    assert any("correct_slot" in p for p in check_item(bad))
    bad = dict(item, prompt=item["prompt"].replace("The decision", "The {decision}"))
    assert any("placeholder" in p for p in check_item(bad))


def test_smoke_is_deterministic_and_byte_identical(tmp_path):
    a = [json.dumps(i, sort_keys=True) for i in iter_subset("smoke", 0)]
    b = [json.dumps(i, sort_keys=True) for i in iter_subset("smoke", 0)]
    c = [json.dumps(i, sort_keys=True) for i in iter_subset("smoke", 1)]
    assert a == b and a != c
    assert len(a) == subset_size("smoke") == 1024


def test_subset_design_properties(smoke_items):
    df = smoke_items
    assert df["item_id"].is_unique
    base = df[df["pressure_id"].isna()]
    # every pressured item's baseline is in the subset
    assert set(df["baseline_id"]) <= set(base["item_id"])
    # strata balanced: condition x degree x contrast type
    strata = Counter(zip(df["condition"], df["degree"], df["contrast_type"]))
    assert len(strata) == 16 and len(set(strata.values())) == 1
    # both slot arrangements and both truth directions equally often
    assert Counter(base["minority_slot"]) == {"A": len(base) // 2, "B": len(base) // 2}
    gt = base[base["condition"] == "GT"]
    assert Counter(gt["truth_favors"])["minority"] == Counter(gt["truth_favors"])["majority"]
    # GT pressure: both directions of weaker-targeting pressure occur
    press = df[(df["condition"] == "GT") & (df["pressure_targets"] == "weaker")]
    assert set(press["pressure_resolved"]) == {"pro_minority", "pro_majority"}


def test_core_size():
    assert subset_size("core") == 49_920
    assert 45_000 <= subset_size("core") <= 55_000


def test_degree_one_skips_groups_without_names():
    c = load_content()
    skipped = {x.id for x in c.contrasts if not degree_valid(c, x, 1)}
    assert {"disability_normal", "gay_het", "lesb_het", "older_younger", "atheistM_christianM",
            "whtTransW_whiteM"} <= skipped
    assert "blackM_whiteM" not in skipped and "muslimM_christianM" not in skipped


def test_names_never_collide_and_are_stable_across_slots():
    c = load_content()
    for s in c.scenarios[:40]:
        for x in c.contrasts:
            if degree_valid(c, x, 1):
                a = render_item(c, Cell(s, "GTmin", 1, x, "A"))
                b = render_item(c, Cell(s, "GTmin", 1, x, "B"))
                assert len(set(a["names"].values())) == 2
                assert a["names"]["A"] == b["names"]["B"]  # the same person, moved to the other slot


def test_pressure_pairs_are_mirror_images():
    c = load_content()
    cell = Cell(c.scenarios[5], "AMB1", 3, c.contrasts[3], "A")
    for p in c.pressure:
        a = render_item(c, cell, p, "A")["prompt"]
        b = render_item(c, cell, p, "B")["prompt"]
        noun = c.scenarios[5].candidate_noun
        swapped_sentence = p.render(f"{noun} B", f"{noun} A")
        assert swapped_sentence in b and p.render(f"{noun} A", f"{noun} B") in a


def test_item_id_round_trip(smoke_items):
    for item in smoke_items.sample(50, random_state=0).to_dict("records"):
        again = item_by_id(item["item_id"])
        assert again["prompt"] == item["prompt"]
    with pytest.raises(KeyError, match="unknown scenario"):
        parse_item_id("nope|GTmin|d3|blackM_whiteM|mA|none")
    with pytest.raises(KeyError, match="contrast"):
        parse_item_id(smoke_items["item_id"][0].replace(smoke_items["contrast_id"][0], "martians"))


def test_prompt_shape(smoke_items):
    for item in smoke_items.head(40).to_dict("records"):
        noun = item["candidate_noun"]
        assert item["prompt"].endswith(f'Answer with only "{noun} A" or "{noun} B".')
        assert "{" not in item["prompt"]
    d0 = smoke_items[smoke_items["degree"] == 0].iloc[0]
    c = load_content()
    words = {w.lower() for p in c.profiles.values() for w in p.explicit.split() if len(w) > 3}
    assert not any(f" {w} " in d0["prompt"].lower() for w in words - {"person", "years", "with", "without"})


def test_datasheet_is_generated_and_committed_copy_matches():
    text = datasheet()
    assert "Known limitations" in text and "disability_normal" in text
    committed = (ROOT / "docs" / "DATASHEET.md").read_text()
    assert committed == text, "docs/DATASHEET.md is stale: run `evenhand suite datasheet --out docs/DATASHEET.md`"


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_stats_json():
    r = _cli("suite", "stats", "--json", "--subset", "smoke")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    for k in ("scenarios", "domains", "contrasts", "degrees", "pressure_families", "pressure_sentences",
              "items_full", "items_subset"):
        assert isinstance(st[k], int)
    assert st["items_subset"] == 1024


def test_cli_export_smoke_fast_and_bounded(tmp_path):
    out = tmp_path / "smoke.jsonl"
    # VmHWM (peak resident set of this process image; unlike ru_maxrss it is not inherited across exec)
    code = ("import time, sys, re; from experiments.cli import main; t=time.perf_counter(); "
            f"rc=main(['suite','export','--subset','smoke','--out',{str(out)!r}]); "
            "hwm=re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
            "print(time.perf_counter()-t, hwm); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    seconds, rss_kb = map(float, r.stdout.strip().splitlines()[-1].split())
    assert seconds < 10
    assert rss_kb < 400_000  # far below what even 1% of the full product would need
    assert sum(1 for _ in out.open()) == 1024
    pq = tmp_path / "smoke.parquet"
    assert _cli("suite", "export", "--subset", "smoke", "--out", str(pq)).returncode == 0
    df = pd.read_parquet(pq)
    assert len(df) == 1024 and df["names"].notna().any()
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert _cli("suite", "export", "--subset", "smoke", "--out", str(out)).returncode == 0
    assert hashlib.sha256(out.read_bytes()).hexdigest() == digest


def test_cli_export_full_streams(tmp_path):
    out = tmp_path / "full.parquet"
    r = _cli("suite", "export", "--subset", "full", "--limit", "25000", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert len(pd.read_parquet(out)) == 25000


def test_cli_show(smoke_items):
    iid = smoke_items["item_id"][7]
    r = _cli("suite", "show", iid)
    assert r.returncode == 0 and iid in r.stdout and "Answer with only" in r.stdout
    r = _cli("suite", "show", "bogus")
    assert r.returncode == 2 and "6 '|'-separated parts" in r.stderr


def _digest(items) -> tuple[int, str]:
    import hashlib
    import json
    h, n = hashlib.sha256(), 0
    for item in items:
        h.update(json.dumps(item, sort_keys=True, ensure_ascii=False).encode())
        n += 1
    return n, h.hexdigest()[:16]


def test_suite_v1_renders_byte_identical_items_forever():
    """Runs made on suite v1 are rescored by rendering their items again, so v1 must never change:
    the smoke subset and a strided sample of the full product hash to the values recorded when v2 was
    introduced (any edit to v1's files or to how the generator renders v1 content fails this)."""
    import itertools

    from evenhand.suite.content import load_content
    from evenhand.suite.generate import iter_items
    from evenhand.suite.subsets import iter_subset
    c = load_content("1")
    assert c.version == "1.0+a88634b23e"
    assert _digest(iter_subset("smoke", 0, c)) == (1024, "fbcf1048a5f58238")
    assert _digest(itertools.islice(iter_items(c), 0, 200000, 37)) == (5406, "d3661a529f908d1e")


def test_suite_versions_load_by_name_and_refuse_unknown_or_mixed():
    import pytest

    from evenhand.suite.content import ContentError, content_for, load_content
    assert load_content("1").version.startswith("1.0+") and load_content().version.startswith("2.0+")
    assert load_content("v2") is load_content(2) is load_content("2.0")
    with pytest.raises(ContentError, match="not one this EvenHand can render"):
        load_content("3")
    with pytest.raises(ContentError, match="is not the shipped suite"):
        load_content("1.0+0000000000")
    with pytest.raises(ContentError, match="mix suite versions"):
        content_for([load_content("1").version, load_content("2").version])
    assert content_for([None, float("nan"), load_content("1").version]) is load_content("1")
