"""The shipped studies: importing this module registers each one (one line per study)."""
from . import bbq  # noqa: F401
from . import modes  # noqa: F401
from . import run  # noqa: F401
from . import simulate  # noqa: F401
from . import sweep  # noqa: F401
