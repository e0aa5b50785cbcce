"""Digests of what the activation reader produces on the fair organism: cache shards (nnsight and TransformerLens
backends), the fitting reads, fitted interventions and decisions under them. Recorded once on the code before the
one reader (tests/data/reader_digests.json, ``python -m tests.reader_reference``); tests/test_reader.py recomputes
them on the current code and asserts every digest equal (the same bytes)."""
from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ORGANISM = Path(__file__).resolve().parents[1] / "evenhand" / "models" / "organism_fair"
RECORDED = Path(__file__).resolve().parent / "data" / "reader_digests.json"
SITES = ["blocks.0.resid_post", "blocks.2.resid_post"]


def digest(a) -> str:
    """sha256 of an array's dtype, shape and bytes (torch tensors through numpy)."""
    a = np.ascontiguousarray(a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(a))
    return hashlib.sha256(f"{a.dtype}{a.shape}".encode() + a.tobytes()).hexdigest()[:16]


def items() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train items: 40 smoke items with identity cues, seeded; eval items: 6 others)."""
    from evenhand.suite.subsets import iter_subset
    smoke = pd.DataFrame(list(iter_subset("smoke", 0)))
    cued = smoke[smoke["degree"] > 0]
    return cued.sample(40, random_state=1).reset_index(drop=True), cued.tail(6).reset_index(drop=True)


def cache_digests(lm, train: pd.DataFrame, backend: str) -> dict:
    from evenhand.running.activations import CacheOptions, cache_activations
    opts = (CacheOptions(sites=("all",), batch_size=5, dtype="float32", name_mean=True, progress=False)
            if backend == "nnsight" else CacheOptions(sites=("residual",), batch_size=4, dtype="float32",
                                                      progress=False))
    with tempfile.TemporaryDirectory() as tmp:
        cache = cache_activations(train.head(12), lm, opts, tmp, backend=backend)
        return {f"cache[{backend}] {s}": digest(cache.load(s)[1]) for s in cache.sites} | {
            f"cache[{backend}] order": digest(np.array(cache.item_ids()))}


def read_digests(lm, train: pd.DataFrame) -> dict:
    from evenhand.engine.reader import last_token_activations, token_states
    from interventions.reading import prompt_ids
    from interventions.steered import demographic_activations, site_activations
    seqs = [prompt_ids(lm, r) for r in train.head(12).to_dict("records")]
    out = {f"site_activations {s}": digest(a) for s, a in site_activations(lm, train.head(12), SITES, 5).items()}
    out |= {f"last_token {s}": digest(a) for s, a in last_token_activations(lm, seqs, SITES, 5).items()}
    out["token_states"] = digest(np.concatenate(token_states(lm, seqs, SITES[1], 3)))
    out |= {f"demographic {s}": digest(a) for s, a in demographic_activations(lm, train.head(12), SITES, 4)[2].items()}
    return out


FITS = {"caa": {"layers": [1], "batch_size": 8}, "ace": {"batch_size": 8},
        "ace relational": {"batch_size": 8, "concept": "relational"}, "leace": {"batch_size": 8},
        "leace parallel": {"batch_size": 8, "sequential": False}}


def fit_digests(lm, train: pd.DataFrame, test: pd.DataFrame) -> dict:
    from evenhand.running.decisions import DecideOptions
    from interventions.base import decide_with
    from interventions.registry import get
    out = {}
    for label, options in FITS.items():
        method = get(label.split()[0])
        fitted = method.fit(lm, train, options)
        out |= {f"fit[{label}] {k}": digest(t) for k, t in sorted(fitted.tensors.items())}
        out[f"fit[{label}] info"] = hashlib.sha256(json.dumps(fitted.info, sort_keys=True).encode()).hexdigest()[:16]
        table = decide_with(method, fitted, test, lm, DecideOptions(mode="logprob", batch_size=4, progress=False))
        out[f"decide[{label}]"] = digest(table[["logprob_A", "logprob_B"]].to_numpy(np.float64))
    return out


def all_digests(lm) -> dict:
    train, test = items()
    return (cache_digests(lm, train, "nnsight") | cache_digests(lm, train, "transformer_lens")
            | read_digests(lm, train) | fit_digests(lm, train, test))


if __name__ == "__main__":
    from evenhand.models.loading import load_model
    found = all_digests(load_model(str(ORGANISM)))
    RECORDED.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    print(len(found), "digests ->", RECORDED, file=sys.stderr)
