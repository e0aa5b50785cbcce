"""Directions in activation space and the hooks that apply them.

Empty until the interventions issue lands: this package holds only what exists."""
