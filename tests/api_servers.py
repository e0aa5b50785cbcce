"""Servers engine openai is tested and benchmarked against that are not EvenHand's own: vLLM's OpenAI-compatible
server (``python -m vllm.entrypoints.openai.api_server``) on a model directory on CPU, as a subprocess that a
test can kill and restart on the same port, and :class:`FaultProxy`, a small HTTP proxy on 127.0.0.1 that injects
faults (HTTP 500, 429 with Retry-After, a connection reset, a cut body, a slow reply) into a share of the requests
it forwards. Used by tests/test_openai_overnight.py (slow tests) and benchmarks/bench_overnight.py."""
from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ORGANISM_DIR = Path(__file__).resolve().parents[1] / "evenhand" / "models" / "organism_fair"
NAME = "evenhand-organism-fair"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vllm_available() -> bool:
    try:
        import importlib.util
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


class VLLMServer:
    """vLLM's own server serving ``model_dir`` as ``name`` on 127.0.0.1:``port`` (float32, eager, CPU; the KV
    cache 1 GiB), started in its own process group so that :meth:`kill` takes its workers too. ``log``: where its
    output goes (a file path; default discarded)."""

    def __init__(self, model_dir: Path = ORGANISM_DIR, name: str = NAME, port: int | None = None,
                 log: Path | None = None):
        self.model_dir, self.name, self.port, self.log = Path(model_dir), name, port or free_port(), log
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc: subprocess.Popen | None = None
        self.starts: list[float] = []

    def start(self, wait_s: float = 600) -> float:
        """Start the server and wait until /v1/models answers (at most ``wait_s``); the seconds it took."""
        t0 = time.monotonic()
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
               "DO_NOT_TRACK": "1"}
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model_dir),
             "--served-model-name", self.name, "--dtype", "float32", "--enforce-eager", "--host", "127.0.0.1",
             "--port", str(self.port)],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        while time.monotonic() - t0 < wait_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM's server exited ({self.proc.returncode}) while starting; see {self.log}")
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2) as resp:
                    if resp.status == 200:
                        took = time.monotonic() - t0
                        self.starts.append(took)
                        return took
            except (urllib.error.URLError, http.client.HTTPException, OSError):
                pass
            time.sleep(0.5)
        self.kill()
        raise RuntimeError(f"vLLM's server did not answer within {wait_s:g} s")

    def kill(self) -> None:
        """SIGKILL the server and its workers (nothing when not running)."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(30)
        self.proc = None

    def __enter__(self) -> "VLLMServer":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


FAULTS = ("500", "429", "reset", "cut", "slow")


class FaultProxy:
    """Forwards ``/v1/...`` requests to ``upstream`` (a base URL ending in /v1) on 127.0.0.1, injecting into each
    chat completion, with probability ``fraction`` (seeded), one of ``kinds``: HTTP 500; 429 with Retry-After
    ``retry_after``; the connection closed with no reply; a 200 whose body is cut off mid-JSON; a reply held back
    ``slow_s``. ``log``: one (outcome, status) per chat request; :attr:`answered`: replies passed through whole."""

    def __init__(self, upstream: str, fraction: float = 0.25, kinds=FAULTS, seed: int = 0, retry_after: str = "0.2",
                 slow_s: float = 0.5):
        self.upstream, self.fraction, self.kinds = upstream.rstrip("/"), fraction, tuple(kinds)
        self.rng, self.lock, self.log = random.Random(seed), threading.Lock(), []
        self.retry_after, self.slow_s = retry_after, slow_s
        proxy = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _forward(self, method: str):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                path = self.path[len("/v1"):] if self.path.startswith("/v1") else self.path
                fault = None
                if method == "POST":
                    with proxy.lock:
                        if proxy.rng.random() < proxy.fraction:
                            fault = proxy.rng.choice(proxy.kinds)
                if fault == "reset":
                    proxy._note("reset", None)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault in ("500", "429"):
                    proxy._note(fault, int(fault))
                    data = json.dumps({"error": f"injected {fault}"}).encode()
                    self.send_response(int(fault))
                    if fault == "429":
                        self.send_header("Retry-After", proxy.retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if fault == "slow":
                    time.sleep(proxy.slow_s)
                req = urllib.request.Request(proxy.upstream + path, data=body, method=method,
                                             headers={k: v for k, v in self.headers.items()
                                                      if k.lower() in ("content-type", "authorization", "accept")})
                try:
                    with urllib.request.urlopen(req, timeout=120) as resp:
                        status, data = resp.status, resp.read()
                except urllib.error.HTTPError as exc:
                    status, data = exc.code, exc.read()
                except (urllib.error.URLError, http.client.HTTPException, OSError):
                    proxy._note("upstream down", None)
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if fault == "cut":
                    proxy._note("cut", status)
                    self.wfile.write(data[: len(data) // 2])
                    self.close_connection = True
                    return
                self.wfile.write(data)
                if method == "POST":
                    proxy._note("ok" if fault is None else fault, status)

            def do_GET(self):
                self._forward("GET")

            def do_POST(self):
                self._forward("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def _note(self, outcome: str, status) -> None:
        with self.lock:
            self.log.append((outcome, status))

    @property
    def answered(self) -> int:
        with self.lock:
            return sum(1 for o, s in self.log if o in ("ok", "slow") and s == 200)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
