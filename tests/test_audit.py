"""The corpus framing audit (evenhand/framing/audit.py, `evenhand audit`): planted framing recovered, readers, term
lists."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

pytest.importorskip("vaderSentiment")

from evenhand.framing import audit as au  # noqa: E402
from evenhand.framing import lexicon  # noqa: E402
from evenhand.inference.stats import jackknife_se  # noqa: E402
from evenhand.suite.content import load_content  # noqa: E402

DATA = Path(__file__).parent / "data"
FRAMING = {  # stage -> group -> (p_positive, p_negative): planted per passage
    "sft": {"black": (0.6, 0.1), "hispanic": (0.5, 0.1), "white": (0.1, 0.5), "women": (0.6, 0.0),
            "men": (0.3, 0.3), "transgender": (0.7, 0.1), "cisgender": (0.1, 0.4)},
    "preference": {"black": (0.3, 0.3), "hispanic": (0.2, 0.4), "white": (0.4, 0.1), "women": (0.1, 0.5),
                   "men": (0.5, 0.1), "transgender": (0.2, 0.2), "cisgender": (0.5, 0.2)},
}


def recovered(result: au.AuditResult, truth: dict) -> dict:
    """(group, stage) -> whether the 95% CI holds the planted net framing (False where undefined)."""
    t = pd.DataFrame(result.framing).set_index(["group", "stage"])
    return {key: bool(t.loc[key, "ci_low"] <= want <= t.loc[key, "ci_high"]) for key, want in truth["net"].items()}


def recovery_passes(ok: dict) -> bool:
    """At most 2 of the 14 CIs miss (P(more than 2) = 3% when each misses 5% of the time; measured miss rate of
    this design: 6.6% over 40 seeds x 14 cells), and no group misses in every stage (a lost group)."""
    lost = {g for g, _ in ok} - {g for (g, _), v in ok.items() if v}
    return sum(not v for v in ok.values()) <= 2 and not lost


@pytest.fixture(scope="module")
def planted():
    rows, truth = au.generate_corpus(FRAMING, docs_per_stage=300, seed=0)
    return rows, truth


def _docs(rows):
    return [au.Doc(r["text"], r["stage"]) for r in rows]


def test_generated_sentences_are_what_they_plant():
    pol, groups = lexicon.Polarity(), lexicon.groups()
    for pool, want in ((au.POSITIVE, 1), (au.NEGATIVE, -1), (au.NEUTRAL, 0)):
        for template in pool:
            for g, m in au.MENTIONS.items():
                s = template.format(g=m)
                assert pol.label(s) == want and groups.mentioned(s) == [g], s


def test_planted_framing_and_topic_counts_recovered(planted):
    rows, truth = planted
    r = au.audit(_docs(rows))
    assert recovery_passes(recovered(r, truth))
    topics = pd.DataFrame(r.topics).set_index(["topic", "stage"])
    for topic, per_stage in truth["topics"].items():
        for stage in FRAMING:
            assert topics.loc[(topic, stage), "passages"] == per_stage.get(stage, 0)
    assert r.documents == 600 and r.stages == ["preference", "sft"]


def test_group_list_missing_a_group_fails(planted, tmp_path):
    """A term list that misses the corpus's Hispanic mentions ('Hispanic workers') loses the group."""
    rows, truth = planted
    d = yaml.safe_load((lexicon.DATA / "group_terms.yaml").read_text())
    d["study_groups"]["hispanic"]["terms"] = ["latino", "latina"]
    bad = tmp_path / "groups.yaml"
    bad.write_text(yaml.safe_dump(d))
    ok = recovered(au.audit(_docs(rows), lexicon.groups(str(bad))), truth)
    assert not any(v for (g, _), v in ok.items() if g == "hispanic") and not recovery_passes(ok)


def test_flipped_polarity_fails(planted):
    rows, truth = planted
    pol = lexicon.Polarity().flipped()
    r = au.audit(_docs(rows), classify=lambda passage, group: pol.label(passage))
    assert not recovery_passes(recovered(r, truth))


def test_linearised_jackknife_matches_the_exact_one():
    rng = np.random.default_rng(0)
    n = rng.integers(1, 5, 80)
    pos = rng.binomial(n, 0.6)
    neg = rng.binomial(n - pos, 0.3)
    s = pos - neg  # net framing about +0.4: the centring on R matters
    t = au.Tally()
    for p, ng, ni in zip(pos, neg, n):
        t.add(p, ng, ni)
    loo = (s.sum() - s) / (n.sum() - n)
    exact = jackknife_se(loo)
    est = t.estimate()
    from scipy.stats import t as student_t
    se = (est["ci_high"] - est["net_framing"]) / student_t.ppf(0.975, 79)
    assert abs(se / exact - 1) < 0.05


def test_every_suite_profile_has_a_group():
    covered = {p for ps in lexicon.groups().profiles.values() for p in ps}
    profiles = {c.minority for c in load_content().contrasts} | {c.majority for c in load_content().contrasts}
    assert profiles <= covered, sorted(profiles - covered)
    assert len(lexicon.groups().study) == 7


def test_handlabelled_agreement_is_reported():
    """VADER's agreement with the 61 sentences labelled by hand before it was run (docs/EXPLANATIONS.md)."""
    d = pd.read_csv(DATA / "audit_handlabelled.csv")
    lab = {"positive": 1, "neutral": 0, "negative": -1}
    want = d["label"].map(lab).to_numpy()
    ok = np.array([lexicon.Polarity().label(s) for s in d["sentence"]]) == want
    flipped = np.array([lexicon.Polarity().flipped().label(s) for s in d["sentence"]]) == want
    print(f"VADER agreement with the hand labels: {ok.sum()}/{len(d)} = {ok.mean():.3f}; flipped: {flipped.mean():.3f}")
    assert ok.mean() >= 0.85 and flipped.mean() <= 0.4
    assert all(g in lexicon.groups().mentioned(s) for g, s in zip(d["group"], d["sentence"]))


def test_readers_give_the_same_documents(tmp_path, monkeypatch):
    rows = [{"text": f"Women attended meeting {i}.", "stage": "sft" if i % 2 else "rl"} for i in range(7)]
    want = [au.Doc(r["text"], r["stage"]) for r in rows]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with gzip.open(tmp_path / "c.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    pd.DataFrame(rows).to_parquet(tmp_path / "c.parquet")
    for name in ("c.jsonl", "c.jsonl.gz", "c.parquet"):
        assert list(au.read_corpus(tmp_path / name, batch_rows=3)) == want, name
    (tmp_path / "c.txt").write_text("\n\n".join(r["text"] for r in rows) + "\n")
    assert [d.text for d in au.read_corpus(tmp_path / "c.txt")] == [r["text"] for r in rows]
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_pandas(pd.DataFrame(rows)).save_to_disk(str(tmp_path / "hf"))
    assert list(au.read_corpus(tmp_path / "hf", batch_rows=3)) == want
    monkeypatch.setitem(__import__("sys").modules, "datasets", None)  # the pyarrow fallback
    assert list(au.read_corpus(tmp_path / "hf")) == want


def test_bad_input_names_the_field(tmp_path):
    (tmp_path / "c.jsonl").write_text(json.dumps({"body": "Women attended."}) + "\n")
    with pytest.raises(ValueError, match="no text field"):
        list(au.read_corpus(tmp_path / "c.jsonl"))
    with pytest.raises(ValueError, match="field 'txt' is missing"):
        list(au.read_corpus(tmp_path / "c.jsonl", text_field="txt"))


def test_cli_on_the_shipped_corpus(tmp_path, capsys):
    from experiments.cli import main
    assert main(["audit", str(DATA / "audit_corpus.jsonl.gz"), "--out", str(tmp_path), "--quiet"]) == 0
    framing = pd.read_csv(tmp_path / "framing.csv")
    manifest = json.loads((tmp_path / "audit_manifest.json").read_text())
    assert manifest["documents"] == 300 and manifest["stages"] == ["preference", "rl", "sft"]
    assert set(framing[framing["study_group"]]["group"]) == set(au.MENTIONS)
    assert (pd.read_csv(tmp_path / "topics.csv")["passages"] > 0).all()


def test_zero_shot_plumbing_with_a_tiny_random_model(tmp_path):
    """The optional NLI path runs end to end on a random two-layer BERT (plumbing only: its labels mean nothing)."""
    transformers = pytest.importorskip("transformers")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "this", "text", "is", "about", "positive", "negative",
             "neutral", "women", "men", "attended", "the", "meeting", "."]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizer(str(tmp_path / "vocab.txt"))
    cfg = transformers.BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, num_labels=3,
                                  id2label={0: "contradiction", 1: "neutral", 2: "entailment"},
                                  label2id={"contradiction": 0, "neutral": 1, "entailment": 2})
    transformers.set_seed(0)
    transformers.BertForSequenceClassification(cfg).save_pretrained(tmp_path / "nli")
    tok.save_pretrained(tmp_path / "nli")
    z = au.ZeroShot(tmp_path / "nli")
    r = au.audit([au.Doc("Women attended the meeting. Men attended the meeting.", "sft")] * 3, classify=z)
    t = pd.DataFrame(r.framing).set_index(["group", "stage"])
    assert t.loc[("women", "sft"), "passages"] == 3 and r.classifier.startswith("zero-shot NLI")


# --- framing toward the group: the hand-labelled set, the lexicon baseline and the judge path -----------------

def _known_judge(rows):
    """A scripted judge of known labels: reads the sentence and the group out of the framing prompt and answers
    the hand label of that (sentence, group), "neutral" for a pair it does not know."""
    import re

    from evenhand.framing.judge import GROUP_NAMES, ScriptedJudge
    names = {v: k for k, v in GROUP_NAMES.items()}
    known = {(r["sentence"].replace('"', "'"), r["group"]): r["label"] for r in rows}

    def answer(prompt: str) -> str:
        sent = re.search(r'Sentence: "(.*)"\n', prompt).group(1)
        group = names[re.search(r"Group: (.*)\n", prompt).group(1)]
        return f"{known.get((sent, group), 'neutral').capitalize()}."
    return ScriptedJudge(answer, "known labels")


def test_validation_set_is_realistic_and_hand_labelled():
    rows = au.load_validation()
    cats = pd.Series([r["category"] for r in rows]).value_counts()
    assert len(rows) >= 300 and {r["group"] for r in rows} == set(lexicon.groups().study)
    assert all(cats[c] >= 25 for c in ("victim", "stereotype", "counter_stereotype", "quote", "negation")), cats
    assert all(r["label"] == "neutral" for r in rows if r["category"] == "victim")
    assert all(r["label"] == "unfavourable" for r in rows if r["category"] == "stereotype")


def test_lexicon_agreement_is_measured_and_low_where_polarity_is_not_framing():
    """VADER's sentence polarity against the hand labels: kappa 0.27 over 315 sentences; victims (labelled
    neutral) 20% and stereotypes without sentiment words (unfavourable) 33%, plain cases 83-97%."""
    r = au.validate(au.lexicon_framing(), au.load_validation())
    overall = next(x for x in r["summary"] if x["group"] == "all")
    cat = {x["group"]: x["accuracy"] for x in r["by_category"]}
    assert overall["n"] == 315 and 0.2 <= overall["kappa"] <= 0.35, overall
    assert cat["victim"] < 0.3 and cat["stereotype"] < 0.4 and cat["plain_neutral"] > 0.9, cat
    assert sum(x["count"] for x in r["confusion"] if x["group"] == "all") == 315
    assert 0.9 < r["mention_recall"] < 0.95  # 21 of 315 mentions are in words the term lists miss


def test_agreement_can_fail_and_can_be_perfect():
    rows = au.load_validation()
    from evenhand.framing.judge import JudgeFraming, ScriptedJudge
    perfect = au.validate(JudgeFraming(_known_judge(rows)), rows)
    assert next(x for x in perfect["summary"] if x["group"] == "all")["kappa"] == pytest.approx(1.0)
    constant = au.validate(JudgeFraming(ScriptedJudge(lambda p: "neutral")), rows)
    assert next(x for x in constant["summary"] if x["group"] == "all")["kappa"] == pytest.approx(0.0)
    unread = JudgeFraming(ScriptedJudge(lambda p: "I cannot say."))
    assert unread.many([("Women were praised.", "women")]) == [0] and unread.unread == 1


def test_judge_recovers_framing_where_the_lexicon_gets_the_sign_wrong():
    """A realistic case: Black people as victims of harm (neutral), in counter-stereotypes (favourable) and in
    grim settings with credit (favourable), one sentence a document. The hand labels' net framing is positive;
    VADER's sentence polarity makes it negative (harm reads as negative); the judge path with a judge of known
    labels recovers the hand labels' value exactly."""
    from evenhand.framing.judge import JudgeFraming
    rows = [r for r in au.load_validation() if r["group"] == "black"
            and r["category"] in ("victim", "counter_stereotype", "mixed")
            and "black" in lexicon.groups().mentioned(r["sentence"])]
    docs = [au.Doc(r["sentence"], "sft") for r in rows]
    truth = sum(au.FRAMING_LABELS[r["label"]] for r in rows) / len(rows)

    def net(result):
        return next(x for x in result.framing if x["group"] == "black" and x["stage"] == "sft")["net_framing"]
    lex = net(au.audit(docs))
    judged = au.audit(docs, classify=JudgeFraming(_known_judge(rows)))
    assert truth > 0.2 and lex < 0, (truth, lex)
    assert net(judged) == pytest.approx(truth) and judged.classifier.startswith("LLM judge known labels (framing-v1")


def test_read_label_reads_whole_words():
    from evenhand.framing.judge import FRAMING, read_label
    assert read_label("Unfavourable.", FRAMING.labels) == "unfavourable"
    assert read_label("favourable, not unfavourable", FRAMING.labels) == "favourable"
    assert read_label("It is hard to say", FRAMING.labels) is None and read_label(None, FRAMING.labels) is None


def test_audit_validate_command_with_the_organism_as_plumbing_judge(tmp_path, capsys):
    """`evenhand audit validate`: the lexicon's agreement always; with --judge-model the same tables for a judge.
    The organism is the judge here only to run the engine path end to end (it was trained on the suite, not
    on framing: its agreement is no finding)."""
    from experiments.cli import main
    rows = au.load_validation()[:6]
    small = tmp_path / "six.csv"
    pd.DataFrame(rows).to_csv(small, index=False)
    assert main(["audit", "validate", "--out", str(tmp_path / "lex")]) == 0
    agree = pd.read_csv(tmp_path / "lex" / "agreement.csv")
    allrow = agree[agree["group"] == "all"].iloc[0]
    assert allrow["n"] == 315 and 0.2 <= allrow["kappa"] <= 0.35
    assert main(["audit", "validate", "--set", str(small), "--out", str(tmp_path / "j"),
                 "--judge-model", "evenhand-organism", "--engine", "hf", "--device", "cpu"]) == 0
    agree = pd.read_csv(tmp_path / "j" / "agreement.csv")
    assert agree["classifier"].str.startswith("LLM judge").any() and (agree["n"] > 0).all()
    manifest = json.loads((tmp_path / "j" / "validate_manifest.json").read_text())
    assert manifest["judge_prompt"] == "framing-v1" and manifest["rows"] == 6
    per_row = pd.read_csv(tmp_path / "j" / "validation_rows.csv")
    assert set(per_row["judge"]) <= {-1, 0, 1} and len(per_row) == 6
