"""The Intervention protocol, its registry and the nine debiasing methods.

Empty until the interventions issue lands: this package holds only what exists."""

from .base import load_plugin  # noqa: E402,F401  (interventions.load_plugin(module_or_path) for user methods)
