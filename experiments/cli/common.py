"""What several commands share: the bootstrap flags, the model-and-items flags and the start of a
model run (cheap checks first, then the items and the model)."""
from __future__ import annotations

import argparse

from evenhand.decide import DecideOptions
from evenhand.options import add_flags


def boot_args(x: argparse.ArgumentParser) -> None:
    """The flags of the commands that score with a cluster bootstrap (`score`, `compare`)."""
    x.add_argument("--contrast-type", choices=["type1", "type23"], default=None,
                   help="never pooled; default type1 when present")
    x.add_argument("--json", action="store_true")
    x.add_argument("--resamples", type=int, default=1000)
    x.add_argument("--seed", type=int, default=0)


def model_args(x: argparse.ArgumentParser) -> None:
    """The flags of the commands that load a model and decide a subset (`decide`, `cache`, `modes`)."""
    x.add_argument("--model", required=True, help="Hugging Face id, local directory, .gguf file or preset")
    x.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    x.add_argument("--device", default="auto")
    x.add_argument("--attn-implementation", default=None)
    x.add_argument("--trust-remote-code", action="store_true")
    x.add_argument("--chat-template", default="auto", choices=["auto", "none"])
    x.add_argument("--subset", default="smoke", help="smoke, core or an items file")
    x.add_argument("--seed", type=int, default=0)
    x.add_argument("--limit", type=int, default=None)
    x.add_argument("--out", required=True)
    add_flags(x, DecideOptions, ["batch_size"])


def model_spec(a: argparse.Namespace):
    """The :class:`~evenhand.models.loading.ModelSpec` the model flags describe."""
    from evenhand.models.loading import ModelSpec
    return ModelSpec(a.model, dtype=a.dtype, device=a.device, attn_implementation=a.attn_implementation,
                     trust_remote_code=a.trust_remote_code, chat_template=a.chat_template)


def items(a: argparse.Namespace):
    """The suite items the subset flags select."""
    from experiments.config import SuiteConfig
    from experiments.runner import suite_items
    return suite_items(SuiteConfig(subset=a.subset, seed=a.seed, limit=a.limit))


def prepare(a: argparse.Namespace):
    """The shared start of `decide`, `cache` and `modes`: cheap checks first, then items and the model.
    Returns (output directory, resolved spec, items, loaded model)."""
    from evenhand.models.loading import load_model, locate, resolve_spec
    from experiments.runner import check_output_dir
    out = check_output_dir(a.out)
    spec = resolve_spec(model_spec(a))
    locate(spec)
    return out, spec, items(a), load_model(spec)
