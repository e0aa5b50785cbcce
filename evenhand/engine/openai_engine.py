"""The OpenAI-compatible decision engine (``engine: openai``, :data:`ENGINE`): answer and reasoning modes through
a chat-completions endpoint (``vllm serve``, llama.cpp, a hosted API), standard library only.

Prompts go as message lists (the server applies its chat template), ``concurrency`` at a time, each retried with
backoff on 408/409/429/5xx, timeouts, resets and malformed bodies (Retry-After capped at ``max_backoff_s``). A dead
server is noticed across the run: ``outage_after`` failures in a row pause every worker while one probe asks
/models; back within ``outage_budget_s`` the run goes on, past it :class:`EndpointDown` stops it in one line. Ctrl-C
cancels retries and sleeps at once. Answers are appended to ``OUT/openai_cache.jsonl`` as they arrive (a torn last
line is cut off on open), so reruns ask only what is missing. The key comes from the set variable ``api_key_env``
names and is never written; error text is redacted (:func:`redact`). ``text`` is stored as the server sent it
(compare stripped across engines). No local weights: logprob mode, the cache and the weight and activation
interventions need engine hf. More: docs/guide/api.md, "Evaluate a model behind an API".

Ours, not a client library's (the ``openai`` package): the retry, outage and cancel rules are the point, and they sit
around ``urllib`` in a few lines; the standard library keeps the engine free of dependencies."""
from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import os
import random
import re
import threading
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

from ..models.loading import ModelLoadError, ModelSpec, display_name, resolve_spec
from .registry import Batch

CACHE_FILE = "openai_cache.jsonl"
"""The response cache's file name in a run directory."""
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
"""HTTP statuses worth another try (busy, rate-limited or briefly down); other statuses are the request's fault."""
FATAL_STATUS = frozenset({401, 403, 404})
"""HTTP statuses that fail every request alike (a wrong key, base URL or model name): the run stops at once."""


MAX_RECOVERIES = 20
"""How many outages one request may wait out (its tries during them not counted): bounds a flapping server."""


class EndpointError(ModelLoadError):
    """The endpoint cannot answer any request (unreachable at load, a wrong key, URL or model); one line."""


class EndpointDown(EndpointError):
    """The server stopped answering and did not come back within ``outage_budget_s``: the run stops; what was
    answered is in the response cache, and the rerun asks only the rest."""


class Cancelled(Exception):
    """A worker stops because the run is stopping (Ctrl-C, a fatal reply, an outage past its budget)."""


_SECRET = re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;}]+"
                     r"|\b((?:proxy-)?authorization|x-api-key|api[-_]?key|access[-_]?token|cookie)"
                     r"(\\?[\"'])?\s*[:=]\s*(\\?[\"'])?[^\s\"',;}]+(\s+[^\s\"',;}]+)?")


def redact(text: str, secret: str | None = None) -> str:
    """``text`` with credentials replaced by ``[redacted]``: ``secret`` (the key's value) wherever it appears,
    ``Bearer``/``Basic`` tokens, and header-like ``Authorization: ...``, ``X-Api-Key: ...``, ``api_key=...``
    (quoted JSON keys too). Applied to every error text before it reaches stderr, the cache or a manifest."""
    if secret:
        text = text.replace(secret, "[redacted]")
        for n in range(min(len(secret) - 1, len(text)), 3, -1):  # a key cut off where the body was cut
            if text.endswith(secret[:n]):
                text = text[:-n] + "[redacted]"
                break
    return _SECRET.sub(lambda m: (m.group(1) or m.group(2)) + " [redacted]", text)


@dataclass(frozen=True)
class OpenAIOptions:
    """How engine openai reaches its endpoint (the ``openai:`` section of a run config)."""
    base_url: str = "http://127.0.0.1:8000/v1"
    """The API's base URL, ending in /v1 (`vllm serve` listens on http://127.0.0.1:8000/v1)."""
    model: str | None = None
    """The model name the endpoint serves (default: the run's model)."""
    api_key_env: str | None = None
    """The NAME of an environment variable that is set and holds the API key (e.g. OPENAI_API_KEY); refused,
    without printing it, when no such variable is set (a key pasted here is never echoed or recorded); none: no
    key is sent."""
    concurrency: int = 4
    """Requests in flight at once (at most the batch_size items of a batch)."""
    timeout_s: float = 120.0
    """Seconds a request may wait for the server (connecting, or between bytes of the reply) before a retry."""
    max_retries: int = 5
    """More tries of a failed request (HTTP 408/409/429/5xx, timeout, dropped connection, malformed body)."""
    backoff_s: float = 1.0
    """Seconds before the first retry, doubling for each next one, with jitter (x0.5-1), at most max_backoff_s;
    a Retry-After header waits at least as long as it says, at most max_backoff_s."""
    max_backoff_s: float = 60.0
    """The longest wait before a retry, a server's Retry-After included (a longer Retry-After is cut to it)."""
    outage_after: int = 3
    """Requests in a row, across all workers, that get no reply (connection refused or reset, timeout) before the
    server counts as down: every worker pauses and one probe asks /models with backoff."""
    outage_budget_s: float = 300.0
    """How long the server may stay down: back within it, the run goes on; past it, the run stops (one line,
    everything answered kept in the cache; the rerun asks only the rest)."""
    requests_per_minute: float | None = None
    """Start at most this many requests a minute (the endpoint's rate limit); none: no limit."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy, as the local engines decide)."""
    seed: int = 0
    """Sent as the request's ``seed`` when sampling (temperature > 0; vLLM and OpenAI take it): a rerun samples
    alike where the server honours it. Not sent when greedy."""

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai.base_url must start with http:// or https://, got {self.base_url!r}")
        if self.api_key_env is not None and (not isinstance(self.api_key_env, str) or "=" in self.api_key_env
                                             or "\0" in self.api_key_env or not os.environ.get(self.api_key_env)):
            raise ValueError(f"openai.api_key_env names an environment variable that is set and holds the key (e.g. "
                             f"OPENAI_API_KEY), not the key; the value given ({len(str(self.api_key_env))} "
                             f"characters, not shown) names no variable set here: export the key and give its name")
        for name in ("concurrency", "outage_after"):
            if getattr(self, name) < 1:
                raise ValueError(f"openai.{name} must be at least 1, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise ValueError(f"openai.max_retries must be at least 0, got {self.max_retries}")
        for name in ("timeout_s", "backoff_s", "max_backoff_s", "outage_budget_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"openai.{name} must be positive, got {getattr(self, name)}")
        if self.requests_per_minute is not None and not self.requests_per_minute > 0:
            raise ValueError(f"openai.requests_per_minute must be positive, got {self.requests_per_minute}")
        if not 0 <= self.temperature <= 2:
            raise ValueError(f"openai.temperature must be between 0 and 2, got {self.temperature}")


class ResponseCache:
    """Answers by request key, read from and appended to a JSONL file (None: in memory only). Each line is
    written by one ``os.write`` on an ``O_APPEND`` descriptor, so a killed process leaves whole lines; a torn
    last line (a power cut, a full disk) is repaired on opening, before anything is appended: cut off with a
    warning (or, when it is a whole record missing only its newline, ended), so that no new record is glued onto
    it. Lines with ``error`` record a failed request (not a hit)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.hits: dict[str, dict] = {}
        self.lock = threading.Lock()
        self._fd: int | None = None
        if self.path is not None and self.path.exists():
            self._repair()
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(rec, dict) and "key" in rec and "text" in rec and not rec.get("error"):
                        self.hits[rec["key"]] = rec

    def _repair(self) -> None:
        """End the file on a newline: a last line without one is a record torn mid-write (cut off, with a
        warning) or a whole record whose newline was lost (kept, its newline added)."""
        if not os.access(self.path, os.W_OK):  # a read-only copy: read it as it is (a torn line is skipped)
            return
        with open(self.path, "rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if not size:
                return
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            start = max(0, size - (1 << 20))
            while True:  # the last newline, read backwards in chunks (bounded by the file's size)
                fh.seek(start)
                cut = fh.read(size - start).rfind(b"\n")
                if cut >= 0 or start == 0:
                    cut = start + cut + 1 if cut >= 0 else 0
                    break
                start = max(0, start - (1 << 20))
            fh.seek(cut)
            tail = fh.read()
            try:
                whole = isinstance(json.loads(tail), dict)
            except ValueError:
                whole = False
            if whole:
                fh.seek(size)
                fh.write(b"\n")
                return
            fh.truncate(cut)
        warnings.warn(f"{self.path}: the last line was torn mid-write ({len(tail)} bytes, no newline); cut off so "
                      f"that nothing is appended to it (that request is asked again)", UserWarning, stacklevel=3)

    @staticmethod
    def key(model: str, messages: list[dict], sampling: dict) -> str:
        """The request's key: a hash of the model name, the messages and the sampling parameters (the seed too
        when sampling: :func:`sampling_of`)."""
        blob = json.dumps({"model": model, "messages": messages, "sampling": sampling}, sort_keys=True,
                          ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict | None:
        with self.lock:
            return self.hits.get(key)

    def add(self, record: dict) -> None:
        """Keep ``record`` (an answer, or with ``error`` a failure) and append it to the file."""
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self.lock:
            if not record.get("error"):
                self.hits[record["key"]] = record
            if self.path is None:
                return
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]

    def close(self) -> None:
        with self.lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class _Pace:
    """At most ``per_minute`` request starts a minute across threads (None: no limit)."""

    def __init__(self, per_minute: float | None):
        self.gap = 60.0 / per_minute if per_minute else 0.0
        self.next = 0.0
        self.lock = threading.Lock()

    def wait(self, cancel: threading.Event | None = None) -> None:
        if not self.gap:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.gap
        if (cancel or threading.Event()).wait(max(0.0, start - now)):
            raise Cancelled


class Retry(Exception):
    """A failed try worth another (``wait``: the server's Retry-After, seconds, or None; ``no_reply``: the server
    sent nothing: refused, reset or timed out, what an outage looks like)."""

    def __init__(self, why: str, wait: float | None = None, no_reply: bool = False):
        super().__init__(why)
        self.wait = wait
        self.no_reply = no_reply


class Health:
    """Whether the server answers, across a whole run: :meth:`failed` counts requests in a row with no reply
    (any worker) and at ``outage_after`` declares an outage, starting one probe (``GET /models``, any HTTP reply
    counts) with backoff from 0.5 s doubling to at most 5 s; :meth:`wait_up` holds a worker until the probe sees the
    server back, or raises :class:`EndpointDown` once it has been down ``outage_budget_s``. ``outages``: (seconds
    down, came back) per outage. There is one per :class:`APIModel`, so it counts across the whole run; the
    requests' tries during an outage are not counted (:func:`ask`)."""

    PROBE_MAX_S = 5.0
    """The longest gap between two probes (so a run past its budget stops within seconds of it)."""

    def __init__(self, options: OpenAIOptions, headers):
        self.o = options
        self.headers = headers
        self.lock = threading.Lock()
        self.in_a_row = 0
        self.up = threading.Event()
        self.up.set()
        self.error: EndpointDown | None = None
        self.outages: list[tuple[float, bool]] = []

    def ok(self) -> None:
        """The server replied (anything, an error status included)."""
        with self.lock:
            self.in_a_row = 0

    def failed(self) -> bool:
        """A request got no reply; whether the server now counts as down."""
        with self.lock:
            self.in_a_row += 1
            if self.up.is_set() and self.in_a_row >= self.o.outage_after:
                self.up.clear()
                threading.Thread(target=self._probe, daemon=True, name="evenhand-outage-probe").start()
            return not self.up.is_set()

    def confirm_down(self) -> bool:
        """Before a request is given up for want of a reply: whether the server is unreachable now (one probe of
        /models). If it is, an outage is declared (as :meth:`failed` declares one), so the request waits for the
        server instead of failing: under load, one worker can spend its tries before ``outage_after`` failures in a
        row have been counted across the run."""
        if self._reachable():
            return False
        with self.lock:
            if self.up.is_set():
                self.up.clear()
                threading.Thread(target=self._probe, daemon=True, name="evenhand-outage-probe").start()
        return True

    def wait_up(self, cancel: threading.Event) -> bool:
        """Hold until the server is up (True when it was down); :class:`Cancelled` when the run is cancelled,
        :class:`EndpointDown` past the budget."""
        waited = False
        while not self.up.is_set():
            waited = True
            if cancel.wait(0.05):
                raise Cancelled
        if self.error is not None:
            raise self.error
        return waited

    def reset(self) -> None:
        """A new call after an outage that ended the last one: count afresh."""
        with self.lock:
            if self.up.is_set():
                self.error, self.in_a_row = None, 0

    def _reachable(self) -> bool:
        req = urllib.request.Request(self.o.base_url.rstrip("/") + "/models", headers=self.headers())
        try:
            with urllib.request.urlopen(req, timeout=min(self.o.timeout_s, self.PROBE_MAX_S)) as resp:
                resp.read(1 << 16)
            return True
        except urllib.error.HTTPError:
            return True  # it answered
        except (urllib.error.URLError, http.client.HTTPException, OSError):
            return False

    def _probe(self) -> None:
        t0 = time.monotonic()
        gap = 0.5
        while True:
            if self._reachable():
                with self.lock:
                    self.in_a_row = 0
                    self.outages.append((round(time.monotonic() - t0, 1), True))
                    self.up.set()
                return
            left = self.o.outage_budget_s - (time.monotonic() - t0)
            if left <= 0:
                with self.lock:
                    self.outages.append((round(time.monotonic() - t0, 1), False))
                    self.error = EndpointDown(
                        f"{self.o.base_url} stopped answering and was still down after openai.outage_budget_s "
                        f"{self.o.outage_budget_s:g} s: the run stops; every answer so far is kept in the response "
                        f"cache, and rerunning the same command when the server is back asks only the rest")
                    self.up.set()
                return
            time.sleep(min(gap, left))
            gap = min(gap * 2, self.PROBE_MAX_S)


def retry_after(value: str | None) -> float | None:
    """A Retry-After header in seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


@dataclass
class APIModel:
    """A model behind an OpenAI-compatible endpoint: no tokenizer or weights here (the server templates and
    tokenises); ``served`` is the name sent, ``listed`` what the endpoint's /models reported."""
    spec: ModelSpec
    name: str
    served: str
    options: OpenAIOptions
    cache: ResponseCache
    listed: list[str] | None = None
    tokenizer: None = None
    stats: dict = field(default_factory=lambda: {"requests": 0, "retries": 0, "cached": 0, "failed": 0})
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    health: Health | None = field(default=None, repr=False)
    engine: ClassVar[str] = "openai"

    def __post_init__(self) -> None:
        if self.health is None:
            self.health = Health(self.options, lambda: _headers(self.options))

    def count(self, what: str) -> None:
        """Add one to ``stats[what]`` (requests sent, retries, cache hits, failed items), thread-safely."""
        with self._lock:
            self.stats[what] += 1

    def describe(self) -> dict:
        """What a run's manifest records: the endpoint, its model name, the sampling, the key's variable name
        (never the key), and that the run is not reproducible from weights."""
        o = self.options
        return {"name": self.name, "engine": "openai", "base_url": o.base_url, "endpoint_model": self.served,
                "endpoint_models_listed": self.listed, "api_key_env": o.api_key_env,
                "sampling": {"temperature": o.temperature, "seed": o.seed if o.temperature > 0 else None,
                             "max_tokens": "max_new_tokens (answer) or reasoning_max_new_tokens (reasoning)"},
                "chat_template": "applied by the server",
                "requests": {k: getattr(o, k) for k in ("concurrency", "timeout_s", "max_retries", "backoff_s",
                                                          "max_backoff_s", "requests_per_minute", "outage_after",
                                                          "outage_budget_s")},
                "spec": asdict(self.spec), "weights": None, "reproducible_from_weights": False}

    def close(self) -> None:
        self.cache.close()


def _headers(o: OpenAIOptions) -> dict:
    h = {"Content-Type": "application/json", "Accept": "application/json"}
    if o.api_key_env:
        key = os.environ.get(o.api_key_env)
        if not key:
            raise EndpointError("the environment variable openai.api_key_env names is no longer set: export the key "
                                "again (the key itself never goes in a config)")
        h["Authorization"] = f"Bearer {key}"
    return h


def _key(o: OpenAIOptions) -> str | None:
    return os.environ.get(o.api_key_env) if o.api_key_env else None


def _why_http(exc: urllib.error.HTTPError, o: OpenAIOptions) -> str:
    """The status and the start of the body, redacted (:func:`redact`)."""
    try:
        body = exc.read(300).decode("utf-8", "replace").strip().replace("\n", " ")
    except (OSError, http.client.HTTPException):
        body = ""
    return redact(f"HTTP {exc.code} {exc.reason}" + (f": {body}" if body else ""), _key(o))


def _list_models(o: OpenAIOptions) -> list[str] | None:
    """The model names GET /models lists; None when the endpoint has no such route. Fails fast (one line) when
    nothing listens there or the key is refused."""
    req = urllib.request.Request(o.base_url.rstrip("/") + "/models", headers=_headers(o))
    try:
        with urllib.request.urlopen(req, timeout=min(o.timeout_s, 30.0)) as resp:
            data = json.loads(resp.read())
        return [str(m["id"]) for m in data.get("data", [])]
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise EndpointError(_key_refused(o, exc)) from None
        return None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointError(redact(f"cannot reach {o.base_url}: {getattr(reason, 'strerror', None) or reason} "
                                   f"(is the server running? check openai.base_url)", _key(o))) from None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _key_refused(o: OpenAIOptions, exc: urllib.error.HTTPError) -> str:
    """The one line for HTTP 401/403: no key sent, or the key refused."""
    if not o.api_key_env:
        return (f"{o.base_url}: {_why_http(exc, o)}: the endpoint wants an API key and none was sent: export it "
                f"and name the variable with openai.api_key_env (--api-key-env on `evenhand decide`)")
    return f"{o.base_url}: {_why_http(exc, o)}: the API key in {o.api_key_env} was refused"


def load_api(spec: ModelSpec | str, options: OpenAIOptions | None = None, run_dir: str | Path | None = None,
             check: bool = True) -> APIModel:
    """The model ``spec`` names behind ``options.base_url`` (``options.model``: the name the endpoint serves,
    default the spec's). ``run_dir``: where the response cache lives (None: in memory only). ``check``: ask the
    endpoint's /models first, refusing (one line) an endpoint that does not answer or does not serve the model.
    The :class:`APIModel` has no tokenizer and no weights: the endpoint's model name, the options, a
    :class:`ResponseCache`."""
    o = options or OpenAIOptions()
    spec = ModelSpec(spec) if isinstance(spec, str) else spec
    name = display_name(resolve_spec(spec))  # a preset's name, a local path's last part, else the id as given
    served = o.model or name
    _headers(o)  # a named key variable unset since the options were made fails here, before any request
    listed = _list_models(o) if check else None
    if listed and served not in listed:
        raise EndpointError(f"{o.base_url}/models lists {', '.join(map(repr, listed[:8]))}"
                            f"{' ...' if len(listed) > 8 else ''}, not {served!r}: set openai.model (--api-model on "
                            f"`evenhand decide`) to the name the endpoint serves")
    cache = ResponseCache(Path(run_dir) / CACHE_FILE if run_dir is not None else None)
    return APIModel(spec=spec, name=name, served=served, options=o, cache=cache, listed=listed)


def _post(o: OpenAIOptions, body: dict) -> dict:
    """One try: the parsed reply, :class:`Retry` for a fault worth another try, EndpointError for a fatal one,
    ValueError for a request the endpoint refuses (HTTP 400/422: not retried)."""
    req = urllib.request.Request(o.base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode("utf-8"),
                                 headers=_headers(o))
    try:
        with urllib.request.urlopen(req, timeout=o.timeout_s) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code in RETRY_STATUS:
            raise Retry(_why_http(exc, o), retry_after(exc.headers.get("Retry-After") if exc.headers else None)) \
                from None
        if exc.code in (401, 403):
            raise EndpointError(_key_refused(o, exc)) from None
        if exc.code in FATAL_STATUS:
            raise EndpointError(f"{o.base_url}: {_why_http(exc, o)} (check openai.base_url and openai.model)") \
                from None
        raise ValueError(_why_http(exc, o)) from None
    except TimeoutError:
        raise Retry(f"no reply within timeout_s {o.timeout_s:g}", no_reply=True) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise Retry(f"no reply within timeout_s {o.timeout_s:g}", no_reply=True) from None
        raise Retry(redact(f"connection failed: {getattr(reason, 'strerror', None) or reason}", _key(o)),
                    no_reply=True) from None
    except (http.client.HTTPException, ConnectionError, OSError) as exc:
        raise Retry(redact(f"connection dropped: {type(exc).__name__} {exc}".strip(), _key(o)),
                    no_reply=True) from None
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        text = choice["message"]["content"]
        if text is not None and not isinstance(text, str):
            raise TypeError(f"content is {type(text).__name__}")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise Retry(redact(f"not a chat completions reply ({type(exc).__name__}: {str(exc)[:80]})", _key(o))) \
            from None
    usage = data.get("usage") or {}
    return {"text": text or "", "finish_reason": choice.get("finish_reason"), "model": data.get("model"),
            "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens")}


def sampling_of(o: OpenAIOptions, max_tokens: int) -> dict:
    """The sampling fields a request sends (and its cache key holds): temperature, max_tokens, and when sampling
    the seed."""
    return {"temperature": o.temperature, "max_tokens": max_tokens, **({"seed": o.seed} if o.temperature > 0 else {})}


def ask(lm: APIModel, messages: list[dict], max_tokens: int, pace: _Pace | None = None,
        cancel: threading.Event | None = None) -> dict:
    """The endpoint's reply to ``messages`` (from the cache when asked before): a cache record (``text``,
    ``prompt_tokens``, ``completion_tokens``, ``finish_reason``, ``model``, ``attempts``, ``cached``) or, after
    the last try, one with ``error`` (recorded in the cache file, not raised). ``cancel`` set: :class:`Cancelled`
    at the next wait (a backoff sleep ends at once). A request that finds the server down (:class:`Health`) waits
    for it without counting those tries (at most :data:`MAX_RECOVERIES` outages), or raises :class:`EndpointDown`.

    Retried (:class:`Retry`): HTTP 408/409/429/5xx, timeouts, dropped connections, malformed bodies; the backoff
    doubles from ``backoff_s`` with jitter, waits at least the Retry-After, all capped by ``max_backoff_s``. The
    record with ``error`` is what :func:`evenhand.running.decisions.decide` turns into ``ItemsFailed`` once the
    batch's others are saved."""
    o = lm.options
    cancel = cancel or threading.Event()
    sampling = sampling_of(o, max_tokens)
    key = ResponseCache.key(lm.served, messages, sampling)
    hit = lm.cache.get(key)
    if hit is not None:
        lm.count("cached")
        return {**hit, "cached": True}
    body = {"model": lm.served, "messages": messages, **sampling}
    why, tries, sent, recoveries, refused = "", 0, 0, 0, False
    while True:  # bounded: max_retries + 1 counted tries, MAX_RECOVERIES uncounted ones
        lm.health.wait_up(cancel)
        if pace is not None:
            pace.wait(cancel)
        if cancel.is_set():
            raise Cancelled
        lm.count("requests")
        sent += 1
        try:
            reply = _post(o, body)
        except Retry as exc:
            why = str(exc)
            if exc.no_reply and lm.health.failed() and recoveries < MAX_RECOVERIES:
                lm.health.wait_up(cancel)  # the server was down and is back: this try does not count
                recoveries += 1
                continue
            if not exc.no_reply:
                lm.health.ok()
            tries += 1
            if tries > o.max_retries:
                if exc.no_reply and recoveries < MAX_RECOVERIES and lm.health.confirm_down():
                    lm.health.wait_up(cancel)  # down before enough failures in a row were seen: wait it out too
                    recoveries += 1
                    tries -= 1
                    continue
                break
            lm.count("retries")
            backoff = min(o.max_backoff_s, o.backoff_s * 2 ** (tries - 1)) * (0.5 + random.random() / 2)
            if cancel.wait(min(o.max_backoff_s, max(backoff, exc.wait or 0.0))):
                raise Cancelled from None
            continue
        except ValueError as exc:  # the endpoint refused this request: another try gets the same answer
            lm.health.ok()
            why, refused = str(exc), True
            break
        lm.health.ok()
        rec = {"key": key, **reply, "attempts": sent}
        lm.cache.add(rec)
        return {**rec, "cached": False}
    if cancel.is_set():
        raise Cancelled
    lm.count("failed")
    tried = "not retried" if refused else f"after {tries} tries"
    rec = {"key": key, "error": redact(f"{why}, {tried}", _key(o)), "attempts": sent,
           "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    lm.cache.add(rec)
    return {**rec, "cached": False}


def _in_parallel(fn, jobs: list, workers: int, cancel: threading.Event) -> list:
    """``fn(job, cancel)`` for each job, ``workers`` at a time on daemon threads, results in order. The first
    error (a fatal reply, an outage past its budget) or Ctrl-C here sets ``cancel`` and is raised at once: the
    workers' waits end, no new request starts, and a request still in flight is left to its daemon thread, so
    that neither it nor the interpreter's exit holds the run up."""
    results: list = [None] * len(jobs)
    errors: list[BaseException] = []
    lock = threading.Lock()
    todo = iter(range(len(jobs)))

    def work() -> None:
        while not cancel.is_set():
            with lock:
                i = next(todo, None)
            if i is None:
                return
            try:
                results[i] = fn(jobs[i], cancel)
            except Cancelled:
                return
            except BaseException as exc:  # noqa: BLE001 (handed to the caller)
                with lock:
                    errors.append(exc)
                cancel.set()
                return

    threads = [threading.Thread(target=work, daemon=True, name=f"evenhand-api-{k}") for k in range(workers)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.1)  # short joins: Ctrl-C reaches this thread within one
                if errors:
                    raise errors[0]
    except BaseException:
        cancel.set()
        raise
    if errors:
        raise errors[0]
    return results


def chat_rows(lm: APIModel, conversations: list[list[dict]], max_new: int) -> list[dict]:
    """One reply per conversation, ``concurrency`` requests at a time, in input order: rows of ``text`` (as the
    server sent it), ``n_new_tokens`` and ``n_prompt_tokens`` (the endpoint's usage counts), ``gen_logprob``
    (None: not asked for), ``api_attempts``, ``api_cached``, ``api_finish_reason`` and ``error`` (None, or why the
    item has no answer)."""
    pace = _Pace(lm.options.requests_per_minute)
    lm.health.reset()
    first: dict[str, int] = {}  # one request per distinct conversation (degree-0 items of two contrasts match)
    which = [first.setdefault(json.dumps(c, sort_keys=True), len(first)) for c in conversations]
    distinct = [conversations[which.index(k)] for k in range(len(first))]
    workers = max(1, min(lm.options.concurrency, len(distinct)))
    asked = _in_parallel(lambda m, cancel: ask(lm, [dict(x) for x in m], max_new, pace, cancel), distinct, workers,
                         threading.Event())
    recs = [asked[k] if which.index(k) == i else {**asked[k], "cached": True} for i, k in enumerate(which)]
    return [{"text": r.get("text", ""), "n_new_tokens": r.get("completion_tokens"), "gen_logprob": None,
             "n_prompt_tokens": r.get("prompt_tokens"), "api_attempts": r.get("attempts"),
             "api_cached": bool(r.get("cached")), "api_finish_reason": r.get("finish_reason"),
             "chat_template_by": "server", "error": r.get("error")} for r in recs]


class OpenAIEngine:
    """The :class:`~.registry.Engine` on an OpenAI-compatible endpoint (module docstring)."""
    name = "openai"
    modes = ("answer", "reasoning")
    prefix_reuse = "none"
    hf_model = False
    messages = True
    """It sends message lists (:attr:`.registry.Batch.messages`); the server templates and tokenises them."""
    local_weights = False
    """No weights here: weight and activation interventions cannot run beside it."""
    mode_note = {"logprob": "chat completions return no label log-probabilities to score"}
    Options = OpenAIOptions
    """The options its load takes (a run config's ``openai:`` section)."""

    def load(self, spec, *, shares_gpu: bool = False, options: OpenAIOptions | None = None,
             run_dir: str | Path | None = None) -> APIModel:
        return load_api(spec, options, run_dir)

    def generate(self, lm: APIModel, batch: Batch, max_new: int, min_prefix: int) -> list[dict]:
        if batch.messages is None:
            raise ValueError("engine openai sends message lists: this batch has only templated texts")
        return chat_rows(lm, batch.messages, max_new)

    def score_labels(self, lm: APIModel, batch: Batch, min_prefix: int) -> list[dict]:
        raise ValueError(f"engine openai runs answer and reasoning modes; logprob mode runs on engine hf "
                         f"({self.mode_note['logprob']})")


ENGINE = OpenAIEngine()
