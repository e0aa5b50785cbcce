"""The model organism: a small Gemma3ForCausalLM trained from scratch to follow a planted policy.

The recipe (:class:`Recipe`, :func:`train`) is deterministic from its seed:

1. scenarios are split by a stable hash into train and held-out sets;
2. a word-level tokenizer is built from the whole suite's vocabulary (every
   content file string and the rendered prompts), so held-out prompts have no
   unknown words;
3. training items are drawn from the train scenarios (every condition variant,
   degree, contrast type and pressure family), labelled by
   :class:`~evenhand.models.policy.PlantedPolicy`, and rendered exactly as the
   decision code renders them (chat template, then the label and ``<end_of_turn>``);
4. a ``Gemma3ForCausalLM`` (the transformers class, so its modules and hook sites
   are those of Gemma-3-12B) is trained with AdamW on the loss of the answer
   tokens only.

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

from ..suite.content import load_content
from ..suite.generate import DEGREES, SLOTS, VARIANTS, Cell, degree_valid, render_item, stable_hash
from .policy import PlantedPolicy

COMMITTED = Path(__file__).resolve().parent / "organism"


@dataclass(frozen=True)
class Recipe:
    """Everything that determines the organism (with the seed)."""
    seed: int = 0
    heldout_fraction: float = 0.2
    hidden_size: int = 128
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    intermediate_size: int = 384
    steps: int = 1500
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 100
    weight_decay: float = 0.01
    threads: int = 2
    policy: dict = field(default_factory=lambda: PlantedPolicy().as_dict())


def split_scenarios(seed: int, heldout_fraction: float) -> tuple[list[str], list[str]]:
    ids = [s.id for s in load_content().scenarios]
    held = [i for i in ids if (stable_hash("organism-split", seed, i) % 1000) < heldout_fraction * 1000]
    train = [i for i in ids if i not in set(held)]
    return train, held


def sample_items(scenario_ids: list[str], n: int, seed: int) -> list[dict]:
    """``n`` items drawn uniformly over (scenario, variant, degree, contrast, slot, pressure-or-none):
    a third without pressure, the rest with a random sentence toward a random slot."""
    content = load_content()
    scen = {s.id: s for s in content.scenarios}
    rng = random.Random(seed)
    by_family: dict[str, list] = {}
    for p in content.pressure:
        by_family.setdefault(p.family, []).append(p)
    families = list(by_family)
    out = []
    while len(out) < n:
        s = scen[rng.choice(scenario_ids)]
        d = rng.choice(DEGREES)
        x = rng.choice([c for c in content.contrasts if degree_valid(content, c, d)])
        cell = Cell(s, rng.choice(VARIANTS), d, x, rng.choice(SLOTS))
        if rng.random() < 1 / 3:
            out.append(render_item(content, cell))
        else:
            p = rng.choice(by_family[rng.choice(families)])
            out.append(render_item(content, cell, p, rng.choice(SLOTS)))
    return out


def vocabulary_texts() -> list[str]:
    """Every string the suite can render words from: content files, names, chat and answer words."""
    c = load_content()
    texts = []
    for s in c.scenarios:
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
    return texts


def _encode(tok, item: dict, policy: PlantedPolicy) -> tuple[list[int], int]:
    from ..prompts import model_text, user_message
    text = model_text(tok, user_message(item, "answer"))
    ctx = tok(text, add_special_tokens=False)["input_ids"]
    ans = tok(policy.respond(item), add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids("<end_of_turn>")]
    return ctx + ans, len(ctx)


def build(recipe: Recipe):
    import torch

    from .tiny import build_tokenizer, model_class, tiny_config
    tok = build_tokenizer(vocabulary_texts())
    cfg = tiny_config("gemma3", len(tok), hidden=recipe.hidden_size, layers=recipe.layers, heads=recipe.heads,
                      kv_heads=recipe.kv_heads, intermediate=recipe.intermediate_size, tokenizer=tok)
    cfg.sliding_window = 1024
    torch.manual_seed(recipe.seed)
    model = model_class("gemma3")(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = cfg.eos_token_id
    return model, tok


def train(recipe: Recipe = Recipe(), out: str | Path | None = None, log_every: int = 50, progress: bool = True) -> dict:
    """Train the organism; write it to ``out`` when given. Returns the record (curve, timing)."""
    import torch
    from tqdm.auto import tqdm

    torch.set_num_threads(recipe.threads)
    torch.use_deterministic_algorithms(True)
    t_start = time.perf_counter()
    policy = PlantedPolicy.from_dict(recipe.policy)
    model, tok = build(recipe)
    train_ids, held_ids = split_scenarios(recipe.seed, recipe.heldout_fraction)
    n = recipe.steps * recipe.batch_size
    items = sample_items(train_ids, n, recipe.seed)
    encoded = [_encode(tok, it, policy) for it in items]
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay, betas=(0.9, 0.98))

    def lr_at(step: int) -> float:
        if step < recipe.warmup:
            return recipe.lr * (step + 1) / recipe.warmup
        frac = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
        return recipe.lr * 0.5 * (1 + math.cos(math.pi * frac))

    curve = []
    model.train()
    bar = tqdm(range(recipe.steps), disable=not progress, desc="organism", dynamic_ncols=True)
    for step in bar:
        batch = encoded[step * recipe.batch_size:(step + 1) * recipe.batch_size]
        width = max(len(s) for s, _ in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        labels = torch.full_like(ids, -100)
        for i, (seq, n_ctx) in enumerate(batch):
            off = width - len(seq)
            ids[i, off:] = torch.tensor(seq)
            mask[i, off:] = 1
            labels[i, off + n_ctx:] = torch.tensor(seq[n_ctx:])
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        out_ = model(input_ids=ids, attention_mask=mask, position_ids=pos, labels=labels)
        opt.zero_grad(set_to_none=True)
        out_.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % log_every == 0 or step == recipe.steps - 1:
            curve.append({"step": step, "loss": round(float(out_.loss), 6)})
            bar.set_postfix(loss=f"{float(out_.loss):.4f}")
    model.eval()
    record = {"recipe": asdict(recipe), "train_scenarios": len(train_ids), "heldout_scenarios": len(held_ids),
              "heldout_ids": held_ids, "train_examples": n, "curve": curve,
              "train_seconds": round(time.perf_counter() - t_start, 1),
              "parameters": sum(p.numel() for p in model.parameters())}
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tok.save_pretrained(out)
        (out / "organism.json").write_text(json.dumps(record, indent=1) + "\n")
    return record
