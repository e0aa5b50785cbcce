"""The run study (``kind: run``, the default; ``evenhand run``): a model on a suite subset in one mode, scored
(then cached, probed, ablated, attributed, drawn).

``config`` holds the config (:class:`RunConfig`, the suite it selects: :func:`suite_items`), ``study`` the
registered :class:`RunStudy`, ``local`` and ``ray`` its two backends.
"""
from .config import RunConfig, SuiteConfig, config_from_dict, load_config, suite_items
from .study import RunStudy

__all__ = ["RunConfig", "RunStudy", "SuiteConfig", "config_from_dict", "load_config", "suite_items"]
