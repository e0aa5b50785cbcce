"""The shipped studies: importing this module registers each one (one line per study)."""
from . import bbq  # noqa: F401
from . import calibration  # noqa: F401  (kind: calibration, the bias dial's calibration curve)
from . import compare  # noqa: F401  (kind: compare, the interventions comparison)
from . import dose_response  # noqa: F401  (kind: dose_response, the dose-response benchmark)
from . import modes  # noqa: F401
from . import run  # noqa: F401
from . import simulate  # noqa: F401
from . import sweep  # noqa: F401
