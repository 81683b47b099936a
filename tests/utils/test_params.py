"""The declarative parameter checks (ppa_dask.utils.params) and their one error format at the
entry points that use them: "<name> must be <expected>, got <value>"."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from ppa_dask import PPA, datasets
from ppa_dask.app.pipeline import PipelineError, validate_pipeline
from ppa_dask.ensemble.bagging import FeatureBaggingPPA, FeatureBaggingRegressor
from ppa_dask.information import entropy
from ppa_dask.stability import bagging_rounds, feature_instability
from ppa_dask.utils.params import (
    AnyOf,
    Instance,
    Integer,
    InvalidParameterError,
    Options,
    Real,
    check_param,
    check_params,
)
from ppa_dask.vsk import scaling

# --------------------------------------------------------------------------------------------
# the vocabulary
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "constraint, good, bad",
    [
        (Integer(1), [1, 7, np.int64(2), 10**30], [0, -1, 1.0, True, np.bool_(True), "1", None]),
        (Integer(0, 5, closed="left"), [0, 4], [5, -1]),
        (Integer(0, 5, closed="right"), [1, 5], [0, 6]),
        (Integer(0, 5, closed="neither"), [1, 4], [0, 5]),
        (Integer(), [-(10**9), 0], [0.5]),
        (Real(0), [0, 0.0, 2, np.float32(1.5)], [-1e-9, math.nan, math.inf, True, "1", None]),
        (Real(0, 1, closed="right"), [1, 0.5], [0, 1.5]),
        (Real(0, closed="neither"), [1e-300], [0.0]),
        (Real(), [-1e300], [-math.inf]),
        (Options("pca", "gd"), ["pca", np.str_("gd")], ["PCA", None, 1, ["pca"]]),
        (Options(1, 2), [1, np.int64(2)], [True, 1.5]),
        (Options(True), [True, np.bool_(True)], [1]),
        (AnyOf(None, Integer(1)), [None, 3], [0, "x"]),
        (Instance(str, expected="a str"), ["a"], [b"a", 1]),
    ],
)
def test_constraints_accept_and_refuse(constraint, good, bad):
    for value in good:
        assert constraint.accepts(value), value
    for value in bad:
        assert not constraint.accepts(value), value


def test_values_are_converted():
    assert type(check_param("k", np.int64(3), Integer(1))) is int
    assert type(check_param("x", 2, Real(0))) is float
    # an int is a count before it is a ratio: order matters in AnyOf
    either = AnyOf(Integer(1), Real(0, 1, closed="right"))
    assert check_param("q", 1, either) == 1 and type(check_param("q", 1, either)) is int
    assert type(check_param("q", 1.0, either)) is float
    assert check_param("n", None, AnyOf(None, Integer(1))) is None


@pytest.mark.parametrize(
    "constraint, expected",
    [
        (Integer(1), "an int >= 1"),
        (Integer(1, 3), "an int in [1, 3]"),
        (Integer(0, 5, closed="left"), "an int in [0, 5)"),
        (Integer(hi=5, closed="left"), "an int < 5"),
        (Integer(), "an int"),
        (Real(0, closed="neither"), "a finite number > 0"),
        (Real(0, 1, closed="right"), "a finite number in (0, 1]"),
        (Real(), "a finite number"),
        (Options("a", "b"), "one of ('a', 'b')"),
        (AnyOf(None, Integer(1), Real(0, 1)), "None or an int >= 1 or a finite number in [0, 1]"),
        (
            Integer(1, 4, closed="left", expected="an int with 1 <= k < d = 4"),
            "an int with 1 <= k < d = 4",
        ),
    ],
)
def test_descriptions(constraint, expected):
    assert constraint.expected == expected


def test_check_params_names_the_parameter_the_expectation_and_the_value():
    spec = {"n": Integer(1), "kind": Options("a", "b")}
    assert check_params(spec, {"kind": "b", "n": 2, "ignored": object()}) == {"n": 2, "kind": "b"}
    assert list(check_params(spec, {"kind": "b", "n": 2})) == ["n", "kind"]  # spec order
    with pytest.raises(InvalidParameterError) as info:
        check_params(spec, {"n": 2, "kind": "c"})
    assert str(info.value) == "kind must be one of ('a', 'b'), got 'c'"
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


def test_a_bad_closed_is_refused():
    with pytest.raises(ValueError, match="closed must be one of"):
        Integer(0, 1, closed="open")


# --------------------------------------------------------------------------------------------
# the entry points: one message format
# --------------------------------------------------------------------------------------------

_X = np.random.default_rng(0).normal(size=(40, 4))
_Y = _X[:, 0]


def _bag(**params):
    return FeatureBaggingRegressor(LinearRegression(), **params).fit(_X, _Y)


ENTRY_POINTS = [
    (lambda: PPA(cv=1.5).fit(_X), "cv must be an int >= 2, got 1.5"),
    (lambda: PPA(gd_tol=math.nan).fit(_X), "gd_tol must be a finite number >= 0, got nan"),
    (lambda: PPA(gd_max_iter=-1).fit(_X), "gd_max_iter must be an int >= 0, got -1"),
    (
        lambda: PPA(extrapolation="cubic").fit(_X),
        "extrapolation must be one of ('linear', 'polynomial'), got 'cubic'",
    ),
    (
        lambda: PPA(checkpoint_dir=3).fit(_X),
        "checkpoint_dir must be None or a path (str or os.PathLike), got 3",
    ),
    (
        lambda: PPA(n_components=4).fit(_X),
        "n_components must be None or an int with 1 <= n_components < n_features = 4, got 4",
    ),
    (lambda: PPA(block_rows=True).fit(_X), "block_rows must be an int >= 1, got True"),
    (
        lambda: _bag(n_estimators=0),
        "n_estimators (the number of bags B) must be an int >= 1, got 0",
    ),
    (
        lambda: _bag(max_features=1.5),
        "max_features must be an int >= 1 or a finite number in (0, 1], got 1.5",
    ),
    (
        lambda: _bag(max_samples="all"),
        "max_samples must be None or an int >= 1 or a finite number in (0, 1], got 'all'",
    ),
    (
        lambda: _bag(coupling="loose"),
        "coupling must be one of ('shared', 'independent'), got 'loose'",
    ),
    (
        lambda: FeatureBaggingPPA(PPA(degree=2), n_components=0).fit(_X),
        "n_components must be an int >= 1, got 0",
    ),
    (lambda: datasets.make_helix(0), "n_samples must be an int >= 1, got 0"),
    (lambda: datasets.make_helix(10, a=0), "a must be a finite number > 0, got 0"),
    (
        lambda: datasets.make_curved_manifold(10, noise=-1),
        "noise must be a finite number >= 0, got -1",
    ),
    (lambda: datasets.generate_rows("curved", -1, 5), "start must be an int >= 0, got -1"),
    (
        lambda: datasets.make_cube(ny=4, nx=4, cloud_fraction=1.0),
        "cloud_fraction must be a finite number in [0, 1), got 1.0",
    ),
    (lambda: datasets.make_parabolas(True), "n_samples must be an int >= 1, got True"),
    (
        lambda: entropy.marginal_entropies(_X, method="knn"),
        "method must be one of ('auto', 'vasicek', 'van es', 'ebrahimi', 'correa', "
        "'histogram', 'kde'), got 'knn'",
    ),
    (lambda: bagging_rounds(10, 0.0), "q must be a finite number in (0, 1], got 0.0"),
    (
        lambda: feature_instability(LinearRegression(), _X, _Y, n_features=0),
        "n_features must be an int >= 1, got 0",
    ),
    (
        lambda: scaling.SVMExtraction(n_keep=-1).fit(_X, _Y > 0),
        "n_keep must be an int >= 0, got -1",
    ),
    (
        lambda: scaling.blockwise_spectral_ratio(_X, None, "rbf", 1.0, tile_rows=0),
        "tile_rows must be an int >= 1, got 0",
    ),
    (
        lambda: scaling.vsk_gram(_X, None, "rbf", gamma=-1.0),
        "gamma (of the Gaussian kernel) must be a finite number > 0, got -1.0",
    ),
]


@pytest.mark.parametrize("call, message", ENTRY_POINTS, ids=[m for _, m in ENTRY_POINTS])
def test_entry_points_raise_the_one_error_format(call, message):
    with pytest.raises(InvalidParameterError) as info:
        call()
    assert str(info.value) == message


def test_the_pipeline_schema_checks_its_leaves_with_the_same_constraints():
    config = {"name": "ok", "data": {"source": "dataset", "name": "vehicles"}, "seed": True}
    # a bool is not an int, in the config file as everywhere (True == 1 in Python)
    with pytest.raises(PipelineError, match="seed: expected an integer >= 0, got True"):
        validate_pipeline(config)
    config["seed"] = 3
    config["model"] = {"extrapolation": "cubic"}
    with pytest.raises(PipelineError, match="model.extrapolation: expected one of 'linear'"):
        validate_pipeline(config)
