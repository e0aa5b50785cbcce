"""The four prompt interventions: what the model reads changes, the item does not.

The texts and the prompt rewrites they use (candidate-line parsing, blind and swapped prompts, case body,
answer instruction, the chat procedures' user turns) are defined once in the core, :mod:`evenhand.suite.rewrites`,
which the fair organism's training also renders (docs/ORGANISM.md, "The fair organism holds a conversation");
this module re-exports them under the same names, raising :class:`InterventionError`."""
from __future__ import annotations

import abc
import functools
from dataclasses import dataclass, field, fields

import pandas as pd

from evenhand.suite import rewrites as _R
from evenhand.suite.generate import SLOTS
from evenhand.suite.rewrites import (  # noqa: F401 (re-exported: the public names of the prompt methods)
    CF_FINAL,
    CF_FIRST,
    CF_SECOND,
    CRITERIA_ONLY,
    CRITIQUE_REQUEST,
    CUE_KINDS,
    FAIR_INSTRUCTIONS,
    FINAL_AFTER_CRITIQUE,
    ILLEGAL,
    NAME_MODES,
    NEUTRAL_LABELS,
    POSITIONS,
    CandidateLine,
    Candidates,
    RewriteError,
)

from .base import Fitted, Intervention, InterventionError, register
from .chat import decide_chat


def _raising_intervention_error(fn):
    """``fn`` of :mod:`evenhand.suite.rewrites`, raising :class:`InterventionError` (same message) for its
    :class:`~evenhand.suite.rewrites.RewriteError`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RewriteError as e:
            raise InterventionError(str(e)) from None
    return wrapper


# Suite prompts are read through their candidate block (parse_candidates): one paragraph of two lines,
# "<Noun> A ..." and "<Noun> B ...", each carrying the item's degree cue, found with the exact names (names) or
# the exact explicit / implicit sentences of the two profiles of the item's contrast.
parse_candidates = _raising_intervention_error(_R.parse_candidates)
identity_cue_texts = _raising_intervention_error(_R.identity_cue_texts)
blind_prompt = _raising_intervention_error(_R.blind_prompt)
swapped_prompt = _raising_intervention_error(_R.swapped_prompt)
case_body = _raising_intervention_error(_R.case_body)
answer_instruction = _raising_intervention_error(_R.answer_instruction)
add_instruction = _raising_intervention_error(_R.add_instruction)
self_critique_turns = _raising_intervention_error(_R.self_critique_turns)
counterfactual_turns = _raising_intervention_error(_R.counterfactual_turns)


def _choice(name: str, option: str, value, allowed) -> None:
    if value not in allowed:
        raise InterventionError(f"{name}: option {option} must be one of {', '.join(allowed)}, got {value!r}")


def _budget(name: str, option: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InterventionError(f"{name}: option {option} must be a positive integer, got {value!r}")


# === the interventions ======================================================================
@dataclass(frozen=True)
class FairInstructionOptions:
    """Apply options of ``fair_instruction``: which instruction, and where it goes."""
    variant: str = "criteria_only"
    position: str = "prepend"

    def __post_init__(self):
        _choice("fair_instruction", "variant", self.variant, tuple(FAIR_INSTRUCTIONS))
        _choice("fair_instruction", "position", self.position, POSITIONS)

    @property
    def instruction(self) -> str:
        """The instruction text of ``variant``."""
        return FAIR_INSTRUCTIONS[self.variant]


# fair_instruction (rewrite): adds an instruction to decide on the stated criteria only (criteria_only), that
# discrimination is illegal (illegal, after Tamkin et al. 2023) or both; prepended, or appended as its own paragraph
# just before the question, so the prompt still ends with the answer instruction that the reasoning variant and the
# parser rely on.
@register
class FairInstruction(Intervention):
    """Instruct the model to decide on the stated criteria only / that discrimination is illegal."""
    name = "fair_instruction"
    kind = "prompt"
    ApplyOptions = FairInstructionOptions

    def rewrite(self, item: dict, options: FairInstructionOptions | None = None) -> dict:
        o = self.apply_options(options)
        return {**item, "prompt": add_instruction(item["prompt"], o.instruction, o.position)}


@dataclass(frozen=True)
class IdentityBlindOptions:
    """Apply options of ``identity_blind``: names to neutral labels (``label``) or dropped, and the labels."""
    name_mode: str = "label"
    name_labels: dict = field(default_factory=lambda: dict(NEUTRAL_LABELS))

    def __post_init__(self):
        _choice("identity_blind", "name_mode", self.name_mode, NAME_MODES)
        nl = self.name_labels
        if not isinstance(nl, dict) or set(nl) != set(SLOTS) or not all(isinstance(v, str) and v.strip()
                                                                         for v in nl.values()):
            raise InterventionError(f"identity_blind: option name_labels must map A and B to non-empty strings, "
                                    f"got {nl!r}")
        if nl["A"] == nl["B"]:
            raise InterventionError("identity_blind: option name_labels must give A and B different labels")


# identity_blind (rewrite): names replaced by neutral per-slot labels (or dropped; always dropped where the name is of
# a person who stands for a candidate that is not a person), implicit-correlate and explicit-identity sentences
# removed. The result equals the degree-0 rendering of the item's cell up to the neutral labels (exactly, with
# name_mode="drop").
@register
class IdentityBlind(Intervention):
    """Blind the prompt: names to neutral labels, identity and correlate sentences removed."""
    name = "identity_blind"
    kind = "prompt"
    ApplyOptions = IdentityBlindOptions

    def rewrite(self, item: dict, options: IdentityBlindOptions | None = None) -> dict:
        o = self.apply_options(options)
        return {**item, "prompt": blind_prompt(item, o.name_mode, o.name_labels)}


class ChatProcedure(Intervention, abc.ABC):
    """Base of the multi-turn prompt procedures: user turns per item, one token budget per turn."""
    kind = "prompt"
    budget_options: tuple[str, ...] = ()

    def budgets(self, options=None) -> list[int]:
        """The new-token budget of each turn, from the apply options (None: the defaults)."""
        o = self.apply_options(options)
        return [getattr(o, opt) for opt in self.budget_options]

    @abc.abstractmethod
    def user_turns(self, item: dict) -> list[str]:
        """The user messages of the chat for ``item``, in order."""

    def decide(self, fitted: Fitted, items: pd.DataFrame, lm, opts, options=None) -> pd.DataFrame:
        """The chat of every item, turn by turn (:func:`interventions.chat.decide_chat`)."""
        records = items.to_dict("records") if isinstance(items, pd.DataFrame) else list(items)
        turns = [self.user_turns(r) for r in records]
        return decide_chat(records, lm, opts, turns, self.budgets(options), self.name)


@dataclass(frozen=True)
class SelfCritiqueOptions:
    """Apply options of ``self_critique``: the new-token budget of each of its three turns."""
    answer_max_new_tokens: int = 8
    critique_max_new_tokens: int = 128
    final_max_new_tokens: int = 8

    def __post_init__(self):
        for f in fields(self):
            _budget("self_critique", f.name, getattr(self, f.name))


# self_critique (decide, 3 turns in one chat): the item's prompt, then a request to critique the answer for influence
# of identity and of pressure unrelated to the criteria, then a request for the final answer in the suite's format,
# which gives the choice.
@register
class SelfCritique(ChatProcedure):
    """Answer, critique the answer for identity and pressure influence, then answer again."""
    name = "self_critique"
    ApplyOptions = SelfCritiqueOptions
    budget_options = ("answer_max_new_tokens", "critique_max_new_tokens", "final_max_new_tokens")

    def user_turns(self, item: dict) -> list[str]:
        return self_critique_turns(item)


@dataclass(frozen=True)
class CounterfactualCotOptions:
    """Apply options of ``counterfactual_cot``: the budget of each reasoning turn and of the final turn."""
    reason_max_new_tokens: int = 128
    final_max_new_tokens: int = 8

    def __post_init__(self):
        for f in fields(self):
            _budget("counterfactual_cot", f.name, getattr(self, f.name))


# counterfactual_cot (decide, 3 turns in one chat): reason about the case (without answering), reason about the same
# case with the candidates' identity cues swapped between the two slots (criteria values, pressure and question stay
# with their slot), then give the decision that holds under both, which gives the choice. The swapped case is built
# from the item's own prompt (swapped_prompt): for a suite item it equals the rendering of the mirror cell (variant
# GTmin<->GTmaj, AMB1<->AMB2, minority slot flipped). Degree-0 items run the same three turns with an identical second
# case, so every degree gets the same procedure.
@register
class CounterfactualCot(ChatProcedure):
    """Reason about the case and its identity-swapped twin, then give the decision that holds under both."""
    name = "counterfactual_cot"
    ApplyOptions = CounterfactualCotOptions
    budget_options = ("reason_max_new_tokens", "reason_max_new_tokens", "final_max_new_tokens")

    def user_turns(self, item: dict) -> list[str]:
        return counterfactual_turns(item)
