"""PPA on bad input: a clear error, and nothing changed.

Every failing call is checked three ways: the exception type, the key words of its message, and
that it had no side effects (the caller's array is untouched and an estimator fitted before keeps
every fitted attribute, including ``n_features_in_``/``feature_names_in_``, which validation sets
first). The last tests cover degenerate but valid input: residuals with zero variance, and
float32 input.
"""

from __future__ import annotations

import copy
import re

import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from ppa_dask import PPA, FeatureBaggingPPA

N_FEATURES = 4


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _curved(n, seed=0):
    """A 4-D cloud around a parabola (a few clear polynomial degrees)."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, n)
    return np.column_stack(
        [
            t,
            t**2 + 0.05 * rng.normal(size=n),
            0.5 * t**3 + 0.05 * rng.normal(size=n),
            0.1 * rng.normal(size=n),
        ]
    )


@pytest.fixture(scope="module")
def X():
    return _curved(200)


@pytest.fixture(scope="module")
def _fitted_template():
    return PPA(random_state=0).fit(_curved(300, seed=1))


@pytest.fixture
def fitted(_fitted_template):
    """A fresh fitted estimator per test (failing calls must not alter it)."""
    return copy.deepcopy(_fitted_template)


def _fitted_state(model):
    """Deep copy of everything fit sets: public attributes ending in '_'."""
    return {
        k: copy.deepcopy(v)
        for k, v in vars(model).items()
        if k.endswith("_") and not k.startswith("_")
    }


def _assert_state_equal(model, state):
    now = _fitted_state(model)
    assert now.keys() == state.keys(), (
        f"fitted attributes changed: {sorted(now)} vs {sorted(state)}"
    )
    for k, before in state.items():
        after = now[k]
        if before is None or isinstance(before, (str, numbers_types)):
            assert after == before, k
        else:
            np.testing.assert_array_equal(np.asarray(after), np.asarray(before), err_msg=k)
            assert np.asarray(after).dtype == np.asarray(before).dtype, k


numbers_types = (int, float, np.integer, np.floating)


def _source(data):
    """The numpy array the caller holds (the source of a Dask array built from it)."""
    return data if isinstance(data, np.ndarray) else None


def _expect_failure(model, method, data, exc, match, source=None):
    """Call ``model.method(data)``, expecting ``exc`` matching ``match``, with no side effects.

    ``source`` is the caller's numpy array behind ``data`` (``data`` itself when numpy); it
    must be unchanged afterwards. Returns the exception for further checks of its message.
    """
    source = _source(data) if source is None else source
    source_copy = source.copy() if source is not None else None
    state = _fitted_state(model)
    with pytest.raises(exc, match=match) as info:
        result = getattr(model, method)(data)
        if isinstance(result, da.Array):  # lazy output: the error may come when computed
            result.compute()
    if source is not None:
        np.testing.assert_array_equal(source, source_copy)
        assert source.dtype == source_copy.dtype
    _assert_state_equal(model, state)
    return info.value


def _as(kind, array, row_chunk=50, col_chunk=None):
    if kind == "numpy":
        return array
    chunks = (row_chunk,) + ((col_chunk or array.shape[1],) if array.ndim > 1 else ())
    chunks = chunks + tuple(array.shape[2:])
    return da.from_array(array, chunks=chunks)


KINDS = ["numpy", "dask"]


# --------------------------------------------------------------------------------------------
# NaN / inf
# --------------------------------------------------------------------------------------------


def _with_nonfinite(X, cells):
    bad = X.copy()
    for (i, j), value in cells.items():
        bad[i, j] = value
    return bad


NONFINITE_CASES = {
    "nan": ({(3, 1): np.nan, (9, 1): np.nan}, 2, 0, [1]),
    "inf": ({(5, 2): np.inf, (6, 0): -np.inf}, 0, 2, [0, 2]),
    "both": ({(3, 1): np.nan, (7, 3): np.inf, (9, 1): np.nan}, 2, 1, [1, 3]),
}


@pytest.mark.parametrize("case", sorted(NONFINITE_CASES))
@pytest.mark.parametrize("kind", KINDS + ["dask-column-chunks"])
def test_fit_nonfinite(fitted, X, kind, case):
    cells, n_nan, n_inf, cols = NONFINITE_CASES[case]
    bad = _with_nonfinite(X, cells)
    data = _as(
        "numpy" if kind == "numpy" else "dask", bad, col_chunk=2 if "column" in kind else None
    )
    err = _expect_failure(fitted, "fit", data, ValueError, r"NaN", source=bad)
    msg = str(err)
    # how many of each, and which columns
    assert re.search(rf"\b{n_nan} NaN\b", msg), msg
    assert re.search(rf"\b{n_inf} inf\b", msg), msg
    assert str(cols) in msg, msg
    assert "finite" in msg


@pytest.mark.parametrize("kind", KINDS)
def test_fit_values_whose_squares_overflow(fitted, X, kind):
    """Finite but huge values in one column: their variance cannot be a float64, and the error
    says so (not "inf values" that are not there)."""
    bad = X.copy()
    bad[:, 2] *= 1e200
    err = _expect_failure(
        fitted, "fit", _as(kind, bad), ValueError, r"total variance of about", source=bad
    )
    assert "beyond what float64 holds" in str(err) and "inf values" not in str(err), str(err)


@pytest.mark.parametrize("kind", KINDS)
def test_fit_nonfinite_unfitted_stays_unfitted(X, kind):
    bad = _with_nonfinite(X, {(0, 0): np.nan})
    model = PPA(random_state=0)
    _expect_failure(model, "fit", _as(kind, bad), ValueError, r"NaN", source=bad)
    with pytest.raises(NotFittedError):
        model.transform(X)


@pytest.mark.parametrize("method", ["transform", "jacobian", "reconstruction_errors"])
@pytest.mark.parametrize("kind", KINDS)
def test_apply_nonfinite(fitted, X, kind, method):
    bad = _with_nonfinite(X, {(3, 1): np.nan, (7, 3): np.inf, (9, 1): np.nan})
    err = _expect_failure(fitted, method, _as(kind, bad), ValueError, r"NaN", source=bad)
    msg = str(err)
    assert re.search(r"\b3\b", msg), msg  # how many
    assert "[1, 3]" in msg, msg  # which columns


@pytest.mark.parametrize("kind", KINDS)
def test_inverse_transform_nonfinite(fitted, X, kind):
    R = fitted.transform(X)
    R[4, 0] = np.nan
    err = _expect_failure(fitted, "inverse_transform", _as(kind, R), ValueError, r"NaN", source=R)
    assert "[0]" in str(err)


# --------------------------------------------------------------------------------------------
# too few samples, too few features, wrong number of dimensions, non-numeric data
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_fit_too_few_rows_for_cv(fitted, X, kind):
    small = X[:10].copy()
    err = _expect_failure(
        fitted.set_params(degree=(1, 2, 3, 4, 5), cv=2),
        "fit",
        _as(kind, small, row_chunk=4),
        ValueError,
        r"10 sample",
        source=small,
    )
    msg = str(err)
    assert "2-fold" in msg and "degrees up to 5" in msg and "14 samples" in msg, msg


@pytest.mark.parametrize("kind", KINDS)
def test_fit_too_few_rows_for_fixed_degree(fitted, X, kind):
    small = X[:3].copy()
    err = _expect_failure(
        fitted.set_params(degree=5), "fit", _as(kind, small), ValueError, r"3 sample", source=small
    )
    assert re.search(r"degree 5 needs at least 6 rows", str(err)), str(err)


def test_fit_cv_training_fold_too_small(fitted, X):
    # 12 rows are enough on average for 2 folds of degree 5, but this seed's split leaves a
    # training fold of 4 rows: refused after the pass, before anything is stored
    small = X[:12].copy()
    _expect_failure(
        fitted.set_params(random_state=0),
        "fit",
        small,
        ValueError,
        r"training fold has \d+ rows; degree 5 needs at least 6",
    )


@pytest.mark.parametrize("kind", KINDS)
def test_fit_zero_rows(fitted, X, kind):
    empty = X[:0].copy()
    data = empty if kind == "numpy" else da.from_array(empty, chunks=(1, N_FEATURES))
    _expect_failure(fitted, "fit", data, ValueError, r"0 sample", source=empty)


@pytest.mark.parametrize("kind", KINDS)
def test_fit_one_column(fitted, X, kind):
    one = X[:, :1].copy()
    err = _expect_failure(fitted, "fit", _as(kind, one), ValueError, r"1 feature", source=one)
    assert "minimum of 2" in str(err)


@pytest.mark.parametrize("kind", KINDS)
def test_fit_1d(fitted, X, kind):
    flat = X[:, 0].copy()
    _expect_failure(fitted, "fit", _as(kind, flat), ValueError, r"2D array.*1D", source=flat)


@pytest.mark.parametrize("kind", KINDS)
def test_fit_3d(fitted, X, kind):
    cube = X.reshape(50, 4, N_FEATURES).copy()
    _expect_failure(
        fitted, "fit", _as(kind, cube, row_chunk=10), ValueError, r"dim 3|3D", source=cube
    )


@pytest.mark.parametrize("method", ["transform", "jacobian", "reconstruction_errors"])
@pytest.mark.parametrize("kind", KINDS)
def test_apply_1d_and_3d(fitted, X, kind, method):
    flat = X[:, 0].copy()
    _expect_failure(fitted, method, _as(kind, flat), ValueError, r"2D array.*1D", source=flat)
    cube = X.reshape(50, 4, N_FEATURES).copy()
    _expect_failure(
        fitted, method, _as(kind, cube, row_chunk=10), ValueError, r"dim 3|3D", source=cube
    )


def _words(n_rows, n_cols):
    return np.array([[f"w{i}{j}" for j in range(n_cols)] for i in range(n_rows)])


@pytest.mark.parametrize("dtype", [str, object])
def test_fit_strings_numpy(fitted, dtype):
    words = _words(20, N_FEATURES).astype(dtype)
    _expect_failure(fitted, "fit", words, ValueError, r"could not convert string to float")


@pytest.mark.parametrize("dtype", [str, object])
def test_fit_strings_dask(fitted, dtype):
    words = _words(20, N_FEATURES).astype(dtype)
    _expect_failure(
        fitted,
        "fit",
        da.from_array(words, chunks=(5, N_FEATURES)),
        TypeError,
        r"must hold real numbers.*dtype",
        source=words,
    )


def test_fit_object_numbers_dask_refused(fitted, X):
    # Dask cannot convert lazily with a known result dtype: an object array is refused upfront
    obj = X.astype(object)
    _expect_failure(
        fitted,
        "fit",
        da.from_array(obj, chunks=(50, N_FEATURES)),
        TypeError,
        r"must hold real numbers.*object",
        source=obj,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_transform_strings(fitted, kind):
    words = _words(6, N_FEATURES)
    exc, match = (
        (ValueError, r"could not convert string")
        if kind == "numpy"
        else (TypeError, r"must hold real numbers")
    )
    _expect_failure(fitted, "transform", _as(kind, words, row_chunk=3), exc, match, source=words)


# --------------------------------------------------------------------------------------------
# widths of the input to a fitted model
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["transform", "jacobian", "reconstruction_errors"])
@pytest.mark.parametrize("kind", KINDS)
def test_apply_wrong_width(fitted, X, kind, method):
    narrow = X[:, :3].copy()
    _expect_failure(
        fitted,
        method,
        _as(kind, narrow),
        ValueError,
        r"3 features.*expecting 4 features",
        source=narrow,
    )
    wide = np.hstack([X, X[:, :1]])
    _expect_failure(
        fitted,
        method,
        _as(kind, wide),
        ValueError,
        r"5 features.*expecting 4 features",
        source=wide,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_inverse_transform_too_many_columns(fitted, X, kind):
    R = fitted.transform(X)
    assert R.shape[1] == fitted.n_components_ == N_FEATURES
    wide = np.hstack([R, R[:, :1]])
    _expect_failure(
        fitted,
        "inverse_transform",
        _as(kind, wide),
        ValueError,
        r"5 columns.*n_components_ = 4",
        source=wide,
    )


def test_inverse_transform_too_many_columns_truncated_model(X):
    model = PPA(n_components=2, degree=2, random_state=0).fit(X)
    R = np.hstack([model.transform(X), np.zeros((X.shape[0], 1))])
    _expect_failure(model, "inverse_transform", R, ValueError, r"3 columns.*n_components_ = 2")


@pytest.mark.parametrize("kind", KINDS)
def test_inverse_transform_zero_columns(fitted, X, kind):
    empty = fitted.transform(X)[:, :0].copy()
    _expect_failure(
        fitted,
        "inverse_transform",
        _as(kind, empty),
        ValueError,
        r"\b0 (feature|column)",
        source=empty,
    )


# --------------------------------------------------------------------------------------------
# use before fit
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method", ["transform", "inverse_transform", "jacobian", "reconstruction_errors"]
)
@pytest.mark.parametrize("kind", KINDS)
def test_not_fitted(X, kind, method):
    model = PPA()
    data = X.copy()
    _expect_failure(model, method, _as(kind, data), NotFittedError, r"not fitted", source=data)
    assert not _fitted_state(model)


def test_failed_first_fit_leaves_model_unfitted(X):
    # validation sets n_features_in_ before the checks that fail; it must not survive them
    for bad in (PPA(degree=0), PPA(n_components=7), PPA(residual_cache="nope")):
        with pytest.raises(ValueError):
            bad.fit(X)
        assert not hasattr(bad, "n_features_in_")
        with pytest.raises(NotFittedError):
            bad.transform(X)


def test_failed_refit_keeps_width_and_feature_names(X):
    import pandas as pd

    frame = pd.DataFrame(X, columns=list("abcd"))
    model = PPA(random_state=0).fit(frame)
    state = _fitted_state(model)
    assert list(state["feature_names_in_"]) == list("abcd")
    # a narrower, unnamed, too-short array; a renamed frame; a Dask array of another width
    with pytest.raises(ValueError, match=r"sample"):
        model.fit(X[:10, :3])
    _assert_state_equal(model, state)
    with pytest.raises(ValueError, match=r"sample"):
        model.fit(pd.DataFrame(X[:10], columns=list("wxyz")))
    _assert_state_equal(model, state)
    with pytest.raises(ValueError, match=r"degree"):
        model.set_params(degree=0).fit(da.from_array(X[:, :3], chunks=(50, 3)))
    _assert_state_equal(model, state)
    # the model still works on its own features
    model.set_params(degree=(1, 2, 3, 4, 5))
    assert model.transform(frame).shape == (X.shape[0], N_FEATURES)


# --------------------------------------------------------------------------------------------
# parameters
# --------------------------------------------------------------------------------------------

BAD_PARAMS = [
    (dict(degree=0), ValueError, r"degree must be >= 1"),
    (dict(degree=[0, 2]), ValueError, r"degree must be >= 1"),
    (dict(degree=-3), ValueError, r"degree must be >= 1"),
    (dict(degree=2.5), TypeError, r"degree must be an int"),
    (dict(degree="abc"), TypeError, r"degree.*ints"),
    (dict(degree=[2, 2.5]), TypeError, r"degree.*ints"),
    (dict(degree=[]), ValueError, r"degree must not be an empty"),
    (dict(degree=True), TypeError, r"degree must be an int"),
    (dict(cv=1), ValueError, r"cv must be an int >= 2"),
    (dict(cv=0, degree=[1, 3]), ValueError, r"cv must be an int >= 2"),
    (dict(cv=2.0), ValueError, r"cv must be an int >= 2"),
    (dict(n_components=0), ValueError, r"1 <= n_components < n_features = 4, got 0"),
    (dict(n_components=N_FEATURES), ValueError, r"1 <= n_components < n_features = 4, got 4"),
    (dict(n_components=-1), ValueError, r"1 <= n_components < n_features = 4, got -1"),
    (dict(n_components=2.0), ValueError, r"n_components must be None or an int"),
    (dict(residual_cache="bogus"), ValueError, r"residual_cache must be one of.*'bogus'"),
    (dict(residual_cache=None), ValueError, r"residual_cache must be one of"),
    (dict(extrapolation="cubic"), ValueError, r"extrapolation must be one of \('linear', 'poly"),
    (dict(block_rows=0), ValueError, r"block_rows must be an int >= 1, got 0"),
]


@pytest.mark.parametrize(
    "params, exc, match", BAD_PARAMS, ids=lambda v: str(v) if isinstance(v, dict) else ""
)
@pytest.mark.parametrize("kind", KINDS)
def test_bad_params(fitted, X, kind, params, exc, match):
    data = X.copy()
    _expect_failure(fitted.set_params(**params), "fit", _as(kind, data), exc, match, source=data)


def test_cv_ignored_for_fixed_degree(X):
    # cv only matters when there are candidate degrees to choose from
    model = PPA(degree=3, cv=1, random_state=0).fit(X)
    assert model.cv_scores_ is None
    assert (model.degrees_ == 3).all()


# --------------------------------------------------------------------------------------------
# degenerate but valid input: residuals with zero variance
# --------------------------------------------------------------------------------------------


def _planar(n=300, seed=0):
    """3-D data on a plane: third column = first + second."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, n)
    a, b = t, t**2 + 0.05 * rng.normal(size=n)
    return np.column_stack([a, b, a + b])


def _constant_column(n=300, seed=0, where=2):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, n)
    cols = [t, t**2 + 0.05 * rng.normal(size=n)]
    cols.insert(where, np.full(n, 3.0))
    return np.column_stack(cols)


DEGENERATE = {
    "plane": _planar(),
    "constant-last": _constant_column(where=2),
    "constant-first": _constant_column(where=0),
}


@pytest.mark.parametrize(
    "params",
    [dict(), dict(degree=3), dict(whiten=True), dict(extrapolation="polynomial")],
    ids=["cv", "fixed", "whiten", "polynomial"],
)
@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_zero_variance_residual(name, params):
    X = DEGENERATE[name]
    X_copy = X.copy()
    model = PPA(random_state=0, **params).fit(X)
    np.testing.assert_array_equal(X, X_copy)
    assert model.explained_variance_[-1] < 1e-12 * model.explained_variance_[0]
    for attr in (
        "leading_vectors_",
        "coefficients_",
        "residual_basis_",
        "explained_variance_",
        "residual_variance_",
        "basis_intervals_",
    ):
        assert np.isfinite(getattr(model, attr)).all(), attr
    assert np.isfinite(model.alpha_ranges_).all()
    R = model.transform(X)
    X_back = model.inverse_transform(R)
    J = model.jacobian(X[:50])
    errors = model.reconstruction_errors(X)
    for value in (R, X_back, J, errors):
        assert np.isfinite(value).all()
    np.testing.assert_allclose(X_back, X, rtol=0, atol=1e-8)
    # the map stays volume (and orientation) preserving
    np.testing.assert_allclose(np.linalg.det(J), 1.0, atol=1e-8)
    # and finite on points off the subspace, with the inverse still exact there
    off = X[:20] + np.array([0.3, -0.2, 0.5])
    R_off = model.transform(off)
    assert np.isfinite(R_off).all() and np.isfinite(model.jacobian(off)).all()
    np.testing.assert_allclose(model.inverse_transform(R_off), off, rtol=0, atol=1e-8)


@pytest.mark.parametrize("name", sorted(DEGENERATE))
def test_zero_variance_residual_dask(name):
    X = DEGENERATE[name]
    model = PPA(random_state=0).fit(da.from_array(X, chunks=(64, 3)))
    reference = PPA(random_state=0).fit(X)
    Xd = da.from_array(X, chunks=(64, 3))
    R = model.transform(Xd).compute()
    X_back = model.inverse_transform(da.from_array(R, chunks=(64, 3))).compute()
    J = model.jacobian(Xd[:50]).compute()
    for value in (R, X_back, J):
        assert np.isfinite(value).all()
    np.testing.assert_allclose(X_back, X, rtol=0, atol=1e-8)
    # the last step regresses a residual of zero variance: its cv scores are rounding noise
    # (~1e-18), which degree selection treats as ties, so chunking cannot change the choice
    np.testing.assert_array_equal(model.degrees_, reference.degrees_)
    np.testing.assert_allclose(R, reference.transform(X), rtol=0, atol=1e-8)


# --------------------------------------------------------------------------------------------
# float32 input
# --------------------------------------------------------------------------------------------


FITTED_ARRAYS = (
    "mean_",
    "leading_vectors_",
    "coefficients_",
    "basis_intervals_",
    "alpha_ranges_",
    "residual_basis_",
    "explained_variance_",
    "residual_variance_",
)


def _assert_close_models(a, b, rtol):
    np.testing.assert_array_equal(a.degrees_, b.degrees_)
    for attr in FITTED_ARRAYS:
        va, vb = getattr(a, attr), getattr(b, attr)
        np.testing.assert_allclose(va, vb, rtol=rtol, atol=rtol * np.abs(vb).max(), err_msg=attr)


@pytest.mark.parametrize("kind", KINDS)
def test_float32_same_as_float64(X, kind):
    X32 = X.astype(np.float32)
    X32_copy = X32.copy()
    X64 = X32.astype(np.float64)  # the same numbers
    m32 = PPA(random_state=0).fit(_as(kind, X32))
    m64 = PPA(random_state=0).fit(_as(kind, X64))
    np.testing.assert_array_equal(X32, X32_copy)
    assert X32.dtype == np.float32
    # float32 input is computed in float64: the same numbers give the same model, exactly
    _assert_close_models(m32, m64, rtol=0)

    def run(model, data):
        out = model.transform(_as(kind, data))
        return out.compute() if isinstance(out, da.Array) else out

    R32, R64 = run(m32, X32), run(m64, X64)
    np.testing.assert_array_equal(R32, R64)
    np.testing.assert_array_equal(m32.inverse_transform(R32), m64.inverse_transform(R64))
    np.testing.assert_array_equal(m32.jacobian(X32[:20]), m64.jacobian(X64[:20]))


def test_float32_close_to_float64_original(X):
    # against the unrounded float64 data, with a fixed degree so no selection can flip
    m32 = PPA(degree=3, random_state=0).fit(X.astype(np.float32))
    m64 = PPA(degree=3, random_state=0).fit(X)
    R32, R64 = m32.transform(X.astype(np.float32)), m64.transform(X)
    np.testing.assert_allclose(R32, R64, rtol=1e-5, atol=1e-5 * np.abs(R64).max())


@pytest.mark.parametrize(
    "fit",
    [
        lambda X: PPA(degree=1).fit(X),
        lambda X: FeatureBaggingPPA(n_estimators=2, random_state=0).fit(X),
    ],
    ids=["PPA", "FeatureBaggingPPA"],
)
def test_dask_arrays_with_unknown_chunk_sizes_are_named_before_any_work(fit):
    # unknown row chunks (a boolean filter) and unknown feature chunks (a dataframe's values)
    # both stop the fit with the one Dask validator's message, not a TypeError deep inside
    X = da.from_array(np.random.default_rng(0).normal(size=(40, 3)), chunks=(10, 3))
    rows_unknown = X[X[:, 0] > -10]
    with pytest.raises(ValueError, match=r"X has unknown chunk sizes \(shape \(nan, 3\)\)"):
        fit(rows_unknown)
    features_unknown = X.map_blocks(lambda b: b, chunks=((10,) * 4, (np.nan,)))
    with pytest.raises(ValueError, match=r"unknown chunk sizes"):
        fit(features_unknown)


# ---------------------------------------------------------------------------------------------
# Dask arrays: bool like numpy, unknown chunk sizes named by axis (issue 11)
# ---------------------------------------------------------------------------------------------


def test_dask_bool_is_fitted_like_numpy_bool(X):
    B = X > 0
    direct = PPA(degree=2, random_state=0).fit(B)
    lazy = PPA(degree=2, random_state=0).fit(da.from_array(B, chunks=(50, N_FEATURES)))
    np.testing.assert_allclose(
        lazy.transform(da.from_array(B, chunks=50)).compute(), direct.transform(B), atol=1e-10
    )


@pytest.mark.parametrize("axis_name", ["feature", "sample"])
def test_dask_unknown_chunk_sizes_are_named_by_axis(fitted, X, axis_name):
    x = da.from_array(X, chunks=(50, N_FEATURES))
    unknown = x[x[:, 0] > -np.inf]  # every row kept, row chunk sizes unknown
    data = unknown if axis_name == "sample" else unknown.T
    _expect_failure(
        fitted,
        "fit",
        data,
        ValueError,
        rf"its {axis_name} \((row|column)\) chunk sizes are unknown.*compute_chunk_sizes\(\).*"
        r"lengths=True",
        source=X,
    )
