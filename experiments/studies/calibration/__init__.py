"""The bias dial's calibration (``kind: calibration``; ``evenhand organism calibrate`` computes the same
curve). ``study`` holds the config and the run (:class:`CalibrationStudy`, registered), ``text`` what it prints.
"""
from .study import CalibrationConfig, CalibrationStudy, run_calibration, write_curve
from .text import calibration_text

__all__ = ["CalibrationConfig", "CalibrationStudy", "calibration_text", "run_calibration", "write_curve"]
