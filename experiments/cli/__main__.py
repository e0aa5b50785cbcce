"""``python -m experiments.cli``: the ``evenhand`` command."""
import sys

from .main import main

sys.exit(main())
