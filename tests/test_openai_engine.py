"""Engine openai against a real HTTP server (evenhand.engine.serve: the fair organism behind the OpenAI chat
completions wire format on a loopback port, faults injected by the test), not a mock: the same choices as the hf
engine, each fault retried or reported per item without losing finished items, a client killed with SIGKILL
resuming from its response cache without asking again, the prompt procedures through it, the weight methods
refused, and what the run's manifest records (never the key)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from evenhand.running.decisions import DecideOptions, ItemsFailed, decide
from evenhand.engine.openai_engine import (CACHE_FILE, EndpointError, OpenAIOptions, ResponseCache, load_api,
                                           retry_after)
from evenhand.engine.serve import ChatServer, Faults
from evenhand.vocab.prompts import user_message

ROOT = Path(__file__).resolve().parents[1]
NAME = "evenhand-organism-fair"


@pytest.fixture(scope="module")
def organism():
    from evenhand.models.loading import load_model
    return load_model(NAME)


@pytest.fixture(scope="module")
def items(smoke_items) -> pd.DataFrame:
    """32 smoke items (suite v2, the fair organism's)."""
    return smoke_items.head(32).reset_index(drop=True)


@pytest.fixture(scope="module")
def reference(organism, items) -> pd.DataFrame:
    """The hf engine's decisions of :func:`items` (greedy)."""
    return decide(items, organism, DecideOptions(progress=False))


def api(server: ChatServer, run_dir=None, **kw):
    """The served organism loaded for engine openai (quick retries for the tests)."""
    return load_api(NAME, OpenAIOptions(base_url=server.url, **{"backoff_s": 0.01, **kw}), run_dir)


OPTS = DecideOptions(engine="openai", progress=False)


def test_same_choices_as_the_hf_engine(organism, items, reference):
    """Greedy through the server = greedy in process, item for item. Fails when the
    server templates the chat otherwise than the hf engine (chat_template="none" there: no item gets a choice)."""
    with ChatServer(organism, NAME) as server:
        got = decide(items, api(server, concurrency=1), OPTS)
        assert len(server.log) == items["prompt"].nunique()  # degree-0 items of several contrasts share a prompt
    assert got["item_id"].tolist() == reference["item_id"].tolist()
    assert got["choice"].tolist() == reference["choice"].tolist()
    assert got["text"].tolist() == reference["text"].tolist()
    assert got["n_prompt_tokens"].tolist() == reference["n_prompt_tokens"].tolist()  # the endpoint's usage counts
    assert got["chat_template"].all()
    assert got["api_cached"].tolist() == items["prompt"].duplicated().tolist()  # asked once, the repeats cached


@pytest.mark.parametrize("fault", ["429", "500", "drop", "slow", "malformed"])
def test_each_fault_is_retried(organism, items, reference, tmp_path, fault):
    """The first two requests get ``fault``; both are retried and every item is answered as the hf engine
    answers it. With max_retries 0 the two items fail (ItemsFailed)."""
    sub = items.head(8)
    with ChatServer(organism, NAME, faults=Faults(first=[fault, fault], retry_after_s=0.3, slow_s=1.5)) as server:
        got = decide(sub, api(server, tmp_path, concurrency=1, timeout_s=0.5, max_retries=3), OPTS, out_dir=tmp_path)
        log = list(server.log)
    assert got["choice"].tolist() == reference["choice"].head(8).tolist()
    assert [r["outcome"] for r in log[:2]] == [fault, fault]
    assert got["api_attempts"].sum() == 8 + 2
    assert sum(r["outcome"] == "ok" for r in log) == 8
    if fault == "429":  # the retry waited as long as Retry-After said (the backoff alone is 0.01 s)
        first_ok = next(r for r in log if r["outcome"] == "ok" and r["key"] == log[1]["key"])
        assert first_ok["at"] - log[1]["at"] >= 0.3


def test_an_item_failing_every_try_is_reported_and_retried_by_the_rerun(organism, items, reference, tmp_path):
    """One item's every request gets HTTP 500: the other 7 are decided and saved, the run ends with one
    ItemsFailed naming the count; the rerun (the server healthy) asks only that item."""
    sub = items.head(8)
    i = next(i for i in range(8) if (sub["prompt"] == sub["prompt"][i]).sum() == 1)  # a prompt no other item has
    marker = sub["prompt"][i]
    with ChatServer(organism, NAME, faults=Faults(always={marker: "500"})) as server:
        with pytest.raises(ItemsFailed, match=r"^1 of 8 items got no answer \(first: item .*HTTP 500.*after 4 tries\); the 7 "
                                              r"answered are saved"):
            decide(sub, api(server, tmp_path, max_retries=3), OPTS, out_dir=tmp_path)
        assert sum(r["outcome"] == "500" for r in server.log) == 4
        errors = [json.loads(x) for x in (tmp_path / CACHE_FILE).read_text().splitlines() if '"error"' in x]
        assert len(errors) == 1 and "HTTP 500" in errors[0]["error"]
        server.faults.always.clear()
        n_before = len(server.log)
        got = decide(sub, api(server, tmp_path), OPTS, out_dir=tmp_path)
        assert [r["last"] for r in server.log[n_before:]] == [marker]  # only the failed item, once
    assert got["choice"].tolist() == reference["choice"].head(8).tolist()


def test_a_client_killed_with_sigkill_resumes_from_the_cache(organism, tmp_path):
    """`evenhand decide --engine openai` killed (SIGKILL) mid-run; the same command again: every item once in
    the responses, and no item whose answer was in the cache at the kill is asked again (counted at the
    server). Fails without the cache (every item answered before the kill but not in a shard is re-asked)."""
    out = tmp_path / "run"
    with ChatServer(organism, NAME, delay_s=0.15) as server:
        cmd = [sys.executable, "-m", "experiments.cli", "decide", "--model", NAME, "--subset", "smoke", "--limit",
               "48", "--engine", "openai", "--base-url", server.url, "--concurrency", "2", "--batch-size", "16",
               "--out", str(out)]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        cache = out / CACHE_FILE
        deadline = time.monotonic() + 120
        while not (cache.exists() and len(cache.read_text().splitlines()) >= 20):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()[-2000:]
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        cached_keys = {json.loads(x)["key"] for x in cache.read_text().splitlines()}
        assert 20 <= len(cached_keys) < 48 and not (out / "responses.parquet").exists()
        time.sleep(1.0)  # the killed client's requests in flight finish at the server (logged before the rerun's)
        n_before = len(server.log)
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        asked_again = [r["last"] for r in server.log[n_before:]]
    responses = pd.read_parquet(out / "responses.parquet")
    assert len(responses) == 48 and responses["item_id"].is_unique
    key = {ResponseCache.key(NAME, [{"role": "user", "content": p}], {"temperature": 0.0, "max_tokens": 8}): p
           for p in responses["prompt"]}
    cached_prompts = {key[k] for k in cached_keys}
    assert not set(asked_again) & cached_prompts                      # nothing cached was asked again
    assert len(asked_again) == len(set(asked_again)) == responses["prompt"].nunique() - len(cached_prompts)


def test_self_critique_through_the_api_matches_the_hf_engine(organism, items):
    """The three-turn procedure's message lists through the server = the same chats in process."""
    from interventions.base import decide_with
    from interventions.registry import get
    method, sub = get("self_critique"), items.head(6)
    fitted = method.fit(organism, None)
    opts = {"critique_max_new_tokens": 24}
    ref = decide_with(method, fitted, sub, organism, DecideOptions(progress=False), opts)
    with ChatServer(organism, NAME) as server:
        got = decide_with(method, fitted, sub, api(server), OPTS, opts)
        assert len(server.log) == 3 * 6
    assert got["transcript"].tolist() == ref["transcript"].tolist()
    assert got["choice"].tolist() == ref["choice"].tolist()


@pytest.mark.parametrize("method", ["caa", "ace", "leace", "loreft", "reft_r1"])
def test_weight_and_activation_methods_need_local_weights(organism, items, method):
    from interventions.fitted import InterventionError
    from interventions.registry import get
    with ChatServer(organism, NAME) as server:
        lm = api(server)
        with pytest.raises(InterventionError, match=f"^{method} edits the model's weights or activations and "
                                                    f"needs local weights; engine openai decides through an API"):
            get(method).fit(lm, items)


def test_the_endpoint_is_checked_at_load(organism, tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(EndpointError, match=rf"^cannot reach http://127.0.0.1:{port}/v1: .*is the server running"):
        load_api(NAME, OpenAIOptions(base_url=f"http://127.0.0.1:{port}/v1"))
    with ChatServer(organism, NAME) as server:
        with pytest.raises(EndpointError, match=rf"/models lists '{NAME}', not 'gpt-9': set openai.model"):
            load_api(NAME, OpenAIOptions(base_url=server.url, model="gpt-9"))
        with pytest.raises(ValueError, match="names an environment variable that is set"):
            load_api(NAME, OpenAIOptions(base_url=server.url, api_key_env="EVENHAND_TEST_UNSET_KEY"))


def test_a_run_config_records_the_endpoint_and_never_the_key(organism, tmp_path, monkeypatch):
    """`evenhand run` with engine openai: scored, the manifest names the endpoint, its model, the sampling and
    reproducible_from_weights false; the key's value is in no file of the run."""
    from experiments.cli.main import main
    from evenhand.runs.rundir import RunDir
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("EVENHAND_TEST_KEY", secret)
    with ChatServer(organism, NAME) as server:
        cfg = tmp_path / "run.yaml"
        cfg.write_text(f"model: {NAME}\noutput_dir: {tmp_path / 'r'}\nsuite: {{subset: smoke, limit: 24}}\n"
                       f"engine: openai\nopenai: {{base_url: '{server.url}', api_key_env: EVENHAND_TEST_KEY}}\n"
                       f"resamples: 20\n")
        assert main(["run", "--quiet", str(cfg)]) == 0
    run = RunDir(tmp_path / "r")
    model = run.manifest()["model"]
    assert model["engine"] == "openai" and model["base_url"] == server.url and model["endpoint_model"] == NAME
    assert model["reproducible_from_weights"] is False and model["sampling"]["temperature"] == 0.0
    assert model["api_key_env"] == "EVENHAND_TEST_KEY"
    assert len(run.read_responses()) == 24 and run.read_metrics()["overall"]
    for f in (tmp_path / "r").rglob("*"):
        if f.is_file():
            assert secret.encode() not in f.read_bytes(), f


@pytest.mark.parametrize("data, msg", [
    ({"engine": "openai", "mode": "logprob"},
     "engine openai runs answer and reasoning modes; mode logprob runs on engine hf "
     r"\(chat completions return no label log-probabilities to score\)"),
    ({"engine": "hf", "openai": {"base_url": "http://127.0.0.1:1/v1"}}, "config field 'openai' sets engine openai"),
    ({"engine": "openai", "openai": {"concurrency": 0}}, "config field 'openai.concurrency' must be at least 1"),
    ({"engine": "openai", "openai": {"concurrency": 16}}, r"'openai.concurrency' \(16\) exceeds batch_size \(8\)"),
    ({"engine": "openai", "openai": {"api_key_env": "sk-abc def"}}, "'openai.api_key_env' names an environment"),
])
def test_config_refusals(tmp_path, data, msg):
    from evenhand.support.options import ConfigError
    from experiments.studies.run.config import config_from_dict
    with pytest.raises(ConfigError, match=msg):
        config_from_dict({"model": NAME, "output_dir": str(tmp_path), **data})


def test_retry_after_and_a_torn_cache_line(tmp_path):
    assert retry_after("3") == 3.0 and retry_after(None) is None and retry_after("soon") is None
    assert 0 < retry_after(time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))) <= 30
    path = tmp_path / CACHE_FILE
    path.write_text(json.dumps({"key": "k1", "text": "Applicant A"}) + "\n" + '{"key": "k2", "te')
    with pytest.warns(UserWarning, match="torn mid-write"):
        cache = ResponseCache(path)
    assert set(cache.hits) == {"k1"}


def _compare_raw(url: str, out: Path, interventions: list) -> dict:
    return {"kind": "compare", "model": NAME, "output_dir": str(out), "engine": "openai", "openai": {"base_url": url},
            "interventions": interventions, "train": {"scenarios": 2, "max_items": 8}, "validation": {"scenarios": 1},
            "eval": {"scenarios": 2, "baselines": 1}, "batch_size": 16, "resamples": 20, "controls": False}


def test_a_comparison_through_the_api_refuses_weight_methods(tmp_path):
    from experiments.studies.compare.config import parse_config
    from evenhand.support.options import ConfigError
    raw = _compare_raw("http://127.0.0.1:1/v1", tmp_path, [{"name": "fair_instruction"}, {"name": "caa"}])
    with pytest.raises(ConfigError, match=r"interventions\[1\]: caa edits the model's weights or activations and "
                                          r"needs local weights; engine openai decides through an API"):
        parse_config(raw)
    with pytest.raises(ConfigError, match="openai sets engine openai's endpoint, but engine is hf"):
        parse_config({**raw, "engine": "hf", "interventions": [{"name": "caa"}]})


@pytest.mark.slow  # the whole comparison (20 s); fast: a prompt procedure through the API, the refusal above
def test_a_comparison_through_the_api_runs_prompt_methods(organism, tmp_path):
    """`kind: compare` with engine openai: the baseline and fair_instruction decided through the server (the
    table's engine column says openai), the response cache in the comparison's directory."""
    from experiments.studies.compare import run_compare
    from experiments.studies.compare.config import parse_config
    with ChatServer(organism, NAME) as server:
        table = run_compare(parse_config(_compare_raw(server.url, tmp_path / "c", [{"name": "fair_instruction"}])),
                            progress=False)
        assert len(server.log) > 0
    assert set(table.loc[table["cell"] != "", "engine"]) == {"openai"}
    assert (tmp_path / "c" / "openai_cache.jsonl").exists()


def test_decide_refuses_endpoint_flags_without_engine_openai(tmp_path, capsys):
    from experiments.cli.main import main
    assert main(["decide", "--model", NAME, "--base-url", "http://127.0.0.1:1/v1", "--concurrency", "2",
                 "--out", str(tmp_path / "d")]) == 2
    assert capsys.readouterr().err.strip() == ("evenhand: error: --base-url, --concurrency set engine openai's "
                                               "endpoint, but --engine is hf: add --engine openai")


def test_a_fatal_reply_stops_the_run_with_one_line(organism, items, tmp_path):
    """HTTP 404 (a model the endpoint does not serve; the load check skipped) is not retried: the first reply
    stops the run with EndpointError, and the requests not yet sent are not sent."""
    with ChatServer(organism, NAME) as server:
        lm = load_api(NAME, OpenAIOptions(base_url=server.url, model="gpt-9", concurrency=1), tmp_path, check=False)
        with pytest.raises(EndpointError, match=r"HTTP 404 .*'gpt-9' does not exist.*check openai.base_url and "
                                                r"openai.model\)"):
            decide(items.head(8), lm, OPTS, out_dir=tmp_path)
        assert lm.stats["requests"] <= 2 and lm.stats["retries"] == 0  # the next may start before the cancel


def test_reasoning_mode_and_identity_blind_match_the_hf_engine(organism, smoke_items):
    """The reasoning variant of the prompt, and identity_blind's rewritten prompt, through the server = in process."""
    from interventions.base import decide_with
    from interventions.registry import get
    sub = smoke_items[smoke_items["degree"] == 1].head(8).reset_index(drop=True)
    assert len(sub) == 8
    blind = get("identity_blind")
    fitted = blind.fit(organism, None)
    with ChatServer(organism, NAME) as server:
        lm = api(server)
        got = decide(sub, lm, DecideOptions(engine="openai", mode="reasoning", reasoning_max_new_tokens=24,
                                            progress=False))
        assert sorted(r["last"] for r in server.log) == sorted({user_message(r, "reasoning") for r in
                                                               sub.to_dict("records")})
        got_blind = decide_with(blind, fitted, sub, lm, OPTS)
    ref = decide(sub, organism, DecideOptions(mode="reasoning", reasoning_max_new_tokens=24, progress=False))
    assert got["text"].tolist() == ref["text"].tolist() and got["choice"].tolist() == ref["choice"].tolist()
    assert got["n_prompt_tokens"].tolist() == ref["n_prompt_tokens"].tolist()
    ref_blind = decide_with(blind, fitted, sub, organism, DecideOptions(progress=False))
    assert got_blind["shown_prompt"].tolist() == ref_blind["shown_prompt"].tolist()
    assert got_blind["choice"].tolist() == ref_blind["choice"].tolist()
