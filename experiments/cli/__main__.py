"""``python -m experiments.cli``: the ``evenhand`` command."""
import sys

from .main import entry

sys.exit(entry())
