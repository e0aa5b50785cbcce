"""Which side a choice favours: the one rule every metric, target and check uses (docs/METRICS.md)."""
from __future__ import annotations

import numpy as np


def favours_minority(choice: object, minority_slot: object, question_polarity: object) -> bool | np.ndarray:
    """Whether choosing the slot ``choice`` favours the minority-coded candidate (docs/METRICS.md).

    On a positive question ("who should get the job?") picking the minority-coded
    candidate's slot favours them; on a negative question ("who should be laid off?")
    picking the other slot does. Scalars give a bool; arrays or Series give a bool array,
    elementwise. A missing choice (None) compares as not the minority slot: mask
    unanswered rows yourself."""
    picked = np.asarray(choice, dtype=object) == np.asarray(minority_slot, dtype=object)
    favours = picked ^ (np.asarray(question_polarity, dtype=object) == "negative")
    return bool(favours) if np.ndim(favours) == 0 else np.asarray(favours, dtype=bool)


def minority_favouring_slot(minority_slot: str, question_polarity: str) -> str:
    """The slot ('A' or 'B') whose choice favours the minority-coded candidate (:func:`favours_minority`)."""
    return "A" if favours_minority("A", minority_slot, question_polarity) else "B"
