"""EvenHand: measure, explain and reduce asymmetric demographic bias in LLM decisions.

The public API, for a notebook (``import evenhand as eh``)::

    lm = eh.load_model("evenhand-organism")        # a preset, a Hugging Face id or a local path
    items = eh.suite.items("smoke", limit=200)      # suite items, spread across scenarios
    responses = eh.decide(items, lm, eh.DecideOptions(mode="answer"))
    cache = eh.cache(items, lm, eh.CacheOptions(), out_dir="activations")
    report = eh.score(responses)                    # FairStress metrics, 95% CIs: jackknife-t over scenarios
    print(report); report.to_frame()                # the degree-3 headline with n and k; every estimate, tidy
    eh.table(["runs/a", "runs/b=label"]).figure("f")  # several runs' headlines side by side, a forest plot

Names load on first use (PEP 562): ``import evenhand`` imports neither torch nor transformers.
``eh.decide`` is :func:`evenhand.running.decisions.decide` (its module is ``decisions``, never shadowing it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .support.lazy import lazy_exports

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
    "decide": ".running.decisions", "DecideOptions": ".running.decisions",
    # caching
    "cache": ".running.activations:cache_activations", "cache_activations": ".running.activations",
    "CacheOptions": ".running.activations", "ActivationCache": ".running.activations",
    # scoring
    "score": ".scoring.metrics", "compare": ".scoring.metrics", "HEADLINE": ".scoring.metrics",
    "ScoreReport": ".scoring.score_report",
    "validate_rows": ".rows.schema", "read_rows": ".rows.schema", "load_rows": ".rows.schema",
    "RowError": ".rows.schema",
    "load_fairstress": ".rows.fairstress",
    # several runs side by side
    "table": ".reporting.multirun:runs_table", "RunsTable": ".reporting.multirun",
    # run directories
    "RunDir": ".runs.rundir", "RunError": ".runs.rundir",
}
_SUBMODULES = ("suite",)
__all__ = sorted([*_EXPORTS, *_SUBMODULES, "ORGANISM"])
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _SUBMODULES)


if TYPE_CHECKING:
    from . import suite
    from .running.activations import ActivationCache, CacheOptions, cache_activations
    from .running.activations import cache_activations as cache
    from .running.decisions import DecideOptions, decide
    from .rows.fairstress import load_fairstress
    from .scoring.metrics import HEADLINE, compare, score
    from .reporting.multirun import RunsTable
    from .reporting.multirun import runs_table as table
    from .models.loading import PRESETS, LoadedModel, ModelLoadError, ModelSpec, load_model
    from .models.policy import PlantedPolicy
    from .models.simulated import SimulatedModel
    from .runs.rundir import RunDir, RunError
    from .scoring.score_report import ScoreReport
    from .rows.schema import RowError, load_rows, read_rows, validate_rows
