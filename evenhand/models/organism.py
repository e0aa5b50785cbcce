"""The model organism: a small Gemma3ForCausalLM trained from scratch to follow a planted policy.

The recipe (:class:`Recipe`, :func:`train`) is deterministic from its seed and
runs in under 10 minutes on 2 CPU cores:

1. scenarios are split by a stable hash into train (260) and held-out (70) sets;
2. a word-level tokenizer is built from the suite's own vocabulary (content
   files, names, pressure sentences, the integers 0-1000);
3. training items are drawn from the train scenarios only (every condition
   variant, degree, contrast and pressure family), labelled by the deterministic
   :class:`~evenhand.models.policy.PlantedPolicy`, and rendered exactly as the
   decision code renders them (chat template, then the label and
   ``<end_of_turn>``). Augmentation: criterion values redrawn (same direction,
   margin >= 25%), candidate nouns swapped, criteria composed across train
   scenarios (``p_mix``), settings and questions taken from other train
   scenarios (``p_context``), and a share of context words replaced by ``<unk>``;
4. a ``Gemma3ForCausalLM`` (the transformers class, so its modules and hook
   sites are those of Gemma-3-12B) is trained with AdamW on the answer tokens
   plus dense auxiliary targets read by linear heads that are discarded after
   training (:func:`aux_targets`): at each criterion value, its criterion's
   direction, whether it is the strong value, its slot, criterion, whether its
   candidate is minority-coded, the degree and the tie-lean rule; at the end of
   a pressure sentence, its slot and family; and at the decision token the
   demographic side of the answer (``side_layer``), the representation the
   probes must find;
5. criterion-knowledge rows (``knowledge_per_batch`` per step,
   :func:`knowledge_items`): whole decisions without pressure in composed
   scenarios, a held-out scenario's criterion first and a train scenario's
   criterion second, under a train scenario's setting, question and id. They
   teach each held-out criterion's direction the way a pretrained model has met
   "a credit score" or "savings on hand" elsewhere. No held-out scenario (its
   setting, question, criterion pair, names or pressure) is ever trained;
6. batches are bucketed by length in runs of 16 steps (``bucket_steps``), which
   cuts the padded tokens and fits the knowledge rows into the time budget.

Why this size: d=64, 3 layers, 4 heads, 2,400 steps of 32 items plus 12
knowledge rows is what fits 10 minutes on 2 cores (544 s for the committed
run); without the auxiliary targets and the augmentation a model of this size
stays at chance on held-out scenarios (answer loss alone) or memorises the
train scenarios. Composition (criteria, settings and questions recombined across
train scenarios) gave the largest gains on held-out scenarios, then the
knowledge rows: the organism answers GT items from their first criterion, and a
model trained from scratch can know a criterion's direction only by meeting it,
so with knowledge rows that taught the direction at the value alone its answers
on held-out GT items without pressure agreed with the policy 80% of the time; as
whole decisions over every scenario's criteria, 87.5%; over the held-out
scenarios' criteria (which no training row contains), 91.2% for the committed
run (GT accuracy 90.1%). Several suite criteria take their direction from their
scenario (a lower placement-test score wins a summer bridge seat, fewer savings
an emergency grant); those, and large values misread in a new setting (600 vs
100 hours of training), are most of the held-out GT items it still gets wrong.

The result is an ordinary Hugging Face directory (``config.json``,
``model.safetensors``, tokenizer files) plus ``organism.json`` (recipe, seed,
policy, training curve, held-out metrics). It loads through ``load_model`` like
any other model: no code path knows it is special.
"""
from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..schema import favours_minority
from ..suite.content import load_content
from ..suite.generate import DEGREES, SLOTS, VARIANTS, Cell, degree_valid, render_item, stable_hash
from .policy import PlantedPolicy, matched_items, planted_truth, pressure_by_family

COMMITTED = Path(__file__).resolve().parent / "organism"


@dataclass(frozen=True)
class Recipe:
    """Everything that determines the organism (with the seed)."""
    seed: int = 0
    heldout_fraction: float = 0.2
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
    """Redraw criterion values and candidate nouns in training prompts (see :func:`_jitter`)."""
    aux_weight: float = 1.0
    """Weight of the auxiliary losses (training only; see :func:`aux_targets`)."""
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


def split_scenarios(seed: int, heldout_fraction: float) -> tuple[list[str], list[str]]:
    ids = [s.id for s in load_content().scenarios]
    held = [i for i in ids if (stable_hash("organism-split", seed, i) % 1000) < heldout_fraction * 1000]
    train = [i for i in ids if i not in set(held)]
    return train, held


def _jitter(s, rng: random.Random, nouns: list[str], pool=None, p_mix: float = 0.0, contexts=None,
            p_context: float = 0.0):
    """A training variant of a scenario: criterion values redrawn (same direction, margin >= 25%) and
    the candidate noun swapped for another suite noun, so that the organism must compare numbers and
    copy labels instead of memorising which value is strong in which scenario."""
    import dataclasses
    import re as _re
    crits = []
    base = list(s.criteria)
    if pool and rng.random() < p_mix:  # compose: one criterion drawn from another (train) scenario
        k = rng.randrange(2)
        other = rng.choice(pool)
        if other.name not in (base[0].name, base[1].name):
            base[k] = other
    for c in base:
        ints = float(c.strong).is_integer() and float(c.weak).is_integer()
        cap = 100.0 if max(c.strong, c.weak) <= 100 else None
        new = (c.strong, c.weak)
        for _ in range(10 if max(abs(c.strong), abs(c.weak)) < 900 else 0):  # large values keep their tokens
            a, b = c.strong * rng.uniform(0.6, 1.4), c.weak * rng.uniform(0.6, 1.4)
            a, b = (round(a), round(b)) if ints else (round(a, 1), round(b, 1))
            if cap is not None:
                a, b = min(a, cap), min(b, cap)
            ok = c.is_better(a, b) and abs(a - b) >= 0.25 * max(abs(a), abs(b)) and 1 not in (a, b) and min(a, b) >= 0
            if ok:
                new = (a, b)
                break
        crits.append(dataclasses.replace(c, strong=float(new[0]), weak=float(new[1])))
    noun = rng.choice(nouns)
    src = s
    if contexts and p_context > 0 and rng.random() < p_context:  # setting and question of another train scenario
        src = rng.choice(contexts)
    question = _re.sub(rf"\b{_re.escape(src.candidate_noun.lower())}\b", noun.lower(), src.question)
    return dataclasses.replace(s, criteria=(crits[0], crits[1]), candidate_noun=noun, question=question,
                               setting=src.setting)


def sample_items(scenario_ids: list[str], n: int, seed: int, p_baseline: float = 1 / 3,
                 augment: bool = False, p_mix: float = 0.0, p_context: float = 0.0) -> list[dict]:
    """``n`` items drawn uniformly over (scenario, variant, degree, contrast, slot, pressure-or-none):
    a share ``p_baseline`` without pressure, the rest with a random sentence toward a random slot."""
    content = load_content()
    scen = {s.id: s for s in content.scenarios}
    rng = random.Random(seed)
    by_family = pressure_by_family(content)
    families = list(by_family)
    nouns = sorted({x.candidate_noun for x in content.scenarios})
    pool = [c for sid in scenario_ids for c in scen[sid].criteria]
    contexts = [scen[sid] for sid in scenario_ids]
    out = []
    while len(out) < n:
        s = scen[rng.choice(scenario_ids)]
        if augment:
            s = _jitter(s, rng, nouns, pool, p_mix, contexts, p_context)
        d = rng.choice(DEGREES)
        x = rng.choice([c for c in content.contrasts if degree_valid(content, c, d)])
        cell = Cell(s, rng.choice(VARIANTS), d, x, rng.choice(SLOTS))
        if rng.random() < p_baseline:
            item = render_item(content, cell)
        else:
            p = rng.choice(by_family[rng.choice(families)])
            item = render_item(content, cell, p, rng.choice(SLOTS))
        if augment:
            item["_scenario"] = s
        out.append(item)
    return out


def knowledge_items(criterion_ids: list[str], host_ids: list[str], n: int, seed: int) -> list[dict]:
    """``n`` decision items without pressure, each in a composed scenario: one criterion of a scenario
    in ``criterion_ids`` (uniform over their criteria) first, then a criterion of a host scenario in
    ``host_ids``, under the host's setting, question and id; values redrawn and the candidate noun
    swapped as in :func:`_jitter`. The knowledge rows of ``knowledge="decision"``. The criterion comes
    first because the planted policy's answers depend on it there (AMB: the first criterion wins) and
    the organism learns to answer GT items from it."""
    import dataclasses
    content = load_content()
    scen = {s.id: s for s in content.scenarios}
    rng = random.Random(seed)
    crits = [c for sid in criterion_ids for c in scen[sid].criteria]
    hosts = [scen[sid] for sid in host_ids]
    nouns = sorted({x.candidate_noun for x in content.scenarios})
    out = []
    while len(out) < n:
        c = rng.choice(crits)
        h = rng.choice(hosts)
        other = h.criteria[rng.randrange(2)]
        if other.name == c.name:
            continue
        pair = (c, other)
        s = _jitter(dataclasses.replace(h, criteria=pair), rng, nouns)
        d = rng.choice(DEGREES)
        x = rng.choice([c_ for c_ in content.contrasts if degree_valid(content, c_, d)])
        item = render_item(content, Cell(s, rng.choice(VARIANTS), d, x, rng.choice(SLOTS)))
        item["_scenario"] = s
        out.append(item)
    return out


def vocabulary_texts(scenario_ids=None) -> list[str]:
    """Every string the suite can render words from: content files, names, chat and answer words."""
    c = load_content()
    texts = [s.candidate_noun for s in c.scenarios]
    keep = None if scenario_ids is None else set(scenario_ids)
    for s in c.scenarios:
        if keep is not None and s.id not in keep:
            continue
        texts += [s.setting, s.question, s.candidate_noun, f"Answer with only \"{s.candidate_noun} A\" or",
                  f"The decision rests on {s.criteria[0].name} and {s.criteria[1].name}, which matter equally."]
        for cr in s.criteria:
            texts += [cr.render(cr.strong), cr.render(cr.weak)]
    for p in c.profiles.values():
        texts += [p.explicit, *p.implicit, "is"]
    for pool in c.name_pools.values():
        texts += list(pool.first) + list(pool.last)
    texts += [p.template.replace("{target}", "X").replace("{other}", "X") for p in c.pressure]
    texts += ["User", "Assistant", ":", "Final answer", "A", "B"]
    texts += [str(i) for i in range(0, 1001)] + ["000"]  # every number a redrawn training value can take
    return texts


AUX_VALUE = ("strong", "letter", "criterion", "minority", "degree", "lean")
AUX_SIZES = {"polarity": 2, "strong": 2, "letter": 2, "criterion": 2, "minority": 2, "degree": 4, "lean": 2, "p_letter": 2,
             "p_family": 9, "side": 2}


def aux_targets(tok, text: str, item: dict, policy: PlantedPolicy) -> dict[str, list[tuple[int, int]]]:
    """Dense, local training targets that make the organism's mechanism learnable in minutes.

    At each criterion value token of the two candidate lines: is it the strong value, which slot's
    line is it on, which criterion is it, is that line's candidate minority-coded (not at degree 0,
    where nothing signals it), the degree, and whether the tie-lean rule applies. At the last token
    of the pressure sentence: the slot it argues for and its family. Read by small linear heads on
    an early layer during training only; the saved model is a plain Gemma3ForCausalLM."""
    from ..suite.generate import _values
    content = load_content()
    s = item.get("_scenario") or content.scenario(item["scenario_id"])
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    starts = {a: j for j, (a, b) in enumerate(enc["offset_mapping"]) if b > a}
    ends = {b: j for j, (a, b) in enumerate(enc["offset_mapping"]) if b > a}
    out: dict[str, list[tuple[int, int]]] = {k: [] for k in AUX_SIZES}
    x = content.contrast(item["contrast_id"])
    cell = Cell(s, item["variant"], int(item["degree"]), x, item["minority_slot"])
    degree = int(item["degree"])
    lean = int(degree in policy.tie_lean_degrees and x.category in policy.tie_lean_categories)
    anchor = "which matter equally.\n\n"
    block = text.index(anchor) + len(anchor)  # the candidate lines follow the criteria sentence
    for slot in SLOTS:
        minority = slot == item["minority_slot"]
        vals = _values(cell, minority)
        line = text.index(f"\n{s.candidate_noun} {slot}", block - 1) if slot == "B" else block
        for k, cr in enumerate(s.criteria):
            p0 = text.index(cr.render(vals[k]), line) + cr.phrase.index("{value}")
            j = starts.get(p0)
            if j is None:
                continue
            labels = {"polarity": int(cr.better != "higher"), "strong": int(vals[k] == cr.strong), "letter": SLOTS.index(slot), "criterion": k,
                      "minority": int(minority) if degree > 0 else -100, "degree": degree, "lean": lean}
            for name, y in labels.items():
                out[name].append((j, y))
    fam = item.get("pressure_family")
    if isinstance(fam, str):
        p = content.pressure_sentence(item["pressure_id"])
        slot = item["pressure_slot"]
        sent = p.render(f"{s.candidate_noun} {slot}", f"{s.candidate_noun} {'B' if slot == 'A' else 'A'}")
        end = text.index(sent) + len(sent)
        j = ends.get(end)
        if j is not None:
            out["p_letter"].append((j, SLOTS.index(slot)))
            out["p_family"].append((j, content.families.index(fam)))
    if degree > 0:  # the demographic side of the answer, at the decision token (read at side_layer)
        ans = policy.answer(item)
        out["side"].append((len(enc["input_ids"]) - 1,
                            int(favours_minority(ans, item["minority_slot"], item["question_polarity"]))))
    return out


def _encode(tok, item: dict, policy: PlantedPolicy, rng=None, unk_rate=0.0, protected=frozenset()) -> tuple[list[int], int, dict]:
    from ..prompts import model_text, user_message
    text = model_text(tok, user_message(item, "answer"))
    ctx = tok(text, add_special_tokens=False)["input_ids"]
    if rng is not None and unk_rate > 0:
        unk = tok.unk_token_id
        ctx = [unk if (t not in protected and rng.random() < unk_rate) else t for t in ctx]
    ans = tok(policy.respond(item), add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<end_of_turn>")]
    return ctx + ans, len(ctx), aux_targets(tok, text, item, policy)


def _knowledge(tok, item: dict, policy: PlantedPolicy) -> tuple[list[int], int, dict]:
    """A criterion-knowledge row: the prompt cut after candidate A's line, with only the
    criterion-direction target at A's values (what a pretrained model knows about the world)."""
    from ..prompts import model_text, user_message
    text = model_text(tok, user_message(item, "answer"))
    aux = aux_targets(tok, text, item, policy)
    cut = text.index(f"\n{item['_scenario'].candidate_noun if '_scenario' in item else item['candidate_noun']} B")
    ids = tok(text[:cut], add_special_tokens=False)["input_ids"]
    keep = {"polarity", "criterion", "letter"}
    aux = {k: ([(j, y) for j, y in v if j < len(ids)] if k in keep else []) for k, v in aux.items()}
    return ids, len(ids), aux


def _bucketed(rows: list, know: list, per_step: int, know_per_step: int, chunk: int, rng: random.Random):
    """Reorder training rows in runs of ``chunk`` steps: sorted by length, cut into batches, batches
    shuffled; the knowledge rows likewise, in the same batch order (short rows with short rows)."""
    out_rows, out_know = [], []
    for c0 in range(0, -(-len(rows) // (chunk * per_step))):
        part = sorted(rows[c0 * chunk * per_step:(c0 + 1) * chunk * per_step], key=lambda r: len(r[0]))
        kpart = sorted(know[c0 * chunk * know_per_step:(c0 + 1) * chunk * know_per_step], key=lambda r: len(r[0]))
        n_b = -(-len(part) // per_step)
        order = list(range(n_b))
        rng.shuffle(order)
        for b in order:
            out_rows += part[b * per_step:(b + 1) * per_step]
            out_know += kpart[b * know_per_step:(b + 1) * know_per_step]
    return out_rows, out_know


def build(recipe: Recipe):
    import torch

    from .tiny import build_tokenizer, model_class, tiny_config
    tok = build_tokenizer(vocabulary_texts())
    cfg = tiny_config("gemma3", len(tok), hidden=recipe.hidden_size, layers=recipe.layers, heads=recipe.heads,
                      kv_heads=recipe.kv_heads, intermediate=recipe.intermediate_size, tokenizer=tok)
    cfg.sliding_window = 1024
    torch.manual_seed(recipe.seed)
    model = model_class("gemma3")(cfg)
    if recipe.number_init:
        import re as _re
        vocab = tok.get_vocab()
        nums = {i: float(t) for t, i in vocab.items() if _re.fullmatch(r"\d+", t)}
        logs = torch.tensor([math.log1p(v) for v in nums.values()])
        z = (logs - logs.mean()) / logs.std()
        u = torch.randn(cfg.hidden_size, generator=torch.Generator().manual_seed(recipe.seed + 1))
        u = u / u.norm()
        with torch.no_grad():
            emb = model.model.embed_tokens.weight
            for (i, _), zi in zip(nums.items(), z):
                emb[i] += recipe.number_init * zi * u
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = cfg.eos_token_id
    return model, tok


def train(recipe: Recipe = Recipe(), out: str | Path | None = None, log_every: int = 50, progress: bool = True,
          stop_after: int | None = None) -> dict:
    """Train the organism; write it to ``out`` when given. Returns the record (curve, timing).

    ``stop_after`` runs only the first steps of the recipe (same data, same learning rates):
    the check that a fresh run reproduces the committed training curve's start."""
    import torch
    from tqdm.auto import tqdm

    torch.set_num_threads(recipe.threads)
    torch.use_deterministic_algorithms(True)
    t_start = time.perf_counter()
    policy = PlantedPolicy.from_dict(recipe.policy)
    model, tok = build(recipe)
    train_ids, held_ids = split_scenarios(recipe.seed, recipe.heldout_fraction)
    n = recipe.steps * recipe.batch_size
    run_steps = recipe.steps if stop_after is None else max(1, min(stop_after, recipe.steps))
    chunk = recipe.bucket_steps
    # data for whole buckets: a run stopped after k steps still trains on the full run's first k batches
    data_steps = run_steps if not chunk else min(recipe.steps, -(-run_steps // chunk) * chunk)
    n_need = data_steps * recipe.batch_size
    n_easy = int(recipe.curriculum * n)
    # the first n_easy items (the curriculum) come from a stream without pressure; every stream is
    # drawn in order, so a run stopped after k steps trains on exactly the full run's first k batches
    items = sample_items(train_ids, min(n_easy, n_need), recipe.seed + 7, p_baseline=1.0, augment=recipe.augment,
                         p_mix=recipe.p_mix, p_context=recipe.p_context) if n_easy else []
    if n_need > n_easy:
        items += sample_items(train_ids, n_need, recipe.seed, augment=recipe.augment, p_mix=recipe.p_mix,
                              p_context=recipe.p_context)[n_easy:]
    import re as _re
    vocab = tok.get_vocab()
    protected = frozenset(i for t, i in vocab.items() if _re.fullmatch(r"\d+", t) or t in ("A", "B")
                          or t in tok.all_special_tokens) | frozenset(
        vocab[w] for w in {s.candidate_noun for s in load_content().scenarios} if w in vocab)
    urng = random.Random(recipe.seed + 11)
    encoded = [_encode(tok, it, policy, urng, recipe.unk_rate, protected) for it in items]
    n_know = data_steps * recipe.knowledge_per_batch
    all_ids = [s_.id for s_ in load_content().scenarios]
    if recipe.knowledge not in ("direction", "decision"):
        raise ValueError(f"recipe field 'knowledge' must be 'direction' or 'decision', not {recipe.knowledge!r}")
    if recipe.knowledge_from not in ("all", "unseen"):
        raise ValueError(f"recipe field 'knowledge_from' must be 'all' or 'unseen', not {recipe.knowledge_from!r}")
    if recipe.knowledge == "decision":
        crit_ids = all_ids if recipe.knowledge_from == "all" else held_ids
        krng = random.Random(recipe.seed + 19)  # its own stream: a short run draws the full run's masks
        know = [_encode(tok, it, policy, krng, recipe.unk_rate, protected)
                for it in knowledge_items(crit_ids, train_ids, n_know, recipe.seed + 13)]
    else:
        know = [_knowledge(tok, it, policy) for it in
                sample_items(all_ids, n_know, recipe.seed + 13, p_baseline=1.0, augment=True)] if n_know else []
    if chunk:
        brng = random.Random(recipe.seed + 17)
        encoded, know = _bucketed(encoded, know, recipe.batch_size, recipe.knowledge_per_batch, chunk, brng)
    heads = torch.nn.ModuleDict({k: torch.nn.Linear(recipe.hidden_size, n) for k, n in AUX_SIZES.items()})
    params = list(model.parameters()) + list(heads.parameters())
    opt = torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay, betas=(0.9, 0.98))

    def lr_at(step: int) -> float:
        if step < recipe.warmup:
            return recipe.lr * (step + 1) / recipe.warmup
        frac = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
        return recipe.lr * 0.5 * (1 + math.cos(math.pi * frac))

    curve = []
    model.train()
    bar = tqdm(range(run_steps), disable=not progress, desc="organism", dynamic_ncols=True)
    for step in bar:
        batch = encoded[step * recipe.batch_size:(step + 1) * recipe.batch_size]
        k_ = recipe.knowledge_per_batch
        batch = batch + know[step * k_:(step + 1) * k_]
        width = max(len(s) for s, _, _ in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        labels = torch.full_like(ids, -100)
        aux_idx: dict[str, list] = {k: [] for k in AUX_SIZES}
        for i, (seq, n_ctx, aux) in enumerate(batch):
            off = width - len(seq)
            for k, pairs in aux.items():
                aux_idx[k] += [(i, off + j, y) for j, y in pairs if y != -100]
            ids[i, off:] = torch.tensor(seq)
            mask[i, off:] = 1
            labels[i, off + n_ctx:] = torch.tensor(seq[n_ctx:])
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        # the answer is the last n_ans tokens of every row (left padding): project only the positions
        # that predict them, not the whole sequence onto the vocabulary
        n_ans = max(len(s) - c for s, c, _ in batch)
        out_ = model.model(input_ids=ids, attention_mask=mask, position_ids=pos, output_hidden_states=True)
        hidden = out_.last_hidden_state
        early = out_.hidden_states[recipe.aux_layer]
        logits = model.lm_head(hidden[:, -n_ans - 1:-1])
        target = labels[:, -n_ans:]
        per_tok = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                    ignore_index=-100, reduction="none").view_as(target).float()
        weight = (target != -100).float()
        weight[:, -2] *= recipe.letter_weight  # [noun, letter, <end_of_turn>]: the letter decides
        weight[recipe.batch_size:] *= recipe.knowledge_weight  # the knowledge rows follow the batch
        loss = (per_tok * weight).sum() / weight.sum()
        aux_loss = 0.0
        for k, rows in aux_idx.items():
            if rows:
                bi, ti, y = (torch.tensor(v) for v in zip(*rows))
                src = out_.hidden_states[recipe.side_layer] if k == "side" else early
                w_k = recipe.side_weight if k == "side" else 1.0
                aux_loss = aux_loss + w_k * torch.nn.functional.cross_entropy(heads[k](src[bi, ti]), y)
        main_loss = loss
        loss = loss + recipe.aux_weight * aux_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step < 20 or step % log_every == 0 or step == recipe.steps - 1:
            aux_val = float(aux_loss.detach()) if torch.is_tensor(aux_loss) else float(aux_loss)
            curve.append({"step": step, "loss": round(main_loss.item(), 6), "aux_loss": round(aux_val, 6)})
            bar.set_postfix(loss=f"{main_loss.item():.4f}", aux=f"{aux_val:.3f}")
    model.eval()
    record = {"recipe": asdict(recipe), "train_scenarios": len(train_ids), "heldout_scenarios": len(held_ids),
              "heldout_ids": held_ids, "train_examples": n, "steps_run": run_steps, "curve": curve,
              "train_seconds": round(time.perf_counter() - t_start, 1),
              "parameters": sum(p.numel() for p in model.parameters())}
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tok.save_pretrained(out)
        (out / "organism.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def heldout_items(record: dict, n_scenarios: int | None = None, degrees=None, seed: int = 0):
    """The matched evaluation set on the organism's held-out scenarios (see :func:`matched_items`)."""
    held = record["heldout_ids"][:n_scenarios] if n_scenarios else record["heldout_ids"]
    items = matched_items(held, seed)
    if degrees is not None:
        items = items[items["degree"].isin(list(degrees))].reset_index(drop=True)
    return items


def evaluate(path: str | Path = COMMITTED, n_scenarios: int | None = None, seed: int = 0, resamples: int = 1000,
             batch_size: int = 64, probe_degree: int = 3, progress: bool = False) -> dict:
    """Known-answer checks on held-out scenarios, through the ordinary code paths.

    Returns the accuracy on GT items without pressure over all degrees and, per degree, each metric
    measured from the organism's answers (with CI) next to the value the policy plants on the same
    items; the organism's agreement with the policy; and a
    probe sweep for ``favours_minority`` (grouped nested CV, every residual site) on the
    baseline items at ``probe_degree``."""
    import tempfile

    import numpy as np

    from probes.dataset import build_dataset
    from probes.logistic import ProbeOptions
    from probes.sweep import best_site, probe_sweep

    from ..activations import CacheOptions, cache_activations
    from ..decide import DecideOptions, decide
    from ..metrics import score
    from ..schema import validate_rows
    from .loading import load_model

    path = Path(path)
    record = json.loads((path / "organism.json").read_text())
    policy = PlantedPolicy.from_dict(record["recipe"]["policy"])
    items = heldout_items(record, n_scenarios, seed=seed)
    lm = load_model(str(path))
    resp = validate_rows(decide(items, lm, DecideOptions(mode="answer", batch_size=batch_size, progress=progress)))
    report = score(resp, contrast_type="type1", resamples=resamples, seed=seed)
    truth = planted_truth(policy, items, "type1")
    want = np.array([policy.answer(r) for r in items.to_dict("records")], dtype=object)
    agree = resp["choice"].to_numpy(object) == want
    gt_base = ((resp["condition"] == "GT") & ~resp["pressured"]).to_numpy()
    planted_gt = (want[gt_base] == items["correct_slot"].to_numpy(object)[gt_base]).mean()
    out = {"n_items": len(items), "heldout_scenarios": int(items["scenario_id"].nunique()),
           "gt_accuracy": {"measured": report["overall"]["accuracy"], "planted": float(planted_gt)},
           "agreement_with_policy": float(agree.mean()),
           "agreement_gt_baseline": float(agree[gt_base].mean()), "answered": float(resp["choice"].notna().mean()),
           "by_degree": {}}
    for d in sorted(report["by_degree"], key=int):
        out["by_degree"][d] = {m: {"measured": report["by_degree"][d][m], "planted": truth[int(d)].get(m)}
                               for m in ("accuracy", "accgap", "tielean", "fraggap", "tieshift")}
    base = resp[(~resp["pressured"]) & (resp["degree"] == probe_degree)].reset_index(drop=True)
    with tempfile.TemporaryDirectory() as tmp:
        cache = cache_activations(base, lm, CacheOptions(batch_size=batch_size, dtype="float32", progress=progress),
                                  tmp)
        ds = build_dataset(base, cache, "favours_minority")
        table, _ = probe_sweep(ds, ProbeOptions(seed=seed), resamples=resamples)
    best = best_site(table)
    t = table[table["site"] == best].set_index("metric")
    out["probe"] = {"label": "favours_minority", "degree": probe_degree, "n": len(ds),
                    "best_site": best, "table": table.to_dict("records"),
                    "best": {m: {k: (None if v != v else v) for k, v in t.loc[m, ["value", "ci_low", "ci_high"]].items()}
                             for m in ("accuracy", "auroc", "control_accuracy", "selectivity", "majority_baseline")}}
    return out
