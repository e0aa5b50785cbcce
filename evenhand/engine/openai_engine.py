"""The OpenAI-compatible decision engine (``engine: openai``, :data:`ENGINE`): answer and reasoning modes through
a chat-completions endpoint (``vllm serve``, llama.cpp, a hosted API), standard library only.

Each prompt goes as a message list (the suite's user message; a prompt procedure's turns) and the server applies
its chat template. Requests run ``concurrency`` at a time; each is retried with exponential backoff and jitter on
HTTP 408/409/429/5xx, timeouts, dropped connections and malformed bodies (Retry-After honoured), ``max_retries``
more tries at most; an item still failing is recorded and reported, the others go on. Every answer is appended to
a response cache (``OUT/openai_cache.jsonl``, keyed by the model, messages and sampling) as it arrives, so a rerun
or a killed run resumes without asking again. The API key is read from the environment variable ``api_key_env``
names and never written. No local weights: logprob mode, the activation cache and the weight and activation
interventions need engine hf. docs/GUIDE.md, "Evaluate a model behind an API".
"""
from __future__ import annotations

import email.utils
import hashlib
import http.client
import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
import warnings
from concurrent.futures import ThreadPoolExecutor
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


class EndpointError(ModelLoadError):
    """The endpoint cannot answer any request (unreachable at load, a wrong key, URL or model); one line."""


@dataclass(frozen=True)
class OpenAIOptions:
    """How engine openai reaches its endpoint (the ``openai:`` section of a run config)."""
    base_url: str = "http://127.0.0.1:8000/v1"
    """The API's base URL, ending in /v1 (`vllm serve` listens on http://127.0.0.1:8000/v1)."""
    model: str | None = None
    """The model name the endpoint serves (default: the run's model)."""
    api_key_env: str | None = None
    """The NAME of the environment variable holding the API key (e.g. OPENAI_API_KEY); none: no key is sent."""
    concurrency: int = 4
    """Requests in flight at once (at most the batch_size items of a batch)."""
    timeout_s: float = 120.0
    """Seconds a request may wait for the server (connecting, or between bytes of the reply) before a retry."""
    max_retries: int = 5
    """More tries of a failed request (HTTP 408/409/429/5xx, timeout, dropped connection, malformed body)."""
    backoff_s: float = 1.0
    """Seconds before the first retry, doubling for each next one, with jitter (x0.5-1), at most max_backoff_s;
    a Retry-After header waits at least as long as it says."""
    max_backoff_s: float = 60.0
    """The longest wait before a retry."""
    requests_per_minute: float | None = None
    """Start at most this many requests a minute (the endpoint's rate limit); none: no limit."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy, as the local engines decide)."""

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai.base_url must start with http:// or https://, got {self.base_url!r}")
        if self.api_key_env is not None and not self.api_key_env.replace("_", "").isalnum():
            raise ValueError(f"openai.api_key_env names an environment variable (e.g. OPENAI_API_KEY), not a key; "
                             f"got a value of {len(self.api_key_env)} characters")
        for name in ("concurrency",):
            if getattr(self, name) < 1:
                raise ValueError(f"openai.{name} must be at least 1, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise ValueError(f"openai.max_retries must be at least 0, got {self.max_retries}")
        for name in ("timeout_s", "backoff_s", "max_backoff_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"openai.{name} must be positive, got {getattr(self, name)}")
        if self.requests_per_minute is not None and not self.requests_per_minute > 0:
            raise ValueError(f"openai.requests_per_minute must be positive, got {self.requests_per_minute}")
        if not 0 <= self.temperature <= 2:
            raise ValueError(f"openai.temperature must be between 0 and 2, got {self.temperature}")


class ResponseCache:
    """Answers by request key, read from and appended to a JSONL file (None: in memory only). Each line is
    written by one ``os.write`` on an ``O_APPEND`` descriptor, so a killed process leaves whole lines; a torn
    last line (a power cut) is skipped on reading. Lines with ``error`` record a failed request (not a hit)."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.hits: dict[str, dict] = {}
        self.lock = threading.Lock()
        self._fd: int | None = None
        if self.path is not None and self.path.exists():
            with open(self.path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(rec, dict) and "key" in rec and "text" in rec and not rec.get("error"):
                        self.hits[rec["key"]] = rec

    @staticmethod
    def key(model: str, messages: list[dict], sampling: dict) -> str:
        """The request's key: a hash of the model name, the messages and the sampling parameters."""
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

    def wait(self) -> None:
        if not self.gap:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.gap
        time.sleep(max(0.0, start - now))


class Retry(Exception):
    """A failed try worth another (``wait``: the server's Retry-After, seconds, or None)."""

    def __init__(self, why: str, wait: float | None = None):
        super().__init__(why)
        self.wait = wait


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
    engine: ClassVar[str] = "openai"

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
                "sampling": {"temperature": o.temperature, "max_tokens": "max_new_tokens (answer) or "
                             "reasoning_max_new_tokens (reasoning)"},
                "requests": {k: getattr(o, k) for k in ("concurrency", "timeout_s", "max_retries", "backoff_s",
                                                          "max_backoff_s", "requests_per_minute")},
                "spec": asdict(self.spec), "weights": None, "reproducible_from_weights": False}

    def close(self) -> None:
        self.cache.close()


def _headers(o: OpenAIOptions) -> dict:
    h = {"Content-Type": "application/json", "Accept": "application/json"}
    if o.api_key_env:
        key = os.environ.get(o.api_key_env)
        if not key:
            raise EndpointError(f"openai.api_key_env names {o.api_key_env}, which is not set in the environment: "
                                f"export {o.api_key_env}=<your key> (the key itself never goes in a config)")
        h["Authorization"] = f"Bearer {key}"
    return h


def _why_http(exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read(300).decode("utf-8", "replace").strip().replace("\n", " ")
    except (OSError, http.client.HTTPException):
        body = ""
    return f"HTTP {exc.code} {exc.reason}" + (f": {body}" if body else "")


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
            raise EndpointError(f"{o.base_url}: {_why_http(exc)}: the API key was refused "
                                f"(openai.api_key_env: {o.api_key_env})") from None
        return None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointError(f"cannot reach {o.base_url}: {getattr(reason, 'strerror', None) or reason} "
                            f"(is the server running? check openai.base_url)") from None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def load_api(spec: ModelSpec | str, options: OpenAIOptions | None = None, run_dir: str | Path | None = None,
             check: bool = True) -> APIModel:
    """The model ``spec`` names behind ``options.base_url`` (``options.model``: the name the endpoint serves,
    default the spec's). ``run_dir``: where the response cache lives (None: in memory only). ``check``: ask the
    endpoint's /models first, refusing (one line) an endpoint that does not answer or does not serve the model."""
    o = options or OpenAIOptions()
    spec = ModelSpec(spec) if isinstance(spec, str) else spec
    name = display_name(resolve_spec(spec))  # a preset's name, a local path's last part, else the id as given
    served = o.model or name
    listed = _list_models(o) if check else None
    if listed and served not in listed:  # stated, not refused: a hosted API may serve names its list leaves out
        warnings.warn(f"{o.base_url}/models lists {', '.join(listed[:8])}{' ...' if len(listed) > 8 else ''}, not "
                      f"{served!r}: set openai.model to the name the endpoint serves (asking for {served!r} anyway; "
                      f"an endpoint that does not serve it stops the run at the first reply)", UserWarning,
                      stacklevel=2)
    _headers(o)  # a named but unset key variable fails here, before any item
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
            raise Retry(_why_http(exc), retry_after(exc.headers.get("Retry-After") if exc.headers else None)) \
                from None
        if exc.code in FATAL_STATUS:
            raise EndpointError(f"{o.base_url}: {_why_http(exc)} (check openai.base_url, openai.model and "
                                f"openai.api_key_env)") from None
        raise ValueError(_why_http(exc)) from None
    except TimeoutError:
        raise Retry(f"no reply within timeout_s {o.timeout_s:g}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise Retry(f"no reply within timeout_s {o.timeout_s:g}") from None
        raise Retry(f"connection failed: {getattr(reason, 'strerror', None) or reason}") from None
    except (http.client.HTTPException, ConnectionError, OSError) as exc:
        raise Retry(f"connection dropped: {type(exc).__name__} {exc}".strip()) from None
    try:
        data = json.loads(raw)
        choice = data["choices"][0]
        text = choice["message"]["content"]
        if text is not None and not isinstance(text, str):
            raise TypeError(f"content is {type(text).__name__}")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise Retry(f"not a chat completions reply ({type(exc).__name__}: {str(exc)[:80]})") from None
    usage = data.get("usage") or {}
    return {"text": text or "", "finish_reason": choice.get("finish_reason"), "model": data.get("model"),
            "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens")}


def ask(lm: APIModel, messages: list[dict], max_tokens: int, pace: _Pace | None = None,
        sleep=time.sleep) -> dict:
    """The endpoint's reply to ``messages`` (from the cache when asked before): a cache record (``text``,
    ``prompt_tokens``, ``completion_tokens``, ``finish_reason``, ``model``, ``attempts``, ``cached``) or, after
    the last try, one with ``error`` (recorded in the cache file, not raised)."""
    o = lm.options
    sampling = {"temperature": o.temperature, "max_tokens": max_tokens}
    key = ResponseCache.key(lm.served, messages, sampling)
    hit = lm.cache.get(key)
    if hit is not None:
        lm.count("cached")
        return {**hit, "cached": True}
    body = {"model": lm.served, "messages": messages, **sampling}
    why = ""
    for attempt in range(o.max_retries + 1):
        if pace is not None:
            pace.wait()
        lm.count("requests")
        try:
            reply = _post(o, body)
        except Retry as exc:
            why = str(exc)
            if attempt == o.max_retries:
                break
            lm.count("retries")
            wait = min(o.max_backoff_s, o.backoff_s * 2 ** attempt) * (0.5 + random.random() / 2)
            sleep(max(wait, exc.wait or 0.0))
            continue
        except ValueError as exc:  # the endpoint refused this request: another try gets the same answer
            why = str(exc)
            attempt = -1
            break
        rec = {"key": key, **reply, "attempts": attempt + 1}
        lm.cache.add(rec)
        return {**rec, "cached": False}
    lm.count("failed")
    tries = "not retried" if attempt == -1 else f"after {o.max_retries + 1} tries"
    rec = {"key": key, "error": f"{why}, {tries}", "attempts": max(attempt + 1, 1),
           "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    lm.cache.add(rec)
    return {**rec, "cached": False}


def chat_rows(lm: APIModel, conversations: list[list[dict]], max_new: int) -> list[dict]:
    """One reply per conversation, ``concurrency`` requests at a time, in input order: rows of ``text``,
    ``n_new_tokens`` and ``n_prompt_tokens`` (the endpoint's usage counts), ``gen_logprob`` (None: not asked for),
    ``api_attempts``, ``api_cached``, ``api_finish_reason`` and ``error`` (None, or why the item has no answer)."""
    pace = _Pace(lm.options.requests_per_minute)
    first: dict[str, int] = {}  # one request per distinct conversation (degree-0 items of two contrasts match)
    which = [first.setdefault(json.dumps(c, sort_keys=True), len(first)) for c in conversations]
    distinct = [conversations[which.index(k)] for k in range(len(first))]
    workers = max(1, min(lm.options.concurrency, len(distinct)))
    with ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(ask, lm, [dict(x) for x in m], max_new, pace) for m in distinct]
        try:
            asked = [f.result() for f in futures]
        except BaseException:  # a fatal reply or Ctrl-C: the requests not yet sent are not sent
            for f in futures:
                f.cancel()
            raise
    recs = [asked[k] if which.index(k) == i else {**asked[k], "cached": True} for i, k in enumerate(which)]
    return [{"text": r.get("text", ""), "n_new_tokens": r.get("completion_tokens"), "gen_logprob": None,
             "n_prompt_tokens": r.get("prompt_tokens"), "api_attempts": r.get("attempts"),
             "api_cached": bool(r.get("cached")), "api_finish_reason": r.get("finish_reason"),
             "error": r.get("error")} for r in recs]


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
