"""The Intervention protocol, its registry and the nine debiasing methods.

A notebook needs::

    method = interventions.get("leace")                    # interventions.registered() lists them
    fitted = method.fit(lm, train_items, seed=0)           # a Fitted: save(dir) / Fitted.load(dir)
    responses = interventions.decide_with(method, fitted, items, lm, eh.DecideOptions())
    table = interventions.run_compare(interventions.load_config("compare.yaml"))

A method of your own subclasses :class:`Intervention` and is added with ``@interventions.register``.
Names load on first use (PEP 562).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from evenhand.lazy import lazy_exports

_EXPORTS = {
    "Intervention": ".base", "Fitted": ".base", "InterventionError": ".base", "KINDS": ".base",
    "register": ".base", "get": ".base", "registered": ".base", "check_fitted": ".base", "decide_with": ".base",
    "CompareConfig": ".compare", "parse_config": ".compare", "load_config": ".compare", "run_compare": ".compare",
    "frontier_points": ".figures", "frontier_figure": ".figures",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .base import KINDS, Fitted, Intervention, InterventionError, check_fitted, decide_with, get, register, registered
    from .compare import CompareConfig, load_config, parse_config, run_compare
    from .figures import frontier_figure, frontier_points
