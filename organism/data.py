"""The organism's training data: augmented training items, criterion-knowledge items and the
vocabulary its word-level tokenizer is built from (steps 2, 3 and 5 of the recipe in
:mod:`organism.recipe`)."""
from __future__ import annotations

import random
import re

from evenhand.suite.content import load_content
from evenhand.suite.generate import DEGREES, SLOTS, VARIANTS, Cell, cell_valid, render_item
from evenhand.suite.matched import pressure_by_family
from evenhand.suite.rewrites import PROCEDURE_TEXTS

from .recipe import ORGANISM_SUITE

def jitter(s, rng: random.Random, nouns: list[str], pool=None, p_mix: float = 0.0, contexts=None,
            p_context: float = 0.0):
    """A training variant of a scenario: criterion values redrawn (same direction, margin >= 25%) and
    the candidate noun swapped for another suite noun, so that the organism must compare numbers and
    copy labels instead of memorising which value is strong in which scenario."""
    import dataclasses
    import re
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
    question = re.sub(rf"\b{re.escape(src.candidate_noun.lower())}\b", noun.lower(), src.question)
    return dataclasses.replace(s, criteria=(crits[0], crits[1]), candidate_noun=noun, question=question,
                               setting=src.setting)


def sample_items(scenario_ids: list[str], n: int, seed: int, p_baseline: float = 1 / 3,
                 augment: bool = False, p_mix: float = 0.0, p_context: float = 0.0,
                 suite: str = ORGANISM_SUITE) -> list[dict]:
    """``n`` items drawn uniformly over (scenario, variant, degree, contrast, slot, pressure-or-none):
    a share ``p_baseline`` without pressure, the rest with a random sentence toward a random slot
    (items of suite version ``suite``)."""
    content = load_content(suite)
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
            s = jitter(s, rng, nouns, pool, p_mix, contexts, p_context)
        d = rng.choice(DEGREES)
        x = rng.choice([c for c in content.contrasts if cell_valid(content, s, c, d)])
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


def knowledge_items(criterion_ids: list[str], host_ids: list[str], n: int, seed: int,
                    suite: str = ORGANISM_SUITE) -> list[dict]:
    """``n`` decision items without pressure, each in a composed scenario: one criterion of a scenario
    in ``criterion_ids`` (uniform over their criteria) first, then a criterion of a host scenario in
    ``host_ids``, under the host's setting, question and id; values redrawn and the candidate noun
    swapped as in :func:`jitter`. The knowledge rows of ``knowledge="decision"``. The criterion comes
    first because the planted policy's answers depend on it there (AMB: the first criterion wins) and
    the organism learns to answer GT items from it."""
    import dataclasses
    content = load_content(suite)
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
        s = jitter(dataclasses.replace(h, criteria=pair), rng, nouns)
        d = rng.choice(DEGREES)
        x = rng.choice([c_ for c_ in content.contrasts if cell_valid(content, s, c_, d)])
        item = render_item(content, Cell(s, rng.choice(VARIANTS), d, x, rng.choice(SLOTS)))
        item["_scenario"] = s
        out.append(item)
    return out


def vocabulary_texts(scenario_ids: list[str] | None = None, suite: str = ORGANISM_SUITE,
                     procedures: bool = False) -> list[str]:
    """Every string suite version ``suite`` can render words from: content files, names, chat and
    answer words; with ``procedures`` also the prompt methods' texts (their ``{...}`` fields left out)."""
    c = load_content(suite)
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
    if procedures:
        texts += [re.sub(r"\{\w+\}", " ", t) for t in PROCEDURE_TEXTS]
    return texts
