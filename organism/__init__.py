"""The model organism: a small Gemma3ForCausalLM trained from scratch to follow a planted policy.

This directory is both the committed organism (an ordinary Hugging Face directory: ``config.json``,
``model.safetensors``, tokenizer files, plus ``organism.json`` with the recipe, the training curve
and the held-out evaluation) and the code that made it:

- :mod:`.recipe`: :class:`Recipe` (everything that determines the organism, with the seed; the
  recipe and why it has this size are in that module's docstring), the scenario split, :data:`COMMITTED`;
- :mod:`.data`: augmented training items, criterion-knowledge items, the tokenizer's vocabulary;
- :mod:`.targets`: the dense auxiliary training targets and the encoded training rows;
- :mod:`.training`: :func:`build` and :func:`train`;
- :mod:`.evaluation`: the held-out items and the known-answer checks (the probe check is
  :mod:`probes.organism`).
"""
from .data import jitter, knowledge_items, sample_items, vocabulary_texts
from .evaluation import CHECKED_METRICS, HeldoutRun, heldout_items, heldout_responses, known_answer_checks
from .recipe import COMMITTED, FAIR, FAIR_RECIPE, ORGANISM_SUITE, RECIPES, Recipe, record_suite, split_scenarios
from .targets import AUX_SIZES, AUX_VALUE, aux_targets, encode, knowledge_row
from .training import build, train

__all__ = ["AUX_SIZES", "AUX_VALUE", "CHECKED_METRICS", "COMMITTED", "FAIR", "FAIR_RECIPE", "HeldoutRun", "RECIPES",
           "Recipe", "record_suite", "aux_targets", "build",
           "encode", "heldout_items", "heldout_responses", "jitter", "knowledge_items", "knowledge_row",
           "known_answer_checks", "sample_items", "split_scenarios", "train", "vocabulary_texts"]
