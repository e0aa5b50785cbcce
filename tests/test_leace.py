"""LEACE through concept-erasure: parity with the library, the operator norm, and the relabelled controls of
``leace`` and ``ace`` (issue 27 item 1)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from concept_erasure import LeaceFitter
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import cross_val_score

from interventions.base import InterventionError
from interventions.fitted import Fitted
from interventions.registry import get
from interventions.steered import (LABELS, PAIR_STRATA, concept_labels, eraser_norms, fit_activations_key, pair_flipped,
                                  relabelled)
from steering.directions import diff_of_means
from steering.leace import fit_leace


def _ill_conditioned(seed=0, n=600, d=64, cond=1e7, shift=0.5):
    """Activations with covariance eigenvalues log-spaced over ``cond`` in a random basis, a binary concept
    planted along a mixture of the large and the small eigendirections (as in a model's residual stream,
    whose few huge coordinates make the covariance ill-conditioned)."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = np.logspace(0, -np.log10(cond), d)
    z = rng.integers(0, 2, n)
    delta = Q @ (rng.standard_normal(d) * np.sqrt(lam) * 3)
    X = (rng.standard_normal((n, d)) * np.sqrt(lam)) @ Q.T + np.outer(z, delta) + 2.0
    return X, z


def _well_conditioned(seed=1, n=400, d=16):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((d, d)) * np.linspace(0.3, 2.0, d)
    z = rng.integers(0, 2, n)
    return rng.standard_normal((n, d)) @ A + np.outer(z, rng.standard_normal(d)) + 3.0, z


def _library(X, Z, **kw):
    """concept-erasure's own eraser on float64 data (the reference): (P = the linear part, the eraser)."""
    Zt = torch.from_numpy(np.asarray(Z, dtype=np.float64)).reshape(len(X), -1)
    eraser = LeaceFitter.fit(torch.from_numpy(np.asarray(X, dtype=np.float64)), Zt, **kw).eraser
    return eraser.P.numpy(), eraser


def _unshrunk_numpy_leace(X, z):
    """LEACE whitened by the sample covariance, no shrinkage: the pre-fix implementation's math (that code
    also one-hot encoded a binary label, and its tight SVD tolerance then kept a second, numerical-noise
    direction on this ill-conditioned case: norm 242 where the one-column eraser has 214)."""
    Xc = X - X.mean(0)
    zc = (z - z.mean())[:, None]
    lam, V = np.linalg.eigh(Xc.T @ Xc / len(X))
    keep = lam > lam.max() * X.shape[1] * np.finfo(float).eps
    W = (V[:, keep] / np.sqrt(lam[keep])) @ V[:, keep].T
    W_pinv = (V[:, keep] * np.sqrt(lam[keep])) @ V[:, keep].T
    u = W @ (Xc.T @ zc / len(X))
    u /= np.linalg.norm(u)
    return W_pinv @ u @ u.T @ W


def _spectral(M) -> float:
    return float(np.linalg.norm(M, 2))


# ----------------------------------------------------------------------------- parity with the library

@pytest.mark.parametrize("data", ["well_conditioned", "ill_conditioned"])
@pytest.mark.parametrize("shrinkage", [True, False])
def test_fit_leace_is_concept_erasures_eraser(data, shrinkage):
    """The Done-means bar: ``fit_leace`` equals concept-erasure's eraser to 1e-6, with its shrinkage on
    (the default) and off."""
    X, z = _well_conditioned() if data == "well_conditioned" else _ill_conditioned()
    kw = {} if shrinkage else {"shrinkage": False}
    ours = fit_leace(X, z, **kw)
    P, theirs = _library(X, z, **kw)
    scale = np.abs(X).max()
    assert np.abs(ours(X) - theirs(torch.from_numpy(X)).numpy()).max() < 1e-6 * scale
    assert np.abs((np.eye(X.shape[1]) - ours.proj) - P).max() < 1e-6
    assert ours.operator_norm == pytest.approx(_spectral(P), rel=1e-6)


def test_fit_leace_matches_the_library_for_categorical_and_continuous_concepts():
    X, _ = _well_conditioned(seed=2)
    rng = np.random.default_rng(2)
    cats = rng.integers(0, 3, len(X))
    X = X + np.eye(3)[cats] @ rng.standard_normal((3, X.shape[1]))
    for Z, Zlib in ((cats, np.eye(3)[cats]), (X[:, :2] + rng.standard_normal((len(X), 2)),) * 2):
        ours = fit_leace(X, Z)
        P, _ = _library(X, Zlib)
        assert np.abs((np.eye(X.shape[1]) - ours.proj) - P).max() < 1e-6
        assert ours.rank == 2


def test_the_old_unshrunk_eraser_is_not_the_library_default_on_an_ill_conditioned_case():
    """The case that makes the parity check fail on the old code: covariance condition number ~1e7."""
    X, z = _ill_conditioned()
    assert np.linalg.cond(np.cov(X.T)) > 1e6
    old = _unshrunk_numpy_leace(X, z)
    P_default, _ = _library(X, z)
    unshrunk = fit_leace(X, z, shrinkage=False)
    # shrinkage off reproduces the old eraser (to the precision an ill-conditioned whitening allows)...
    assert np.abs(unshrunk.proj - old).max() < 1e-6 * np.abs(old).max()
    # ...and the library's default is far from it: the old eraser is not concept-erasure's LEACE.
    assert np.abs((np.eye(X.shape[1]) - old) - P_default).max() > 1.0
    assert np.abs(fit_leace(X, z).proj - old).max() > 1.0


# ----------------------------------------------------------------------------- the operator norm

def test_operator_norm_huge_without_shrinkage_moderate_with_it():
    """Whitening an ill-conditioned covariance stretches activations hundreds of times; the library's shrinkage
    keeps the map moderate, and both still zero the cross-covariance on the fitting data."""
    X, z = _ill_conditioned()
    d = X.shape[1]
    old, new = fit_leace(X, z, shrinkage=False), fit_leace(X, z)
    old_norm, new_norm = _spectral(np.eye(d) - old.proj), _spectral(np.eye(d) - new.proj)
    print(f"operator norm: no shrinkage {old_norm:.1f}, shrinkage {new_norm:.2f}")
    assert old_norm > 100
    assert 1.0 <= new_norm < 10
    assert fit_leace(X, z).operator_norm == pytest.approx(new_norm, rel=1e-9)
    assert old.operator_norm == pytest.approx(old_norm, rel=1e-9)
    zc = z - z.mean()
    for e in (old, new):
        Xe = e(X)
        assert np.abs((Xe - Xe.mean(0)).T @ zc).max() < 1e-6 * np.abs((X - X.mean(0)).T @ zc).max()


def test_shrinkage_option_is_a_bool():
    X, z = _well_conditioned()
    with pytest.raises(ValueError, match="shrinkage must be true or false"):
        fit_leace(X, z, shrinkage=0.5)
    with pytest.raises(InterventionError, match="leace: option shrinkage must be true or false"):
        get("leace").split_options({"shrinkage": 0.5})
    assert get("leace").split_options({"shrinkage": False})[0].shrinkage is False


# ----------------------------------------------------------------------------- the relabelled control

def _probe(X, z) -> float:
    return float(cross_val_score(LogisticRegression(max_iter=5000), X, z, cv=5).mean())


def test_a_relabelled_eraser_moves_as_much_and_erases_nothing():
    """The control: the same eraser (same data, shrinkage) fitted on permuted labels. Its norm is of the same
    order as the real eraser's, a probe still reads the concept after it, and after the real eraser it does not.
    The old control (the orthogonal projection on a random direction, norm 1) is not comparable to an unshrunk
    eraser's norm."""
    X, z = _ill_conditioned(seed=3)
    chance = max(z.mean(), 1 - z.mean())
    assert _probe(X, z) > 0.9
    for shrinkage in (True, False):
        real = fit_leace(X, z, shrinkage)
        controls = [fit_leace(X, relabelled(z, s), shrinkage) for s in range(5)]
        ratios = [c.operator_norm / real.operator_norm for c in controls]
        print(f"shrinkage {shrinkage}: real norm {real.operator_norm:.2f}, control/real {np.round(ratios, 2)}")
        assert all(0.1 < r < 10 for r in ratios)
        assert _probe(real(X), z) < chance + 0.06
        assert all(_probe(c(X), z) > 0.85 for c in controls)
    u = np.random.default_rng(0).standard_normal(X.shape[1])
    u /= np.linalg.norm(u)
    assert fit_leace(X, z, False).operator_norm / _spectral(np.eye(len(u)) - np.outer(u, u)) > 100  # the old control


def test_relabelled_keeps_the_class_counts_and_is_seeded():
    z = np.array([0] * 30 + [1] * 10)
    a, b = relabelled(z, 1), relabelled(z, 2)
    assert sorted(a) == sorted(z) and np.array_equal(a, relabelled(z, 1)) and not np.array_equal(a, b)


# ----------------------------------------------------------------------------- the methods on a tiny model

@pytest.fixture(scope="module")
def lm(tiny_gemma_lm):
    return tiny_gemma_lm


@pytest.fixture(scope="module")
def train_items(smoke_items):
    return smoke_items[smoke_items["degree"] > 0].sample(80, random_state=2).reset_index(drop=True)


@pytest.fixture(scope="module")
def leace_fit(lm, train_items):
    return get("leace").fit(lm, train_items, {"layers": [0, 1], "batch_size": 16})


def test_leace_fit_is_the_librarys_eraser_on_the_activations_it_stores(lm, train_items, leace_fit):
    """Each site's edit is concept-erasure's default eraser fitted on the stored activations (those collected
    with the upstream erasers applied), and the stored activations are what the model computes under them."""
    from evenhand.engine.reader import last_token_activations
    from interventions.reading import prompt_ids
    from steering.hooks import steer
    leace = get("leace")
    _, z = concept_labels(train_items, "identity")
    sites = leace_fit.info["sites"]
    assert leace_fit.info["shrinkage"] is True and np.array_equal(leace_fit.tensors[LABELS].numpy(), z)
    for s in sites:
        X = leace_fit.tensors[fit_activations_key(s)].double().numpy()
        P, theirs = _library(X, z)
        got = leace.edits(leace_fit, lm, leace.ApplyOptions())[s](torch.from_numpy(X)).numpy()
        scale = np.abs(X).max()
        assert np.abs(got - theirs(torch.from_numpy(X)).numpy()).max() < 1e-5 * scale  # float32 storage
        assert leace_fit.info["operator_norms"][s] == pytest.approx(_spectral(P), rel=1e-4)
    rows, _ = concept_labels(train_items, "identity")
    seqs = [prompt_ids(lm, r) for r in rows.to_dict("records")]
    with steer(lm.model, {sites[0]: leace.eraser(leace_fit, sites[0]).as_affine()}):
        fresh = last_token_activations(lm, seqs, [sites[1]], 16)[sites[1]]
    stored = leace_fit.tensors[fit_activations_key(sites[1])].numpy()
    assert np.abs(fresh - stored).max() < 1e-4 * np.abs(stored).max()


def test_leace_control_is_the_same_eraser_on_relabelled_data(lm, train_items, leace_fit, tmp_path):
    leace = get("leace")
    control = leace.random_control(leace_fit, seed=3)
    _, z = concept_labels(train_items, "identity")
    fake = relabelled(z, 3)
    assert np.array_equal(control.tensors[LABELS].numpy(), fake) and not np.array_equal(fake, z)
    assert control.info["sites"] == leace_fit.info["sites"] and control.fit_options == leace_fit.fit_options
    norms, control_norms = eraser_norms(leace_fit), eraser_norms(control)
    print(f"tiny model: leace norms {norms}, control {control_norms}")
    assert control.info["operator_norms"] == control_norms and leace_fit.info["operator_norms"] == norms
    zc = z - z.mean()
    for s in leace_fit.info["sites"]:
        X = leace_fit.tensors[fit_activations_key(s)].double().numpy()
        want = fit_leace(X, fake)  # same data, same (default) shrinkage, permuted labels
        assert np.abs(control.tensors[f"{s}/proj"].double().numpy() - want.proj).max() < 1e-5
        # the control moves activations about as much as the eraser (the old control, a rank-one orthogonal
        # projection, had norm 1 against the unshrunk eraser's 12.2 and 4.7 on this fixture)
        direct = {k: _spectral(np.eye(X.shape[1]) - f.tensors[f"{s}/proj"].double().numpy())
                  for k, f in (("real", leace_fit), ("control", control))}
        assert direct["real"] == pytest.approx(norms[s], rel=1e-4)
        assert direct["control"] == pytest.approx(control_norms[s], rel=1e-4)
        assert 1 / 3 < direct["control"] / direct["real"] < 3
        before = np.abs((X - X.mean(0)).T @ zc).max()
        real = leace.eraser(leace_fit, s)(X)
        ctrl = leace.eraser(control, s)(X)
        assert np.abs((real - real.mean(0)).T @ zc).max() < 1e-4 * before  # the real eraser erases the concept
        assert np.abs((ctrl - ctrl.mean(0)).T @ zc).max() > 0.2 * before  # its control does not
    # the control is derived the same way from a fit read back from disk (the runners' cache)
    loaded = Fitted.load(leace_fit.save(tmp_path / "fit"))
    again = leace.random_control(loaded, seed=3)
    assert all(torch.equal(again.tensors[k], control.tensors[k]) for k in control.tensors)
    reloaded = Fitted.load(control.save(tmp_path / "control"))
    assert reloaded.info["operator_norms"] == control_norms and eraser_norms(reloaded) == control_norms


def test_leace_shrinkage_off_is_the_unshrunk_eraser(lm, train_items, leace_fit):
    leace = get("leace")
    off = leace.fit(lm, train_items, {"layers": [0], "batch_size": 16, "shrinkage": False})
    assert off.info["shrinkage"] is False and off.key != leace_fit.key
    s = off.info["sites"][0]
    _, z = concept_labels(train_items, "identity")
    X = off.tensors[fit_activations_key(s)].double().numpy()
    P, _ = _library(X, z, shrinkage=False)
    assert np.abs(off.tensors[f"{s}/proj"].double().numpy() - (np.eye(len(P)) - P)).max() < 1e-4 * np.abs(P).max()
    control = leace.random_control(off, seed=0)  # refitted with the fit's shrinkage (off)
    want = fit_leace(X, relabelled(z, 0), shrinkage=False)
    assert np.abs(control.tensors[f"{s}/proj"].double().numpy() - want.proj).max() < 1e-4 * np.abs(want.proj).max()


def test_ace_control_is_the_same_edit_on_relabelled_data(lm, train_items):
    ace = get("ace")
    fitted = ace.fit(lm, train_items, {"layers": [0, 1], "batch_size": 16})
    control = ace.random_control(fitted, seed=5)
    z = fitted.tensors[LABELS].numpy()  # the default concept's labels (demographic: one row per candidate)
    fake = pair_flipped(z, fitted.tensors[PAIR_STRATA].numpy(), 5)  # paired: half of each slot stratum's pairs
    assert np.array_equal(control.tensors[LABELS].numpy(), fake)
    assert eraser_norms(fitted) == eraser_norms(control) == {s: 1.0 for s in fitted.info["sites"]}
    assert fitted.info["operator_norms"] == eraser_norms(fitted)
    zc = z - z.mean()
    for s in fitted.info["sites"]:
        X = fitted.tensors[fit_activations_key(s)].double().numpy()
        assert np.allclose(control.tensors[f"{s}/direction"].double().numpy(), diff_of_means(X, fake), atol=1e-5)
        assert torch.equal(control.tensors[f"{s}/mean"], fitted.tensors[f"{s}/mean"])
        before = np.abs((X - X.mean(0)).T @ zc).max()
        edit = {k: ace.edits(f, lm, ace.ApplyOptions())[s] for k, f in (("real", fitted), ("control", control))}
        real = edit["real"](torch.from_numpy(X)).numpy()
        ctrl = edit["control"](torch.from_numpy(X)).numpy()
        assert np.abs((real - real.mean(0)).T @ zc).max() < 1e-4 * before
        assert np.abs((ctrl - ctrl.mean(0)).T @ zc).max() > 0.2 * before


def test_a_fit_without_its_fitting_data_says_so(leace_fit):
    stripped = Fitted(leace_fit.name, leace_fit.fit_options, leace_fit.seed, leace_fit.key, "none",
                      leace_fit.info, {k: v for k, v in leace_fit.tensors.items() if k != LABELS})
    with pytest.raises(InterventionError, match="no tensor 'concept_labels'.*fit again"):
        get("leace").random_control(stripped, seed=0)
    with pytest.raises(InterventionError, match="eraser_norms: a fit of ace or leace"):
        eraser_norms(Fitted("caa", info={"sites": ["blocks.0.resid_post"]}))


def test_dose_response_reports_the_erasers_norms_and_refuses_a_stale_fit(leace_fit, train_items, tmp_path):
    """The dose-response benchmark writes each eraser's and its relabelled control's operator norms
    (``operator_norms.csv``), equal to the saved fit's; and a saved fit whose key is not the config's (a fit
    made with other options, or before the method changed) is refused instead of decoding with it silently."""
    import experiments.studies.dose_response.study as dr
    from interventions.fitted import InterventionError
    leace_fit.save(tmp_path / "fitted" / "leace@0")
    rows = dr.eraser_norm_rows(tmp_path, ["baseline", "leace", "leace-random", "caa"], [0.0, 10.0], 0)
    assert set(rows["arm"]) == {"leace", "leace-random"} and set(rows["beta"]) == {0.0}  # beta 1: no fit written
    own = rows[rows["arm"] == "leace"].set_index("site")["operator_norm"].to_dict()
    assert own == pytest.approx(eraser_norms(leace_fit))
    ctl = rows[rows["arm"] == "leace-random"].set_index("site")["operator_norm"].to_dict()
    assert ctl == pytest.approx(eraser_norms(get("leace").random_control(leace_fit, 0)))
    cfg = dr.parse_config({"output_dir": str(tmp_path), "model": "evenhand/models/organism_fair",
                           "methods": [{"name": "leace", "options": {"layers": [0, 1], "batch_size": 16}}]})
    dec = dr.CellDecoder(cfg, None, None, train_items, [0.0])
    assert dec.fitted("leace", 0).key == leace_fit.key  # the same options and items: read back
    stale = dr.parse_config({"output_dir": str(tmp_path), "model": "evenhand/models/organism_fair",
                             "methods": [{"name": "leace", "options": {"layers": [0, 1], "shrinkage": False}}]})
    with pytest.raises(InterventionError, match="another key"):
        dr.CellDecoder(stale, None, None, train_items, [0.0]).fitted("leace", 0)
