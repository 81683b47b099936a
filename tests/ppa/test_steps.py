"""The step loop's degree policy (ppa_dask.ppa.steps) against brute-force refits.

At every step of a fit the policy's scores must be those of refitting each candidate degree's
polynomial by least squares (numpy lstsq, in another basis) on all folds but one and scoring it
on that fold, for the same folds, direction and basis interval; and the degree chosen must be the
lowest within rounding of the best of those brute-force scores, with and without the lookahead
(whose gathered moments then stand in for a step's own pass). Too few rows for the folds or the
degree are refused before any pass, naming the fold sizes, which are counted here from the fold
labels themselves.
"""

import numpy as np
import pytest

from ppa_dask import PPA
from ppa_dask.ppa import kernels, steps
from ppa_dask.ppa.drivers import NumpyDriver


def curved(n=2400, seed=0):
    """Six features: a cubic and a quadratic curve in a parameter, plus Gaussian directions."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, n)
    Z = rng.normal(size=(n, 6)) * np.array([0.05, 0.04, 0.3, 0.2, 0.1, 0.02])
    Z[:, 0] += 2 * t
    Z[:, 1] += 1.5 * t**2
    Z[:, 4] += 0.8 * t**3
    return Z @ np.linalg.qr(rng.normal(size=(6, 6)))[0]


def brute_force_scores(R, e, offset, scale, candidates, labels, n_folds):
    """CV error per sample of each degree: lstsq of the part of ``R`` orthogonal to ``e`` on a
    Legendre basis of the step's ``t``, fitted on the training folds and scored on the held-out
    one (a different basis from the fit's Chebyshev one: same span, same least squares)."""
    alpha = R @ e
    Z = R - np.outer(alpha, e)
    t = (alpha - offset) / scale
    scores = []
    for g in candidates:
        V = np.polynomial.legendre.legvander(t, g)
        total = 0.0
        for f in range(n_folds):
            train, held = labels != f, labels == f
            W = np.linalg.lstsq(V[train], Z[train], rcond=None)[0]
            total += float(((Z[held] - V[held] @ W) ** 2).sum())
        scores.append(total / len(R))
    return np.array(scores)


@pytest.mark.parametrize("lookahead", [0, 3])
def test_each_steps_degree_is_the_brute_force_refits_choice_on_the_same_folds(lookahead):
    X = curved()
    candidates = [1, 2, 3, 4]
    model = PPA(degree=candidates, cv=3, random_state=5, lookahead=lookahead).fit(X)
    labels = kernels.fold_labels(0, len(X), model.fold_seed_, 3)
    params = model.model_params()
    R = X - model.mean_  # the residual entering step p, advanced by the fitted steps
    chosen = []
    for p, step in enumerate(params.steps):
        offset, scale = model.basis_intervals_[p]
        brute = brute_force_scores(
            R, model.leading_vectors_[p], offset, scale, candidates, labels, 3
        )
        np.testing.assert_allclose(model.cv_scores_[p], brute, rtol=1e-8, atol=1e-14)
        threshold = brute.min() + 1e-10 * model.residual_variance_[p]
        assert model.degrees_[p] == candidates[int(np.flatnonzero(brute <= threshold)[0])]
        chosen.append(int(model.degrees_[p]))
        Yt = np.ascontiguousarray(R.T)
        _, Yt = kernels.step_forward(Yt, step, out=Yt)
        R = Yt.T
    # the data are chosen so that the policy has something to choose: curved and linear steps
    assert max(chosen) > 1 and 1 in chosen
    if lookahead:  # and a step's moments came from an earlier pass's gathering
        assert model.n_passes_ < len(params.steps) + 1


def test_fold_size_refusal_names_the_smallest_training_fold_counted_from_the_labels():
    seed, folds, degree = 11, 4, 5
    needed = steps.min_samples_for_folds(seed, folds, degree + 1)

    def smallest_training_fold(n):
        labels = kernels.fold_labels(0, n, seed, folds)
        return n - int(np.bincount(labels, minlength=folds).max())

    # the fewest rows: every training fold is large enough from there, and not one row before
    assert smallest_training_fold(needed) >= degree + 1
    assert smallest_training_fold(needed - 1) < degree + 1
    steps.check_rows(needed, [1, degree], folds, seed)
    short = needed - 1
    message = (
        f"X has {short} sample(s); in {folds}-fold cross-validation of degrees up to {degree} "
        f"with these folds (fold seed {seed}) the smallest training fold has "
        f"{smallest_training_fold(short)} rows; degree {degree} needs at least {degree + 1}, "
        f"which the folds reach from {needed} samples."
    )
    with pytest.raises(ValueError) as caught:
        steps.check_rows(short, [1, degree], folds, seed)
    assert str(caught.value).startswith(message)


def test_the_estimator_refuses_short_folds_before_any_pass(monkeypatch):
    X = curved(n=15)
    passes = []

    def first_pass(self, sample_index):
        passes.append(sample_index)
        raise AssertionError("a pass ran before the row check")

    monkeypatch.setattr(NumpyDriver, "first_pass", first_pass)
    with pytest.raises(ValueError, match=r"smallest training fold has \d+ rows; degree 12"):
        PPA(degree=[1, 12], cv=4, random_state=3).fit(X)
    assert passes == []


def test_one_degree_needs_one_row_more_than_the_degree():
    steps.check_rows(4, [3], cv=None)
    with pytest.raises(ValueError, match=r"^X has 3 sample\(s\); degree 3 needs at least 4 rows"):
        steps.check_rows(3, [3], cv=None)
    with pytest.raises(ValueError, match=r"degree 3 needs at least 4 rows"):
        PPA(degree=3).fit(curved(n=3))


def test_the_in_pass_fold_check_names_the_fold_and_the_degree():
    # a pass whose folds hold 10, 3 and 2 rows: the training folds hold 5, 12 and 13
    moments = {"n": np.array([10, 3, 2])}
    with pytest.raises(ValueError, match="training fold has 5 rows; degree 5 needs at least 6"):
        steps.choose_degree(moments, None, [1, 5], 1.0, n_rows=15)


def test_rounding_makes_the_step_linear_whatever_the_scores():
    X = curved(n=600)
    driver = NumpyDriver(X)
    settings = steps.StepSettings(candidates=(1, 2, 3), n_steps=1, seed=0, cv=2)
    fitted = steps.fit_steps(driver, settings)
    assert fitted["degrees_"][0] > 1  # a curved first step ...
    # ... whose moments, with the residual declared rounding, give degree 1
    first = NumpyDriver(X).first_pass(np.arange(0))
    e = fitted["leading_vectors_"][0]
    offset, scale = fitted["basis_intervals_"][0]
    spec = kernels.StepSpec(e, offset, scale, 3, 0, 2, subspace=np.eye(6))
    moments = NumpyDriver(X).step_pass(first["mean"], [], spec, last=True)
    degree, scores = steps.choose_degree(moments, e, [1, 2, 3], 1.0, len(X), past_rank=True)
    assert degree == 1 and scores.shape == (3,)


@pytest.mark.parametrize(
    ("degree", "leading_vector", "gathers"),
    [([1, 2], "pca", True), ([2, 3], "pca", False), (3, "pca", False), ([1, 2], "gd", False)],
)
def test_a_pass_gathers_ahead_only_where_a_step_can_be_linear(
    monkeypatch, degree, leading_vector, gathers
):
    # the guess gathered ahead is a linear step along the next eigenvector: with no candidate
    # degree 1, or under PPA-GD (whose direction is not that eigenvector), it is never used
    ahead = []
    step_pass = NumpyDriver.step_pass

    def spy(self, mean, fitted, spec, last=False):
        ahead.append(len(spec.ahead))
        return step_pass(self, mean, fitted, spec, last)

    monkeypatch.setattr(NumpyDriver, "step_pass", spy)
    PPA(degree=degree, lookahead=3, leading_vector=leading_vector, gd_max_iter=1,
        random_state=0).fit(curved(n=600))  # fmt: skip
    assert (max(ahead) > 0) == gathers
