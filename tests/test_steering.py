"""Steering: direction estimators, hidden-state edits, the ``steer`` context on tiny models, LEACE."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss

from evenhand.models.loading import load_model
from evenhand.models.sites import SiteError, module, resolve
from evenhand.models.tiny import save_tiny_model
from steering.directions import diff_of_means, pca_paired, probe_direction, random_like, unit
from steering.hooks import Add, Affine, ProjectOut, active_hooks, steer
from steering.leace import LeaceEraser, fit_leace

STEER_ARCHS = ["gemma3", "qwen2"]
TEXTS = ["the cat sat", "on the mat"]
D = 64  # tiny_config's default hidden size


def _cos(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# ----------------------------------------------------------------------------- directions

def _planted(n=400, d=20, seed=0, sep=3.0):
    rng = np.random.default_rng(seed)
    u = unit(rng.standard_normal(d))
    z = rng.integers(0, 2, n)
    X = rng.standard_normal((n, d)) + sep * z[:, None] * u
    return X, z, u


def test_diff_of_means_recovers_planted_direction():
    X, z, u = _planted()
    v = diff_of_means(X, z)
    assert v.shape == (20,) and v.dtype == np.float64
    assert np.allclose(v, X[z == 1].mean(0) - X[z == 0].mean(0))
    assert _cos(v, u) > 0.95
    assert np.allclose(diff_of_means(X, z.astype(bool)), v)


def test_pca_paired_recovers_direction_with_sign():
    rng = np.random.default_rng(1)
    n, d = 300, 20
    u = unit(rng.standard_normal(d))
    base = rng.standard_normal((n, d)) * 3
    Xa = base + rng.uniform(1, 3, n)[:, None] * u + 0.2 * rng.standard_normal((n, d))
    V = pca_paired(Xa, base, k=2)
    assert V.shape == (2, d)
    assert np.allclose(V @ V.T, np.eye(2), atol=1e-10)
    assert _cos(V[0], u) > 0.95  # sign-aligned: positive, not just |cos|
    mean_diff = (Xa - base).mean(0)
    assert np.all(V @ mean_diff >= 0)
    # Swapping the sides flips the first direction.
    assert _cos(pca_paired(base, Xa)[0], u) < -0.95
    # RepE's variant: random order within pairs (mean ~0), centred differences; the axis is recovered up to sign.
    flip = rng.integers(0, 2, n).astype(bool)
    A, B = np.where(flip[:, None], base, Xa), np.where(flip[:, None], Xa, base)
    assert abs(_cos(pca_paired(A, B, center=True)[0], u)) > 0.95


def test_probe_direction_is_in_raw_feature_space():
    rng = np.random.default_rng(2)
    n, d = 3000, 8
    scales = np.array([0.1, 0.5, 1, 2, 5, 10, 1, 3])
    X = rng.standard_normal((n, d)) * scales
    w_true = unit(rng.standard_normal(d) / scales)  # a direction that matters on every scale
    logits = 4 * (X @ w_true) / np.std(X @ w_true)
    z = (rng.uniform(size=n) < 1 / (1 + np.exp(-logits))).astype(int)
    w = probe_direction(X, z, C=10.0)
    assert w.shape == (d,) and abs(np.linalg.norm(w) - 1) < 1e-12
    assert _cos(w, w_true) > 0.95
    assert _cos(probe_direction(X, 1 - z, C=10.0), w_true) < -0.95


def test_random_like_and_unit():
    v = np.arange(1.0, 11.0)
    r = random_like(v, seed=3)
    assert r.shape == v.shape and np.isclose(np.linalg.norm(r), np.linalg.norm(v))
    assert np.array_equal(r, random_like(v, seed=3))
    assert not np.allclose(r, random_like(v, seed=4))
    assert abs(_cos(r, v)) < 0.9
    M = np.stack([v, 2 * v])
    R = random_like(M, seed=0)
    assert np.allclose(np.linalg.norm(R, axis=1), np.linalg.norm(M, axis=1))
    assert np.allclose(np.linalg.norm(unit(M), axis=1), 1.0)


def test_direction_errors_name_the_problem():
    X, z, _ = _planted(n=20, d=4)
    with pytest.raises(ValueError, match="no rows of class 1"):
        diff_of_means(X, np.zeros(20, dtype=int))
    with pytest.raises(ValueError, match="z has 19 labels but X has 20"):
        diff_of_means(X, z[:19])
    with pytest.raises(ValueError, match="0/1"):
        probe_direction(X, z + 1)
    with pytest.raises(ValueError, match="Xa and Xb must have the same shape"):
        pca_paired(X, X[:5])
    with pytest.raises(ValueError, match="k=5 exceeds"):
        pca_paired(X, X * 0, k=5)
    with pytest.raises(ValueError, match="zero"):
        unit(np.zeros(3))
    with pytest.raises(ValueError, match="2-D"):
        diff_of_means(X[0], z)


# ----------------------------------------------------------------------------- edits

def _devices() -> list[str]:
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def test_add_algebra_and_no_in_place():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(2, 3, 5, generator=g)
    v = torch.randn(5, generator=g)
    h0 = h.clone()
    out = Add(v, 2.5)(h)
    assert torch.allclose(out, h + 2.5 * v)
    assert torch.equal(h, h0) and out.data_ptr() != h.data_ptr()
    assert torch.equal(Add(v, 0.0)(h), h)
    assert torch.allclose(Add(v.numpy(), -1.0)(h), h - v)  # array-likes are accepted


def test_project_out_algebra():
    g = torch.Generator().manual_seed(1)
    h = torch.randn(2, 4, 6, generator=g, dtype=torch.float64)
    d = torch.randn(6, generator=g, dtype=torch.float64) * 7
    u = d / d.norm()
    mean = torch.randn(6, generator=g, dtype=torch.float64)
    h0 = h.clone()
    out = ProjectOut(d)(h)
    assert torch.allclose(out @ u, torch.zeros(2, 4, dtype=torch.float64), atol=1e-12)
    orth = h - (h @ u).unsqueeze(-1) * u
    assert torch.allclose(out, orth, atol=1e-12)  # only the component along u moves
    ace = ProjectOut(d, mean=mean)(h)
    assert torch.allclose(ace @ u, (mean @ u).expand(2, 4), atol=1e-12)
    assert torch.allclose(ace - (ace @ u).unsqueeze(-1) * u, orth, atol=1e-12)
    half = ProjectOut(d, mean=mean, strength=0.5)(h)
    assert torch.allclose(half @ u, 0.5 * (h @ u) + 0.5 * (mean @ u), atol=1e-12)
    assert torch.equal(ProjectOut(d, strength=0.0)(h), h)
    assert torch.equal(h, h0)


def test_affine_algebra():
    g = torch.Generator().manual_seed(2)
    h = torch.randn(3, 2, 4, generator=g, dtype=torch.float64)
    M = torch.randn(4, 4, generator=g, dtype=torch.float64)
    b = torch.randn(4, generator=g, dtype=torch.float64)
    assert torch.allclose(Affine(M, b)(h), h @ M.T + b, atol=1e-12)
    assert torch.allclose(Affine(M, b, 0.25)(h), h + 0.25 * (h @ M.T + b - h), atol=1e-12)
    assert torch.equal(Affine(M, b, 0.0)(h), h)
    assert torch.allclose(Affine(torch.eye(4), torch.zeros(4))(h), h)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_edits_keep_dtype_and_device(dtype):
    g = torch.Generator().manual_seed(3)
    v64 = torch.randn(8, generator=g, dtype=torch.float64)
    M64 = torch.eye(8, dtype=torch.float64) * 0.5
    edits = [Add(v64, 1.5), ProjectOut(v64), ProjectOut(v64, mean=v64 * 0.1, strength=0.7), Affine(M64, v64)]
    for dev in _devices():
        h = torch.randn(2, 3, 8, generator=g).to(device=dev, dtype=dtype)
        h0 = h.clone()
        for e in edits:
            out = e(h)
            assert out.dtype == dtype and out.device == h.device and out.shape == h.shape
            ref = e(h.double())
            tol = 1e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-5
            assert torch.allclose(out.double(), ref, atol=tol * 10, rtol=tol)
        assert torch.equal(h, h0)


def test_edit_errors_name_the_problem():
    with pytest.raises(ValueError, match="zero norm"):
        ProjectOut(torch.zeros(4))
    with pytest.raises(ValueError, match="ProjectOut.mean has shape"):
        ProjectOut(torch.ones(4), mean=torch.ones(3))
    with pytest.raises(ValueError, match="Affine.matrix must be square"):
        Affine(torch.ones(3, 4), torch.ones(3))
    with pytest.raises(ValueError, match="Add.vector must have 1 dimension"):
        Add(torch.ones(2, 4))
    with pytest.raises(ValueError, match="Add has dimension 4 but the hidden state has shape"):
        Add(torch.ones(4))(torch.ones(1, 2, 5))


# ----------------------------------------------------------------------------- steer on tiny models

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny_steer")
    out = {}
    for arch in STEER_ARCHS:
        lm = load_model(str(save_tiny_model(root / arch, arch, TEXTS, seed=0)))
        out[arch] = (lm.model, lm.tokenizer)
    return out


def _ids(tok, sentences: list[str]) -> torch.Tensor:
    """Token ids [batch, seq] (bos + words), built from the vocabulary directly."""
    rows = [[tok.bos_token_id] + tok.convert_tokens_to_ids(s.split()) for s in sentences]
    assert len({len(r) for r in rows}) == 1 and tok.unk_token_id not in sum(rows, [])
    return torch.tensor(rows)


BATCH = ["the cat sat on the mat", "on the mat the cat sat"]


def _logits(model, ids) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=ids).logits


def _capture(model, site_name: str, store: list):
    """Register (after any steering hook) a hook that stores the site's value; returns the handle."""
    site = resolve(model, site_name)
    mod = module(model, site)
    if site.port == "input":
        return mod.register_forward_pre_hook(lambda m, a: store.append(a[0].detach().clone()))
    return mod.register_forward_hook(
        lambda m, a, o: store.append((o if isinstance(o, torch.Tensor) else o[0]).detach().clone()))


@pytest.mark.parametrize("arch", STEER_ARCHS)
def test_steer_changes_logits_and_restores_exactly(tiny, arch):
    model, tok = tiny[arch]
    ids = _ids(tok, BATCH)
    before = _logits(model, ids)
    v = torch.randn(D, generator=torch.Generator().manual_seed(0))
    with steer(model, {"blocks.1.resid_post": Add(v, 4.0)}):
        assert active_hooks(model) == 1
        inside = _logits(model, ids)
    assert not torch.allclose(inside, before, atol=1e-3)
    assert active_hooks(model) == 0
    assert torch.equal(_logits(model, ids), before)
    with pytest.raises(RuntimeError, match="boom"):
        with steer(model, {"blocks.1.resid_post": Add(v, 4.0), "embed": Add(v, 1.0)}):
            assert active_hooks(model) == 2
            _logits(model, ids)
            raise RuntimeError("boom")
    assert active_hooks(model) == 0
    assert torch.equal(_logits(model, ids), before)


SITE_KINDS = ["embed", "blocks.0.resid_pre", "blocks.1.attn_out", "blocks.1.mlp_out", "blocks.2.resid_post", "ln_final"]


@pytest.mark.parametrize("arch", STEER_ARCHS)
def test_every_site_kind_takes_effect_and_alpha_zero_is_identity(tiny, arch):
    model, tok = tiny[arch]
    ids = _ids(tok, BATCH)
    before = _logits(model, ids)
    v = torch.randn(D, generator=torch.Generator().manual_seed(1))
    for site in SITE_KINDS:  # attn_out on Qwen2 is a tuple output; resid_pre is an input port
        with steer(model, {site: Add(v, 5.0)}):
            assert not torch.allclose(_logits(model, ids), before, atol=1e-3), site
        with steer(model, {site: Add(v, 0.0)}):
            assert torch.equal(_logits(model, ids), before), site
    with steer(model, {s: Add(v, 0.0) for s in SITE_KINDS}):
        assert active_hooks(model) == len(SITE_KINDS)
        assert torch.equal(_logits(model, ids), before)
    assert active_hooks(model) == 0


@pytest.mark.parametrize("arch", STEER_ARCHS)
def test_steer_applies_to_every_generated_token(tiny, arch):
    model, tok = tiny[arch]
    ids = _ids(tok, BATCH[:1])
    n_new = 4
    with torch.inference_mode():
        plain = model.generate(input_ids=ids, max_new_tokens=n_new, do_sample=False)[0, ids.shape[1]:].tolist()
    target = next(t for t in tok.convert_tokens_to_ids(["mat", "sat", "on", "cat", "the"]) if t not in plain)
    E = model.get_input_embeddings().weight.detach()
    push = Add(E[target], 100.0 / float(E[target] @ E[target]))  # raises the target's logit by 100
    seen: list[int] = []

    def counter(h):
        seen.append(h.shape[1])
        return h

    with steer(model, {"ln_final": [push, counter]}), torch.inference_mode():
        steered = model.generate(input_ids=ids, max_new_tokens=n_new, do_sample=False)[0, ids.shape[1]:].tolist()
    assert steered == [target] * n_new and steered != plain
    # The prompt forward, then one single-position forward per further token (KV cache).
    assert seen == [ids.shape[1]] + [1] * (n_new - 1)
    assert active_hooks(model) == 0


@pytest.mark.parametrize("arch", STEER_ARCHS)
def test_bad_site_or_edit_registers_nothing(tiny, arch):
    model, _ = tiny[arch]
    v = torch.ones(D)
    with pytest.raises(SiteError, match="unknown site"):
        with steer(model, {"blocks.0.resid_post": Add(v), "blocks.0.resid_middle": Add(v)}):
            pass
    assert active_hooks(model) == 0
    with pytest.raises(SiteError, match="out of range"):
        with steer(model, {"embed": Add(v), "blocks.7.resid_post": Add(v)}):
            pass
    assert active_hooks(model) == 0
    with pytest.raises(TypeError, match="not an edit"):
        with steer(model, {"embed": Add(v), "ln_final": [Add(v), "nope"]}):
            pass
    with pytest.raises(ValueError, match="empty list"):
        with steer(model, {"embed": []}):
            pass
    assert active_hooks(model) == 0


@pytest.mark.parametrize("arch", STEER_ARCHS)
def test_project_out_with_mean_fixes_the_component(tiny, arch):
    model, tok = tiny[arch]
    ids = _ids(tok, BATCH)
    site, layer = "blocks.1.resid_post", 1
    with torch.inference_mode():  # installs HF's output-capture hooks before ours: ours must still run first
        hs_plain = model(input_ids=ids, output_hidden_states=True).hidden_states[layer + 1]
    g = torch.Generator().manual_seed(2)
    direction, mean = torch.randn(D, generator=g), torch.randn(D, generator=g)
    u = direction / direction.norm()
    target = float(mean @ u)
    assert float((hs_plain @ u).std()) > 1e-2
    store: list[torch.Tensor] = []
    with steer(model, {site: ProjectOut(direction, mean=mean)}), torch.inference_mode():
        handle = _capture(model, site, store)
        try:
            hs = model(input_ids=ids, output_hidden_states=True).hidden_states[layer + 1]
        finally:
            handle.remove()
    scale = float(hs_plain.abs().max())
    for h in (hs, store[0]):
        assert torch.allclose(h @ u, torch.full(h.shape[:-1], target), atol=1e-5 * scale)
        # Nothing but the component along u moved.
        assert torch.allclose(h - (h @ u).unsqueeze(-1) * u, hs_plain - (hs_plain @ u).unsqueeze(-1) * u,
                              atol=1e-5 * scale)


@pytest.mark.parametrize("arch", STEER_ARCHS)
def test_leace_as_affine_in_steer_matches_numpy(tiny, arch):
    model, tok = tiny[arch]
    rng = np.random.default_rng(5)
    words = tok.convert_tokens_to_ids(["the", "cat", "sat", "on", "mat"])
    ids = torch.tensor([[tok.bos_token_id] + rng.choice(words, 9).tolist() for _ in range(12)])
    site = "blocks.1.resid_post"
    plain: list[torch.Tensor] = []
    handle = _capture(model, site, plain)
    with torch.inference_mode():
        model(input_ids=ids)
    handle.remove()
    H = plain[0][:, 1:].reshape(-1, D).double().numpy()  # all non-bos positions: 108 rows, d = 64
    z = (ids[:, 1:].reshape(-1).numpy() == words[1]).astype(int)  # concept: the current token is "cat"
    eraser = fit_leace(H, z)
    edited: list[torch.Tensor] = []
    with steer(model, {site: eraser.as_affine()}), torch.inference_mode():
        handle = _capture(model, site, edited)
        try:
            model(input_ids=ids)
        finally:
            handle.remove()
    got = edited[0][:, 1:].reshape(-1, D).double().numpy()
    want = eraser(H)
    scale = np.abs(H).max()
    assert np.allclose(got, want, atol=1e-4 * scale)
    assert np.abs(got - H).max() > 1e-2 * scale  # the eraser did something
    zc = z - z.mean()
    cross = np.abs((got - got.mean(0)).T @ zc / len(z)).max()
    assert cross < 1e-5 * np.abs((H - H.mean(0)).T @ zc / len(z)).max() + 1e-6


# ----------------------------------------------------------------------------- LEACE

def _cross_cov(X, Zm) -> np.ndarray:
    Xc, Zc = X - X.mean(0), Zm - Zm.mean(0)
    return Xc.T @ Zc / len(X)


def _data(seed=0, n=600, d=8):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((d, d)) * np.linspace(0.2, 3, d)
    z = rng.integers(0, 2, n)
    X = rng.standard_normal((n, d)) @ A + np.outer(z, rng.standard_normal(d)) * 1.5 + 4.0
    return X, z


def _onehot(z) -> np.ndarray:
    return np.eye(int(z.max()) + 1)[z]


@pytest.mark.parametrize("case", ["binary", "categorical", "continuous", "rank_deficient", "no_shrinkage"])
def test_leace_zeroes_cross_covariance(case):
    X, z = _data(seed=1)
    rng = np.random.default_rng(1)
    kw = {}
    if case == "binary":
        Z, Zm = z, _onehot(z)
    elif case == "categorical":
        Z = rng.integers(0, 4, len(X))
        X = X + _onehot(Z) @ rng.standard_normal((4, X.shape[1]))
        Zm = _onehot(Z)
    elif case == "continuous":
        Zm = np.stack([X[:, 0] + rng.standard_normal(len(X)), rng.standard_normal(len(X)) + 0.3 * X[:, 3]], 1)
        Z = Zm
    elif case == "rank_deficient":
        X = X[:, :3] @ rng.standard_normal((3, 8))  # covariance of rank 3 in d = 8
        Z, Zm = z, _onehot(z)
    else:
        Z, Zm, kw = z, _onehot(z), {"shrinkage": False}
    eraser = fit_leace(X, Z, **kw)
    before = np.abs(_cross_cov(X, Zm)).max()
    after = np.abs(_cross_cov(eraser(X), Zm)).max()
    assert before > 1e-2
    assert after < 1e-8 * before
    assert eraser.rank == {"categorical": 3, "continuous": 2}.get(case, 1)


def test_leace_defeats_every_linear_classifier_on_training_data():
    X, z = _data(seed=2)
    p = z.mean()
    constant = -(p * np.log(p) + (1 - p) * np.log(1 - p))

    def fitted_loss(A):
        clf = LogisticRegression(C=1e6, max_iter=10000).fit(A, z)
        return log_loss(z, clf.predict_proba(A)[:, 1])

    assert fitted_loss(X) < constant - 0.05  # the concept is linearly readable before
    assert fitted_loss(fit_leace(X, z)(X)) >= constant - 1e-6


def test_leace_moves_only_along_the_concept_and_least():
    rng = np.random.default_rng(3)
    n, d = 800, 6
    A = rng.standard_normal((d, d)) * np.linspace(0.3, 2.5, d)
    X = rng.standard_normal((n, d)) @ A  # correlated coordinates
    z = rng.integers(0, 2, n)
    for cls in (0, 1):  # class means of every coordinate made exactly equal...
        X[z == cls] -= X[z == cls].mean(0)
    X[:, 0] += 2.0 * z  # ...then the concept planted in coordinate 0 only
    eraser = fit_leace(X, z, shrinkage=False)  # least squares under the sample covariance (no shrinkage)
    Xe = eraser(X)
    moved = Xe - X
    # Sigma_XZ is along e_0, so LEACE moves points along e_0 only: the other coordinates are untouched...
    assert np.abs(moved[:, 1:]).max() < 1e-10
    # ...and coordinate 0 becomes its least-squares linear prediction from the other coordinates (which carry
    # no concept), keeping what they explain of it; an orthogonal projection would reset it to its mean.
    F = np.c_[X[:, 1:], np.ones(n)]
    predicted = F @ np.linalg.lstsq(F, X[:, 0], rcond=None)[0]
    assert np.allclose(Xe[:, 0], predicted, atol=1e-10)
    assert predicted.std() > 0.1
    # proj is an oblique projection, orthogonal in the whitened metric: P^2 = P, P Sigma symmetric.
    P, S = eraser.proj, np.cov(X.T, bias=True)
    assert np.allclose(P @ P, P, atol=1e-10)
    assert np.allclose(P @ S, (P @ S).T, atol=1e-10)
    # Least squares: every eraser x - delta a.(x - mu) with a.delta = 1 also zeroes the cross-covariance
    # (delta = the class-mean difference); LEACE has the smallest mean squared displacement among them.
    delta, mu = diff_of_means(X, z), X.mean(0)
    leace_cost = (moved ** 2).sum(1).mean()
    alternatives = [delta] + [rng.standard_normal(d) for _ in range(20)]
    for i, a in enumerate(alternatives):
        a = a / (a @ delta)
        other = X - np.outer((X - mu) @ a, delta)
        assert np.abs(_cross_cov(other, _onehot(z))).max() < 1e-10
        cost = ((other - X) ** 2).sum(1).mean()
        assert leace_cost <= cost * (1 + 1e-9)
        if i == 0:  # the orthogonal projection along delta is strictly worse for anisotropic data
            assert leace_cost < 0.95 * cost


def test_leace_eraser_as_affine_and_validation():
    X, z = _data(seed=4)
    eraser = fit_leace(X, z)
    aff = eraser.as_affine()
    assert isinstance(aff, Affine)
    Xt = torch.from_numpy(X).reshape(20, 30, -1)
    assert np.allclose(aff(Xt).reshape(len(X), -1).numpy(), eraser(X), atol=1e-10)
    half = eraser.as_affine(0.5)(Xt).reshape(len(X), -1).numpy()
    assert np.allclose(half, (X + eraser(X)) / 2, atol=1e-10)
    assert np.allclose(eraser(X[0]), eraser(X)[0])
    with pytest.raises(ValueError, match="frozen|read-only|assignment destination"):
        eraser.proj[0, 0] = 1.0
    with pytest.raises(ValueError, match="single class"):
        fit_leace(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="Z has 5 rows but X has 600"):
        fit_leace(X, z[:5])
    with pytest.raises(ValueError, match="shrinkage must be true or false"):
        fit_leace(X, z, shrinkage=0.3)
    with pytest.raises(ValueError, match=r"X must be \[d\] or \[n, d\] with d = 8"):
        eraser(X[:, :3])
    with pytest.raises(ValueError, match="LeaceEraser.proj must be"):
        LeaceEraser(np.zeros(3), np.zeros((3, 4)))


@pytest.mark.parametrize("arch", STEER_ARCHS)
def test_observe_reads_each_site_and_the_edited_value_inside_steer(tiny, arch):
    """``observe`` records a site's hidden state per pass (an input port, ``resid_pre``, included: layer 1's input
    is layer 0's output), reads the edited value inside ``steer``, changes no logit and leaves no hook, also when
    the block raises."""
    from steering.hooks import observe
    model, tok = tiny[arch]
    ids = _ids(tok, BATCH)
    before = _logits(model, ids)
    v = torch.randn(D, generator=torch.Generator().manual_seed(2))
    with observe(model, ["blocks.0.resid_post", "blocks.1.resid_pre"]) as seen:
        assert active_hooks(model) == 2
        assert torch.equal(_logits(model, ids), before)
    assert active_hooks(model) == 0 and len(seen["blocks.0.resid_post"]) == len(seen["blocks.1.resid_pre"]) == 1
    plain = seen["blocks.0.resid_post"][0]
    assert plain.shape == (len(BATCH), ids.shape[1], D) and torch.equal(plain, seen["blocks.1.resid_pre"][0])
    with steer(model, {"blocks.0.resid_post": Add(v, 3.0)}), observe(model, ["blocks.0.resid_post"],
                                                                      take=lambda h: h[:, -1]) as edited:
        _logits(model, ids)
    assert torch.allclose(edited["blocks.0.resid_post"][0], plain[:, -1] + 3.0 * v.to(plain.dtype), atol=1e-5)
    with pytest.raises(RuntimeError, match="boom"):
        with observe(model, ["blocks.1.resid_post"]):
            raise RuntimeError("boom")
    assert active_hooks(model) == 0
