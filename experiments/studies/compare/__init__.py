"""The interventions comparison (``kind: compare``; ``evenhand compare``; docs/INTERVENTIONS.md).

``config`` holds the config and its cells, ``split`` the scenario split and the selection rule, ``study`` the
run (:class:`CompareStudy`, registered), ``figures`` the frontier figure and the LaTeX table, ``text`` what it
prints.
"""
from .config import CompareConfig, cells, load_config, parse_config
from .study import CompareStudy, item_sets, run_compare

__all__ = ["CompareConfig", "CompareStudy", "cells", "item_sets", "load_config", "parse_config", "run_compare"]
