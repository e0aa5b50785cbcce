"""The dose-response study (``kind: dose_response``; docs/INTERVENTIONS.md, "The dose-response benchmark").

``study`` holds the config, the arms, the decoding and the run (:class:`DoseResponseStudy`, registered);
``items`` the fitting and evaluation items, ``replications`` the independent replications, ``scoring`` the
table, the bar and the figure, ``gains`` the dial's gain under each arm.
"""
from .study import DoseConfig, DoseMethod, DoseResponseStudy, load_config, parse_config, run_dose_response

__all__ = ["DoseConfig", "DoseMethod", "DoseResponseStudy", "load_config", "parse_config", "run_dose_response"]
