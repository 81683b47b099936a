"""The one xarray seam: estimators written for arrays that take and give labelled cubes.

An estimator's public methods are written for ``(samples, features)`` arrays; decorated here,
they take a DataArray or Dataset as well, and no estimator tests for xarray itself:

* :func:`labelled_fit` wraps ``fit``: a cube's valid samples are stacked by a new
  :class:`~ppa_dask.store.stacker.Stacker` (the keyword-only ``feature_dim``, ``nan_policy``
  and ``coslat`` the decorator adds), the array ``fit`` runs on the rows, and the stacker's
  layout is kept as ``xarray_layout_`` (what model files save). A fit on a plain array drops
  a layout kept before and refuses the xarray-only options.
* :func:`labelled` wraps a method (or a function of a fitted model) that takes samples: for
  xarray input it rebuilds the fitted stacker from ``xarray_layout_``, stacks the input and
  hands a :class:`LabelledRows` to the method's *xarray form*, which says what comes back per
  sample (:meth:`LabelledRows.map` runs the array method on the rows without NaN) and how it is
  unstacked (:meth:`LabelledRows.components`, :meth:`LabelledRows.features`,
  :meth:`LabelledRows.per_sample`). Arrays go straight to the array method.
* :func:`patterns` puts a fitted model's vectors in feature space (its leading vectors) on
  the fitted layout: maps ``(component, latitude, longitude)`` of a field, NaN at the cells
  dropped at fit, in the input's units when the fit was weighted (``coslat``).

This is the only module of the package outside :mod:`ppa_dask.utils` that tests whether an
input is an xarray object (tests/test_architecture.py checks the estimators do not).

Examples
--------
>>> import numpy as np, xarray as xr
>>> from sklearn.base import BaseEstimator
>>> class Centre(BaseEstimator):
...     @labelled_fit
...     def fit(self, X, y=None):
...         self.mean_ = np.asarray(X).mean(axis=0)
...         return self
...
...     @labelled(lambda rows: rows.features(rows.map((rows.n_kept,))))
...     def transform(self, X):
...         return np.asarray(X) - self.mean_
>>> cube = xr.DataArray(np.arange(12.0).reshape(2, 2, 3), dims=("band", "y", "x"))
>>> model = Centre().fit(cube, feature_dim="band")
>>> model.transform(cube).dims, float(model.transform(cube).mean())
(('band', 'y', 'x'), 0.0)
>>> model.transform(np.ones((1, 2))).tolist()  # arrays pass straight through
[[-1.5, -7.5]]
"""

from __future__ import annotations

import dataclasses
import functools
import inspect

import numpy as np

from ppa_dask.store.labelled import (
    apply_method,
    feature_coords,
    map_valid_rows,
    scatter_kept,
    unstack_samples,
)
from ppa_dask.store.stacker import COMPONENT_DIM, Samples, Stacker
from ppa_dask.utils.arrays import is_xarray

__all__ = [
    "LAYOUT_ATTR",
    "LabelledRows",
    "fitted_stacker",
    "labelled",
    "labelled_fit",
    "patterns",
]

#: The fitted attribute holding the stacker's layout (absent after a fit on plain arrays).
LAYOUT_ATTR = "xarray_layout_"

_XARRAY_ONLY = (
    "feature_dim, nan_policy and coslat apply to xarray input only (DataArray or Dataset)"
)


def fitted_stacker(estimator, use="transform xarray input"):
    """The stacker of an estimator fitted on xarray, rebuilt from its ``xarray_layout_``.

    Parameters
    ----------
    estimator : object
    use : str
        What the caller wanted to do, for the error of an estimator fitted on a plain array.

    Returns
    -------
    Stacker

    Raises
    ------
    ValueError
        The estimator has no ``xarray_layout_`` (fitted on a plain array, or not fitted).

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> fitted_stacker(BaseEstimator(), "draw a map")
    Traceback (most recent call last):
    ...
    ValueError: this BaseEstimator was fitted on a plain array; fit it on a DataArray or Dataset to draw a map
    """
    layout = getattr(estimator, LAYOUT_ATTR, None)
    if layout is None:
        raise ValueError(
            f"this {type(estimator).__name__} was fitted on a plain array; fit it on a DataArray "
            f"or Dataset to {use}"
        )
    return Stacker.from_layout(layout)


def _with_xarray_options(signature):
    """``signature`` with the keyword-only ``feature_dim=None, nan_policy="raise",
    coslat=False`` added."""
    params = list(signature.parameters.values())
    tail = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    head = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    added = [
        inspect.Parameter("feature_dim", inspect.Parameter.KEYWORD_ONLY, default=None),
        inspect.Parameter("nan_policy", inspect.Parameter.KEYWORD_ONLY, default="raise"),
        inspect.Parameter("coslat", inspect.Parameter.KEYWORD_ONLY, default=False),
    ]
    return signature.replace(parameters=head + added + tail)


def labelled_fit(fit):
    """Decorate an array ``fit(self, X, ...)`` so that it also fits xarray cubes.

    The decorated ``fit`` takes the keyword-only ``feature_dim`` (the DataArray dimension
    holding the features), ``nan_policy`` and ``coslat`` (see
    :class:`~ppa_dask.store.stacker.Stacker`), which the array ``fit`` never sees. For xarray
    input it fits on the stacked valid samples and sets ``xarray_layout_``; for arrays it
    refuses those options and, once the array fit has returned, drops an ``xarray_layout_`` of
    an earlier fit (a failing fit leaves it).
    Warnings of the stacker point at the user's call.

    Parameters
    ----------
    fit : callable
        ``fit(self, X, *args, **kwargs)`` for ``(samples, features)`` arrays.

    Returns
    -------
    callable
        With ``fit``'s name, docstring and signature (the three options added).
    """

    @functools.wraps(fit)
    def wrapper(estimator, X, *args, feature_dim=None, nan_policy="raise", coslat=False, **kwargs):
        if is_xarray(X):
            stacker = Stacker(feature_dim=feature_dim, nan_policy=nan_policy, coslat=coslat)
            wrapper(estimator, stacker.fit_stack(X), *args, **kwargs)
            setattr(estimator, LAYOUT_ATTR, stacker.layout)
            return estimator
        if feature_dim is not None or nan_policy != "raise" or coslat is not False:
            raise ValueError(_XARRAY_ONLY)
        result = fit(estimator, X, *args, **kwargs)
        vars(estimator).pop(LAYOUT_ATTR, None)  # a fit on plain arrays has no xarray layout
        return result

    wrapper.__signature__ = _with_xarray_options(inspect.signature(fit))
    return wrapper


@dataclasses.dataclass(frozen=True)
class LabelledRows:
    """An xarray input stacked for one call: what a method's xarray form works with.

    Attributes
    ----------
    estimator : object
        The fitted estimator (or model) the method belongs to.
    method : str
        The decorated method's name (what :meth:`map` runs on the rows by default).
    X : xarray.DataArray or xarray.Dataset
        The input as given.
    stacker : Stacker
        Rebuilt from the estimator's ``xarray_layout_``.
    rows : numpy.ndarray or dask.array.Array
        Every sample of ``X``, NaN rows included (one chunk along the columns).
    samples : Samples
        Where the rows go back to.
    """

    estimator: object
    method: str
    X: object
    stacker: Stacker
    rows: object
    samples: Samples

    @property
    def layout(self):
        """The fitted layout (:attr:`Stacker.layout`)."""
        return self.stacker.layout

    @property
    def feature_dim(self):
        """The fitted feature dimension (``"variable"`` for a Dataset)."""
        return self.stacker.layout["feature_dim"]

    @property
    def n_kept(self):
        """Columns of :attr:`rows`: the fitted features kept (NaN nowhere at fit)."""
        return self.stacker.n_kept

    @property
    def weights(self):
        """The weights :attr:`rows` were multiplied by, one per column (a fit with ``coslat``),
        or None. :meth:`features` divides them out; a form whose result has axes along the
        features of another kind (a derivative) says what it does with them."""
        return self.stacker.kept_weights

    def map(self, tail, kwargs=None, *, method=None):
        """The estimator's array method on the rows without NaN (NaN of shape ``tail`` else).

        Parameters
        ----------
        tail : tuple of int
            The method's result per sample (``()`` for one number).
        kwargs : dict, optional
            Keyword arguments of the method.
        method : str, optional
            Another method of the estimator than the decorated one.

        Returns
        -------
        numpy.ndarray or dask.array.Array of shape (n_samples, *tail)
            Lazy for Dask rows, one task per row chunk.
        """
        call = (self.estimator, method or self.method, dict(kwargs or {}))
        return map_valid_rows(self.rows, apply_method, tail, call)

    def map_kernel(self, func, tail, args=()):
        """``func(block, *args)`` on the rows without NaN (see :func:`map_valid_rows`)."""
        return map_valid_rows(self.rows, func, tail, args)

    def components(self, values):
        """Rows of coefficients back to a DataArray ``"components"``
        (:meth:`Stacker.unstack_components`)."""
        return self.stacker.unstack_components(values, self.samples)

    def features(self, values, keep_attrs=False):
        """Rows of the kept features back to the fitted layout
        (:meth:`Stacker.unstack_features`), with the input's attrs if ``keep_attrs``."""
        out = self.stacker.unstack_features(values, self.samples)
        if keep_attrs:
            out.attrs = dict(self.X.attrs)
        return out

    def feature_coords(self, dim=None):
        """Coordinates of the fitted feature dimension, for a result along ``dim``
        (:func:`~ppa_dask.store.labelled.feature_coords`)."""
        return feature_coords(self.stacker.layout, dim)

    def per_sample(self, values, dims, coords, name, kept_axes=()):
        """Per-sample results back over the input's sample dimensions, with its attrs.

        Parameters
        ----------
        values : numpy.ndarray or dask.array.Array of shape (n_samples, *shape)
        dims, coords, name
            As for :func:`~ppa_dask.store.labelled.unstack_samples`.
        kept_axes : tuple of int
            Axes of ``values`` along the kept features, put back on every fitted feature
            (NaN for those dropped at fit; :func:`~ppa_dask.store.labelled.scatter_kept`).
        """
        if kept_axes:
            values = scatter_kept(values, self.stacker.layout, tuple(kept_axes))
        return unstack_samples(values, self.samples, dims, coords, name, self.X.attrs)

    def sample_mean(self, values):
        """The mean over the valid samples of a result of :meth:`per_sample` (attrs kept)."""
        return values.mean(dim=list(self.samples.dims), skipna=True, keep_attrs=True)


def labelled(xarray_form, *, components=False, use="transform xarray input", check=None):
    """Decorate a method that takes samples so that it also takes xarray input.

    Parameters
    ----------
    xarray_form : callable
        ``xarray_form(rows, *args, **kwargs)``: the result for xarray input, given a
        :class:`LabelledRows` and the call's other arguments.
    components : bool, default=False
        The input is coefficients (a ``component`` dimension; ``inverse_transform``), stacked
        with :meth:`Stacker.stack_components`; otherwise samples of the fitted features.
    use : str
        The end of the error for an estimator fitted on a plain array ("... fit it on a
        DataArray or Dataset to <use>").
    check : callable, optional
        ``check(estimator, *args, **kwargs)``, run on xarray input before the stacker is
        rebuilt (say, ``check_is_fitted``).

    Returns
    -------
    callable
        A decorator; the method keeps its name, docstring and signature.
    """

    def decorate(method):
        @functools.wraps(method)
        def wrapper(estimator, X, *args, **kwargs):
            if not is_xarray(X):
                return method(estimator, X, *args, **kwargs)
            if check is not None:
                check(estimator, *args, **kwargs)
            stacker = fitted_stacker(estimator, use)
            rows, samples = stacker.stack_components(X) if components else stacker.stack(X)
            stacked = LabelledRows(estimator, method.__name__, X, stacker, rows, samples)
            return xarray_form(stacked, *args, **kwargs)

        return wrapper

    return decorate


def patterns(estimator, vectors=None):
    """A fitted model's leading vectors as maps: one per component, on the fitted features.

    The EOF view of a model fitted on xarray: each vector in feature space goes back to the
    fitted feature dimension(s) with their coordinates (``(component, latitude, longitude)``
    for a field fitted with ``feature_dim=("latitude", "longitude")``), NaN at the features
    dropped at fit (land), and divided by the weights of a fit with ``coslat`` so that they
    are in the input's units. A PPA component is a curve through the mean whose coefficient is
    measured along its leading vector: for degree 1 (an EOF), ``inverse_transform`` of the
    coefficient ``alpha`` is ``mean + alpha * pattern``; for higher degrees the curve departs
    from that line orthogonally to it (the polynomial part, which the maps do not show).

    Parameters
    ----------
    estimator : object
        Fitted on a DataArray or Dataset (it has an ``xarray_layout_``).
    vectors : array-like of shape (k, n_kept), optional
        Rows in the space the model was fitted in (one value per kept feature); default the
        model's ``leading_vectors_`` (unit rows of the weighted values with ``coslat``).

    Returns
    -------
    xarray.DataArray
        ``"patterns"`` with a ``component`` dimension (coordinate 1..k) before the fitted
        feature dimension(s); ``attrs`` say what it holds and, with ``coslat``, which weights
        were divided out.

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask import PPA
    >>> from ppa_dask.datasets import make_enso_field
    >>> field = make_enso_field(n_times=60, n_lat=12, n_lon=36)
    >>> model = PPA(n_components=2, degree=2).fit(field, feature_dim=("latitude", "longitude"))
    >>> maps = patterns(model)
    >>> maps.dims, maps.shape
    (('component', 'latitude', 'longitude'), (2, 12, 36))
    >>> bool(np.array_equal(maps[0].isnull(), field[0].isnull()))  # NaN over land
    True
    """
    stacker = fitted_stacker(estimator, "draw its patterns")
    if vectors is None:
        if not hasattr(estimator, "leading_vectors_"):
            raise ValueError(
                f"this {type(estimator).__name__} has no leading_vectors_; pass the vectors"
            )
        vectors = estimator.leading_vectors_
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[1] != stacker.n_kept:
        raise ValueError(
            f"vectors must have one column per feature kept at fit ({stacker.n_kept}), got "
            f"shape {vectors.shape}"
        )
    k = vectors.shape[0]
    # one "sample" per component, the feature dimension(s) after it
    components = Samples((COMPONENT_DIM,), (k,), {COMPONENT_DIM: np.arange(1, k + 1)}, 1)
    out = stacker.unstack_features(vectors, components)
    layout = stacker.layout
    if layout["kind"] == "DataArray":  # (a Dataset's variables keep their names)
        out.name = "patterns"
    what = layout.get("name") or layout["feature_dim"]
    out.attrs = {"long_name": f"leading vectors of the {what} model, as maps"}
    if layout.get("coslat"):
        out.attrs["weights"] = f"sqrt(cos({layout['coslat']})) divided out"
    return out
