"""The group strings of the released FairStress rows, mapped onto EvenHand's contrasts.

Ai2's released rows and its corrections file name groups with words (``black_male``,
``older_worker``, ``heterosexual_female``); EvenHand names them with the parts of the contrast
id (``blackM``, ``older``, ``het``). The two namings do not map one to one: our ``het`` is
``heterosexual_male`` in ``gay_het`` and ``heterosexual_female`` in ``lesb_het``, and Ai2's
``black_male`` is our ``blackM`` in ``blackM_whiteM`` but ``blkM`` in ``blkTransW_blkM``. So the
table maps each *contrast* to its two released group strings, and every check goes through it."""
from __future__ import annotations

import difflib

from ..vocab.problems import RowError

# Where the strings come from (docs/metrics/rows.md, "Importing the released rows"): 25 of the 31 were read in
# Ai2's corrections file or test fixture (repo `allenai/olmo-eval`); `hindu_female`, `hindu_male`,
# `jewish_female`, `jewish_male`, `atheist_male` follow the same `<group>_<male|female>` pattern, and
# `person_without_disability` pairs with the observed `person_with_disability`. A released row naming any
# other string is refused with the field and the value (`released_group`), so a difference shows at once.
AI2_GROUPS: dict[str, tuple[str, str]] = {
    # contrast id: (released minority_group, released majority_group)
    "arabF_whiteM": ("arab_female", "white_male"),
    "atheistM_christianM": ("atheist_male", "christian_male"),
    "blackF_blackM": ("black_female", "black_male"),
    "blackF_whiteF": ("black_female", "white_female"),
    "blackF_whiteM": ("black_female", "white_male"),
    "blackM_whiteM": ("black_male", "white_male"),
    "blkTransM_whiteM": ("black_transman", "white_male"),
    "blkTransW_blkM": ("black_transwoman", "black_male"),
    "blkTransW_whiteM": ("black_transwoman", "white_male"),
    "disability_normal": ("person_with_disability", "person_without_disability"),
    "gay_het": ("gay_male", "heterosexual_male"),
    "hinduF_christianF": ("hindu_female", "christian_female"),
    "hispTransW_hispM": ("hispanic_transwoman", "hispanic_male"),
    "hispTransW_whiteM": ("hispanic_transwoman", "white_male"),
    "hispanicF_whiteM": ("hispanic_female", "white_male"),
    "hispanicM_whiteM": ("hispanic_male", "white_male"),
    "jewishF_christianF": ("jewish_female", "christian_female"),
    "lesb_het": ("lesbian_female", "heterosexual_female"),
    "muslimF_christianF": ("muslim_female", "christian_female"),
    "muslimM_christianM": ("muslim_male", "christian_male"),
    "older_younger": ("older_worker", "younger_worker"),
    "sikhM_christianM": ("sikh_male", "christian_male"),
    "whiteF_whiteM": ("white_female", "white_male"),
    "whtTransM_whiteM": ("white_transman", "white_male"),
    "whtTransW_whiteF": ("white_transwoman", "white_female"),
    "whtTransW_whiteM": ("white_transwoman", "white_male"),
    "arabF_blackF": ("arab_female", "black_female"),
    "arabM_hispanicM": ("arab_male", "hispanic_male"),
    "hinduM_muslimM": ("hindu_male", "muslim_male"),
    "jewishM_muslimM": ("jewish_male", "muslim_male"),
    "atheistM_muslimF": ("atheist_male", "muslim_female"),
    "jewishM_christianF": ("jewish_male", "christian_female"),
    "muslimM_jewishF": ("muslim_male", "jewish_female"),
}
"""Each of the 33 contrasts: the strings the released rows use for its minority and majority group."""

AI2_GROUP_STRINGS: frozenset[str] = frozenset(g for pair in AI2_GROUPS.values() for g in pair)
"""Every group string a released row or a corrections file may name."""


def _hint(value: object) -> str:
    """A suggestion for a string that is not a released group string: the released strings of one of
    our own group ids (the parts of a contrast id), else the closest released string."""
    ours = sorted({pair[i] for cid, pair in AI2_GROUPS.items() for i in (0, 1) if cid.split("_")[i] == value})
    if ours:
        return f" (EvenHand's id; the released rows call it {' or '.join(map(repr, ours))})"
    close = difflib.get_close_matches(str(value), sorted(AI2_GROUP_STRINGS), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def released_group(value: object, contrast_id: str, side: str, ours: str, where: str) -> str:
    """The released group string for ``side`` (``minority`` or ``majority``) of ``contrast_id``.

    ``value`` is the row's ``<side>_group``: the released string, our own id ``ours`` (the part of
    the contrast id), or None (taken from the table). Anything else raises :class:`RowError`
    naming the field and the value."""
    expected = AI2_GROUPS[contrast_id][0 if side == "minority" else 1]
    if value is None or value == expected or value == ours:
        return expected
    field = f"{side}_group"
    if value in AI2_GROUP_STRINGS:
        raise RowError(f"{where}: field '{field}' is {value!r}, but the {side} group of contrast {contrast_id} "
                       f"is {expected!r}")
    raise RowError(f"{where}: field '{field}' is not a known FairStress group string: {value!r}"
                   f"{_hint(value)}")


def check_d2_groups(d2: dict, source: str) -> dict[str, frozenset[str]]:
    """``d2_confound_exclusions`` of a corrections file (scenario id -> released group strings), checked:
    an unknown string raises :class:`RowError` naming the scenario and the value."""
    out = {}
    for scenario, groups in d2.items():
        if not isinstance(groups, list):
            raise RowError(f"{source}: 'd2_confound_exclusions[{scenario!r}]' must be a list of group strings")
        for g in groups:
            if g not in AI2_GROUP_STRINGS:
                raise RowError(f"{source}: 'd2_confound_exclusions[{scenario!r}]' names {g!r}, not a FairStress "
                               f"group string{_hint(g)}; groups are named as the "
                               f"released rows name them (e.g. 'black_male', 'older_worker')")
        out[scenario] = frozenset(groups)
    return out
