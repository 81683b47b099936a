"""Variably scaled kernels (VSK) for SVM classifiers and kernel regression networks.

A variably scaled kernel with scaling function ``psi`` is an ordinary kernel evaluated on the
augmented points ``(x, psi(x))`` (Campi, Marchetti, Perracchione, "Learning via variably scaled
kernels", Adv. Comput. Math. 2021). So the Gaussian VSK Gram matrix is the Hadamard product
``K(x) o K(psi)`` and the linear one is the sum ``K(x) + K(psi)``, and a VSK learner is a
scikit-learn :class:`~sklearn.pipeline.Pipeline` of a transformer that appends ``psi(x)``
(:class:`VariablyScaled`) and an unchanged :class:`~sklearn.svm.SVC` or
:class:`~sklearn.kernel_ridge.KernelRidge`.

Scaling functions (small estimators with ``fit(X, y)`` and ``transform(X)``):

- :class:`NaiveBayesScaling`: the Gaussian naive-Bayes posterior ``P(y = +1 | x)`` (several
  classes: the posteriors of all classes but the first), optionally trained on extra a-priori
  data (the paper's SVM-VSK);
- :class:`ModelScaling`: the prediction of a fitted model, e.g. :class:`CurveFitRegressor` (a
  parametric curve fitted with :func:`scipy.optimize.curve_fit`) or any scikit-learn regressor
  (the paper's KRN-VSK);
- :class:`PPAScaling`: the leading Principal Polynomial Analysis coordinates (unsupervised
  curvilinear features; not in the paper).

Ready learners: :func:`make_svm_vsk`, :func:`make_krn_vsk` and :class:`SVMExtraction` (SVM-E).

Diagnostics: :func:`vsk_gram`, :func:`spectral_ratio` ``C(K) = tr(K) / ||K||_F``,
:func:`condition_number`, and their blockwise versions :func:`blockwise_spectral_ratio` and
:func:`blockwise_condition_number`, which compute the same statistics from tiles of the Gram
matrix (in memory or as Dask tasks) without ever holding the ``n x n`` matrix. The condition
number there comes from ARPACK's Lanczos iteration (:func:`scipy.sparse.linalg.eigsh`) on a
:class:`~scipy.sparse.linalg.LinearOperator` whose matrix-vector product is a tiled computation
(:func:`tiled_gram_operator`).

The Gaussian kernel is ``exp(-gamma ||a - b||^2)`` (scikit-learn's ``gamma``; a shape parameter
``eps`` in ``exp(-(eps r)^2)`` is ``gamma = eps**2``); the linear kernel is ``a . b``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
    TransformerMixin,
    clone,
)
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted, validate_data

from ppa_dask.ppa.estimator import PPA
from ppa_dask.store.encoding import register_estimator
from ppa_dask.utils.arrays import is_dask
from ppa_dask.utils.compute import compute
from ppa_dask.utils.params import Integer, Options, Real, check_param
from ppa_dask.utils.seeds import as_random_state

__all__ = [
    "VariablyScaled",
    "NaiveBayesScaling",
    "ModelScaling",
    "PPAScaling",
    "CurveFitRegressor",
    "SVMExtraction",
    "make_svm_vsk",
    "make_krn_vsk",
    "gram_tile",
    "vsk_gram",
    "spectral_ratio",
    "normalized_spectral_ratio",
    "condition_number",
    "blockwise_spectral_ratio",
    "blockwise_condition_number",
    "tiled_gram_operator",
]

KERNELS = ("rbf", "linear")
_KERNEL_ALIASES = {"rbf": "rbf", "gaussian": "rbf", "linear": "linear"}


# -------------------------------------------------------------------------------------------
# per-tile numpy kernels (shared by the dense, the in-memory tiled and the Dask paths)
# -------------------------------------------------------------------------------------------


def _check_kernel(kernel, gamma):
    name = _KERNEL_ALIASES.get(kernel) if isinstance(kernel, str) else None
    if name is None:
        raise ValueError(f"kernel must be one of {KERNELS} (or 'gaussian'), got {kernel!r}")
    if name == "rbf":
        gamma = check_param("gamma (of the Gaussian kernel)", gamma, Real(0, closed="neither"))
    return name, gamma


def gram_tile(A, B, kernel="rbf", gamma=1.0):
    """Kernel matrix between the rows of ``A`` and ``B`` (one tile of a Gram matrix).

    Parameters
    ----------
    A : ndarray of shape (p, d)
    B : ndarray of shape (q, d)
    kernel : {"rbf", "linear"}, default="rbf"
        ``exp(-gamma ||a - b||^2)`` or ``a . b``.
    gamma : float, default=1.0
        Gaussian shape parameter (ignored by the linear kernel).

    Returns
    -------
    K : ndarray of shape (p, q)

    Examples
    --------
    >>> import numpy as np
    >>> gram_tile(np.zeros((2, 3)), np.ones((1, 3)), "rbf", 0.5).round(4).tolist()
    [[0.2231], [0.2231]]
    """
    kernel, gamma = _check_kernel(kernel, gamma)
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    G = A @ B.T
    if kernel == "linear":
        return G
    # ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a.b; cancellation can leave tiny negatives
    sq = np.einsum("ij,ij->i", A, A)[:, None] + np.einsum("ij,ij->i", B, B)[None, :]
    sq -= 2.0 * G
    np.maximum(sq, 0.0, out=sq)
    sq *= -gamma
    return np.exp(sq, out=sq)


def _upper_rowblock_stats(blocks, kernel, gamma):
    """``(trace, squared Frobenius norm)`` of the tiles ``(i, j >= i)`` of a symmetric Gram matrix.

    ``blocks[0]`` is row block ``i`` and ``blocks[1:]`` are the later row blocks; the
    off-diagonal tiles stand for their mirror images too, so they count twice.
    """
    Zi = blocks[0]
    Kii = gram_tile(Zi, Zi, kernel, gamma)
    trace = float(np.trace(Kii))
    sumsq = float(np.einsum("ij,ij->", Kii, Kii))
    for Zj in blocks[1:]:
        Kij = gram_tile(Zi, Zj, kernel, gamma)
        sumsq += 2.0 * float(np.einsum("ij,ij->", Kij, Kij))
    return np.array([trace, sumsq])


def _rowblock_matvec(Zi, blocks, v, kernel, gamma):
    """Rows of ``K @ v`` for row block ``Zi``, one column tile at a time."""
    out = np.zeros(Zi.shape[0])
    start = 0
    for Zj in blocks:
        stop = start + Zj.shape[0]
        out += gram_tile(Zi, Zj, kernel, gamma) @ v[start:stop]
        start = stop
    return out


# -------------------------------------------------------------------------------------------
# helpers: validation, psi evaluation
# -------------------------------------------------------------------------------------------


def _name(obj):
    """A readable name of a scaling function: its class, or the function's name."""
    return getattr(obj, "__name__", None) or type(obj).__name__


def _as_2d_psi(values, n_rows, who):
    """Check what a scaling function returned: one finite row per sample."""
    try:
        values = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{who} must return real numbers, got {type(values).__name__}: {exc}"
        ) from None
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2:
        raise ValueError(
            f"{who} must return an array of shape (n_samples,) or (n_samples, m), got shape "
            f"{values.shape}"
        )
    if values.shape[0] != n_rows:
        raise ValueError(
            f"{who} returned {values.shape[0]} rows for X with {n_rows} rows; a scaling function "
            "must return one row per sample"
        )
    if values.shape[1] < 1:
        raise ValueError(f"{who} returned no columns (shape {values.shape})")
    finite = np.isfinite(values)
    if not finite.all():
        rows = np.flatnonzero(~finite.all(axis=1))
        cols = np.flatnonzero(~finite.all(axis=0)).tolist()
        raise ValueError(
            f"{who} returned non-finite values (NaN or inf) in {rows.size} of {n_rows} rows "
            f"(first row {int(rows[0])}), columns {cols}"
        )
    return values


def _check_X(X, name="X", min_samples=1):
    """A finite 2-D float array (a copy is never made unless needed: inputs are never modified)."""
    from sklearn.utils import check_array

    return check_array(
        X,
        dtype=np.float64,
        ensure_all_finite=True,
        ensure_min_samples=min_samples,
        input_name=name,
    )


def _require_y(y, who):
    if y is None:
        raise ValueError(
            f"{who} is a supervised scaling function: it requires y to be passed, but the target "
            "y is None (call fit(X, y), or use a Pipeline/GridSearchCV that passes y)"
        )


def _apply_psi(psi, X):
    """Values of a scaling function given as a fitted transformer, a callable or an array."""
    if psi is None:
        return None
    if hasattr(psi, "transform"):
        return psi.transform(X)
    if callable(psi):
        return psi(X)
    return psi


# -------------------------------------------------------------------------------------------
# scaling functions
# -------------------------------------------------------------------------------------------


@register_estimator
class NaiveBayesScaling(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Gaussian naive-Bayes posterior as a VSK scaling function (the paper's SVM-VSK psi).

    ``transform(X)`` returns ``P(y = c | x)`` for every class ``c`` but the first (sorted) one:
    for two classes the single column ``P(y = classes_[1] | x)`` (``P(y = +1 | x)`` for labels
    ``{-1, +1}``); for ``k`` classes ``k - 1`` columns (the dropped one is one minus their sum).

    Parameters
    ----------
    var_smoothing : float, default=1e-9
        Passed to :class:`sklearn.naive_bayes.GaussianNB`.
    priors : array-like of shape (n_classes,), optional
        Class priors (otherwise estimated from the labels).
    extra_X : array-like of shape (n_extra, n_features), optional
        A-priori data: extra labelled samples the naive-Bayes model is trained on besides
        ``(X, y)`` (the paper's toy experiment uses the rows not drawn into the data set).
    extra_y : array-like of shape (n_extra,), optional
        Labels of ``extra_X``.

    Attributes
    ----------
    nb_ : GaussianNB
    classes_ : ndarray
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0], [0.1], [0.9], [1.0]]); y = np.array([-1, -1, 1, 1])
    >>> p = NaiveBayesScaling().fit(X, y).transform([[0.05], [0.95]])
    >>> (p[:, 0] < 0.5).tolist(), (p[:, 0] > 0.5).tolist()
    ([True, False], [False, True])
    """

    def __init__(self, var_smoothing=1e-9, priors=None, extra_X=None, extra_y=None):
        self.var_smoothing = var_smoothing
        self.priors = priors
        self.extra_X = extra_X
        self.extra_y = extra_y

    def fit(self, X, y=None):
        from sklearn.naive_bayes import GaussianNB

        _require_y(y, "NaiveBayesScaling")
        X, y = validate_data(self, X, y, reset=True, dtype=np.float64)
        if (self.extra_X is None) != (self.extra_y is None):
            raise ValueError("NaiveBayesScaling: give both extra_X and extra_y, or neither")
        if self.extra_X is not None:
            extra_X = _check_X(self.extra_X, "extra_X")
            extra_y = np.asarray(self.extra_y)
            if extra_X.shape[1] != X.shape[1]:
                raise ValueError(f"extra_X has {extra_X.shape[1]} features but X has {X.shape[1]}")
            if extra_y.ndim != 1 or extra_y.shape[0] != extra_X.shape[0]:
                raise ValueError(
                    f"extra_y must be 1-D with one label per row of extra_X ({extra_X.shape[0]}), "
                    f"got shape {extra_y.shape}"
                )
            X = np.vstack([X, extra_X])
            y = np.concatenate([y, extra_y])
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(
                f"NaiveBayesScaling needs at least two classes in y, got one class only "
                f"{classes.tolist()}: a posterior of a single class carries no information"
            )
        self.nb_ = GaussianNB(priors=self.priors, var_smoothing=self.var_smoothing).fit(X, y)
        self.classes_ = self.nb_.classes_
        return self

    def transform(self, X):
        check_is_fitted(self, "nb_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        # the first class's posterior is one minus the others: dropping it keeps psi injective
        return self.nb_.predict_proba(X)[:, 1:]

    @property
    def _n_features_out(self):
        # get_feature_names_out: naivebayesscaling0 .. (one per class but the first)
        return len(self.classes_) - 1

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        return tags


@register_estimator
class ModelScaling(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """The prediction of a fitted model as a VSK scaling function (the paper's KRN-VSK psi).

    Parameters
    ----------
    model : estimator with ``predict``
        A parametric curve (:class:`CurveFitRegressor`) or any scikit-learn regressor, cloned
        and fitted on ``(X, y)``. A model fitted beforehand (e.g. on a-priori data such as
        auxiliary time series observed on more days than the training set) is used as it is
        when wrapped in :class:`sklearn.frozen.FrozenEstimator`; ``fit`` then needs no ``y``
        (a bare fitted model would be refitted: cloning, as pipelines and grid searches do,
        forgets its fit).

    Attributes
    ----------
    model_ : the fitted model
    n_features_out_ : int
        Columns of ``transform`` (the model's outputs; names from ``get_feature_names_out``).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> t = np.arange(5.0)[:, None]
    >>> ModelScaling(LinearRegression()).fit(t, 2 * t.ravel() + 1).transform([[10.0]]).round(6)
    array([[21.]])
    """

    def __init__(self, model):
        self.model = model

    def _frozen(self):
        from sklearn.frozen import FrozenEstimator

        return isinstance(self.model, FrozenEstimator)

    def fit(self, X, y=None):
        if not hasattr(self.model, "predict"):
            raise TypeError(
                f"ModelScaling needs a model with a predict method, got {type(self.model).__name__}"
            )
        X = validate_data(self, X, reset=True, dtype=np.float64)
        if self._frozen():
            try:
                check_is_fitted(self.model)
            except NotFittedError:
                raise NotFittedError(
                    "ModelScaling got a FrozenEstimator of an unfitted "
                    f"{type(self.model.estimator).__name__}: fit it before freezing"
                ) from None
            self.model_ = self.model
        else:
            _require_y(y, f"ModelScaling({type(self.model).__name__})")
            y = np.asarray(y)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}")
            self.model_ = clone(self.model).fit(X, y)
        # the width of transform, for get_feature_names_out (modelscaling0 ..)
        self.n_features_out_ = int(np.asarray(self.model_.predict(X[:1])).reshape(1, -1).shape[1])
        return self

    def transform(self, X):
        check_is_fitted(self, "model_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        values = np.asarray(self.model_.predict(X), dtype=np.float64)
        return values[:, None] if values.ndim == 1 else values

    @property
    def _n_features_out(self):
        return self.n_features_out_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = not self._frozen()
        return tags


@register_estimator
class PPAScaling(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Leading Principal Polynomial Analysis coordinates as a VSK scaling function.

    Unsupervised curvilinear features (not in the VSK paper): ``psi(x) = [alpha_1 .. alpha_k]``
    of a :class:`ppa_dask.PPA` fitted on the training inputs.

    Parameters
    ----------
    n_components : int, default=1
        Number of leading PPA coordinates (``< n_features``).
    degree : int or iterable of int, default=(1, 2, 3)
        PPA's polynomial degree(s) per step (candidates chosen by ``cv``-fold CV).
    cv : int, default=2
    random_state : None, int >= 0, Generator or RandomState, default=None
        The PPA's ``random_state`` (its folds).
    whiten : bool, default=True
        Divide each coordinate by its standard deviation, so the augmented columns are on a
        comparable scale whatever the spread of the data.

    Attributes
    ----------
    ppa_ : PPA
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0); t = rng.uniform(-1, 1, 200)
    >>> X = np.column_stack([t, t ** 2]) + 0.01 * rng.normal(size=(200, 2))
    >>> PPAScaling(n_components=1, random_state=0).fit(X).transform(X).shape
    (200, 1)
    """

    def __init__(self, n_components=1, degree=(1, 2, 3), cv=2, random_state=None, whiten=True):
        self.n_components = n_components
        self.degree = degree
        self.cv = cv
        self.random_state = random_state
        self.whiten = whiten

    def fit(self, X, y=None):
        X = validate_data(self, X, reset=True, dtype=np.float64)
        self.ppa_ = PPA(
            n_components=self.n_components,
            degree=self.degree,
            cv=self.cv,
            random_state=self.random_state,
            whiten=self.whiten,
        ).fit(X)
        return self

    def transform(self, X):
        check_is_fitted(self, "ppa_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.ppa_.transform(X)

    @property
    def _n_features_out(self):
        # get_feature_names_out: ppascaling0 .. (one per PPA coordinate)
        return self.ppa_.n_components_


@register_estimator
class CurveFitRegressor(RegressorMixin, BaseEstimator):
    """A parametric model ``func(x, *beta)`` fitted by :func:`scipy.optimize.curve_fit`.

    Parameters
    ----------
    func : callable
        ``func(x, *params)``; ``x`` is the single input column as a 1-D array when ``X`` has
        one feature, else the ``(n, d)`` array.
    p0 : sequence of float, optional
        Starting parameters.
    bounds : (lower, upper), optional
        Parameter bounds (as for ``curve_fit``).
    maxfev : int, default=20000

    Attributes
    ----------
    params_ : ndarray
        The fitted parameters ``beta``.

    Examples
    --------
    >>> import numpy as np
    >>> t = np.linspace(0, 1, 20)
    >>> f = lambda x, a, b: a * np.exp(b * x)
    >>> CurveFitRegressor(f, p0=(1, 1)).fit(t[:, None], 2 * np.exp(3 * t)).params_.round(6)
    array([2., 3.])
    """

    def __init__(self, func, p0=None, bounds=None, maxfev=20000):
        self.func = func
        self.p0 = p0
        self.bounds = bounds
        self.maxfev = maxfev

    def _x(self, X):
        return X[:, 0] if X.shape[1] == 1 else X

    def fit(self, X, y):
        from scipy.optimize import curve_fit

        if not callable(self.func):
            raise TypeError(f"func must be callable, got {type(self.func).__name__}")
        X, y = validate_data(self, X, y, reset=True, dtype=np.float64, y_numeric=True)
        kwargs = {"maxfev": int(self.maxfev)}
        if self.bounds is not None:
            kwargs["bounds"] = self.bounds
            kwargs.pop("maxfev")
            kwargs["max_nfev"] = int(self.maxfev)
        params, _ = curve_fit(self.func, self._x(X), y, p0=self.p0, **kwargs)
        self.params_ = np.asarray(params, dtype=np.float64)
        return self

    def predict(self, X):
        check_is_fitted(self, "params_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return np.broadcast_to(
            np.asarray(self.func(self._x(X), *self.params_), dtype=np.float64), (X.shape[0],)
        ).copy()


# -------------------------------------------------------------------------------------------
# the VSK transformer and ready learners
# -------------------------------------------------------------------------------------------


@register_estimator
class VariablyScaled(TransformerMixin, BaseEstimator):
    """Map ``X`` to the augmented points ``[X, psi(X)]`` of a variably scaled kernel.

    A kernel on the output is the VSK with scaling function ``psi`` (Gaussian: ``K(x) o
    K(psi)``; linear: ``K(x) + K(psi)``), so ``Pipeline([("vsk", VariablyScaled(psi)),
    ("svc", SVC())])`` is an SVM-VSK. ``fit`` fits the scaling function on ``(X, y)``, so inside
    a Pipeline, GridSearchCV or cross-validation a supervised ``psi`` only sees training rows.

    Parameters
    ----------
    psi : estimator, callable or None
        The scaling function: an estimator with ``fit(X, y)`` and ``transform(X)`` (cloned and
        fitted in ``fit``: :class:`NaiveBayesScaling`, :class:`ModelScaling`,
        :class:`PPAScaling`, or any transformer), or a plain function ``X -> psi(X)`` (used as
        is). ``None`` appends nothing (the standard kernel), which lets a grid search compare
        ``psi`` choices with the plain kernel.
    rescale : {None, "minmax"}, default=None
        ``"minmax"`` maps each psi column to [0, 1] over the training rows (needed when psi is
        on another scale than X, e.g. a fitted curve of counts).
    weight : float, default=1.0
        Factor on the psi columns (the relative scale of the two factors of the kernel).

    Attributes
    ----------
    psi_ : the fitted scaling function (or the callable, or None)
    n_psi_ : int
        Number of appended columns.
    psi_min_, psi_scale_ : ndarray
        The ``rescale="minmax"`` map (identity otherwise).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.svm import SVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> model = make_pipeline(VariablyScaled(NaiveBayesScaling()), SVC()).fit(X, y)
    >>> model[0].transform(X).shape
    (60, 4)
    """

    def __init__(self, psi=None, rescale=None, weight=1.0):
        self.psi = psi
        self.rescale = rescale
        self.weight = weight

    def _who(self):
        return f"psi ({_name(self.psi)})"

    def fit(self, X, y=None):
        self._fit(X, y)
        return self

    def fit_transform(self, X, y=None, **fit_params):
        return self._fit(X, y)

    def _fit(self, X, y):
        check_param("rescale", self.rescale, Options(None, "minmax"))
        check_param("weight", self.weight, Real(0, closed="neither"))
        X = validate_data(self, X, reset=True, dtype=np.float64)
        psi = self.psi
        if psi is None:
            self.psi_ = None
            self.n_psi_ = 0
            self.psi_min_ = self.psi_scale_ = np.zeros(0)
            return X.copy()
        if hasattr(psi, "fit") and hasattr(psi, "transform"):
            fitted = clone(psi)
            values = fitted.fit(X, y).transform(X)
        elif callable(psi):
            fitted = psi
            values = psi(X)
        else:
            raise TypeError(
                "psi must be an estimator with fit and transform, a callable X -> psi(X), or None; "
                f"got {type(psi).__name__}"
            )
        values = _as_2d_psi(values, X.shape[0], self._who())
        if self.rescale == "minmax":
            lo, hi = values.min(axis=0), values.max(axis=0)
            span = hi - lo
            # a constant psi column stays constant instead of dividing by zero
            scale = np.where(span > 0, span, 1.0)
        else:
            lo, scale = np.zeros(values.shape[1]), np.ones(values.shape[1])
        self.psi_ = fitted
        self.n_psi_ = values.shape[1]
        self.psi_min_, self.psi_scale_ = lo, scale
        return np.hstack([X, self.weight * (values - lo) / scale])

    def psi_values(self, X):
        """The (rescaled, weighted) psi columns that ``transform`` appends to ``X``."""
        check_is_fitted(self, "n_psi_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self._psi_values(X)

    def _psi_values(self, X):
        if self.psi_ is None:
            return np.zeros((X.shape[0], 0))
        values = _as_2d_psi(_apply_psi(self.psi_, X), X.shape[0], self._who())
        if values.shape[1] != self.n_psi_:
            raise ValueError(
                f"{self._who()} returned {values.shape[1]} columns, {self.n_psi_} at fit time"
            )
        return self.weight * (values - self.psi_min_) / self.psi_scale_

    def transform(self, X):
        check_is_fitted(self, "n_psi_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return np.hstack([X, self._psi_values(X)])

    def get_feature_names_out(self, input_features=None):
        from sklearn.utils.validation import _check_feature_names_in

        check_is_fitted(self, "n_psi_")
        names = list(_check_feature_names_in(self, input_features))
        return np.asarray(names + [f"psi{j}" for j in range(self.n_psi_)], dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        psi = self.psi
        if psi is not None and hasattr(psi, "__sklearn_tags__"):
            tags.target_tags.required = psi.__sklearn_tags__().target_tags.required
        return tags


def make_svm_vsk(kernel="rbf", psi=None, C=1.0, gamma="scale", rescale=None, weight=1.0):
    """SVM-VSK: an SVC on the augmented points ``[x, psi(x)]``.

    Parameters
    ----------
    kernel : {"rbf", "linear"}, default="rbf"
    psi : scaling function, default=None
        ``None`` means :class:`NaiveBayesScaling()` (the paper's choice).
    C, gamma : SVC parameters (tunable as ``svc__C``, ``svc__gamma``).
    rescale, weight : passed to :class:`VariablyScaled` (``vsk__rescale``, ``vsk__weight``).

    Returns
    -------
    Pipeline ``[("vsk", VariablyScaled), ("svc", SVC)]``: an ordinary classifier (clone-able,
    ``get_params``), usable in GridSearchCV or as a base learner of an ensemble.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(size=(80, 2)); y = np.where(X[:, 0] > X[:, 1], 1, -1)
    >>> make_svm_vsk("linear", C=10.0).fit(X, y).score(X, y) > 0.9
    True
    """
    from sklearn.pipeline import Pipeline
    from sklearn.svm import SVC

    kernel, _ = _check_kernel(kernel, 1.0)
    psi = NaiveBayesScaling() if psi is None else psi
    return Pipeline(
        [
            ("vsk", VariablyScaled(psi, rescale=rescale, weight=weight)),
            ("svc", SVC(kernel=kernel, C=C, gamma=gamma)),
        ]
    )


def make_krn_vsk(psi=None, alpha=0.0, gamma=1.0, rescale=None, weight=1.0):
    """KRN-VSK: a Gaussian kernel regression network on the augmented points ``[x, psi(x)]``.

    The coefficients solve ``(K_Psi + alpha I) c = y`` (the paper's regularisation ``nu`` is
    ``alpha``; ``alpha=0`` interpolates), via :class:`~sklearn.kernel_ridge.KernelRidge`.

    Parameters
    ----------
    psi : scaling function or None, default=None
        ``None`` gives the plain KRN.
    alpha : float, default=0.0
        The regularisation ``nu`` (``krn__alpha``).
    gamma : float, default=1.0
        Gaussian ``exp(-gamma r^2)`` (``krn__gamma``).
    rescale, weight : passed to :class:`VariablyScaled`.

    Returns
    -------
    Pipeline ``[("vsk", VariablyScaled), ("krn", KernelRidge)]``

    Examples
    --------
    >>> import numpy as np
    >>> t = np.linspace(0, 1, 15)[:, None]; y = np.sin(3 * t.ravel())
    >>> model = make_krn_vsk(psi=lambda X: X ** 2, alpha=1e-8, gamma=10.0).fit(t, y)
    >>> bool(np.abs(model.predict(t) - y).max() < 1e-3)
    True
    """
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.pipeline import Pipeline

    return Pipeline(
        [
            ("vsk", VariablyScaled(psi, rescale=rescale, weight=weight)),
            ("krn", KernelRidge(kernel="rbf", alpha=alpha, gamma=gamma)),
        ]
    )


@register_estimator
class SVMExtraction(ClassifierMixin, BaseEstimator):
    """SVM-E: an SVC on ``n_keep`` kept features plus the naive-Bayes posterior of the others.

    The paper's VSK-inspired feature extraction: of ``d`` features, ``n_keep`` (the paper's
    ``n - 1``) are kept as they are and the remaining ``d - n_keep`` are compressed into the
    Gaussian naive-Bayes posterior ``P(y = classes_[1] | x_rest)`` (all but the first class's
    posterior for several classes); the SVC sees ``n_keep + 1`` (binary) features.

    Parameters
    ----------
    n_keep : int, default=1
        Number of features kept, chosen at random (``random_state``) unless ``keep`` is given.
    keep : sequence of int, optional
        Indices of the kept features (overrides ``n_keep``).
    kernel : {"rbf", "linear"}, default="rbf"
    C : float, default=1.0
    gamma : float or "scale", default="scale"
    var_smoothing : float, default=1e-9
        Of the naive-Bayes model.
    random_state : None, int >= 0, Generator or RandomState, default=None
        Draws the kept features (:func:`ppa_dask.utils.seeds.as_random_state`).

    Attributes
    ----------
    keep_ : ndarray of int
        Kept features.
    compressed_ : ndarray of int
        Features compressed by the naive-Bayes posterior.
    nb_ : NaiveBayesScaling
    svc_ : SVC
    classes_ : ndarray

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 5)); y = (X.sum(axis=1) > 0).astype(int)
    >>> model = SVMExtraction(keep=[0], kernel="linear").fit(X, y)
    >>> model.extract(X).shape, model.compressed_.tolist()
    ((100, 2), [1, 2, 3, 4])
    """

    def __init__(
        self,
        n_keep=1,
        keep=None,
        kernel="rbf",
        C=1.0,
        gamma="scale",
        var_smoothing=1e-9,
        random_state=None,
    ):
        self.n_keep = n_keep
        self.keep = keep
        self.kernel = kernel
        self.C = C
        self.gamma = gamma
        self.var_smoothing = var_smoothing
        self.random_state = random_state

    def _choose(self, d):
        if self.keep is not None:
            keep = np.asarray(self.keep)
            if keep.ndim != 1 or keep.size < 1 or not np.issubdtype(keep.dtype, np.integer):
                raise ValueError(
                    f"keep must be a non-empty sequence of feature indices, got {self.keep!r}"
                )
            if keep.min() < 0 or keep.max() >= d or np.unique(keep).size != keep.size:
                raise ValueError(
                    f"keep must hold distinct feature indices in [0, {d}), got {keep.tolist()}"
                )
        else:
            k = self.n_keep
            k = check_param("n_keep", k, Integer(0))
            if k >= d:
                raise ValueError(
                    f"n_keep={k} leaves no feature for the naive-Bayes posterior: X has {d} features"
                )
            keep = as_random_state(self.random_state).choice(d, size=k, replace=False)
        keep = np.sort(keep.astype(np.intp))
        if keep.size >= d:
            raise ValueError(
                f"keep={keep.tolist()} leaves no feature for the naive-Bayes posterior: X has {d} features"
            )
        return keep, np.setdiff1d(np.arange(d), keep)

    def fit(self, X, y):
        from sklearn.svm import SVC
        from sklearn.utils.multiclass import check_classification_targets

        X, y = validate_data(self, X, y, reset=True, dtype=np.float64, ensure_min_features=2)
        check_classification_targets(y)
        kernel, _ = _check_kernel(self.kernel, 1.0)
        self.keep_, self.compressed_ = self._choose(X.shape[1])
        self.nb_ = NaiveBayesScaling(var_smoothing=self.var_smoothing).fit(
            X[:, self.compressed_], y
        )
        self.svc_ = SVC(kernel=kernel, C=self.C, gamma=self.gamma).fit(self._extract(X), y)
        self.classes_ = self.svc_.classes_
        return self

    def _extract(self, X):
        return np.hstack([X[:, self.keep_], self.nb_.transform(X[:, self.compressed_])])

    def extract(self, X):
        """The extracted features ``[x_keep, P(y | x_rest)]`` the SVC works on."""
        check_is_fitted(self, "svc_")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self._extract(X)

    def predict(self, X):
        Z = self.extract(X)  # checks the fit first
        return self.svc_.predict(Z)

    def decision_function(self, X):
        Z = self.extract(X)
        return self.svc_.decision_function(Z)


# -------------------------------------------------------------------------------------------
# diagnostics: dense
# -------------------------------------------------------------------------------------------


def _augmented(X, psi):
    """``[X, psi(X)]`` as numpy (or Dask when X is Dask)."""
    if is_dask(X):
        return _augmented_dask(X, psi)
    X = _check_X(X)
    if psi is None:
        return X
    values = _as_2d_psi(_apply_psi(psi, X), X.shape[0], f"psi ({_name(psi)})")
    return np.hstack([X, values])


def _augmented_dask(X, psi):
    import dask.array as da

    if X.ndim != 2:
        raise ValueError(f"Expected a 2D array for X, got a {X.ndim}D Dask array")
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError("X has unknown chunk sizes; call compute_chunk_sizes() first")
    X = X.astype(np.float64)
    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    if psi is None:
        return X
    if (
        is_dask(psi)
        or isinstance(psi, np.ndarray)
        or not (callable(psi) or hasattr(psi, "transform"))
    ):
        values = psi if is_dask(psi) else da.from_array(np.asarray(psi, dtype=np.float64))
        if values.ndim == 1:
            values = values[:, None]
        if values.shape[0] != X.shape[0]:
            raise ValueError(
                f"psi has {values.shape[0]} rows for X with {X.shape[0]} rows; one row per sample needed"
            )
        values = values.astype(np.float64).rechunk((X.chunks[0], -1))
    else:
        # the width of psi's output, from one row
        m = _as_2d_psi(_apply_psi(psi, X[:1].compute()), 1, f"psi ({_name(psi)})").shape[1]
        who = f"psi ({_name(psi)})"
        values = X.map_blocks(
            lambda b: _as_2d_psi(_apply_psi(psi, b), b.shape[0], who),
            chunks=(X.chunks[0], (m,)),
            dtype=np.float64,
        )
    return da.concatenate([X, values], axis=1)


def vsk_gram(X, psi=None, kernel="rbf", gamma=1.0, Y=None):
    """The VSK Gram matrix: the kernel on the augmented points ``[X, psi(X)]``.

    Parameters
    ----------
    X : array-like of shape (n, d)
    psi : array of shape (n,) or (n, m), callable, fitted scaling function, or None
        Values of the scaling function on ``X`` or a way to compute them; ``None`` gives the
        standard kernel matrix ``K(x)``.
    kernel : {"rbf", "linear"}, default="rbf"
    gamma : float, default=1.0
    Y : array-like of shape (p, d + m), optional
        Augmented points for the columns (default: the rows' own).

    Returns
    -------
    K_Psi : ndarray of shape (n, n) (or (n, p))

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics.pairwise import rbf_kernel
    >>> rng = np.random.default_rng(0); X = rng.uniform(size=(5, 2)); p = rng.uniform(size=5)
    >>> K = vsk_gram(X, p, "rbf", 2.0)
    >>> bool(np.allclose(K, rbf_kernel(X, gamma=2.0) * rbf_kernel(p[:, None], gamma=2.0)))
    True
    """
    if is_dask(X):
        raise TypeError("vsk_gram builds the dense n x n matrix: use blockwise_* for Dask input")
    Z = _augmented(X, psi)
    return gram_tile(Z, Z if Y is None else _check_X(Y, "Y"), kernel, gamma)


def _check_square(K, name="K"):
    K = np.asarray(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] < 1:
        raise ValueError(f"{name} must be a non-empty square matrix, got shape {K.shape}")
    if not np.isfinite(K).all():
        raise ValueError(f"{name} contains NaN or inf")
    return K


def _normalize_ratio(C, n):
    # C lies in [1, sqrt(n)] for a PSD matrix; n = 1 has no range to normalise over
    return 0.0 if n == 1 else (C - 1.0) / (np.sqrt(n) - 1.0)


def spectral_ratio(K, normalized=False):
    """Spectral ratio ``C(K) = tr(K) / ||K||_F`` (Donini and Aiolli's expressiveness measure).

    For a PSD matrix ``1 <= C(K) <= sqrt(rank K)``; a larger ratio means a more expressive
    kernel. ``normalized=True`` returns ``(C - 1) / (sqrt(n) - 1)`` in ``[0, 1]``.

    Examples
    --------
    >>> import numpy as np
    >>> spectral_ratio(np.eye(4)), spectral_ratio(np.ones((4, 4)))
    (2.0, 1.0)
    """
    K = _check_square(K)
    fro = np.linalg.norm(K, "fro")
    if fro == 0:
        raise ValueError("K is the zero matrix: its spectral ratio is undefined")
    C = float(np.trace(K) / fro)
    return _normalize_ratio(C, K.shape[0]) if normalized else C


def normalized_spectral_ratio(K):
    """``(C(K) - 1) / (sqrt(n) - 1)``, the spectral ratio mapped to [0, 1]."""
    return spectral_ratio(K, normalized=True)


def condition_number(K):
    """2-norm condition number ``max|lambda| / min|lambda|`` of a symmetric (Gram) matrix.

    Returns ``inf`` when the smallest eigenvalue is zero to machine precision or negative
    (a PSD Gram matrix that has become numerically singular).

    Examples
    --------
    >>> import numpy as np
    >>> condition_number(np.diag([4.0, 2.0, 0.5]))
    8.0
    """
    K = _check_square(K)
    if not np.allclose(K, K.T, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(K).max())):
        raise ValueError("K must be symmetric (a Gram matrix); use numpy.linalg.cond otherwise")
    lam = np.linalg.eigvalsh((K + K.T) / 2)
    return _cond_from_extremes(lam[-1], lam[0], np.abs(lam).max(), np.abs(lam).min())


def _cond_from_extremes(lam_max, lam_min, abs_max, abs_min):
    # a Gram matrix is PSD: a non-positive smallest eigenvalue means numerically singular
    if lam_min <= 0 or abs_min == 0:
        return float("inf")
    return float(abs_max / abs_min)


# -------------------------------------------------------------------------------------------
# diagnostics: blockwise (tiles in memory or Dask tasks)
# -------------------------------------------------------------------------------------------


def _check_tile_rows(tile_rows):
    return check_param("tile_rows", tile_rows, Integer(1))


def _row_blocks(Z, tile_rows):
    """Row blocks of the augmented points: numpy views, or persisted Dask chunks as delayed.

    Also returns the persisted array: the caller keeps it alive, since on a distributed
    cluster the chunks are released as soon as no collection refers to them.
    """
    if is_dask(Z):
        Z = Z.rechunk((tile_rows, -1)).persist()
        return Z.to_delayed().ravel().tolist(), Z
    return [Z[s : s + tile_rows] for s in range(0, Z.shape[0], tile_rows)], None


def blockwise_spectral_ratio(
    X, psi=None, kernel="rbf", gamma=1.0, normalized=False, tile_rows=1024
):
    """Spectral ratio of the (VSK) Gram matrix, from tiles: never holds the ``n x n`` matrix.

    The trace and the squared Frobenius norm are sums over the tiles ``(i, j >= i)`` of the
    symmetric Gram matrix (an off-diagonal tile counts twice); each tile lives only while its
    sums are taken. A Dask ``X`` gives one task per row block (run on the current Client).

    Parameters
    ----------
    X : array-like or dask.array.Array of shape (n, d)
    psi : as in :func:`vsk_gram` (an array may be a Dask array), default=None
    kernel, gamma : as in :func:`gram_tile`
    normalized : bool, default=False
    tile_rows : int, default=1024
        Rows of a tile (memory per task about ``8 * tile_rows^2`` bytes per tile).

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).uniform(size=(300, 2))
    >>> a = blockwise_spectral_ratio(X, gamma=3.0, tile_rows=64)
    >>> bool(np.isclose(a, spectral_ratio(vsk_gram(X, None, "rbf", 3.0))))
    True
    """
    kernel, gamma = _check_kernel(kernel, gamma)
    tile_rows = _check_tile_rows(tile_rows)
    Z = _augmented(X, psi)
    n = Z.shape[0]
    blocks, persisted = _row_blocks(Z, tile_rows)
    if persisted is not None:
        import dask

        task = dask.delayed(_upper_rowblock_stats, pure=True)
        parts = compute(*[task(blocks[i:], kernel, gamma) for i in range(len(blocks))])
        del persisted
    else:
        parts = [_upper_rowblock_stats(blocks[i:], kernel, gamma) for i in range(len(blocks))]
    trace, sumsq = np.sum(parts, axis=0)
    if not np.isfinite(sumsq):
        raise ValueError("the Gram matrix has non-finite entries (non-finite X or psi?)")
    if sumsq == 0:
        raise ValueError("the Gram matrix is zero: its spectral ratio is undefined")
    C = float(trace / np.sqrt(sumsq))
    return _normalize_ratio(C, n) if normalized else C


def tiled_gram_operator(X, psi=None, kernel="rbf", gamma=1.0, tile_rows=1024):
    """The (VSK) Gram matrix as a :class:`scipy.sparse.linalg.LinearOperator`, applied by tiles.

    ``op @ v`` computes ``K v`` one row block at a time, each row block summing its tiles
    ``K_ij v_j`` (tiles are recomputed per product rather than stored). With a Dask ``X`` the
    augmented points are persisted and each product runs as one Dask task per row block.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).uniform(size=(50, 2)); v = np.ones(50)
    >>> op = tiled_gram_operator(X, gamma=2.0, tile_rows=16)
    >>> bool(np.allclose(op @ v, vsk_gram(X, None, "rbf", 2.0) @ v))
    True
    """
    from scipy.sparse.linalg import LinearOperator

    kernel, gamma = _check_kernel(kernel, gamma)
    tile_rows = _check_tile_rows(tile_rows)
    Z = _augmented(X, psi)
    n = Z.shape[0]
    blocks, persisted = _row_blocks(Z, tile_rows)

    if persisted is not None:
        import dask

        task = dask.delayed(_rowblock_matvec, pure=True)

        def matvec(v, _keep_alive=persisted):
            dv = dask.delayed(np.asarray(v, dtype=np.float64).ravel(), pure=True)
            return np.concatenate(compute(*[task(b, blocks, dv, kernel, gamma) for b in blocks]))
    else:

        def matvec(v):
            v = np.asarray(v, dtype=np.float64).ravel()
            return np.concatenate([_rowblock_matvec(b, blocks, v, kernel, gamma) for b in blocks])

    # symmetric: the adjoint product is the same product
    return LinearOperator((n, n), matvec=matvec, rmatvec=matvec, dtype=np.float64)


def blockwise_condition_number(
    X,
    psi=None,
    kernel="rbf",
    gamma=1.0,
    shift=0.0,
    tile_rows=1024,
    tol=1e-8,
    maxiter=None,
    ncv=None,
):
    """Condition number of the (VSK) Gram matrix by Lanczos on the tiled operator.

    The largest and the smallest eigenvalue come from ARPACK's implicitly restarted Lanczos
    (:func:`scipy.sparse.linalg.eigsh`, ``which="LA"`` and ``"SA"``) on
    :func:`tiled_gram_operator`, so only ``O(n)`` vectors and one tile per task are in memory;
    each iteration costs one tiled product (``O(n^2 d)`` work, one Dask task per row block).

    Limits: Lanczos needs few iterations for the largest eigenvalue, but the smallest one of a
    badly conditioned Gaussian kernel matrix sits in a cluster of tiny eigenvalues and can take
    thousands of products (a 200-point matrix with condition number 1e5 needs several thousand).
    The method is meant for moderately conditioned matrices (condition numbers up to about
    1e4-1e5, or a regularised ``K + shift I`` as a kernel ridge regression inverts); beyond that
    use the dense :func:`condition_number` on moderate ``n``. Eigenvalues are accurate to about
    ``tol * |lambda|`` (plus rounding of order ``eps * lambda_max``); a numerically singular
    matrix (``lambda_min <= 0``) gives ``inf``. If ARPACK does not converge within ``maxiter``
    restarts a RuntimeError says so.

    Parameters
    ----------
    X, psi, kernel, gamma, tile_rows : as in :func:`blockwise_spectral_ratio`
    shift : float, default=0.0
        Condition number of ``K + shift * I`` (the KRN's ``nu``).
    tol : float, default=1e-8
        Relative tolerance of the eigenvalues.
    maxiter, ncv : int, optional
        Passed to ``eigsh`` (default ``ncv``: ``min(n - 1, 20)``).

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).uniform(size=(100, 2))
    >>> c = blockwise_condition_number(X, gamma=300.0, tile_rows=32)
    >>> bool(np.isclose(c, condition_number(vsk_gram(X, None, "rbf", 300.0)), rtol=1e-6))
    True
    """
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    shift = check_param("shift", shift, Real(0))
    gram = tiled_gram_operator(X, psi, kernel, gamma, tile_rows)
    n = gram.shape[0]
    shift = float(shift)

    def matvec(v):
        v = np.asarray(v, dtype=np.float64).ravel()
        return gram.matvec(v) + shift * v

    op = LinearOperator((n, n), matvec=matvec, rmatvec=matvec, dtype=np.float64)
    if n <= 3:
        # ARPACK needs k < n - 1: build the tiny matrix column by column instead
        return condition_number(np.column_stack([op @ e for e in np.eye(n)]))
    # a fixed start vector makes the result reproducible
    v0 = np.random.default_rng(0).uniform(0.5, 1.5, n)
    kw = {"tol": tol, "maxiter": maxiter, "v0": v0, "ncv": min(n - 1, 20) if ncv is None else ncv}
    try:
        lam_max = float(eigsh(op, k=1, which="LA", return_eigenvectors=False, **kw)[0])
        lam_min = float(eigsh(op, k=1, which="SA", return_eigenvectors=False, **kw)[0])
    except ArpackNoConvergence as exc:
        raise RuntimeError(
            f"Lanczos (ARPACK) did not converge for an extreme eigenvalue of the {n} x {n} Gram "
            f"matrix ({exc}); the matrix is probably badly conditioned: raise maxiter/ncv, add a "
            "shift, or use condition_number on the dense matrix"
        ) from exc
    return _cond_from_extremes(
        lam_max, lam_min, max(abs(lam_max), abs(lam_min)), min(abs(lam_max), abs(lam_min))
    )
