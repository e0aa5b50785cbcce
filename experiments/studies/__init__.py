"""Every study EvenHand runs, one module each, found through one registry (``base.py``)."""
from .base import DEFAULT_KIND, Study, get, kinds, register, study_of
from . import registry  # noqa: F401  (importing it registers the shipped studies)

__all__ = ["DEFAULT_KIND", "Study", "get", "kinds", "register", "study_of"]
