"""Hidden-state edits and the ``steer``/``observe`` context managers that apply and read them at model sites.

The public face of :mod:`evenhand.engine.hooks`, where they live so that the core's activation cache reads
through the same hooks as fitting and interventions (:mod:`evenhand.engine.reader`)."""
from __future__ import annotations

from evenhand.engine.hooks import (POSITIONS, Add, Affine, AtPositions, Edit, ForwardInfo, ProjectOut,
                                   active_hooks, observe, steer)

__all__ = ["POSITIONS", "Add", "Affine", "AtPositions", "Edit", "ForwardInfo", "ProjectOut", "active_hooks",
           "observe", "steer"]
