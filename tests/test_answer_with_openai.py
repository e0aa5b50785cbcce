"""docs/answer_with_openai.py against a local stub of the OpenAI chat API (no internet): it retries
failed requests with backoff, resumes (skips the item_ids already in OUT), prints progress, and a refused
connection ends in one line, not a traceback."""
from __future__ import annotations

import csv
import importlib.util
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "answer_with_openai.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("answer_with_openai", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Stub:
    """An OpenAI-compatible /v1/chat/completions answering "A" for every prompt; the first ``fail`` requests
    of each prompt get HTTP 503. ``seen`` lists the prompts asked, in order."""

    def __init__(self, fail: int = 0):
        self.fail, self.seen, self.lock = fail, [], threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][0]["content"]
                with stub.lock:
                    stub.seen.append(prompt)
                    tries = stub.seen.count(prompt)
                if tries <= stub.fail:
                    self.send_response(503)
                    self.end_headers()
                    return
                data = json.dumps({"choices": [{"message": {"content": f"A ({prompt})"}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _items(tmp_path, n=12) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"item_id": f"i{k}", "prompt": f"p{k}"}) + "\n" for k in range(n)))
    return path


def _rows(path: Path) -> dict:
    with open(path, newline="", encoding="utf-8") as fh:
        return {r["item_id"]: r["text"] for r in csv.DictReader(fh)}


def test_failed_requests_are_retried_with_backoff(script, tmp_path, capsys, monkeypatch):
    """Every prompt fails twice with 503 first; the old script raised on the first failure."""
    waits = []
    monkeypatch.setattr(script.time, "sleep", waits.append)
    stub = Stub(fail=2)
    try:
        out = tmp_path / "answers.csv"
        assert script.main([str(_items(tmp_path)), str(out), "--base-url", stub.url, "--model", "m",
                            "--workers", "3", "--backoff", "0.5"]) == 0
    finally:
        stub.close()
    rows = _rows(out)
    assert rows == {f"i{k}": f"A (p{k})" for k in range(12)}
    assert len(stub.seen) == 36
    assert sorted(waits) == [0.5] * 12 + [1.0] * 12      # doubling backoff, two waits per prompt
    err = capsys.readouterr().err
    assert "answered 12/12" in err


def test_a_rerun_resumes_skipping_the_answered_items(script, tmp_path, capsys):
    """OUT holding 5 answers: only the other 7 are asked for (the old script asked for all 12 and
    overwrote OUT)."""
    out = tmp_path / "answers.csv"
    out.write_text("item_id,text\n" + "".join(f"i{k},earlier {k}\n" for k in range(5)))
    stub = Stub()
    try:
        assert script.main([str(_items(tmp_path)), str(out), "--base-url", stub.url, "--model", "m",
                            "--progress-every", "0"]) == 0
    finally:
        stub.close()
    assert sorted(stub.seen) == sorted(f"p{k}" for k in range(5, 12))
    rows = _rows(out)
    assert len(rows) == 12 and rows["i0"] == "earlier 0" and rows["i11"] == "A (p11)"
    err = capsys.readouterr().err
    assert "(5 from an earlier run)" in err and "items/s, about" in err and "answered 12/12" in err


def test_a_refused_connection_is_one_line_and_keeps_the_answers(script, tmp_path, capsys):
    """A port nobody listens on: the old script printed a urllib traceback and wrote nothing."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "answers.csv"
    out.write_text("item_id,text\ni0,earlier\n")
    rc = script.main([str(_items(tmp_path)), str(out), "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
                      "--retries", "2", "--backoff", "0.01"])
    assert rc == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("answered")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("answer_with_openai: error: cannot get an answer from http://127.0.0.1:")
    assert "Connection refused" in lines[0] and "3 tries" in lines[0] and "holds 1 answers" in lines[0]
    assert _rows(out) == {"i0": "earlier"}


def test_the_progress_line_rests_on_this_runs_measured_rate(script):
    now = [0.0]
    p = script.Progress(total=100, resumed=40, every=1e9, clock=lambda: now[0])
    for _ in range(20):
        now[0] += 0.5                     # 2 items/s
        p.step()
    assert p.line() == "answered 60/100 (40 from an earlier run), 2.0 items/s, about 0m20s left"
