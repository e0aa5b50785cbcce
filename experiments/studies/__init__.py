"""Every study EvenHand runs, one package each (``<kind>/``: its ``__init__`` names its public face), found through one registry (``base.py``)."""
from .base import DEFAULT_KIND, Study, get, kinds, register, study_of
from . import registry  # noqa: E402,F401  (registers the shipped studies; base.py imports no study, so no cycle)

__all__ = ["DEFAULT_KIND", "Study", "get", "kinds", "register", "study_of"]
