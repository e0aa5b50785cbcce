"""EvenHand: measure, explain and reduce asymmetric demographic bias in LLM decisions.

The public API, for a notebook (``import evenhand as eh``)::

    lm = eh.load_model("evenhand-organism")        # a preset, a Hugging Face id or a local path
    items = eh.suite.items("smoke", n=200)          # suite items, spread across scenarios
    responses = eh.decide(items, lm, eh.DecideOptions(mode="answer"))
    cache = eh.cache(items, lm, eh.CacheOptions(), out_dir="activations")
    report = eh.score(responses)                    # FairStress metrics with cluster-bootstrap CIs

Names load on first use (PEP 562), so ``import evenhand`` imports neither torch nor transformers.
``eh.decide`` is the function :func:`evenhand.decide.decide`; the engine module it lives in is
reached with ``from evenhand.decide import ...``.
"""
from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from .lazy import lazy_exports

__version__ = "0.1.0"

ORGANISM = "evenhand-organism"
"""The preset name of EvenHand's model organism (``eh.load_model(eh.ORGANISM)``): a 0.4M-parameter
Gemma3 trained on a planted policy, for validating the tools; it says nothing about real models."""

_EXPORTS = {
    # models
    "load_model": ".models.loading", "ModelSpec": ".models.loading", "LoadedModel": ".models.loading",
    "ModelLoadError": ".models.loading", "PRESETS": ".models.loading",
    "SimulatedModel": ".models.simulated", "PlantedPolicy": ".models.policy",
    # deciding
    "decide": ".decide", "DecideOptions": ".decide",
    # caching
    "cache": ".activations:cache_activations", "cache_activations": ".activations",
    "CacheOptions": ".activations", "ActivationCache": ".activations",
    # scoring
    "score": ".metrics", "compare": ".metrics", "HEADLINE": ".metrics",
    "validate_rows": ".schema", "read_rows": ".schema", "load_rows": ".schema", "RowError": ".schema",
    # run directories
    "RunDir": ".runs", "RunError": ".runs",
}
_SUBMODULES = ("suite",)
__all__ = sorted([*_EXPORTS, *_SUBMODULES, "ORGANISM"])
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _SUBMODULES)


class _Package(types.ModuleType):
    """The package's module type: keeps ``evenhand.decide`` the function.

    Importing the submodule :mod:`evenhand.decide` binds the package attribute of the same name to
    the module; this binds the module's ``decide`` function instead, so ``eh.decide(...)`` works
    whichever of the two was imported first."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "decide" and isinstance(value, types.ModuleType):
            value = value.decide
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

if TYPE_CHECKING:
    from . import suite
    from .activations import ActivationCache, CacheOptions, cache_activations
    from .activations import cache_activations as cache
    from .decide import DecideOptions, decide
    from .metrics import HEADLINE, compare, score
    from .models.loading import PRESETS, LoadedModel, ModelLoadError, ModelSpec, load_model
    from .models.policy import PlantedPolicy
    from .models.simulated import SimulatedModel
    from .runs import RunDir, RunError
    from .schema import RowError, load_rows, read_rows, validate_rows
