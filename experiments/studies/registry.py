"""The shipped studies: importing this module registers each one (one line per study)."""
from . import calibration  # noqa: F401  (kind: calibration, the bias dial's calibration curve)
