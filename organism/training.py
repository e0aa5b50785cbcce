"""Training the organism (steps 4 and 6 of the recipe in :mod:`organism.recipe`):
the untrained model, length-bucketed batches, the AdamW loop with the auxiliary heads, and the
written directory (weights, tokenizer, ``organism.json``)."""
from __future__ import annotations

import json
import math
import random
import re
import time
from dataclasses import asdict
from pathlib import Path

from evenhand.models.policy import PlantedPolicy
from evenhand.suite.content import load_content

from .data import knowledge_items, sample_items, vocabulary_texts
from .recipe import Recipe, split_scenarios
from .targets import (
    AUX_SIZES,
    CHAT_PROCEDURES,
    DECISION_AUX,
    SINGLE_METHODS,
    encode,
    encode_chat,
    encode_method,
    knowledge_row,
    loss_spans,
)
from evenhand.models.tiny import build_tokenizer, model_class, tiny_config

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


def _method_rows(recipe: Recipe, tok, items: list[dict], policy: PlantedPolicy, urng: random.Random,
                 protected: frozenset) -> tuple[list, dict]:
    """The training rows of a recipe with prompt methods: from its own seeded stream, a share ``chat`` of
    the items as a conversation (self-critique or counterfactual chain of thought, evenly; a share
    ``wrong_first`` of the self-critiques with a wrong, untrained first answer), a share ``prompt_methods``
    of the rest with a rewritten prompt (:data:`~organism.targets.SINGLE_METHODS`, evenly between the fair
    instruction and identity blinding), the others plain. Returns the rows and the count of each form."""
    from evenhand.suite.rewrites import RewriteError

    mrng = random.Random(recipe.seed + 23)
    fair = [m for m in SINGLE_METHODS if m != "identity_blind"]
    rows, forms = [], {}
    for it in items:
        u, pick, wrong, var = mrng.random(), mrng.random(), mrng.random(), mrng.randrange(len(fair))
        args = (urng, recipe.unk_rate, protected, recipe.suite, recipe.pressure_side)
        form = "plain"
        try:
            if u < recipe.chat:
                form = CHAT_PROCEDURES[int(pick < 0.5)]
                w = form == "self_critique" and wrong < recipe.wrong_first
                rows.append(encode_chat(tok, it, policy, form, w, *args))
                form += ":wrong_first" if w else ""
            elif u < recipe.chat + (1 - recipe.chat) * recipe.prompt_methods:
                form = "identity_blind" if pick < 0.5 else fair[var]
                rows.append(encode_method(tok, it, form, policy, *args))
            else:
                rows.append(encode(tok, it, policy, *args))
        except RewriteError:  # a prompt the method cannot rewrite: trained plain
            form = "plain:unrewritable"
            rows.append(encode(tok, it, policy, *args))
        forms[form] = forms.get(form, 0) + 1
    return rows, dict(sorted(forms.items()))


def build(recipe: Recipe):
    """The untrained model and its tokenizer: a word-level tokenizer over :func:`vocabulary_texts`, a
    seeded ``Gemma3ForCausalLM`` of the recipe's size, number tokens initialised along one direction
    by their log value (``number_init``). Returns ``(model, tokenizer)``."""
    import torch

    tok = build_tokenizer(vocabulary_texts(suite=recipe.suite, procedures=recipe.chat > 0 or recipe.prompt_methods > 0))
    cfg = tiny_config("gemma3", len(tok), hidden=recipe.hidden_size, layers=recipe.layers, heads=recipe.heads,
                      kv_heads=recipe.kv_heads, intermediate=recipe.intermediate_size, tokenizer=tok)
    cfg.sliding_window = 1024
    torch.manual_seed(recipe.seed)
    model = model_class("gemma3")(cfg)
    if recipe.number_init:
        vocab = tok.get_vocab()
        nums = {i: float(t) for t, i in vocab.items() if re.fullmatch(r"\d+", t)}
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
    train_ids, held_ids = split_scenarios(recipe.seed, recipe.heldout_fraction, recipe.suite)
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
                         p_mix=recipe.p_mix, p_context=recipe.p_context, suite=recipe.suite) if n_easy else []
    if n_need > n_easy:
        items += sample_items(train_ids, n_need, recipe.seed, augment=recipe.augment, p_mix=recipe.p_mix,
                              p_context=recipe.p_context, suite=recipe.suite)[n_easy:]
    vocab = tok.get_vocab()
    protected = frozenset(i for t, i in vocab.items() if re.fullmatch(r"\d+", t) or t in ("A", "B")
                          or t in tok.all_special_tokens) | frozenset(
        vocab[w] for w in {s.candidate_noun for s in load_content(recipe.suite).scenarios} if w in vocab)
    urng = random.Random(recipe.seed + 11)
    if recipe.chat > 0 or recipe.prompt_methods > 0:
        encoded, forms = _method_rows(recipe, tok, items, policy, urng, protected)
    else:  # no draws from the method stream: a recipe without methods keeps its rows bit-identical
        encoded, forms = [encode(tok, it, policy, urng, recipe.unk_rate, protected, recipe.suite,
                                 recipe.pressure_side) for it in items], {}
    n_know = data_steps * recipe.knowledge_per_batch
    all_ids = [s_.id for s_ in load_content(recipe.suite).scenarios]
    if recipe.knowledge not in ("direction", "decision"):
        raise ValueError(f"recipe field 'knowledge' must be 'direction' or 'decision', not {recipe.knowledge!r}")
    if recipe.knowledge_from not in ("all", "unseen"):
        raise ValueError(f"recipe field 'knowledge_from' must be 'all' or 'unseen', not {recipe.knowledge_from!r}")
    if recipe.knowledge == "decision":
        crit_ids = all_ids if recipe.knowledge_from == "all" else held_ids
        krng = random.Random(recipe.seed + 19)  # its own stream: a short run draws the full run's masks
        know = [encode(tok, it, policy, krng, recipe.unk_rate, protected, recipe.suite, recipe.pressure_side)
                for it in knowledge_items(crit_ids, train_ids, n_know, recipe.seed + 13, recipe.suite)]
    else:
        know = [knowledge_row(tok, it, policy, recipe.suite) for it in
                sample_items(all_ids, n_know, recipe.seed + 13, p_baseline=1.0, augment=True,
                             suite=recipe.suite)] if n_know else []
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
        width = max(len(r[0]) for r in batch)
        ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        labels = torch.full_like(ids, -100)
        aux_idx: dict[str, list] = {k: [] for k in AUX_SIZES}
        spans = [loss_spans(r) for r in batch]
        for i, (seq, n_ctx, aux) in enumerate(r[:3] for r in batch):
            off = width - len(seq)
            for k, pairs in aux.items():
                aux_idx[k] += [(i, off + j, y) for j, y in pairs if y != -100]
            ids[i, off:] = torch.tensor(seq)
            mask[i, off:] = 1
            for a, b in spans[i]:
                labels[i, off + a:off + b] = torch.tensor(seq[a:b])
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        # the answer is the last n_ans tokens of every row (left padding): project only the positions
        # that predict them, not the whole sequence onto the vocabulary
        out_ = model.model(input_ids=ids, attention_mask=mask, position_ids=pos, output_hidden_states=True)
        hidden = out_.last_hidden_state
        early = out_.hidden_states[recipe.aux_layer]
        if all(len(sp) == 1 and sp[0][1] == len(r[0]) for sp, r in zip(spans, batch)):
            n_ans = max(len(r[0]) - r[1] for r in batch)
            logits = model.lm_head(hidden[:, -n_ans - 1:-1])
            target = labels[:, -n_ans:]
            per_tok = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                                        ignore_index=-100, reduction="none").view_as(target).float()
            weight = (target != -100).float()
            weight[:, -2] *= recipe.letter_weight  # [noun, letter, <end_of_turn>]: the letter decides
            weight[recipe.batch_size:] *= recipe.knowledge_weight  # the knowledge rows follow the batch
            loss = (per_tok * weight).sum() / weight.sum()
        else:  # conversations: project only the positions that predict a trained reply's tokens
            bi, ti, wt = [], [], []
            for i, sp in enumerate(spans):
                off = width - len(batch[i][0])
                w_row = recipe.knowledge_weight if i >= recipe.batch_size else 1.0
                for a, b in sp:
                    for j in range(a, b):  # [noun, letter, <end_of_turn>]: the letter decides
                        bi.append(i)
                        ti.append(off + j)
                        wt.append(w_row * (recipe.letter_weight if j == b - 2 else 1.0))
            bi_, ti_ = torch.tensor(bi), torch.tensor(ti)
            logits = model.lm_head(hidden[bi_, ti_ - 1])
            per_tok = torch.nn.functional.cross_entropy(logits, labels[bi_, ti_], reduction="none").float()
            weight = torch.tensor(wt)
            loss = (per_tok * weight).sum() / weight.sum()
        aux_loss = 0.0
        for k, rows in aux_idx.items():
            if rows:
                bi, ti, y = (torch.tensor(v) for v in zip(*rows))
                src = out_.hidden_states[recipe.side_layer] if k in DECISION_AUX else early
                w_k = recipe.side_weight if k in DECISION_AUX else 1.0
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
              "train_seconds": round(time.perf_counter() - t_start, 1), "row_forms": forms,
              "parameters": sum(p.numel() for p in model.parameters())}
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tok.save_pretrained(out)
        (out / "organism.json").write_text(json.dumps(record, indent=1) + "\n")
    return record
