"""The sweep study: a config of any study with a ``sweep:`` field expands into a grid of cells, each run once,
one table for all. ``study`` holds the expansion and the run (:class:`SweepStudy`, registered).
"""
from .study import SweepConfig, SweepStudy, expand, load_sweep, run_sweep

__all__ = ["SweepConfig", "SweepStudy", "expand", "load_sweep", "run_sweep"]
