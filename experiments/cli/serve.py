"""`evenhand serve`: a local model behind a small OpenAI-compatible server (:mod:`evenhand.engine.serve`), on a
loopback port, optionally with injected faults: to try engine openai, or a client of your own, without a GPU."""
from __future__ import annotations

import argparse
import sys
import time

from evenhand.engine.serve import FAULTS

from .common import MODEL_FLAGS, model_spec
from evenhand.models.loading import ModelSpec
from evenhand.support.options import add_flags


def _serve(a) -> int:
    from evenhand.engine.serve import ChatServer, Faults  # deferred: the server's generation pulls in torch
    from evenhand.models.loading import display_name, load_model, resolve_spec  # deferred: pulls in torch
    spec = resolve_spec(model_spec(a))
    faults = Faults(first=a.fault, fraction=a.fault_fraction, seed=a.fault_seed, retry_after_s=a.retry_after_s,
                    slow_s=a.slow_s)
    lm = load_model(spec)
    name = a.served_name or display_name(spec)
    with ChatServer(lm, name, host=a.host, port=a.port, faults=faults, max_batch=a.max_batch,
                    chat_template=spec.chat_template) as server:
        print(f"serving {name} at {server.url} (engine openai: --base-url {server.url} --api-model {name}); "
              f"Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print(f"stopped after {len(server.log):,} requests", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `serve` to the top-level subparsers ``sub``."""
    s = sub.add_parser("serve", help="serve a local model through the OpenAI chat completions API (loopback; "
                                     "for engine openai's checks)")
    add_flags(s, ModelSpec, MODEL_FLAGS)
    s.add_argument("--host", default="127.0.0.1", help="the address to listen on (default loopback only)")
    s.add_argument("--port", type=int, default=8000, help="the port (0: a free one, printed)")
    s.add_argument("--served-name", default=None, help="the model name clients ask for (default: the model's "
                                                        "display name, e.g. evenhand-organism-fair)")
    s.add_argument("--max-batch", type=int, default=8, help="requests generated together at most")
    s.add_argument("--fault", action="append", default=[], choices=list(FAULTS),
                   help="a fault for the next request in order (repeatable: the first requests get them)")
    s.add_argument("--fault-fraction", type=float, default=0.0,
                   help="after those, the share of requests that get a fault of a random kind")
    s.add_argument("--fault-seed", type=int, default=0, help="seed of the random faults")
    s.add_argument("--retry-after-s", type=float, default=0.2, help="the Retry-After a 429 fault carries")
    s.add_argument("--slow-s", type=float, default=5.0, help="how long a slow fault holds its reply back")
    s.set_defaults(fn=_serve)
