"""A small real OpenAI-compatible server for a local model (`evenhand serve`): ``GET /v1/models`` and
``POST /v1/chat/completions`` on a loopback port, greedy replies from the hf engine's generation
(:func:`evenhand.engine.registry.generate_texts`) on the model's chat template
(:func:`evenhand.vocab.prompts.chat_text`).

It is what engine openai is tested against (``vllm serve`` takes minutes to start on a CPU, too slow for the tests):
the same wire format, with faults injected on request (:class:`Faults`: HTTP 429 with Retry-After, 500, a dropped
connection, a reply slower than the client's timeout, a malformed body) for the first requests, a share of them, or
every request of a chosen item. Requests arriving together are generated in one batch (``max_batch``). Every
request is logged (:attr:`ChatServer.log`) so that a test can count what was asked.
"""
from __future__ import annotations

import hashlib
import json
import random
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from queue import Empty, Queue
from typing import Any

from ..vocab.prompts import chat_text, uses_chat_template
from .registry import generate_texts

FAULTS = ("429", "500", "drop", "slow", "malformed")
"""The faults the server can inject: HTTP 429 with Retry-After, HTTP 500, the connection closed without a
reply, a reply held back ``slow_s`` seconds (past a client's timeout), a 200 reply whose body is not JSON."""


@dataclass
class Faults:
    """Which requests get a fault: the ``first`` requests in order (one fault kind each), else each with
    probability ``fraction`` (a kind drawn from ``kinds``, seeded), and every request whose last message contains
    a key of ``always`` (that kind: an item that fails on every try)."""
    first: Sequence[str] = ()
    fraction: float = 0.0
    kinds: Sequence[str] = FAULTS
    seed: int = 0
    always: dict = field(default_factory=dict)
    retry_after_s: float = 0.2
    """The Retry-After a 429 carries (seconds)."""
    slow_s: float = 5.0
    """How long a slow reply is held back."""

    def __post_init__(self) -> None:
        bad = [k for k in [*self.first, *self.kinds, *self.always.values()] if k not in FAULTS]
        if bad:
            raise ValueError(f"fault must be one of {', '.join(FAULTS)}, got {bad[0]!r}")
        if not 0 <= self.fraction <= 1:
            raise ValueError(f"fault fraction must be between 0 and 1, got {self.fraction}")
        self._rng = random.Random(self.seed)

    def pick(self, n: int, messages: list[dict]) -> str | None:
        """The fault of request ``n`` (0-based, in arrival order) carrying ``messages``, or None."""
        last = str(messages[-1].get("content", "")) if messages else ""
        for needle, kind in self.always.items():
            if needle in last:
                return kind
        if n < len(self.first):
            return self.first[n]
        if self.fraction and self._rng.random() < self.fraction:
            return self._rng.choice(list(self.kinds))
        return None


def messages_key(messages: list[dict]) -> str:
    """A short hash of a message list (what the server's log records per request)."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode("utf-8")).hexdigest()[:16]


class ChatServer:
    """Serves ``lm`` (a loaded Hugging Face model) as ``name`` on ``host``:``port`` (0: a free port) in a
    background thread; :meth:`close` stops it. ``delay_s``: added to every reply (a slower endpoint).

    The project's own server of engine openai's wire format: a ``ThreadingHTTPServer`` on loopback, and a
    generation thread (:meth:`_generate_loop`) batching the requests that arrive together through the hf engine's
    generation on :func:`evenhand.vocab.prompts.chat_text`, with :class:`Faults` injected as a test asks."""

    def __init__(self, lm: Any, name: str, host: str = "127.0.0.1", port: int = 0, faults: Faults | None = None,
                 max_batch: int = 8, delay_s: float = 0.0, chat_template: str = "auto"):
        self.lm, self.name, self.faults = lm, name, faults or Faults()
        self.max_batch, self.delay_s, self.chat_template = max_batch, delay_s, chat_template
        self.log: list[dict] = []
        self._arrivals = 0
        self.lock = threading.Lock()
        self.queue: Queue = Queue()
        self._stop = threading.Event()
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}/v1"
        self._threads = [threading.Thread(target=self.httpd.serve_forever, daemon=True),
                         threading.Thread(target=self._generate_loop, daemon=True)]
        for t in self._threads:
            t.start()

    def __enter__(self) -> "ChatServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def served(self, what: str = "ok") -> list[str]:
        """The message keys of the logged requests whose outcome was ``what`` (ok, or a fault kind)."""
        with self.lock:
            return [r["key"] for r in self.log if r["outcome"] == what]

    def _record(self, key: str, outcome: str, content: str) -> None:
        with self.lock:
            self.log.append({"key": key, "outcome": outcome, "last": content, "at": time.monotonic()})

    def _next_fault(self, messages: list[dict]) -> str | None:
        with self.lock:
            self._arrivals += 1
            return self.faults.pick(self._arrivals - 1, messages)

    def _generate_loop(self) -> None:
        """Take the queued requests (up to ``max_batch`` of one max_tokens) and generate them in one batch."""
        while not self._stop.is_set():
            try:
                first = self.queue.get(timeout=0.1)
            except Empty:
                continue
            jobs = [first]
            time.sleep(0.002)  # let requests arriving together join the batch
            while len(jobs) < self.max_batch:
                try:
                    jobs.append(self.queue.get_nowait())
                except Empty:
                    break
            by_budget: dict[int, list] = {}
            for job in jobs:
                by_budget.setdefault(job["max_tokens"], []).append(job)
            for budget, group in by_budget.items():
                try:
                    special = not uses_chat_template(self.lm.tokenizer, self.chat_template)
                    texts = [chat_text(self.lm.tokenizer, j["messages"], self.chat_template) for j in group]
                    rows = generate_texts(self.lm, texts, special, budget)
                    for j, row in zip(group, rows):
                        j["row"] = row
                except Exception as exc:  # a generation failure answers HTTP 500, the server goes on
                    for j in group:
                        j["failure"] = f"{type(exc).__name__}: {exc}"
                for j in group:
                    j["done"].set()


def _check_body(body: Any, name: str) -> str | None:
    """Why a chat completions request body is refused (HTTP 400), or None."""
    if not isinstance(body, dict):
        return "the body must be a JSON object"
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs or not all(
            isinstance(m, dict) and m.get("role") in ("system", "user", "assistant") and isinstance(m.get("content"), str)
            for m in msgs):
        return "messages must be a non-empty list of {role: system|user|assistant, content: string}"
    if float(body.get("temperature", 1.0) or 0.0) != 0.0:
        return "this server decides greedily: set temperature 0"
    mt = body.get("max_tokens", body.get("max_completion_tokens", 16))
    if not isinstance(mt, int) or isinstance(mt, bool) or mt < 1:
        return "max_tokens must be a positive integer"
    return None


def _handler(server: ChatServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send(self, status: int, payload: Any, headers: dict | None = None, raw: bytes | None = None) -> None:
            data = raw if raw is not None else json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str = "invalid_request_error",
                   headers: dict | None = None) -> None:
            self._send(status, {"error": {"message": message, "type": kind}}, headers)

        def do_GET(self) -> None:
            if self.path.rstrip("/") != "/v1/models":
                return self._error(404, f"no route {self.path}")
            self._send(200, {"object": "list", "data": [{"id": server.name, "object": "model",
                                                          "owned_by": "evenhand"}]})

        def do_POST(self) -> None:
            if self.path.rstrip("/") != "/v1/chat/completions":
                return self._error(404, f"no route {self.path}")
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            except ValueError:
                return self._error(400, "the body is not JSON")
            problem = _check_body(body, server.name)
            if problem:
                return self._error(400, problem)
            if body.get("model") != server.name:
                return self._error(404, f"the model {body.get('model')!r} does not exist; this server serves "
                                        f"{server.name!r}", "not_found_error")
            messages = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
            key, last = messages_key(messages), messages[-1]["content"]
            fault = server._next_fault(messages)
            if fault is not None:
                server._record(key, fault, last)
            if fault == "429":
                return self._error(429, "rate limited", "rate_limit_error",
                                   {"Retry-After": f"{server.faults.retry_after_s:g}"})
            if fault == "500":
                return self._error(500, "injected server error", "server_error")
            if fault == "drop":
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if fault == "slow":
                time.sleep(server.faults.slow_s)
            job = {"messages": messages, "max_tokens": body.get("max_tokens", body.get("max_completion_tokens", 16)),
                   "done": threading.Event()}
            server.queue.put(job)
            job["done"].wait()
            if "failure" in job:
                return self._error(500, job["failure"], "server_error")
            if server.delay_s:
                time.sleep(server.delay_s)
            row = job["row"]
            if fault is None:
                server._record(key, "ok", last)
            if fault == "malformed":
                return self._send(200, None, raw=b'{"choices": [{"message": {"content": "Applicant A"')
            finish = "length" if row["n_new_tokens"] >= job["max_tokens"] else "stop"
            try:
                self._send(200, {"id": f"chatcmpl-{key}", "object": "chat.completion", "created": int(time.time()),
                                 "model": server.name,
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": row["text"]},
                                              "finish_reason": finish}],
                                 "usage": {"prompt_tokens": row["n_prompt_tokens"],
                                           "completion_tokens": row["n_new_tokens"],
                                           "total_tokens": row["n_prompt_tokens"] + row["n_new_tokens"]}})
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a slow reply past its timeout)
                pass
    return Handler
