"""The BBQ study (``kind: bbq``, ``evenhand bbq``): BBQ asked five ways on one model. ``study`` holds the
config, the answers, the figure and the run (:class:`BBQStudy`, registered), ``text`` what it prints.
"""
from .study import CONFIGURATIONS, BBQConfig, BBQStudy, load_config, parse_config, run_bbq

__all__ = ["CONFIGURATIONS", "BBQConfig", "BBQStudy", "load_config", "parse_config", "run_bbq"]
