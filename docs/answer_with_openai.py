"""Answer exported EvenHand items with any OpenAI-compatible chat API and write ``item_id,text`` CSV.

Works with a local vLLM server (``vllm serve Qwen/Qwen2.5-7B-Instruct`` serves
``http://localhost:8000/v1``), llama.cpp's or Ollama's OpenAI endpoint, or a hosted API (key in
``OPENAI_API_KEY``). Each item's ``prompt`` is sent as one user message, greedy (temperature 0);
the raw answer text is written, and ``evenhand score`` parses it. Standard library only.

Each answer is appended to OUT as it arrives, so a stopped run loses nothing: the same command again
skips the item_ids already in OUT (resume). A failed request (refused connection, timeout, HTTP 408,
429 or 5xx) is retried with exponential backoff; when the retries are used up the script stops with one
line saying what failed and how many answers OUT holds. A progress line (count, rate, time left) goes
to stderr.

    evenhand suite export --subset smoke --out items.jsonl
    python docs/answer_with_openai.py items.jsonl answers.csv --base-url http://localhost:8000/v1 \
        --model Qwen/Qwen2.5-7B-Instruct
    evenhand score answers.csv
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

RETRY_STATUS = {408, 429, 500, 502, 503, 504}
"""HTTP statuses worth another try (the server is busy or briefly down); others are the request's fault."""


class AnswerError(Exception):
    """A request that failed for good (retries used up, or an error a retry cannot fix)."""


def answer(prompt: str, a: argparse.Namespace) -> str:
    """The model's reply to ``prompt`` (one chat turn, greedy); one try."""
    body = {"model": a.model, "messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": a.max_tokens}
    req = urllib.request.Request(a.base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'none')}"})
    with urllib.request.urlopen(req, timeout=a.timeout) as resp:
        return json.load(resp)["choices"][0]["message"]["content"] or ""


def _why(exc: BaseException) -> str:
    """A failed request in a few words."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        return getattr(reason, "strerror", None) or str(reason)
    if isinstance(exc, TimeoutError):
        return f"no answer within --timeout {exc.args[0] if exc.args else ''}".rstrip()
    return f"{type(exc).__name__}: {exc}"


def answer_with_retries(item: dict, a: argparse.Namespace) -> str:
    """:func:`answer` with up to ``a.retries`` more tries after a refused connection, a timeout or HTTP
    408/429/5xx, waiting ``a.backoff * 2**k`` seconds (at most 60) before try k + 1; AnswerError after."""
    for k in range(a.retries + 1):
        try:
            return answer(item["prompt"], a)
        except urllib.error.HTTPError as exc:
            if exc.code not in RETRY_STATUS:
                raise AnswerError(f"{a.base_url}: {_why(exc)} for item {item['item_id']} (not retried: check "
                                  f"--model, --base-url and OPENAI_API_KEY)") from None
            last = exc
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            last = exc
        except (KeyError, IndexError, ValueError) as exc:
            raise AnswerError(f"{a.base_url}: not an OpenAI chat completions reply for item {item['item_id']} "
                              f"({type(exc).__name__}: {exc}); is --base-url the API's /v1?") from None
        stop = getattr(a, "stop", None)
        if stop is not None and stop.is_set():   # another request failed for good: no more tries
            break
        if k < a.retries:
            time.sleep(min(60.0, a.backoff * 2 ** k))
    raise AnswerError(f"cannot get an answer from {a.base_url}: {_why(last)} (item {item['item_id']}, "
                      f"{k + 1} {'try' if k == 0 else 'tries'})")


def done_ids(path: str) -> set[str]:
    """The item_ids already answered in the CSV ``path`` (empty when it does not exist yet)."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return set()
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or "item_id" not in reader.fieldnames:
            raise AnswerError(f"{path} exists but is not an item_id,text CSV: move it or choose another OUT")
        return {row["item_id"] for row in reader}


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s // 60 % 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """Prints ``answered 120/1,000 (50 from an earlier run), 3.2 items/s, about 4m35s left`` to stderr at
    most every ``every`` seconds, from the rate measured in this run."""

    def __init__(self, total: int, resumed: int, every: float, clock=time.monotonic):
        self.total, self.resumed, self.every, self.clock = total, resumed, every, clock
        self.t0 = self.last = clock()
        self.n = 0

    def line(self) -> str:
        elapsed = self.clock() - self.t0
        done = self.resumed + self.n
        head = f"answered {done:,}/{self.total:,}" + (f" ({self.resumed:,} from an earlier run)" if self.resumed else "")
        if not self.n or elapsed <= 0:
            return head
        rate = self.n / elapsed
        return f"{head}, {rate:.1f} items/s, about {_clock((self.total - done) / rate)} left"

    def step(self, force: bool = False) -> None:
        self.n += 0 if force else 1
        now = self.clock()
        if force or now - self.last >= self.every:
            self.last = now
            print(self.line(), file=sys.stderr, flush=True)


def run(a: argparse.Namespace) -> int:
    """Answer the items of ``a.items`` not yet in ``a.out``, appending each answer as it arrives."""
    with open(a.items, encoding="utf-8") as fh:
        items = [json.loads(line) for line in fh if line.strip()]
    have = done_ids(a.out)
    todo = [it for it in items if str(it["item_id"]) not in have]
    progress = Progress(len(items), len(items) - len(todo), a.progress_every)
    if not todo:
        print(f"{a.out} already holds all {len(items):,} answers")
        return 0
    a.stop = threading.Event()
    new = not have and (not os.path.exists(a.out) or os.path.getsize(a.out) == 0)
    with open(a.out, "a", newline="", encoding="utf-8") as fh, ThreadPoolExecutor(a.workers) as pool:
        w = csv.writer(fh)
        if new:
            w.writerow(["item_id", "text"])
        pending = {pool.submit(answer_with_retries, it, a): it for it in todo[:2 * a.workers]}
        queue = iter(todo[2 * a.workers:])
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    it = pending.pop(f)
                    w.writerow([it["item_id"], f.result()])   # raises the request's AnswerError
                    fh.flush()
                    progress.step()
                    nxt = next(queue, None)
                    if nxt is not None:
                        pending[pool.submit(answer_with_retries, nxt, a)] = nxt
        except BaseException:
            a.stop.set()
            for f in pending:
                f.cancel()
            raise
    progress.step(force=True)
    print(f"wrote {len(todo):,} answers to {a.out} ({len(items):,} in all)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Answer every item of ITEMS (JSONL from `evenhand suite export`) and write OUT (CSV: item_id,text)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("items", help="items.jsonl from `evenhand suite export`")
    p.add_argument("out", help="answers.csv to write (item_id,text); an existing one is resumed")
    p.add_argument("--base-url", default="http://localhost:8000/v1", help="the API's base URL (ending in /v1)")
    p.add_argument("--model", required=True, help="the model name the API serves")
    p.add_argument("--max-tokens", type=int, default=16, help="raise it for reasoning models")
    p.add_argument("--workers", type=int, default=8, help="requests in flight at once")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one answer")
    p.add_argument("--retries", type=int, default=5, help="more tries of a failed request (default 5)")
    p.add_argument("--backoff", type=float, default=1.0,
                   help="seconds before the first retry, doubling for each next one (at most 60)")
    p.add_argument("--progress-every", type=float, default=10.0, help="seconds between progress lines")
    a = p.parse_args(argv)
    try:
        return run(a)
    except AnswerError as exc:
        try:
            held = f"{a.out} holds {len(done_ids(a.out)):,} answers, the same command resumes"
        except AnswerError:
            held = "nothing was written"
        print(f"answer_with_openai: error: {exc}; {held}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"answer_with_openai: error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"answer_with_openai: interrupted; {a.out} keeps the answers so far, the same command resumes",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
