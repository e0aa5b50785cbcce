"""GPU-facing runtime choices checked on the CPU: Ray's per-actor GPU request,
TransformerLens booted from the local path offline without a copy of the weights, loading straight to the device
with ``device_map``, a gated model named as such, and the weights fingerprint taken after the download."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch


class FakeRay:
    """What :class:`experiments.studies.run.ray.WorkerPool` asks of Ray, recording each actor's resources."""

    def __init__(self):
        self.requested, self.started = [], False

    def is_initialized(self):
        return self.started

    def init(self, **kw):
        self.started = True

    def shutdown(self):
        self.started = False


def _actors(monkeypatch, gpus_per_worker, cuda: bool):
    import experiments.studies.run.ray as rr
    fake = FakeRay()

    class Worker:
        @staticmethod
        def options(**kw):
            fake.requested.append(kw)
            return SimpleNamespace(remote=lambda *a: object())

    monkeypatch.setattr(rr, "_worker_class", lambda ray, a, b: Worker)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    pool = rr.WorkerPool(fake, None, None, 3, rr.gpus_for_workers(gpus_per_worker), 2, 0, None)
    pool.spec = SimpleNamespace()
    monkeypatch.setattr(rr, "asdict", lambda spec: {})
    pool.get()
    return fake.requested


def test_ray_actors_ask_for_one_gpu_each_when_cuda_is_present(monkeypatch):
    assert _actors(monkeypatch, None, cuda=True) == [{"num_cpus": 2, "num_gpus": 1.0}] * 3
    assert _actors(monkeypatch, None, cuda=False) == [{"num_cpus": 2, "num_gpus": 0.0}] * 3
    assert _actors(monkeypatch, 0.5, cuda=True) == [{"num_cpus": 2, "num_gpus": 0.5}] * 3  # configurable
    with pytest.raises(ValueError, match="gpus_per_worker"):
        _actors(monkeypatch, -1, cuda=True)


def test_ray_cli_default_is_automatic():
    from experiments.cli.main import build_parser
    a = build_parser().parse_args(["run", "x.yaml", "--backend", "ray"])
    assert a.gpus_per_worker is None


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, smoke_items):
    from evenhand.models.tiny import save_tiny_model
    return save_tiny_model(tmp_path_factory.mktemp("rt") / "g", "gemma3", smoke_items["prompt"].tolist(), seed=2)


def test_loading_goes_straight_to_the_device_with_device_map(tiny_dir, monkeypatch):
    """from_pretrained gets device_map={"": device} (the old loader loaded on the CPU, then called .to(device))."""
    import transformers

    from evenhand.models.loading import ModelSpec, load_model, model_kwargs
    assert model_kwargs(ModelSpec("x"), {}, torch.bfloat16, "cuda:1")["device_map"] == {"": "cuda:1"}
    assert model_kwargs(ModelSpec("x", device_map="auto"), {}, torch.bfloat16, "cuda")["device_map"] == "auto"
    seen = []
    real = transformers.AutoModelForCausalLM.from_pretrained.__func__

    def spy(cls, where, **kw):
        seen.append(kw.get("device_map"))
        return real(cls, where, **kw)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", classmethod(spy))
    moved = []
    monkeypatch.setattr(torch.nn.Module, "to", lambda self, *a, **k: moved.append(a) or self)
    lm = load_model(str(tiny_dir))
    assert seen == [{"": "cpu"}] and lm.device == "cpu" and lm.meta["path"] == str(tiny_dir)
    assert moved == []  # no copy after the load


def test_a_gated_model_is_named_as_such_not_a_damaged_file(tiny_dir, monkeypatch):
    import transformers
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    from evenhand.models.loading import ModelLoadError, load_model

    def raising(exc):
        def f(cls, where, **kw):
            try:
                raise exc
            except Exception as inner:  # transformers wraps the hub's error in an OSError
                raise OSError(f"You are trying to access a model at {where}; {inner}") from inner
        return classmethod(f)

    import httpx

    def response(code):
        return httpx.Response(code, request=httpx.Request("GET", "https://huggingface.co/google/gemma-3-12b-it"))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", raising(GatedRepoError(
        "403 Forbidden: access to model google/gemma-3-12b-it is restricted", response=response(403))))
    with pytest.raises(ModelLoadError, match="is gated on the Hugging Face hub") as e:
        load_model(str(tiny_dir))
    assert "damaged" not in str(e.value)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        raising(RepositoryNotFoundError("401 Client Error: Unauthorized", response=response(401))))
    with pytest.raises(ModelLoadError, match="unauthorised"):
        load_model(str(tiny_dir))


def test_fingerprint_is_taken_after_the_download(tiny_dir, monkeypatch):
    """A hub model's files exist only once from_pretrained has downloaded them: the fingerprint comes after."""
    import transformers

    import evenhand.models.loading as loading
    order = []
    real_fp, real_load = loading.weights_fingerprint, transformers.AutoModelForCausalLM.from_pretrained.__func__
    monkeypatch.setattr(loading, "weights_fingerprint", lambda *a, **k: order.append("fingerprint") or real_fp(*a, **k))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        classmethod(lambda cls, w, **kw: order.append("load") or real_load(cls, w, **kw)))
    lm = loading.load_model(str(tiny_dir))
    assert order == ["load", "fingerprint"] and lm.meta["weights"]


def test_transformer_lens_boots_offline_from_the_local_path_sharing_the_weights(tiny_dir, monkeypatch):
    """HF_HUB_OFFLINE unset and every hub entry point raising: the bridge still boots (named by the local
    directory), its parameters are the loaded model's own tensors, and the loaded model keeps its attention."""
    import huggingface_hub
    import huggingface_hub.file_download as fd

    from evenhand.running.activations import boot_bridge
    from evenhand.models.loading import load_model
    from interventions.model_state import ModelState
    lm = load_model(str(tiny_dir))
    attn = lm.model.config._attn_implementation
    state = ModelState.capture(lm.model)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)

    def hub(*a, **k):
        raise AssertionError(f"reached the hub: {a[:2]}")
    for mod in (huggingface_hub, fd):
        for name in ("hf_hub_download", "snapshot_download", "model_info", "list_repo_files"):
            if hasattr(mod, name):
                monkeypatch.setattr(mod, name, hub)
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", hub)
    bridge = boot_bridge(lm)
    ptrs = {p.data_ptr() for p in lm.model.parameters()}
    assert {p.data_ptr() for p in bridge.parameters()} <= ptrs  # no second copy of any weight
    assert lm.model.config._attn_implementation == attn
    state.check(lm.model, "after booting the bridge")
    ids = lm.tokenizer("the first candidate", return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        ref = lm.model(input_ids=ids).logits
        got = bridge(ids)
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)
