"""The shipped studies: importing this module registers each one (one line per study)."""
from . import dose_response  # noqa: F401
