"""The Intervention protocol, its registry and the nine debiasing methods.

A notebook needs::

    method = interventions.get("leace")                    # interventions.registered() lists them
    fit_opts, apply_opts = method.split_options({"layers": "middle", "strength": 1.0})
    fitted = method.fit(lm, train_items, fit_opts, seed=0)  # a Fitted: save(dir) / Fitted.load(dir)
    responses = interventions.decide_with(method, fitted, items, lm, eh.DecideOptions(), apply_opts)

A method of your own subclasses :class:`Intervention` (or :class:`EditingIntervention`,
:class:`DirectionIntervention`) and is added with ``@interventions.register``; a module of your own
is imported with :func:`load_plugin` (see docs/INTERVENTIONS.md). Names load on first use (PEP 562). The
comparison of methods is a study: :mod:`experiments.studies.compare`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from evenhand.support.lazy import lazy_exports

_EXPORTS = {
    "Intervention": ".base", "EditingIntervention": ".base", "DirectionIntervention": ".base",
    "Fitted": ".base", "InterventionError": ".base", "KINDS": ".base",
    "register": ".base", "check_fitted": ".base", "decide_with": ".base",
    "get": ".registry", "registered": ".registry", "load_plugin": ".registry",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .base import (KINDS, DirectionIntervention, EditingIntervention, Fitted, Intervention, InterventionError,
                       check_fitted, decide_with, register)
    from .registry import get, load_plugin, registered
