"""The fast blockwise fit agrees with an independent direct port of the paper's algorithm."""

import numpy as np
import pytest
from conftest import noisy_helix, random_nonlinear
from direct_ppa import fit_direct, fit_direct_cv, transform_direct

from ppa_dask import PPA
from ppa_dask.ppa.kernels import fold_labels

DATA = {"helix3d": noisy_helix(), "nonlinear6d": random_nonlinear()}


def assert_columns_equal_up_to_sign(R, R_ref, rtol):
    signs = np.sign(np.sum(R * R_ref, axis=0))
    scale = np.abs(R_ref).max(axis=0)
    err = np.abs(R - R_ref * signs).max(axis=0) / scale
    assert err.max() <= rtol, f"relative column errors {err}"


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("degree", range(1, 16))
def test_transform_matches_direct_eigh_and_lstsq(name, degree):
    X = DATA[name]
    R = PPA(degree=degree).fit(X).transform(X)
    R_ref = transform_direct(fit_direct(X, degree), X)
    assert_columns_equal_up_to_sign(R, R_ref, rtol=1e-8)


@pytest.mark.parametrize("name", sorted(DATA))
def test_new_points_transform_like_the_direct_port(name):
    X = DATA[name]
    train, test = X[::2], X[1::2]
    R = PPA(degree=4).fit(train).transform(test)
    R_ref = transform_direct(fit_direct(train, 4), test)
    # test points beyond the training range use the linear extension; compare inside it
    inside = np.all((test >= train.min(0)) & (test <= train.max(0)), axis=1)
    model = PPA(degree=4).fit(train)
    alphas = model.transform(test)[:, :-1]
    within = np.all(
        (alphas >= model.alpha_ranges_[:, 0]) & (alphas <= model.alpha_ranges_[:, 1]), axis=1
    )
    keep = inside & within
    assert keep.sum() > len(test) // 2
    assert_columns_equal_up_to_sign(R[keep], R_ref[keep], rtol=1e-8)


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("cv", [2, 3])
def test_degree_selection_from_fold_moments_equals_brute_force_cv(name, cv):
    X = DATA[name]
    candidates = [1, 2, 3, 4, 5]
    model = PPA(degree=candidates, cv=cv, random_state=7).fit(X)
    folds = fold_labels(0, X.shape[0], model.fold_seed_, cv)
    _, scores_ref, chosen_ref = fit_direct_cv(X, candidates, folds)
    np.testing.assert_allclose(model.cv_scores_, scores_ref, rtol=1e-8)
    assert model.degrees_.tolist() == list(chosen_ref)


def test_cv_picks_a_curved_fit_for_curved_data():
    rng = np.random.default_rng(3)
    t = rng.uniform(-1, 1, 3000)
    X = np.column_stack([t, 0.5 * t**2 + 0.01 * rng.normal(size=t.size)])
    model = PPA(degree=range(1, 6), random_state=0).fit(X)
    assert model.degrees_[0] >= 2
    assert model.cv_scores_[0, 0] > 10 * model.cv_scores_[0, 1]


# --- float32 input is computed in float64 -----------------------------------------------------

_FLOAT32_ARRAYS = (
    "mean_",
    "leading_vectors_",
    "coefficients_",
    "basis_intervals_",
    "alpha_ranges_",
    "residual_basis_",
    "cv_scores_",
    "explained_variance_",
    "residual_variance_",
)


@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_float32_input_gives_exactly_the_float64_model_of_the_same_numbers(kind):
    # the same numbers in float64: every operation on them is float64, so the models and their
    # outputs are identical bit for bit (any float32 arithmetic would show up as a difference)
    import dask.array as da

    X32 = random_nonlinear(1500, 5).astype(np.float32)
    X64 = X32.astype(np.float64)

    def as_kind(a):
        return a if kind == "numpy" else da.from_array(a, chunks=(400, 5))

    m32 = PPA(random_state=0).fit(as_kind(X32))
    m64 = PPA(random_state=0).fit(as_kind(X64))
    np.testing.assert_array_equal(m32.degrees_, m64.degrees_)
    for name in _FLOAT32_ARRAYS:
        np.testing.assert_array_equal(getattr(m32, name), getattr(m64, name), err_msg=name)
    R32 = np.asarray(m32.transform(as_kind(X32)))
    assert R32.dtype == np.float64
    np.testing.assert_array_equal(R32, np.asarray(m64.transform(as_kind(X64))))
    R = R32.astype(np.float32)
    np.testing.assert_array_equal(
        np.asarray(m32.inverse_transform(as_kind(R))),
        np.asarray(m64.inverse_transform(as_kind(R.astype(np.float64)))),
    )
    np.testing.assert_array_equal(
        np.asarray(m32.jacobian(as_kind(X32[:20]))), np.asarray(m64.jacobian(as_kind(X64[:20])))
    )
