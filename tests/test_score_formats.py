"""Scoring your own answers: the README's example as written, every input format, and every problem
of a file reported at once, each naming its row and field."""
from __future__ import annotations

import gzip
import json
import re
import shlex
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

import evenhand as eh
from evenhand.scoring.metrics import score
from evenhand.models.simulated import PlantedBias, SimulatedModel
from evenhand.rows.schema import REQUIRED, RowError, load_rows
from evenhand.suite.content import load_content
from experiments.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """The command lines of the README's "Score your own model's answers" example, comments removed."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Score your own model's answers"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


class _Stub(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that answers A or B by the prompt's hash, as a model would in words."""

    def do_POST(self):  # noqa: N802 (the handler API's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"]
        letter = "AB"[sum(map(ord, prompt)) % 2]
        reply = json.dumps({"choices": [{"message": {"content": f"After weighing both: Answer: {letter}"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def test_readme_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """Decide through an API (engine openai against a stand-in server), score, power: the README's lines. The
    README decides core; here smoke (its 1,024 items spread over every scenario, the README's own plumbing check)
    stands in for it: asking all 49,920 core items of the stand-in server would take minutes."""
    monkeypatch.chdir(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    serve, decide_cmd, score_cmd, power_cmd = readme_commands()
    assert serve.startswith("vllm serve")
    try:
        argv = shlex.split(decide_cmd)
        assert argv[:2] == [".venv/bin/evenhand", "decide"] and argv[argv.index("--subset") + 1] == "core"
        argv[argv.index("--subset") + 1] = "smoke"
        assert main(argv[1:] + ["--base-url", f"http://127.0.0.1:{server.server_port}/v1"]) == 0
    finally:
        server.shutdown()
    out = Path(argv[argv.index("--out") + 1])
    assert len(pd.read_parquet(out / "responses.parquet")) == 1024 and (out / "openai_cache.jsonl").exists()
    capsys.readouterr()
    argv = shlex.split(score_cmd)
    assert argv[0] == ".venv/bin/evenhand" and main(argv[1:]) == 0
    out_text = capsys.readouterr().out
    assert "Headline (degree 3" in out_text and "D0 -> D3" in out_text
    argv = shlex.split(power_cmd)
    assert argv[:2] == [".venv/bin/evenhand", "power"] and main(argv[1:]) == 0
    assert "MDE" in capsys.readouterr().out


def test_a_csv_of_item_id_and_text_scores_like_the_full_rows(tmp_path, capsys):
    """Export a few items, write item_id,text, score via the CLI: the numbers of the full rows."""
    items = tmp_path / "items.jsonl"
    assert main(["suite", "export", "--subset", "smoke", "--out", str(items), "--limit", "300"]) == 0
    full = SimulatedModel(PlantedBias(), seed=0).decide(pd.read_json(items, lines=True))
    answers = tmp_path / "answers.csv"
    full[["item_id", "text"]].to_csv(answers, index=False)
    capsys.readouterr()
    assert main(["score", str(answers), "--json"]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert mine == score(full, resamples=50)


@pytest.fixture(scope="module")
def responses(smoke_items):
    return SimulatedModel(PlantedBias(), seed=0).decide(smoke_items).head(240).reset_index(drop=True)


def _write(path: Path, df: pd.DataFrame, bom: bool = False) -> None:
    """``df`` in the format ``path``'s name says (gzip'd for .gz)."""
    name = path.name.removesuffix(".gz")
    if name.endswith(".parquet"):
        df.to_parquet(path.with_suffix("") if path.suffix == ".gz" else path)
        if path.suffix == ".gz":
            path.write_bytes(gzip.compress(path.with_suffix("").read_bytes()))
        return
    if name.endswith(".csv"):
        text = df.to_csv(index=False)
    elif name.endswith(".tsv"):
        text = df.to_csv(index=False, sep="\t")
    elif name.endswith(".json"):
        text = json.dumps(df.to_dict("records"), indent=1)
    else:
        text = "".join(json.dumps(r) + "\n" for r in df.to_dict("records"))
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


@pytest.mark.parametrize("name, bom", [
    ("a.jsonl", False), ("a.jsonl.gz", False), ("a.json", False), ("a.json.gz", False), ("a.csv", False),
    ("a.csv.gz", False), ("a.tsv", False), ("a.parquet", False), ("a.parquet.gz", False), ("a.csv", True),
    ("a.jsonl", True), ("a.json", True),
])
@pytest.mark.parametrize("answer", ["text", "choice"])
def test_every_format_scores_like_the_full_rows(tmp_path, responses, name, bom, answer):
    df = responses[["item_id", "text"]].copy()
    if answer == "choice":
        df = pd.DataFrame({"item_id": responses["item_id"], "choice": [eh_choice(t) for t in responses["text"]]})
    path = tmp_path / name
    _write(path, df, bom)
    mine, full = score(path, resamples=20), score(responses, resamples=20)  # eh.score on a path
    if answer == "choice":  # without text an empty choice is unparsed: declined answers cannot be told apart
        split, full_split = mine.pop("no_choice")["overall"], full.pop("no_choice")["overall"]
        assert split["refusal"] == 0 and split["unparsed"] == full_split["refusal"] + full_split["unparsed"]
    assert mine == full


def eh_choice(text: str | None) -> str | None:
    from evenhand.parsing.parse import parse_choice
    return parse_choice(text) if isinstance(text, str) else None


def _full(responses: pd.DataFrame) -> list[dict]:
    out = []
    for r in responses[list(REQUIRED) + ["text"]].to_dict("records"):
        out.append({k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()})
    return out


def test_all_problems_of_a_file_at_once(tmp_path, responses):
    """Six problems of six kinds on six lines: one error names every one (a reader stopping at the first fails)."""
    rows = _full(responses.head(14))
    rows[2]["degree"] = "two"
    rows[4]["scenario_id"] = "education.assistant_principal_promotoin"
    rows[7]["contrast_id"] = "martians_humans"
    rows[8]["item_id"] = rows[9]["item_id"]
    lines = [json.dumps(r).encode() for r in rows]
    lines[10] = lines[10].replace(b'"text": "', b'"text": "caf\xe9 ')
    lines[12] = b"{not json"
    f = tmp_path / "bad.jsonl"
    f.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(RowError) as exc:
        load_rows(f)
    msg = str(exc.value)
    assert "line 3 (item_id=" in msg and "field 'degree' must be 0, 1, 2 or 3, got 'two'" in msg
    assert "line 5 (item_id=" in msg and "field 'scenario_id' is not one of the 330 scenario ids" in msg
    assert "did you mean 'education.assistant_principal_promotion'?" in msg
    assert "line 8 (item_id=" in msg and "field 'contrast_id'" in msg
    assert re.search(r"line 9 \(item_id=.*field 'item_id' is duplicated", msg)
    assert re.search(r"line 11 \(item_id=.*\): field 'text' has bytes that are not UTF-8 \(byte 0xe9", msg)
    assert "line 13: malformed JSON" in msg
    assert "problems by kind:" in msg and "duplicate item_id 2" in msg and "unknown scenario id 1" in msg
    assert len(exc.value.problems) == 7
    # in file order
    where = [int(re.match(r"line (\d+)", p.where).group(1)) for p in sorted(exc.value.problems, key=lambda p: p.order)]
    assert where == sorted(where)


def test_the_first_20_are_listed_and_all_counted(tmp_path, responses, capsys):
    df = pd.DataFrame({"item_id": ["no-such-item-" + str(i) for i in range(30)], "text": "A"})
    f = tmp_path / "answers.csv"
    df.to_csv(f, index=False)
    assert main(["score", str(f)]) == 2
    err = capsys.readouterr().err
    assert "31 problems in 30 rows (the first 20 below)" in err, err
    assert "the file has no column baseline_id, scenario_id" in err  # the whole file's problem first
    assert "line 20 (item_id=no-such-item-18)" in err and "line 21 " not in err
    assert "... and 11 more" in err and "problems by kind: unknown item id 30, missing column 1" in err
    assert "field 'item_id' is not an item of suite" in err


def test_csv_problems_name_line_and_field(tmp_path, responses, capsys):
    df = pd.DataFrame({"item_id": responses["item_id"].head(6), "text": "A"})
    f = tmp_path / "answers.csv"
    df.to_csv(f, index=False)
    data = f.read_bytes().split(b"\n")
    data[3] = data[3].rstrip(b"\r") + b" \xff\xfe"  # line 4: bytes that are not UTF-8 in the text
    f.write_bytes(b"\n".join(data))
    assert main(["score", str(f)]) == 2
    err = capsys.readouterr().err
    assert re.search(r"line 4 \(item_id=.*\): field 'text' has bytes that are not UTF-8 \(byte 0xff", err), err
    assert "Traceback" not in err


def test_unknown_scenario_and_contrast_in_full_rows_are_errors(tmp_path, responses):
    rows = _full(responses.head(8))
    rows[1]["scenario_id"] = "made_up.scenario"
    rows[3]["contrast_id"] = "nobody_somebody"
    f = tmp_path / "full.json"
    f.write_text(json.dumps(rows))
    with pytest.raises(RowError) as exc:
        load_rows(f)
    msg = str(exc.value)
    assert "row 1 (item_id=" in msg and "field 'scenario_id'" in msg
    assert "row 3 (item_id=" in msg and "field 'contrast_id'" in msg
    assert {p.kind for p in exc.value.problems} == {"unknown scenario id", "unknown contrast id"}


def test_joined_rows_must_agree_with_the_suite(tmp_path, responses):
    df = responses[["item_id", "degree", "scenario_id"]].head(5).assign(text="A")
    df["suite_version"] = load_content().version
    df.loc[1, "degree"] = (df.loc[1, "degree"] + 1) % 4
    df.loc[2, "suite_version"] = "0.9+deadbeef"
    f = tmp_path / "answers.csv"
    df.to_csv(f, index=False)
    with pytest.raises(RowError) as exc:
        load_rows(f)
    msg = str(exc.value)
    assert re.search(r"line 3 \(item_id=.*field 'degree' is '\d' but suite item .* has \d", msg)
    assert re.search(r"line 4 \(item_id=.*field 'suite_version' is '0.9\+deadbeef' but the other rows are of suite", msg)
    assert len(exc.value.problems) == 2
    df = df.drop(index=[1, 2])
    df.to_csv(f, index=False)
    assert len(load_rows(f)) == 3


def test_a_minimal_dataframe_scores_through_eh_score(responses):
    assert eh.score(responses[["item_id", "text"]], resamples=20) == eh.score(responses, resamples=20)


@pytest.mark.parametrize("content, expect", [
    (b"", "no rows to score"),
    (b"item_id,answer\nx,A\n", "no column 'choice' (or raw 'text')"),
    (b"\xff\xfei\x00d\x00", "UTF-16; save it as UTF-8"),
])
def test_whole_file_problems(tmp_path, content, expect):
    f = tmp_path / "x.csv"
    f.write_bytes(content)
    with pytest.raises(RowError, match=re.escape(expect)):
        load_rows(f)


def test_unknown_format_and_broken_gzip(tmp_path):
    f = tmp_path / "answers.xlsx"
    f.write_text("x")
    with pytest.raises(RowError, match=r"expected one of .jsonl.*\.csv.*\.parquet"):
        load_rows(f)
    g = tmp_path / "answers.csv.gz"
    g.write_bytes(gzip.compress(b"item_id,text\n" * 100)[:40])
    with pytest.raises(RowError, match="not a complete gzip file"):
        load_rows(g)
