"""The decision engines: the :class:`Engine` protocol and the registry :func:`evenhand.running.decisions.decide`
dispatches
through.

An engine loads a model (:meth:`Engine.load`) and decides batches of prompts with it: greedy generation
(answer and reasoning modes) and, if it runs logprob mode, label scoring. What it declares (its modes, how it
reuses prefixes, whether its model is a Hugging Face torch model) is all the option, config and CLI rules read:
nothing else names an engine. ``hf`` (:mod:`.hf_engine`), ``vllm`` (:mod:`.vllm_engine`) and ``openai``
(:mod:`.openai_engine`, a model behind an API) are built in and imported on first use (importing this module
imports neither vLLM nor torch); :func:`register` adds one (docs/ARCHITECTURE.md, "Adding an engine").
"""
from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from ..support.registry import Registry

DEFAULT = "hf"
"""The default engine and the reference the others are checked against."""
Mode = Literal["answer", "reasoning", "logprob"]
"""A decision mode (:class:`evenhand.running.decisions.DecideOptions`)."""
MODES = get_args(Mode)
"""Every decision mode."""
_BUILTIN = {"hf": "evenhand.engine.hf_engine", "vllm": "evenhand.engine.vllm_engine",
            "openai": "evenhand.engine.openai_engine"}
"""The built-in engines: name -> the module whose ``ENGINE`` it is (imported on first use)."""


@dataclass(frozen=True)
class Batch:
    """The prompts an engine decides at once, in order: the items (None where the caller has only texts:
    multi-turn chats, BBQ), the full texts the model sees, their token ids (the tokenizer of the loaded model)
    and ``special`` (whether the tokenizer's special tokens were added: no chat template); ``messages``: the chat
    each text was templated from (an engine that sends messages, :func:`takes_messages`, reads these; its texts
    are the last user messages and its ids empty)."""
    texts: list[str]
    ids: list[list[int]]
    special: bool
    items: list[dict] | None = None
    messages: list[list[dict]] | None = None


@runtime_checkable
class Engine(Protocol):
    """A decision engine. A model it loads has ``tokenizer`` (EvenHand tokenises and templates every prompt with
    it), ``name``, ``describe()`` (what a run's manifest records) and ``engine`` (this engine's name; a model
    without that attribute is the hf engine's).

    Optional declarations (absent: False, True, {}, None): ``messages`` (it sends :attr:`Batch.messages` to a
    server that templates and tokenises them: its model has no tokenizer, ``tokenizer`` None), ``local_weights``
    (False: the model's weights are not here, so weight and activation interventions cannot run beside it),
    ``mode_note`` (mode -> why it does not run that mode, added to the refusal) and ``Options`` (a dataclass of
    load options: :meth:`load` then takes ``options=`` and ``run_dir=``, and a run config's section of the
    engine's name holds them)."""

    name: str
    """The engine's name (``engine:`` in a config, ``--engine`` on `evenhand decide`)."""
    modes: tuple[str, ...]
    """The decision modes it runs (of :data:`MODES`); logprob mode needs :meth:`score_labels`."""
    prefix_reuse: Literal["option", "automatic", "none"]
    """option: ``prefix_reuse`` turns reuse of shared prompt prefixes on (hf); automatic: the engine always reuses
    them itself, the option is refused and batches follow token order so that items sharing a prefix land in one
    batch (vllm); none: no reuse, the option is refused."""
    hf_model: bool
    """Its model is a Hugging Face torch model (:class:`evenhand.models.loading.LoadedModel`): the activation
    cache and the stages after it read it, and interventions that edit activations or weights run on it. An
    engine without one decides only; a comparison runs those interventions on :data:`DEFAULT`."""

    def load(self, spec: Any, *, shares_gpu: bool = False) -> Any:
        """The model for ``spec`` (a ModelSpec or a model name); ``shares_gpu``: a Hugging Face model is loaded
        beside it (a comparison), so take only part of the GPU."""

    def generate(self, lm: Any, batch: Batch, max_new: int, min_prefix: int) -> list[dict]:
        """One greedy continuation of at most ``max_new`` tokens per prompt, in order: rows of ``text`` (up to
        and including the first end-of-sequence token), ``n_new_tokens``, ``gen_logprob`` and
        ``n_prompt_tokens``. ``min_prefix`` > 0 (prefix_reuse ``option`` only): reuse prefixes shared by that
        many tokens, and give each row ``n_shared_prefix_tokens``."""

    def score_labels(self, lm: Any, batch: Batch, min_prefix: int) -> list[dict]:
        """Logprob mode: rows of ``logprob_A``, ``logprob_B`` (each label's summed log-probability as a
        continuation of the prompt), ``n_prompt_tokens`` and ``n_new_tokens`` (0); ``min_prefix`` as in
        :meth:`generate`."""


def _builtin(module: str):
    return lambda: importlib.import_module(module).ENGINE


ENGINE_REGISTRY: Registry[Engine] = Registry(
    "engine", unknown="{what} must be one of {names}, got {name!r}", taken="an {what} named {name!r} is registered already",
    lazy={name: _builtin(module) for name, module in _BUILTIN.items()})
"""The engines by name (:class:`evenhand.support.registry.Registry`; the built-in ones imported on first use)."""


def register(engine: Engine) -> Engine:
    """Add ``engine`` under ``engine.name`` (refused when the name is taken or a declaration is malformed)."""
    if not isinstance(engine, Engine):
        raise TypeError(f"{engine!r} is not an Engine (name, modes, prefix_reuse, hf_model, load, generate, "
                        f"score_labels: evenhand.engine.registry.Engine)")
    if engine.name in ENGINE_REGISTRY.records or engine.name in _BUILTIN:
        raise ValueError(f"an engine named {engine.name!r} is registered already")
    bad = [m for m in engine.modes if m not in MODES]
    if bad or not engine.modes:
        raise ValueError(f"engine {engine.name}: modes must be some of {', '.join(MODES)}, got {engine.modes!r}")
    if engine.prefix_reuse not in ("option", "automatic", "none"):
        raise ValueError(f"engine {engine.name}: prefix_reuse must be option, automatic or none, "
                         f"got {engine.prefix_reuse!r}")
    return ENGINE_REGISTRY.add(engine.name, engine)


def unregister(name: str) -> None:
    """Remove a registered engine (not a built-in one; a name not registered is ignored)."""
    if name in _BUILTIN or name in ENGINE_REGISTRY.records:
        ENGINE_REGISTRY.remove(name)


def names() -> tuple[str, ...]:
    """The registered engines' names: the built-in ones first."""
    return ENGINE_REGISTRY.names()


def get(name: str) -> Engine:
    """The engine called ``name``; ValueError naming the registered ones otherwise."""
    return ENGINE_REGISTRY.get(name)


def engine_of(lm: Any) -> str:
    """The engine a loaded model decides with: its ``engine`` attribute, else :data:`DEFAULT`."""
    return getattr(lm, "engine", None) or DEFAULT


def generate_texts(lm: Any, texts: list[str], special: bool, max_new: int) -> list[dict]:
    """One greedy continuation of at most ``max_new`` tokens per text on the engine ``lm`` was loaded for
    (:meth:`Engine.generate`, no prefix reuse): for callers that hold texts, not items (multi-turn chats, BBQ,
    the local server). ``special``: add the tokenizer's special tokens."""
    from .batching import token_ids
    return get(engine_of(lm)).generate(lm, Batch(texts=texts, ids=token_ids(lm.tokenizer, texts, special),
                                                 special=special), max_new, 0)


def score_texts(lm: Any, texts: list[str], items: list[dict], special: bool, min_prefix: int = 0) -> list[dict]:
    """Both labels' log-probabilities per text on the engine ``lm`` was loaded for (:meth:`Engine.score_labels`);
    ValueError when that engine does not run logprob mode."""
    from .batching import token_ids
    engine = get(engine_of(lm))
    if "logprob" not in engine.modes:
        raise ValueError(f"logprob mode (label scoring) runs on engine {' or '.join(running('logprob'))}; "
                         f"engine {engine.name} runs {' and '.join(engine.modes)} modes")
    return engine.score_labels(lm, Batch(texts=texts, ids=token_ids(lm.tokenizer, texts, special),
                                         special=special, items=items), min_prefix)


def load(spec: Any, name: str = DEFAULT, *, options: Any = None, run_dir: Any = None, **kw) -> Any:
    """``spec`` loaded for engine ``name`` (:meth:`Engine.load`); ``options`` and ``run_dir`` go to an engine
    that declares ``Options`` (its default options when None) and are refused by the others."""
    engine = get(name)
    if getattr(engine, "Options", None) is not None:
        return engine.load(spec, options=options if options is not None else engine.Options(), run_dir=run_dir,
                           **kw)
    if options is not None:
        raise ValueError(f"engine {name} takes no options, got {type(options).__name__}")
    return engine.load(spec, **kw)


def takes_messages(name: str) -> bool:
    """Whether engine ``name`` sends message lists to a server that templates them (no local tokenizer)."""
    return bool(getattr(get(name), "messages", False))


def has_local_weights(name: str) -> bool:
    """Whether engine ``name``'s model has its weights here (False: a model behind an API)."""
    return bool(getattr(get(name), "local_weights", True))


def weights_refusal(name: str, method: str) -> str:
    """The one line refusing weight or activation intervention ``method`` under engine ``name`` (no local
    weights)."""
    return (f"{method} edits the model's weights or activations and needs local weights; engine {name} decides "
            f"through an API without them: use engine {' or '.join(n for n in names() if has_local_weights(n))} "
            f"with the model's weights, or a prompt intervention")


def running(mode: str) -> tuple[str, ...]:
    """The engines that run decision mode ``mode``."""
    return tuple(n for n in names() if mode in get(n).modes)


def refusal(name: str, *, mode: str, prefix_reuse: bool = False, cache: bool = False) -> str | None:
    """Why engine ``name`` cannot decide in ``mode`` (with ``prefix_reuse``; with the activation cache after it,
    ``cache``), read from its declarations; None when it can. The one source of the option, config and CLI
    rules about engines."""
    if name not in names():
        return f"engine must be one of {', '.join(names())}, got {name!r}"
    e = get(name)
    if mode not in e.modes:
        note = (getattr(e, "mode_note", None) or {}).get(mode)
        return (f"engine {name} runs {' and '.join(e.modes)} modes; mode {mode} runs on engine "
                f"{' or '.join(running(mode))}" + (f" ({note})" if note else ""))
    if prefix_reuse and e.prefix_reuse != "option":
        how = "caches prefixes itself" if e.prefix_reuse == "automatic" else "does not reuse prefixes"
        return (f"prefix_reuse is for engine {' or '.join(n for n in names() if get(n).prefix_reuse == 'option')}; "
                f"engine {name} {how}")
    if cache and not e.hf_model:
        return (f"engine {name} decides only: the activation cache (and the probe and ablation after it) needs "
                f"engine {' or '.join(n for n in names() if get(n).hf_model)}")
    return None


class EngineNames(Sequence):
    """The registered engines' names, read when used (a config's allowed values, after a plugin registered one)."""

    def __getitem__(self, i):
        return names()[i]

    def __len__(self) -> int:
        return len(names())

    def __repr__(self) -> str:
        return repr(names())


ENGINES = EngineNames()
"""The registered engines' names, live."""
