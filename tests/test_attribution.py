"""Direct logit attribution: the components add up to the model's own logit difference on tiny
Gemma3 and Qwen2 models, the sign follows the minority slot, the aggregate's CIs, and a run end to end."""
from __future__ import annotations

import copy
import json
from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import pytest
import torch

from evenhand.running.activations import boot_bridge
from evenhand.running.decisions import DecideOptions, decide
from evenhand.models.loading import ModelSpec
from evenhand.vocab.prompts import continuation, labels, model_text, user_message
from probes.attribution import (COMPONENTS, CONDITIONS, aggregate, attribute, attribution_figure, decision_tokens,
                                favoured_slot, run_attribution)

ARCHS = ("gemma3", "qwen2")
TOL = 1e-5  # float32 tiny models: the decomposition is exact up to rounding


@pytest.fixture(scope="module")
def items(smoke_items):
    """Degrees 1-3, both minority slots, pressured and not: a dozen items of several scenarios."""
    return smoke_items[smoke_items["degree"] > 0].groupby(["degree", "minority_slot"]).head(2).reset_index(drop=True)


def wide(table: pd.DataFrame) -> pd.DataFrame:
    return table.pivot(index="item_id", columns="site", values="value")


def hf_logits(lm, item: dict) -> tuple[float, float]:
    """The Hugging Face model's own logits of the favoured and the other label at the first token where
    the two labels differ, from one unpadded forward pass (independent of the attribution code)."""
    text = model_text(lm.tokenizer, user_message(item))
    full = {s: lm.tokenizer(text + continuation(text, lab), add_special_tokens=False)["input_ids"]
            for s, lab in zip("AB", labels(item))}
    j = next(k for k, (a, b) in enumerate(zip(full["A"], full["B"])) if a != b)
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([full["A"][:j]])).logits[0, -1]
    fav = favoured_slot(item)
    other = "B" if fav == "A" else "A"
    return float(logits[full[fav][j]]), float(logits[full[other][j]])


@pytest.mark.parametrize("arch", ARCHS)
def test_components_sum_to_the_models_logit_difference(tiny, arch, items):
    lm = tiny[arch]
    table = attribute(items, lm, batch_size=4, progress=False)
    w = wide(table)
    n_layers = lm.model.config.num_hidden_layers
    assert list(table.drop_duplicates("site")["site"]) == (
        ["embed"] + [f"blocks.{i}.{k}" for i in range(n_layers) for k in ("attn_out", "mlp_out")] + ["logit_diff"])
    parts = w.drop(columns="logit_diff").sum(axis=1)
    hf = pd.Series({r["item_id"]: np.subtract(*hf_logits(lm, r)) for r in items.to_dict("records")})
    assert (parts - w["logit_diff"]).abs().max() < TOL
    assert (parts - hf[w.index]).abs().max() < TOL, "the components must add up to Hugging Face's own logits"
    assert table.attrs["max_abs_error"] < TOL and table.attrs["softcap"] is None
    assert hf.abs().max() > 100 * TOL  # the check is not vacuous
    # the same number as the logprob mode's difference (padded batches), signed by the favoured slot
    resp = decide(items, lm, DecideOptions(mode="logprob", batch_size=6, progress=False)).set_index("item_id")
    sign = np.where(resp["minority_slot"] == "A", 1.0, -1.0)
    lp = pd.Series(sign * (resp["logprob_A"] - resp["logprob_B"]).to_numpy(), index=resp.index)
    assert (lp[w.index] - w["logit_diff"]).abs().max() < 1e-4
    assert set(table["component"]) <= set(COMPONENTS)
    assert (table["chosen"] == "unknown").all() and set(table["pressure"]) <= {"none", "pro_minority", "pro_majority"}


def test_the_sign_follows_the_favoured_slot(tiny, items):
    lm = tiny["qwen2"]
    bridge = boot_bridge(lm)
    base = items.head(4).assign(question_polarity="positive")
    flipped = base.assign(minority_slot=base["minority_slot"].map({"A": "B", "B": "A"}))
    negative = base.assign(question_polarity="negative")
    a, b, c = (wide(attribute(t, lm, progress=False, bridge=bridge)) for t in (base, flipped, negative))
    assert np.allclose(a.to_numpy(), -b.to_numpy(), atol=1e-6)  # the other candidate is the minority
    assert np.allclose(a.to_numpy(), -c.to_numpy(), atol=1e-6)  # "who should not ...": choosing A favours B
    assert np.abs(a.to_numpy()).max() > 1e-4
    tok = decision_tokens(lm.tokenizer, model_text(lm.tokenizer, user_message(base.iloc[0].to_dict())),
                          base.iloc[0].to_dict(), special=False)
    assert tok.favoured != tok.other and lm.tokenizer.decode([tok.favoured]) == base.iloc[0]["minority_slot"]


def test_with_softcapping_the_components_sum_to_the_pre_softcap_difference(tiny, items):
    lm0 = tiny["gemma3"]
    model = copy.deepcopy(lm0.model)
    cap = 0.5
    model.config.final_logit_softcapping = cap
    lm = replace(lm0, model=model)
    sub = items.head(4)
    table = attribute(sub, lm, progress=False)
    w = wide(table)
    for r in sub.to_dict("records"):
        lf, lo = hf_logits(lm, r)  # capped logits, as the model outputs them
        assert w.loc[r["item_id"], "logit_diff"] == pytest.approx(lf - lo, abs=TOL)
        pre = cap * (np.arctanh(lf / cap) - np.arctanh(lo / cap))
        assert w.drop(columns="logit_diff").loc[r["item_id"]].sum() == pytest.approx(pre, abs=1e-4)
    assert table.attrs["softcap"] == cap


def test_aggregate_means_and_cluster_cis():
    rng = np.random.default_rng(0)
    n = 60
    meta = pd.DataFrame({"item_id": [f"i{k}" for k in range(n)], "scenario_id": [f"s{k % 12}" for k in range(n)],
                         "degree": 1 + np.arange(n) % 3, "pressure": np.where(np.arange(n) % 2, "pro_minority", "none"),
                         "chosen": np.where(np.arange(n) % 5 == 0, "majority", "minority")})
    sites = ["embed", "blocks.0.attn_out", "blocks.0.mlp_out", "logit_diff"]
    vals = rng.normal(size=(n, len(sites))) + np.array([0.0, 1.0, -2.0, 0.5])
    long = meta.loc[np.repeat(np.arange(n), len(sites))].reset_index(drop=True)
    long["site"] = sites * n
    long["component"] = [s.split(".")[-1] for s in sites] * n
    long["value"] = vals.reshape(-1)
    t = aggregate(long, resamples=300)
    assert set(t.columns) >= {*CONDITIONS, "component", "site", "layer", "value", "ci_low", "ci_high", "n", "clusters"}
    assert (t["ci_low"] <= t["value"] + 1e-12).all() and (t["value"] <= t["ci_high"] + 1e-12).all()
    pooled = t[(t["degree"] == "all") & (t["pressure"] == "all") & (t["chosen"] == "all")].set_index("site")
    assert np.allclose(pooled.loc[sites, "value"], vals.mean(0))
    assert (pooled["n"] == n).all() and (pooled["clusters"] == 12).all()
    assert pooled.loc["blocks.0.mlp_out", "ci_high"] < 0 < pooled.loc["blocks.0.attn_out", "ci_low"]
    assert pooled.loc["embed", "layer"] == -1 and pd.isna(pooled.loc["logit_diff", "layer"])
    d2 = t[(t["degree"] == "2") & (t["pressure"] == "all") & (t["chosen"] == "all") & (t["site"] == "embed")]
    assert d2["value"].item() == pytest.approx(vals[meta["degree"].to_numpy() == 2, 0].mean())
    with pytest.raises(ValueError, match="by must be one of"):
        attribution_figure(t, "unused", by="colour")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_dirs, tiny, smoke_items):
    """A logprob-mode run of the tiny Qwen2: three items of each of two scenarios per degree 0-3."""
    run = tmp_path_factory.mktemp("attr_run")
    scen = smoke_items.drop_duplicates("scenario_id").groupby("degree").head(2)["scenario_id"]
    items = smoke_items[smoke_items["scenario_id"].isin(scen)].groupby("scenario_id").head(3)
    resp = decide(items, tiny["qwen2"], DecideOptions(mode="logprob", batch_size=16, progress=False))
    resp.to_parquet(run / "responses.parquet")
    (run / "manifest.json").write_text(json.dumps({"config": {"model": asdict(ModelSpec(str(tiny_dirs["qwen2"])))}}))
    return run


def test_run_attribution_writes_tables_manifest_and_figures(run_dir, tmp_path):
    out = tmp_path / "attr"
    table = run_attribution(run_dir, out, batch_size=8, resamples=200, progress=False)
    for f in ("attribution_items.parquet", "attribution.parquet", "attribution.csv", "manifest.json",
              *(f"{stem}.{ext}" for stem in ("attribution", "attribution_pressure", "attribution_chosen")
                for ext in ("pdf", "svg", "png"))):
        assert (out / f).stat().st_size > 0, f
    items = pd.read_parquet(out / "attribution_items.parquet")
    assert set(items["degree"]) == {1, 2, 3} and items["item_id"].nunique() == 18
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["n_items"] == 18 and manifest["clusters"] == 6 and manifest["max_abs_error"] < TOL
    # logprob mode chooses by the sign of this very difference: the chosen side reads off its sign
    total = items[items["site"] == "logit_diff"].set_index("item_id")
    clear = total[total["value"].abs() > 1e-4]
    assert len(clear) > 9
    assert ((clear["value"] > 0) == (clear["chosen"] == "minority")).all()
    assert (table["ci_low"] <= table["value"] + 1e-9).all() and (table["value"] <= table["ci_high"] + 1e-9).all()
    pooled = table[(table[list(CONDITIONS)] == "all").all(axis=1)].set_index("site")
    assert pooled.loc["logit_diff", "value"] == pytest.approx(total["value"].mean())
    assert pooled["n"].eq(18).all() and pooled["clusters"].eq(6).all()
    assert set(table["chosen"]) <= {"minority", "majority", "no_choice", "all"}
    assert pd.read_parquet(out / "attribution.parquet").shape == table.shape


def test_bad_inputs_name_the_problem(run_dir, tmp_path, tiny, items):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="manifest.json not found"):
        run_attribution(empty, progress=False)
    (empty / "manifest.json").write_text(json.dumps({"config": {}}))
    with pytest.raises(FileNotFoundError, match="responses.parquet not found"):
        run_attribution(empty, progress=False)
    with pytest.raises(ValueError, match="no rows of degree 7"):
        run_attribution(run_dir, tmp_path / "x", degrees=(7,), progress=False)
    (empty / "responses.parquet").write_bytes((run_dir / "responses.parquet").read_bytes())
    with pytest.raises(ValueError, match="names no model"):
        run_attribution(empty, progress=False)
    with pytest.raises(ValueError, match="lack the column.*minority_slot"):
        attribute(items.drop(columns="minority_slot"), tiny["qwen2"], progress=False)
