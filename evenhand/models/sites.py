"""One vocabulary for places in a model, resolved to modules per architecture.

Site names (TransformerLens-like, without the ``hook_`` prefix):

- ``embed``: the token embedding as the first layer receives it (Gemma's scaled embedding);
- ``blocks.{L}.resid_pre``: the residual stream entering decoder layer L (its input);
- ``blocks.{L}.resid_post``: the residual stream leaving decoder layer L (its output);
- ``blocks.{L}.attn_out``: the attention block's contribution added to the residual stream
  (Gemma: after ``post_attention_layernorm``; Llama/Qwen: the ``self_attn`` output);
- ``blocks.{L}.mlp_out``: the MLP block's contribution (Gemma: after ``post_feedforward_layernorm``;
  Llama/Qwen: the ``mlp`` output);
- ``ln_final``: the final norm's output (what Hugging Face's last ``hidden_states`` entry is)."""
from __future__ import annotations

import re
from dataclasses import dataclass

SITE_RE = re.compile(r"^(embed|ln_final|blocks\.(\d+)\.(resid_pre|resid_post|attn_out|mlp_out))$")
LAYER_PATHS = ("model.layers", "model.language_model.layers", "language_model.model.layers", "model.model.layers")
GEMMA_STYLE = {"attn_out": "post_attention_layernorm", "mlp_out": "post_feedforward_layernorm"}
LLAMA_STYLE = {"attn_out": "self_attn", "mlp_out": "mlp"}
KNOWN = {"gemma3": GEMMA_STYLE, "gemma3_text": GEMMA_STYLE, "gemma2": GEMMA_STYLE, "qwen2": LLAMA_STYLE,
         "llama": LLAMA_STYLE, "mistral": LLAMA_STYLE, "qwen3": LLAMA_STYLE}


class SiteError(ValueError):
    """An unknown site or an architecture EvenHand cannot map."""


@dataclass(frozen=True)
class Site:
    """A site resolved on a model: its name, a module path and a port (``output``, or ``input`` for
    ``resid_pre``)."""
    name: str
    path: str  # dotted module path from the top-level model
    port: str  # "output" | "input"


def _get(model, path: str):
    mod = model
    for part in path.split("."):
        mod = mod[int(part)] if part.isdigit() else getattr(mod, part)
    return mod


def layers_path(model) -> str:
    for p in LAYER_PATHS:
        try:
            _get(model, p)
            return p
        except (AttributeError, IndexError, TypeError):
            continue
    raise SiteError(f"unknown architecture {type(model).__name__} "
                    f"(model_type={getattr(model.config, 'model_type', '?')}): no decoder layers at "
                    f"{', '.join(LAYER_PATHS)}")


def n_layers(model) -> int:
    return len(_get(model, layers_path(model)))


def _style(model) -> dict:
    mt = getattr(model.config, "model_type", "")
    if mt in KNOWN:
        return KNOWN[mt]
    layer = _get(model, layers_path(model) + ".0")
    if hasattr(layer, "post_attention_layernorm") and hasattr(layer, "post_feedforward_layernorm"):
        return GEMMA_STYLE
    if hasattr(layer, "self_attn") and hasattr(layer, "mlp"):
        return LLAMA_STYLE
    raise SiteError(f"unknown architecture {mt or type(model).__name__}: its decoder layers have neither "
                    f"Gemma-style post-norms nor self_attn/mlp submodules")


def resolve(model, name: str) -> Site:
    """Resolve a site name to a module path and port on ``model``. An unknown site name, a layer out of range, or
    a model whose decoder layers have neither shape (Gemma-style post-norms, or ``self_attn``/``mlp``) is a
    :class:`SiteError` that says which."""
    m = SITE_RE.match(name)
    if not m:
        raise SiteError(f"unknown site {name!r}; sites are embed, ln_final and blocks.{{L}}.resid_pre|resid_post|"
                        f"attn_out|mlp_out")
    lp = layers_path(model)
    base = lp.rsplit(".", 1)[0]
    if name == "embed":
        return Site(name, f"{base}.embed_tokens", "output")
    if name == "ln_final":
        return Site(name, f"{base}.norm", "output")
    layer, kind = int(m.group(2)), m.group(3)
    n = n_layers(model)
    if layer >= n:
        raise SiteError(f"site {name!r}: layer {layer} out of range (the model has {n} layers, 0-{n - 1})")
    if kind == "resid_post":
        return Site(name, f"{lp}.{layer}", "output")
    if kind == "resid_pre":
        return Site(name, f"{lp}.{layer}", "input")
    return Site(name, f"{lp}.{layer}.{_style(model)[kind]}", "output")


def module(model, site: Site):
    return _get(model, site.path)


def residual_sites(model, embed: bool = True) -> list[str]:
    """The default cache: the embedding and every layer's resid_post."""
    return (["embed"] if embed else []) + [f"blocks.{i}.resid_post" for i in range(n_layers(model))]


def expand(model, names: list[str] | str) -> list[str]:
    """Expand shorthands: ``residual`` (embed + every resid_post), ``all`` (every site of every layer)."""
    if isinstance(names, str):
        names = [names]
    out: list[str] = []
    for n in names:
        if n == "residual":
            out += residual_sites(model)
        elif n == "all":
            out += ["embed"] + [f"blocks.{i}.{k}" for i in range(n_layers(model))
                                for k in ("resid_pre", "attn_out", "mlp_out", "resid_post")] + ["ln_final"]
        else:
            resolve(model, n)
            out.append(n)
    return list(dict.fromkeys(out))
