"""The modes study (``kind: modes``, ``evenhand modes``): the suite decided in answer and in logprob mode on one
model, compared. ``study`` holds the config and the run (:class:`ModesStudy`, registered), ``text`` what it prints.
"""
from .study import ModesConfig, ModesStudy, mode_switch

__all__ = ["ModesConfig", "ModesStudy", "mode_switch"]
