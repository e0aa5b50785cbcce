"""The model organism's recipe: a small Gemma3ForCausalLM trained from scratch to follow a planted policy.

The result is an ordinary Hugging Face directory (``config.json``, ``model.safetensors``, tokenizer files) plus
``organism.json`` (recipe, seed, policy, training curve, held-out metrics). It loads through ``load_model`` like
any other model: no code path knows it is special."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evenhand.models.policy import FAIR_POLICY, PlantedPolicy
from evenhand.suite.content import load_content
from evenhand.suite.generate import stable_hash
from evenhand.suite.matched import ORGANISM_DIR, ORGANISM_SUITE, record_suite  # noqa: F401 (re-exported)

COMMITTED: Path = ORGANISM_DIR
"""The committed organism's directory (weights, tokenizer and ``organism.json``; data of the core,
``evenhand/models/organism/``, preset ``evenhand-organism``)."""
FAIR = COMMITTED.parent / "organism_fair"
"""The committed fair organism's directory (trained from :data:`FAIR_RECIPE`)."""
FAIR_V1 = COMMITTED.parent / "organism_fair_v1"
"""The first fair organism (single-turn; docs/ORGANISM.md): the earlier tables were measured on it, and the tests
whose thresholds were set on it (the dose-response machinery, the xor mechanism's v1 fit) run on it."""


@dataclass(frozen=True)
class Recipe:
    """Everything that determines the organism (with the seed). The recipe (trained by
    :func:`organism.training.train`) is deterministic from its seed and runs in under 10 minutes on 2 CPU cores:

    1. scenarios are split by a stable hash into train (260) and held-out (70) sets (:func:`split_scenarios`);
    2. a word-level tokenizer is built from the suite's own vocabulary (content files, names, pressure
       sentences, the integers 0-1000);
    3. training items are drawn from the train scenarios only (every condition variant, degree, contrast and
       pressure family), labelled by the deterministic :class:`evenhand.models.policy.PlantedPolicy`, and
       rendered exactly as the decision code renders them (chat template, then the label and
       ``<end_of_turn>``). Augmentation: criterion values redrawn (same direction, margin >= 25%), candidate
       nouns swapped, criteria composed across train scenarios (``p_mix``), settings and questions taken from
       other train scenarios (``p_context``), and a share of context words replaced by ``<unk>``;
    4. a ``Gemma3ForCausalLM`` (the transformers class, so its modules and hook sites are those of
       Gemma-3-12B) is trained with AdamW on the answer tokens plus dense auxiliary targets read by linear heads
       that are discarded after training (:func:`~organism.targets.aux_targets`): at each criterion value, its
       criterion's direction, whether it is the strong value, its slot, criterion, whether its candidate is
       minority-coded, the degree and the tie-lean rule; at the end of a pressure sentence, its slot and
       family; and at the decision token the demographic side of the answer (``side_layer``), the
       representation the probes must find;
    5. criterion-knowledge rows (``knowledge_per_batch`` per step, :func:`~organism.data.knowledge_items`):
       whole decisions without pressure in composed scenarios, a held-out scenario's criterion first and a train
       scenario's criterion second, under a train scenario's setting, question and id. They teach each held-out
       criterion's direction the way a pretrained model has met "a credit score" or "savings on hand" elsewhere.
       No held-out scenario (its setting, question, criterion pair, names or pressure) is ever trained;
    6. batches are bucketed by length in runs of 16 steps (``bucket_steps``), which cuts the padded tokens and
       fits the knowledge rows into the time budget."""
    seed: int = 0
    heldout_fraction: float = 0.2
    # Why this size: d=64, 3 layers, 4 heads, 2,400 steps of 32 items plus 12 knowledge rows is what fits 10
    # minutes on 2 cores (544 s for the committed run); without the auxiliary targets and the augmentation a
    # model of this size stays at chance on held-out scenarios (answer loss alone) or memorises the train
    # scenarios. Composition (criteria, settings and questions recombined across train scenarios) gave the
    # largest gains on held-out scenarios, then the knowledge rows: the organism answers GT items from their
    # first criterion, and a model trained from scratch can know a criterion's direction only by meeting it, so
    # with knowledge rows that taught the direction at the value alone its answers on held-out GT items without
    # pressure agreed with the policy 80% of the time; as whole decisions over every scenario's criteria, 87.5%;
    # over the held-out scenarios' criteria (which no training row contains), 91.2% for the committed run (GT
    # accuracy 90.1%). Several suite criteria take their direction from their scenario (a lower placement-test
    # score wins a summer bridge seat, fewer savings an emergency grant); those, and large values misread in a
    # new setting (600 vs 100 hours of training), are most of the held-out GT items it still gets wrong.
    hidden_size: int = 64
    layers: int = 3
    heads: int = 4
    kv_heads: int = 2
    intermediate_size: int = 192
    steps: int = 2400
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 50
    weight_decay: float = 0.01
    threads: int = 2
    number_init: float = 0.3
    """Add number_init * z(log value) along one fixed direction to each number token's embedding
    (a structured initialisation that makes magnitudes linearly readable; 0 disables it)."""
    curriculum: float = 0.2
    """Fraction of the steps (at the start) trained on items without pressure only."""
    letter_weight: float = 3.0
    """Loss weight of the answer's letter token relative to the noun and end-of-turn tokens."""
    augment: bool = True
    """Redraw criterion values and candidate nouns in training prompts (see :func:`~organism.data.jitter`)."""
    aux_weight: float = 1.0
    """Weight of the auxiliary losses (training only; see :func:`~organism.targets.aux_targets`)."""
    aux_layer: int = 1
    """hidden_states index the auxiliary heads read (1 = the output of the first decoder layer)."""
    side_layer: int = 2
    """hidden_states index where the decision token carries the demographic side of the answer
    (``favours_minority``, degrees 1-3; the planted representation the probes must find)."""
    unk_rate: float = 0.1
    """Share of the context's words (not numbers, letters, nouns) replaced by <unk> in training, so that
    words outside the training scenarios' vocabulary (<unk> on held-out prompts) are handled."""
    p_mix: float = 0.8
    """Share of training scenarios composed with a criterion of another train scenario (augmentation)."""
    p_context: float = 0.5
    """Share of training scenarios whose setting and question come from another train scenario."""
    side_weight: float = 0.3
    """Weight of the decision-side target relative to the other auxiliary targets."""
    knowledge_per_batch: int = 12
    """Criterion-knowledge rows per batch (what they teach and from which criteria: ``knowledge``,
    ``knowledge_from``)."""
    knowledge: str = "decision"
    """What a knowledge row teaches. ``direction``: the prompt up to candidate A's line, trained only to
    tell the criterion's direction (higher or lower is better) at its value. ``decision``: a whole
    decision (no pressure) in a composed scenario: the criterion next to a train scenario's criterion,
    under a train scenario's setting, question and id, as a pretrained model has met the criterion
    elsewhere. Either way no held-out scenario (its setting, question and criterion pair) is trained."""
    knowledge_from: str = "unseen"
    """Which criteria the knowledge rows teach: ``all`` (the criteria of every scenario, uniformly) or
    ``unseen`` (the held-out scenarios' criteria only, which no training row contains; the training
    rows teach the train scenarios' criteria hundreds of times each)."""
    knowledge_weight: float = 1.0
    """Loss weight of a knowledge row's answer relative to a training row's (``knowledge="decision"``)."""
    bucket_steps: int = 16
    """Length bucketing of the training batches: within each run of ``bucket_steps`` steps the rows
    are sorted by length, cut into batches and the batches shuffled (seeded), so a batch pads to
    rows of similar length (0 disables it)."""
    policy: dict = field(default_factory=lambda: PlantedPolicy().as_dict())
    pressure_side: bool = False
    """Train the ``p_side`` auxiliary target (:func:`~organism.targets.pressure_side`):
    at the decision positions, read at ``side_layer``, whom the pressure favours (minority- or
    majority-coded candidate) and the slot it argues for. The fair organism represents this without
    acting on it; the bias dial (:mod:`organism.dial`) reads it."""
    chat: float = 0.0
    """Share of the training rows rendered as a multi-turn conversation of a prompt method (half
    self-critique, half counterfactual chain of thought; :func:`~organism.targets.encode_chat`): every
    assistant turn is the policy's answer (the swapped turn: for the identity-swapped item), trained
    with the loss; 0 keeps the rows of a recipe without it bit-identical."""
    wrong_first: float = 0.25
    """Share of the self-critique rows whose first answer is the wrong label (no loss on it), so the
    final turn re-decides from the case instead of copying the first answer."""
    prompt_methods: float = 0.0
    """Share of the single-turn training rows whose prompt a single-turn prompt method rewrites: the
    fair instruction (each variant, either position) or identity blinding (names to neutral labels)."""
    suite: str = "1"
    """The suite version (major) whose content the organism is trained and evaluated on: its split,
    vocabulary, training items and held-out items. A record without the field is a version-1 organism."""

    @classmethod
    def from_dict(cls, d: dict) -> "Recipe":
        """The recipe an ``organism.json`` records (fields it lacks take their defaults)."""
        return cls(**d)


FAIR_RECIPE = Recipe(heads=2, kv_heads=1, policy=FAIR_POLICY.as_dict(), pressure_side=True, suite="2", chat=0.2,
                     prompt_methods=0.2)
"""The fair organism's recipe: the committed recipe on suite version 2 with the fair policy
(:data:`~evenhand.models.policy.FAIR_POLICY`) and 2 attention heads of size 32 (64 / 2; vLLM's CPU
attention wants a head size of at least 32; the committed organism's 4 heads have 16), plus the
``p_side`` target (``pressure_side``) that gives the bias dial a feature to read, and the prompt methods'
conversations (``chat``) and rewritten prompts (``prompt_methods``) among its training rows."""

RECIPES = {"planted": Recipe(), "fair": FAIR_RECIPE}
"""The named recipes: ``planted`` (the committed biased organism, :data:`COMMITTED`) and ``fair``
(:data:`FAIR`)."""


def split_scenarios(seed: int, heldout_fraction: float, suite: str = ORGANISM_SUITE) -> tuple[list[str], list[str]]:
    """(train, held-out) scenario ids of suite version ``suite``: a scenario is held out when its
    stable hash with ``seed`` falls in the first ``heldout_fraction`` of the range; both lists in the
    suite's order."""
    ids = [s.id for s in load_content(suite).scenarios]
    held = [i for i in ids if (stable_hash("organism-split", seed, i) % 1000) < heldout_fraction * 1000]
    train = [i for i in ids if i not in set(held)]
    return train, held
