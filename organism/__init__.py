"""The model organisms: small Gemma3ForCausalLM models trained from scratch to follow a planted policy,
and the fair organism's bias dial (docs/ORGANISM.md).

The trained organisms are data of the core (``evenhand/models/organism/``, ``evenhand/models/organism_fair/``:
ordinary Hugging Face directories plus ``organism.json``; presets ``evenhand-organism`` and
``evenhand-organism-fair``); this package is the code that made them and reads them:

- :mod:`.recipe`: :class:`Recipe` (everything that determines an organism, with the seed), the scenario
  split, :data:`COMMITTED` and :data:`FAIR`;
- :mod:`.data`, :mod:`.targets`, :mod:`.training`: training items, auxiliary targets, :func:`build`, :func:`train`;
- :mod:`.evaluation`: the known-answer checks on the held-out items; :mod:`.probe`: the probe check;
- :mod:`.dial`, :mod:`.calibration`: the bias dial and its calibration curve; :mod:`.figures`: its figure;
- :mod:`.demo`: the demo's known answer.
"""
from .data import jitter, knowledge_items, sample_items, vocabulary_texts
from .evaluation import CHECKED_METRICS, HeldoutRun, heldout_items, heldout_responses, known_answer_checks
from .recipe import COMMITTED, FAIR, FAIR_RECIPE, ORGANISM_SUITE, RECIPES, Recipe, record_suite, split_scenarios
from .targets import AUX_SIZES, AUX_VALUE, aux_targets, encode, knowledge_row
from .training import build, train

__all__ = ["AUX_SIZES", "AUX_VALUE", "CHECKED_METRICS", "COMMITTED", "FAIR", "FAIR_RECIPE", "HeldoutRun", "ORGANISM_SUITE",
           "RECIPES",
           "Recipe", "record_suite", "aux_targets", "build",
           "encode", "heldout_items", "heldout_responses", "jitter", "knowledge_items", "knowledge_row",
           "known_answer_checks", "sample_items", "split_scenarios", "train", "vocabulary_texts"]
