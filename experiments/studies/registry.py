"""The shipped studies: importing this module registers each one (one line per study)."""
from . import compare  # noqa: F401  (kind: compare, the interventions comparison)
