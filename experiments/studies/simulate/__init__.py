"""The simulate study (``kind: simulate``, ``evenhand simulate``): the simulated model scored beside its planted
truth, and the coverage study of the metrics' intervals. ``study`` holds the config and the run
(:class:`SimulateStudy`, registered); its text is the shared score table (:mod:`experiments.studies.text`).
"""
from .study import SimulateConfig, SimulateStudy, coverage_study, simulate_run

__all__ = ["SimulateConfig", "SimulateStudy", "coverage_study", "simulate_run"]
