"""The PPA estimator (scikit-learn API) on numpy and Dask arrays.

:meth:`PPA.fit` validates its input, makes the driver its array type calls for
(:mod:`ppa_dask.ppa.drivers`), wraps it in the magnitude check, fits the steps
(:func:`ppa_dask.ppa.steps.fit_steps`) and converts the model back to the input's units
(:mod:`ppa_dask.ppa.magnitude`); :meth:`PPA.fit_with_driver` is that path for a driver given.
"""

from __future__ import annotations

import numbers
import os

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ppa_dask.ppa import algebra as _algebra
from ppa_dask.ppa import kernels
from ppa_dask.ppa import krylov as _krylov
from ppa_dask.ppa import steps as _steps
from ppa_dask.ppa import wide as _wide
from ppa_dask.ppa.drivers import (
    RESIDUAL_CACHES,
    DaskDriver,
    NumpyDriver,
)
from ppa_dask.ppa.magnitude import MagnitudeCheck, fit_in_range, in_input_units
from ppa_dask.ppa.metric import coefficient_variances, metric_from_jacobian
from ppa_dask.store.encoding import register_estimator
from ppa_dask.store.model_files import ModelFileError, load_model, save_model
from ppa_dask.store.results import as_dask_if_zarr
from ppa_dask.store.seam import labelled, labelled_fit
from ppa_dask.store.stacker import COMPONENT_DIM
from ppa_dask.utils.arrays import check_dask_samples, is_dask
from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.compute import compute, tree_reduce
from ppa_dask.utils.params import (
    MAX_CANDIDATE_DEGREES,
    PATH,
    SOLVERS,
    AnyOf,
    Integer,
    Options,
    Real,
    candidate_degrees,
    check_params,
    is_int,
)
from ppa_dask.utils.seeds import RANDOM_STATE, estimator_seed
from ppa_dask.utils.warnings import RankDeficientWarning, warn

__all__ = ["PARAMETER_CONSTRAINTS", "PPA"]

#: What each parameter of :class:`PPA` may be (:mod:`ppa_dask.utils.params` constraints): the
#: one declaration, which the CLI's choices and the pipeline file's allowed values read.
#: ``n_components``, bounded by the data, is added at fit; ``degree`` (an int or candidates) is
#: :func:`ppa_dask.utils.params.candidate_degrees`.
PARAMETER_CONSTRAINTS = {
    "cv": Integer(2),
    "random_state": RANDOM_STATE,
    "extrapolation": Options("linear", "polynomial"),
    "residual_cache": Options(*RESIDUAL_CACHES),
    "checkpoint_dir": AnyOf(None, PATH),
    "block_rows": Integer(1),
    "leading_vector": Options("pca", "gd"),
    "gd_max_iter": Integer(0),
    "gd_tol": Real(0),
    "lookahead": AnyOf(Options("auto"), Integer(0)),
    "solver": Options(*SOLVERS),
}
# fitted attributes that input validation sets at the start of fit
_VALIDATION_ATTRS = ("n_features_in_", "feature_names_in_")


def _warn_rank(fitted, rtol, d, n_steps):
    """One :class:`RankDeficientWarning` for a fit whose numerical rank is below ``d``."""
    rank = fitted["rank_"]
    if rank >= d:
        return
    residual = fitted["residual_variance_"]
    total = float(residual[0])
    tolerance = (
        f"the rank tolerance {rtol * total:.3g} ({rtol:.3g} x the total variance {total:.3g}; "
        "n_features x eps)"
    )
    if rank < len(residual):
        where = (
            f"its residual variance after {rank} components, {float(residual[rank]):.3g}, is "
            f"at most {tolerance}; steps {rank + 1} to {n_steps} are fitted linear (no "
            "polynomial on rounding)"
            if rank < n_steps
            else f"its residual variance after {rank} components, "
            f"{float(residual[rank]):.3g}, is at most {tolerance}"
        )
    else:
        where = (
            f"the covariance left after its {n_steps} fitted steps falls to {tolerance} "
            f"after {rank - n_steps} more dimensions"
        )
    warn(
        f"X has numerical rank {rank} of {d} features: {where}. Reconstruction errors from "
        f"k = {rank} components on are rounding (the model's rank_).",
        RankDeficientWarning,
    )


# xarray forms of the methods that take samples (ppa_dask.store.seam stacks the input, maps
# the array method over the rows without NaN and unstacks what these say)


def _transform_labelled(rows):
    n_out = len(rows.estimator.get_feature_names_out())
    return rows.components(rows.map((n_out,)))


def _inverse_labelled(rows):
    return rows.features(rows.map((rows.n_kept,)))


def _jacobian_labelled(rows):
    """One (d, d) Jacobian per sample: ``component`` by the fitted feature dimension."""
    d, fdim = rows.estimator.n_features_in_, rows.feature_dim
    coords = rows.feature_coords()
    coords[COMPONENT_DIM] = np.arange(1, d + 1)
    values = rows.map((d, d))
    if rows.weights is not None:  # coslat: the model saw w * x, so dR/dx = dR/d(w x) w
        values = values * rows.weights
    return rows.per_sample(values, (COMPONENT_DIM, fdim), coords, "jacobian", kept_axes=(2,))


def _metric_labelled(rows, whitened=True):
    """One (d, d) metric per sample: the feature dimension by its copy suffixed ``_2``."""
    d, fdim = rows.estimator.n_features_in_, rows.feature_dim
    coords = rows.feature_coords()
    coords.update(rows.feature_coords(f"{fdim}_2"))
    values = rows.map((d, d), {"whitened": whitened})
    if rows.weights is not None:  # coslat: dx^T W M W dx, the metric of the weighted values
        w = rows.weights
        values = values * w[:, None] * w
    return rows.per_sample(values, (fdim, f"{fdim}_2"), coords, "metric", kept_axes=(1, 2))


def _errors_labelled(rows, per_sample=None):
    k = len(rows.estimator.degrees_) + 1
    values = rows.map((k,), {"per_sample": True})
    out = rows.per_sample(values, ("k",), {"k": np.arange(k)}, "reconstruction_errors")
    if per_sample is None or per_sample:
        return out
    return rows.sample_mean(out)


@register_estimator
class PPA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Principal Polynomial Analysis: PCA with curved, invertible, volume-preserving axes.

    Each of the ``d - 1`` sequential steps projects the residual on its leading eigenvector
    (``alpha_p``) and subtracts a polynomial in ``alpha_p`` that predicts the conditional mean of
    the remaining dimensions (Laparra et al., 2014). The fit makes one pass over the data for the
    mean and covariance and one per step; each pass returns only small moment matrices, so the
    same code fits numpy arrays in memory and Dask arrays far larger than memory.

    Parameters
    ----------
    n_components : int or None, default=None
        ``None`` fits all ``d - 1`` steps and ``transform`` returns ``d`` columns
        ``[alpha_1, ..., alpha_{d-1}, last residual]``. An int ``k < d`` fits ``k`` steps and
        returns ``k`` columns.
    degree : int or iterable of int, default=(1, 2, 3, 4, 5)
        A fixed polynomial degree for every step, or candidate degrees from which one per step is
        chosen by ``cv``-fold cross-validation, scored from per-fold moments gathered in the
        step's single pass. At most 1000 candidates: more are refused before any list of them
        is built.
    cv : int, default=2
        Number of folds for degree selection (2 is the paper's half split). A row's fold depends
        only on ``random_state`` and its global row index, so chunking never changes the result.
    random_state : None, int >= 0, Generator or RandomState, default=None
        Seeds the fold assignment, in scikit-learn's manner
        (:func:`ppa_dask.utils.seeds.estimator_seed`).
    whiten : bool, default=False
        Divide each output coefficient by its standard deviation (the generalised Mahalanobis
        metric of the paper); ``inverse_transform`` undoes it.
    extrapolation : {"linear", "polynomial"}, default="linear"
        How each polynomial continues beyond the range of ``alpha`` seen in training.
        ``"linear"`` continues it along its tangent (C1), which keeps ``det J = 1`` and the exact
        inverse while ``transform`` of any finite input stays finite; ``"polynomial"`` evaluates
        the raw polynomial everywhere (it can overflow far from the data).
    residual_cache : {"auto", "persist", "checkpoint", "recompute"}, default="auto"
        For Dask input, where the residual lives between passes: ``"persist"`` in worker memory;
        ``"checkpoint"`` on disk (one ``.npy`` file per chunk under ``checkpoint_dir``; the
        first pass writes a copy of the source blocks it reads, so the source is read once, and
        then every second pass writes the next residual, the pass between re-applying the steps
        fitted since; at most two exist, all removed when ``fit`` ends); ``"recompute"``
        nowhere (each pass reads the source and re-applies every fitted step, so step ``p``
        costs ``p`` steps' arithmetic).
        ``"auto"`` persists when the residual takes at most half the cluster memory, else
        checkpoints when ``checkpoint_dir`` is set or all workers run on this machine, else
        recomputes. Ignored for numpy input (the residual is one in-memory array).
    checkpoint_dir : str or None, default=None
        Parent directory of residual checkpoints (a temporary folder is made inside it). It must
        be readable and writable by every worker: shared storage on a multi-machine cluster.
        None: the system's temporary directory.
    block_rows : int, default=8192
        Rows per sub-block of the per-block kernels (a slice of residual and its basis should
        fit in cache).
    leading_vector : {"pca", "gd"}, default="pca"
        How each step's leading vector ``e_p`` is chosen. ``"pca"``: the leading eigenvector of
        the residual covariance (the paper's PCA-based PPA). ``"gd"``: PPA-GD (paper section
        2.3): starting from that eigenvector, gradient descent on the step's reconstruction
        error ``f(e)`` over unit vectors in the residual subspace, with the step's degree chosen
        first at the eigenvector and then held fixed. Each objective-and-gradient evaluation
        is one pass of block moments, so it runs on Dask like the rest; the result is never
        worse than the eigenvector (the best point evaluated is kept).
    gd_max_iter : int, default=20
        PPA-GD only: most objective evaluations (each one pass over the data, returning ``f``
        and its gradient) per step after the one at the eigenvector; the quasi-Newton search
        (scipy's L-BFGS-B on a chart of the sphere) stops when they are spent.
    gd_tol : float, default=1e-6
        PPA-GD only: stop a step when an iteration lowers ``f`` by less than ``gd_tol`` times
        its value at the eigenvector, or when the gradient (per radian) is below that.
    lookahead : "auto" or int >= 0, default="auto"
        Steps whose moments a pass also gathers, so that runs of linear steps take fewer passes
        than steps. A step of degree 1 is a pure rotation (its polynomial is zero up to
        rounding), so the steps after it are known before its pass if it is linear: after a
        linear step the pass also takes the fold moments of the next ``lookahead`` steps, and
        each of them whose preceding steps the cross-validation confirms linear needs no pass
        of its own. The model is the one-pass-per-step model (up to rounding) either way; only
        ``n_passes_`` changes. ``"auto"``: 7 where passes read the data (Dask arrays, the
        shared scans of ensembles: one pass fits up to 8 linear steps; each step gathered ahead
        costs about a fifth of a pass's arithmetic), and after a run of more linear steps as
        many as that run, up to 32 (the late steps of spectra are long linear runs; a failed
        guess then wastes no more gathering than the run before it confirmed); in memory the
        same from 16 features and ``32 d^2`` samples on, else 0 (on smaller tables the client's
        algebra for the steps gathered ahead costs more than the passes it saves). An integer
        is the number gathered, always; 0: one pass per step.
        Not used with a fixed degree above 1 nor with ``leading_vector="gd"``.
    solver : {"auto", "covariance", "gram", "krylov"}, default="auto"
        How the steps reach the data. ``"covariance"``: from the ``d x d`` covariance, one pass
        per step (exact; memory ``O(d^2)`` and ``O(d^3)`` per step on the client, fine up to a
        few thousand features). ``"gram"``: in the span of the samples, for wide data (many
        more features than samples, e.g. grid cells of a field): the ``n x n`` Gram matrix of
        the centred samples in one pass along feature slabs, the steps fitted on the samples'
        ``n x r`` coordinates, and the model mapped back to the features in a second pass
        (:mod:`ppa_dask.ppa.wide`); cost linear in ``d``, no ``d x d`` object, the same model
        to rounding. It needs ``n_components`` (at most the samples' rank minus one) and
        ``3 * 8 * n^2`` bytes on the client, and its models hold no ``residual_basis_``, so
        :meth:`jacobian` and :meth:`metric` (``d x d`` per sample) are refused.
        ``"krylov"``: for many samples and many features alike, each leading vector by Lanczos
        on the implicit residual covariance (products ``Y^T (Y v)``, two passes each; no
        ``d x d`` or ``n x n`` matrix; :mod:`ppa_dask.ppa.krylov`), to an angle of about
        ``1e-14 lambda_1 / gap`` (a :class:`~ppa_dask.ppa.krylov.LeadingVectorWarning` when that
        exceeds 1e-10); it needs ``n_components`` and ``leading_vector="pca"``, and its models
        are applied like the Gram path's. ``"auto"`` (with ``n_components`` given): ``"gram"``
        from 1,000 features when they outnumber the samples and the ``n x n`` matrices take
        at most half the machine's memory, else ``"krylov"`` from 20,000 features, else
        ``"covariance"`` (:func:`ppa_dask.ppa.wide.choose_solver`), which is also the choice
        for ``n_components=None``.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,)
    leading_vectors_ : ndarray of shape (n_steps, n_features)
        Leading vector ``e_p`` of each step in the input frame (orthonormal rows; the entry of
        largest magnitude is positive).
    coefficients_ : ndarray of shape (n_steps, n_features, max_degree + 1)
        Polynomial coefficients of each step in the input frame, on the Chebyshev basis of
        ``t = (alpha_p - offset) / scale`` (``basis_intervals_[p]``), zero-padded beyond
        ``degrees_[p]``.
    basis_intervals_ : ndarray of shape (n_steps, 2)
        ``(offset, scale)`` of each step's basis coordinate, from the range of ``alpha_p`` on a
        fixed row sample (a function of ``random_state`` and the row index only).
    alpha_ranges_ : ndarray of shape (n_steps, 2)
        Training range of each ``alpha_p``; the linear extrapolation starts at its ends.
    residual_basis_ : ndarray of shape (n_features, n_features - n_steps) or None
        Orthonormal basis of the residual left after the last step, oriented so that the
        leading vectors followed by these columns form a rotation (so ``det J = +1``). None
        for the Gram and Krylov paths.
    degrees_ : ndarray of shape (n_steps,)
    cv_scores_ : ndarray of shape (n_steps, n_candidates) or None
        Cross-validated mean squared error per sample for each candidate degree (None when
        ``degree`` is fixed).
    explained_variance_ : ndarray of shape (n_components,)
        Variance of each output coefficient (``ddof=1``, as scikit-learn's PCA).
    residual_variance_ : ndarray of shape (n_steps + 1,)
        Mean squared norm of the residual after 0..n_steps steps: the training reconstruction
        error with that many components.
    n_components_ : int
        Number of output columns.
    n_features_in_ : int
    n_samples_ : int
    rank_ : int
        Numerical rank: the fewest components after which the training residual variance is
        at most ``n_features * eps`` times the total (:func:`~ppa_dask.ppa.algebra.rank_rtol`;
        ``eps`` of float64, or the square of the input's float eps when larger), found from
        the covariance the fit propagates (no extra pass). The steps from ``rank_ + 1`` on are
        fitted linear (degree 1, whatever ``degree`` says), since their residual is rounding;
        a rank below ``n_features_in_`` is reported once per fit by a
        :class:`~ppa_dask.information.RankDeficientWarning`. Equal to ``numpy.linalg.matrix_rank`` of the
        centred data for linearly dependent columns; lower on data that lie exactly on a
        curve (PPA reconstructs them with fewer components).
    fold_seed_ : int or None
        Seed of the fold assignment (``kernels.fold_labels(0, n, fold_seed_, cv)`` gives each
        row's fold); None when ``degree`` is fixed.
    n_passes_ : int
        Passes made over the data by ``fit``: one for the mean and covariance, one per step
        except the steps whose moments an earlier pass gathered ahead (``lookahead``), and with
        ``leading_vector="gd"`` the descent's passes, ``gd_history_[p]["n_passes"]``.
    gd_history_ : list of dict or None
        PPA-GD only (None otherwise), one dict per step: ``objective_start`` and ``objective``
        (the step's mean squared residual ``f`` at the eigenvector and at the chosen ``e_p``),
        ``n_iter`` (quasi-Newton iterations), ``n_passes`` (objective passes, the one at the
        eigenvector included), ``converged`` (stopped by ``gd_tol`` rather than by
        ``gd_max_iter`` or a failed line search) and ``angle`` (radians between the
        eigenvector and ``e_p``).
    residual_cache_ : str
        The residual strategy used (Dask input) or ``"memory"`` (numpy input, and the Gram
        path, whose residual is the samples' coordinates on the client).
    solver_ : {"covariance", "gram", "krylov"}
        The solver used (``solver="auto"`` resolved).

    Examples
    --------
    >>> import numpy as np
    >>> from ppa_dask import PPA
    >>> rng = np.random.default_rng(0)
    >>> t = rng.uniform(-1, 1, 2000)
    >>> X = np.column_stack([t, t**2 + 0.01 * rng.normal(size=2000), rng.normal(size=2000) * 0.1])
    >>> model = PPA(degree=2, random_state=0).fit(X)
    >>> R = model.transform(X)
    >>> bool(np.allclose(model.inverse_transform(R), X))
    True
    """

    def __init__(
        self,
        n_components=None,
        degree=(1, 2, 3, 4, 5),
        cv=2,
        random_state=None,
        whiten=False,
        extrapolation="linear",
        residual_cache="auto",
        checkpoint_dir=None,
        block_rows=kernels.SUB_BLOCK_ROWS,
        leading_vector="pca",
        gd_max_iter=20,
        gd_tol=1e-6,
        lookahead="auto",
        solver="auto",
    ):
        self.n_components = n_components
        self.degree = degree
        self.cv = cv
        self.random_state = random_state
        self.whiten = whiten
        self.extrapolation = extrapolation
        self.residual_cache = residual_cache
        self.checkpoint_dir = checkpoint_dir
        self.block_rows = block_rows
        self.leading_vector = leading_vector
        self.gd_max_iter = gd_max_iter
        self.gd_tol = gd_tol
        self.lookahead = lookahead
        self.solver = solver

    # ---------------------------------------------------------------------------------------
    # validation
    # ---------------------------------------------------------------------------------------

    def _candidate_degrees(self):
        candidates = candidate_degrees(self.degree, limit=MAX_CANDIDATE_DEGREES)
        return candidates, len(candidates) == 1

    def _check_params(self, n_samples, n_features):
        """Check the parameters against the data's shape; returns (candidates, fixed, n_steps).

        With cross-validation the row count is checked against the folds themselves (they are
        a function of the seed and the row index), so only once the fold seed is known
        (:meth:`_check_fold_rows`).
        """
        candidates, fixed = self._candidate_degrees()
        spec = dict(PARAMETER_CONSTRAINTS)
        if fixed:
            del spec["cv"]  # one degree: no cross-validation, so any cv is ignored
        spec["n_components"] = AnyOf(
            None,
            Integer(
                1,
                n_features,
                closed="left",
                expected=f"an int with 1 <= n_components < n_features = {n_features}",
            ),
        )
        # the checked parameters read directly (get_params introspects __init__'s signature,
        # a cost next to a fit of a small data set)
        k = check_params(spec, {name: getattr(self, name) for name in spec})["n_components"]
        n_steps = n_features - 1 if k is None else k
        _steps.check_rows(n_samples, candidates, None if fixed else self.cv)
        return candidates, fixed, n_steps

    def _check_fold_rows(self, n_samples, candidates, fixed, fold_seed):
        """Refuse too few rows for the cross-validation folds of ``fold_seed`` (parameters
        already checked by :meth:`_check_params`)."""
        if not fixed:
            _steps.check_rows(n_samples, candidates, self.cv, fold_seed)

    def check_shape(self, n_samples, n_features):
        """Refuse parameters the data's shape cannot take, before any data are read.

        The checks :meth:`fit` makes first, made from a shape alone: ``n_components`` below
        ``n_features``, enough rows for the highest degree and, with several candidate degrees
        and an int ``random_state``, for the training folds of the cross-validation (whose
        labels follow from the seed and the row index). The front-ends call it before a cluster
        starts or a pipeline's first stage; the messages are the fit's own.

        Parameters
        ----------
        n_samples, n_features : int
            The shape of the data the fit will see (an upper bound on the rows refuses only
            what the fit would refuse too).

        Returns
        -------
        n_components : int
            The components the fitted model will have (``n_components_``).

        Raises
        ------
        ValueError
            Naming the parameter and the shape, as :meth:`fit` would.

        Examples
        --------
        >>> PPA(degree=[1, 2]).check_shape(1000, 6)
        6
        >>> PPA(n_components=99).check_shape(1000, 6)
        Traceback (most recent call last):
        ...
        ppa_dask.utils.params.InvalidParameterError: n_components must be None or an int with
        1 <= n_components < n_features = 6, got 99
        """
        candidates, fixed, n_steps = self._check_params(int(n_samples), int(n_features))
        if is_int(self.random_state):
            seed = estimator_seed(self.random_state)
            self._check_fold_rows(int(n_samples), candidates, fixed, seed)
        return int(n_features) if self.n_components is None else n_steps

    def _validate_dask(self, X, reset, name="X", merge_features=True):
        X = check_dask_samples(
            X, name, min_samples=1, min_features=2, who="PPA", merge_features=merge_features
        )
        if reset:
            self.n_features_in_ = X.shape[1]
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        elif X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but PPA is expecting {self.n_features_in_} "
                "features as input."
            )
        return X

    # ---------------------------------------------------------------------------------------
    # fit
    # ---------------------------------------------------------------------------------------

    @labelled_fit
    def fit(self, X, y=None, progress=None):
        """Fit the model, one pass over ``X`` for the moments and one per step.

        Parameters
        ----------
        X : array-like, dask.array.Array, zarr.Array, xarray.DataArray or xarray.Dataset
            numpy input is fitted in memory; a Dask array (or a ``zarr.Array``, read as Dask
            with its own chunks) is fitted blockwise on the current distributed Client if there
            is one, else on Dask's default scheduler. xarray input is stacked to
            ``(samples, features)`` by :class:`ppa_dask.store.stacker.Stacker` (valid samples
            only) and the layout kept as ``xarray_layout_``.
        y : ignored
        progress : callable, optional
            Called as ``progress(p, k)`` on the client after step ``p`` of ``k`` is fitted
            (e.g. to print a progress bar; the CLI does).
        feature_dim : str, optional
            xarray only: the dimension of a DataArray holding the features; every other
            dimension is a sample dimension. For a Dataset the variables are the features.
        nan_policy : {"raise", "drop_samples"}, default="raise"
            xarray only: what to do with samples that are NaN in some but not all features
            (samples NaN in every feature are always left out, features NaN everywhere always
            dropped); see :class:`ppa_dask.store.stacker.Stacker`.
        coslat : bool or str, default=False
            xarray only: weight each feature by ``sqrt(cos(latitude))`` before the fit, as EOF
            analysis weights the grid cells of a (time, latitude, longitude) field by their
            area. ``True`` finds the latitude coordinate (``lat``, ``latitude``, or
            ``standard_name`` "latitude"), a string names it; it must run along the features.
            The fitted model (``mean_``, ``leading_vectors_``, ``explained_variance_``,
            ``reconstruction_errors``) is that of the weighted values; ``transform`` applies
            the weights and ``inverse_transform`` (and
            :func:`ppa_dask.store.seam.patterns`) divide them back out, in the input's units.

        Returns
        -------
        self : PPA
        """
        # xarray input and the xarray-only options are handled by @labelled_fit
        X = as_dask_if_zarr(X)
        # validation resets these before the checks that can still fail; a failing fit restores
        # them, so a fitted model stays whole and an unfitted one stays unfitted
        saved = {k: v for k, v in vars(self).items() if k in _VALIDATION_ATTRS}
        try:
            self._fit(X, progress)
            return self
        except BaseException:
            for k in _VALIDATION_ATTRS:
                vars(self).pop(k, None)
            vars(self).update(saved)
            raise

    def _fit(self, X, progress=None):
        # the one test of the array type in a fit: the driver does the whole-array work
        in_dask = is_dask(X)
        if in_dask:
            # feature chunks are kept for the Gram path's slabs, merged below otherwise
            X = self._validate_dask(X, reset=True, merge_features=False)
        else:
            X = validate_data(
                self,
                X,
                reset=True,
                dtype=[np.float64, np.float32],
                ensure_all_finite=False,
                ensure_min_features=2,
                ensure_min_samples=1,
                copy=False,
            )
            # NaN/inf are counted per column in the first pass, before anything is stored
        # parameters are checked against the shape before the driver touches the data
        checked_params = self._check_params(*X.shape)
        seed = estimator_seed(self.random_state)  # drawn once, whichever data the fit reads
        solver = self._solver_for(*X.shape)
        if solver != "covariance":
            return self._fit_without_covariance(solver, X, in_dask, checked_params, seed, progress)
        if in_dask and X.numblocks[1] != 1:
            X = X.rechunk({1: -1})  # the covariance path's kernels take whole rows

        def fit_steps(checked, exponent, extra_passes):
            return self._fit_driver(
                checked, progress, seed, exponent, extra_passes,
                checked_params=checked_params, dtype=X.dtype,
            )  # fmt: skip

        # the whole fit runs on one BLAS thread in this process, set once (per pass, setting and
        # restoring it is a cost on small data): in memory the passes and the small algebra
        # between them; on Dask the client's algebra between the passes (eigh of d x d and the
        # like: multithreaded BLAS made a 450-feature fit 5-10x slower on a busy machine). The
        # limit is per process, so it does not reach worker processes (a nanny starts them on
        # one BLAS thread anyway); Dask's threaded scheduler runs its tasks on one thread
        # already (ppa_dask.utils.compute), and in-process workers (LocalCluster(processes=False))
        # get what a nanny gives its workers
        with one_blas_thread():
            # PPA is scale-equivariant: data whose moments float64 cannot hold are fitted
            # divided by a power of two and the model scaled back (ppa_dask.ppa.magnitude)
            return fit_in_range(self._driver_for(X, in_dask), fit_steps)

    def _solver_for(self, n_samples, n_features):
        """The solver of a fit of this shape, refusing what the Gram path cannot take."""
        solver = _wide.choose_solver(self.solver, n_samples, n_features, self.n_components)
        if solver == "covariance":
            return solver
        if self.n_components is None:
            raise ValueError(
                f"solver={solver!r} fits a given number of components: set n_components (all "
                f"{n_features - 1} steps of {n_features} features need solver='covariance')"
            )
        if solver == "krylov":
            if self.leading_vector != "pca":
                raise ValueError(
                    "solver='krylov' takes leading_vector='pca' (PPA-GD's objective passes "
                    "need the d x d moments); use solver='covariance' for PPA-GD"
                )
            return solver
        need = _wide.gram_bytes(n_samples)
        have = _wide.machine_memory_bytes()
        if need > have // 2:
            raise MemoryError(
                f"solver='gram' on {n_samples} samples needs {need / 2**30:.1f} GiB on the "
                f"client (three {n_samples} x {n_samples} float64 matrices), more than half "
                f"of this machine's {have / 2**30:.1f} GiB"
            )
        return solver

    def _fit_without_covariance(self, solver, X, in_dask, checked_params, seed, progress):
        """The Gram path (:func:`ppa_dask.ppa.wide.fit_wide`, two passes along feature slabs)
        or the Krylov path (:func:`ppa_dask.ppa.krylov.fit_krylov`, the residual implicit)."""
        candidates, fixed, n_steps = checked_params
        self._check_fold_rows(X.shape[0], candidates, fixed, seed)
        d = int(X.shape[1])
        rtol = _algebra.rank_rtol(d, X.dtype)
        settings = self._step_settings(checked_params, seed, rtol)
        if solver == "gram":
            source = _wide.DaskSlabs(X) if in_dask else _wide.NumpySlabs(X)
            fitted = _wide.fit_wide(source, settings, progress, owner=self)
        else:
            source = _krylov.ImplicitResidual(X)
            fitted = _krylov.fit_krylov(source, settings, progress)
        # fewer samples than features (and each polynomial step takes a sample-space
        # direction): a rank below d is the samples'; it matters once the steps reach it
        if fitted["rank_"] <= n_steps:
            _warn_rank(fitted, rtol, d, n_steps)
        for name, value in fitted.items():
            setattr(self, name, value)
        self.n_features_in_ = d
        self.n_passes_ = source.n_passes
        # the Gram path's residual is the samples' coordinates on the client; the Krylov
        # path's is the data less the steps, recomputed in every product
        self.residual_cache_ = "memory" if solver == "gram" else "recompute"
        self.solver_ = solver
        return self

    def _step_settings(self, checked_params, seed, rtol):
        candidates, fixed, n_steps = checked_params
        return _steps.StepSettings(
            candidates=tuple(candidates),
            n_steps=n_steps,
            seed=seed,
            cv=None if fixed else int(self.cv),
            lookahead=self.lookahead,
            leading_vector=self.leading_vector,
            gd_max_iter=self.gd_max_iter,
            gd_tol=self.gd_tol,
            rank_rtol=rtol,
            last_variance=self.n_components is None,
        )

    def _driver_for(self, X, in_dask):
        if in_dask:
            checkpoint_dir = (
                None if self.checkpoint_dir is None else os.fspath(self.checkpoint_dir)
            )
            return DaskDriver(
                X,
                residual_cache=self.residual_cache,
                block_rows=self.block_rows,
                checkpoint_dir=checkpoint_dir,
            )
        # fit() holds one BLAS thread for the whole in-memory fit
        return NumpyDriver(X, block_rows=self.block_rows, limit_blas=False)

    def fit_with_driver(self, driver, progress=None):
        """Fit the model through ``driver``: the one fit path behind :meth:`fit`.

        :meth:`fit` validates its input, builds a :class:`~ppa_dask.ppa.drivers.NumpyDriver`
        or :class:`~ppa_dask.ppa.drivers.DaskDriver` and calls this; code that runs the passes
        itself (the shared-scan fit of many members, :mod:`ppa_dask.ppa.multifit`) passes
        its own :class:`~ppa_dask.ppa.drivers.Driver`. The parameters are checked against
        ``driver.n_samples`` and ``driver.n_features``; the driver is not closed.

        Parameters
        ----------
        driver : ppa_dask.ppa.drivers.Driver
        progress : callable, optional
            Called as ``progress(p, k)`` after step ``p`` of ``k``.

        Returns
        -------
        self : PPA

        Examples
        --------
        >>> import numpy as np
        >>> from ppa_dask import PPA
        >>> from ppa_dask.ppa.drivers import NumpyDriver
        >>> X = np.random.default_rng(0).normal(size=(400, 3))
        >>> a = PPA(degree=2, random_state=0).fit_with_driver(NumpyDriver(X))
        >>> bool(np.array_equal(a.transform(X), PPA(degree=2, random_state=0).fit(X).transform(X)))
        True
        """
        dtype = getattr(getattr(driver, "X", None), "dtype", None)
        return self._fit_driver(MagnitudeCheck(driver), progress, dtype=dtype)

    def _fit_driver(
        self,
        driver,
        progress=None,
        seed=None,
        exponent=0,
        extra_passes=0,
        checked_params=None,
        dtype=None,
    ):
        """:meth:`fit_with_driver` on data divided by ``2**exponent``: the fitted attributes
        are scaled back to the input's units (exactly: powers of two;
        :func:`ppa_dask.ppa.magnitude.in_input_units`). ``checked_params`` is
        what :meth:`_check_params` returned for the driver's shape, if the caller checked;
        ``dtype`` the input's (its rounding enters the rank tolerance, :func:`rank_rtol`). The
        steps are :func:`ppa_dask.ppa.steps.fit_steps`."""
        if checked_params is None:
            checked_params = self._check_params(driver.n_samples, driver.n_features)
        if seed is None:
            seed = estimator_seed(self.random_state)
        candidates, fixed, n_steps = checked_params
        # the folds are known now, before any pass: refuse too few rows for them up front
        self._check_fold_rows(driver.n_samples, candidates, fixed, seed)
        rtol = _algebra.rank_rtol(driver.n_features, dtype)
        settings = self._step_settings(checked_params, seed, rtol)
        fitted = _steps.fit_steps(driver, settings, progress, owner=self)
        if exponent:
            fitted = in_input_units(fitted, exponent)
        _warn_rank(fitted, rtol, int(driver.n_features), n_steps)
        for name, value in fitted.items():
            setattr(self, name, value)
        self.n_features_in_ = int(driver.n_features)
        self.n_passes_ = driver.n_passes + extra_passes
        self.residual_cache_ = driver.residual_cache
        self.solver_ = "covariance"
        return self

    # ---------------------------------------------------------------------------------------
    # applying the model
    # ---------------------------------------------------------------------------------------

    def model_params(self):
        """The fitted steps as the per-block kernels take them.

        Returns
        -------
        params : ppa_dask.ppa.kernels.ModelParams
            The mean, one :class:`~ppa_dask.ppa.kernels.StepParams` per step (direction,
            coefficients, basis interval and the range beyond which the basis continues along
            its tangent), the residual basis and the whitening scale (None unless ``whiten``).
        """
        check_is_fitted(self)
        steps = []
        for p, degree in enumerate(self.degrees_):
            offset, scale = (float(v) for v in self.basis_intervals_[p])
            lo, hi = (self.alpha_ranges_[p] - offset) / scale
            if self.extrapolation == "polynomial":
                lo, hi = -np.inf, np.inf
            coef = self.coefficients_[p, :, : degree + 1]
            steps.append(kernels.StepParams(self.leading_vectors_[p], coef, offset, scale, lo, hi))
        scale = np.sqrt(self.explained_variance_) if self.whiten else None
        if scale is not None:
            scale = np.where(scale > 0, scale, 1.0)
        return kernels.ModelParams(self.mean_, tuple(steps), self.residual_basis_, scale)

    @property
    def _wide(self):
        """A model of the Gram path: applied along feature slabs (:mod:`ppa_dask.ppa.wide`)."""
        return getattr(self, "solver_", "covariance") in ("gram", "krylov")

    def _check_input(self, X, name="X", width=None):
        """Validate input for a fitted model; returns (array, is_dask)."""
        check_is_fitted(self)
        if is_dask(X):
            if width is None:
                # a wide model's kernels take feature slabs: the chunks are kept
                X = self._validate_dask(X, reset=False, name=name, merge_features=not self._wide)
            else:
                if X.ndim != 2:
                    raise ValueError(f"Expected a 2D array for {name}, got {X.ndim}D.")
                if X.numblocks[1] != 1:
                    X = X.rechunk({1: -1})
            return X, True
        if width is None:
            X = validate_data(
                self,
                X,
                reset=False,
                dtype=[np.float64, np.float32],
                copy=False,
                ensure_all_finite=False,
            )
        else:
            from sklearn.utils import check_array

            X = check_array(
                X, dtype=[np.float64, np.float32], input_name=name, ensure_all_finite=False
            )
        # the block kernels refuse NaN/inf, naming the count, the columns and the first bad row
        return X, False

    @labelled(_transform_labelled)
    def transform(self, X):
        """PPA coefficients of ``X``.

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, n_features)

        Returns
        -------
        R : ndarray or dask.array.Array of shape (n_samples, n_components)
            Lazy when ``X`` is a Dask array. For xarray input, a DataArray with a ``component``
            dimension in place of the feature dimension (see
            :meth:`ppa_dask.store.stacker.Stacker.unstack_components`), NaN for samples with a
            NaN in a fitted feature.
        """
        X = as_dask_if_zarr(X)
        X, lazy = self._check_input(X)
        model, n_out = self.model_params(), self.n_components_
        if self._wide:
            return _wide.transform(X, model, n_out)
        if lazy:
            return X.map_blocks(
                _transform_chunk,
                model,
                n_out,
                dtype=np.float64,
                chunks=(X.chunks[0], (n_out,)),
                meta=np.empty((0, 0)),
            )
        with one_blas_thread():
            return kernels.transform_block(X, model, n_out)

    @labelled(_inverse_labelled, components=True)
    def inverse_transform(self, X):
        """Map PPA coefficients back to the input space (closed form).

        Parameters
        ----------
        X : array-like or dask.array.Array of shape (n_samples, m), m <= n_components
            Coefficients as returned by ``transform``; with fewer columns than
            ``n_components_`` the residual after step ``m`` is taken as zero, so
            ``inverse_transform(transform(X)[:, :k])`` is the k-component reconstruction (its
            squared error is the residual the model leaves after ``k`` steps, eq. 7 of the paper).

        Returns
        -------
        X_rec : ndarray or dask.array.Array of shape (n_samples, n_features)
            For an xarray DataArray of coefficients (with a ``component`` dimension), the
            original dimensions and coordinates (see
            :meth:`ppa_dask.store.stacker.Stacker.unstack_features`), NaN for samples with a
            NaN coefficient and for the features dropped at fit.
        """
        X = as_dask_if_zarr(X)
        R, lazy = self._check_input(X, name="R", width=True)
        m = R.shape[1]
        if not 1 <= m <= self.n_components_:
            raise ValueError(
                f"R has {m} columns; inverse_transform expects between 1 and n_components_ = "
                f"{self.n_components_} PPA coefficients."
            )
        model, d = self.model_params(), self.n_features_in_
        if self._wide:
            return _wide.inverse_transform(R, model)
        if lazy:
            return R.map_blocks(
                _inverse_chunk,
                model,
                dtype=np.float64,
                chunks=(R.chunks[0], (d,)),
                meta=np.empty((0, 0)),
            )
        with one_blas_thread():
            return kernels.inverse_block(R, model)

    @labelled(_jacobian_labelled)
    def jacobian(self, X):
        """Analytic Jacobian ``dR/dx`` at each row of ``X`` (paper eq. 13-14).

        The Jacobian is that of the volume-preserving map (before any whitening): rows are
        ``alpha_1 .. alpha_k`` and then the residual after ``k`` steps in ``residual_basis_``
        coordinates, so ``det J = 1`` everywhere.

        Parameters
        ----------
        X : array-like, dask.array.Array, xarray.DataArray or xarray.Dataset
            Of shape (n_samples, n_features) for arrays; xarray input of a model fitted on
            xarray, stacked as in :meth:`transform`.

        Returns
        -------
        J : ndarray, dask.array.Array or xarray.DataArray
            Arrays: shape (n_samples, n_features, n_features), ``J[i, m, j] = dR_m / dx_j``;
            lazy for a Dask array. xarray input: a DataArray named ``"jacobian"`` with the
            dimensions ``("component", <feature dim>)`` where the feature dimension was (first
            for a Dataset, whose feature dimension is ``"variable"``) and the input's sample
            dimensions, coordinates and attrs; ``component`` runs 1..n_features (the output
            coordinates, the residual ones included), the feature dimension keeps its fitted
            coordinates. Samples with a NaN, and features dropped at fit, are NaN.

        Examples
        --------
        >>> import numpy as np, xarray as xr
        >>> from ppa_dask import PPA
        >>> X = np.random.default_rng(0).normal(size=(300, 3))
        >>> cube = xr.DataArray(X.T.reshape(3, 20, 15), dims=("band", "y", "x"))
        >>> model = PPA(degree=2, random_state=0).fit(cube, feature_dim="band")
        >>> J = model.jacobian(cube)
        >>> J.dims, bool(np.allclose(np.linalg.det(J.transpose("y", "x", ...).values), 1))
        (('component', 'band', 'y', 'x'), True)
        """
        if self._wide:
            raise ValueError(
                f"jacobian needs {self.n_features_in_} x {self.n_features_in_} values per "
                f"sample and the residual basis, which a model fitted with solver={self.solver_!r} does "
                "not hold; fit with solver='covariance' for the Jacobian and the metric"
            )
        X, lazy = self._check_input(X)
        model, d = self.model_params(), self.n_features_in_
        if lazy:
            return X.map_blocks(
                kernels.jacobian_block,
                model,
                dtype=np.float64,
                new_axis=2,
                chunks=(X.chunks[0], (d,), (d,)),
                meta=np.empty((0, 0, 0)),
            )
        with one_blas_thread():
            return kernels.jacobian_block(X, model)

    @labelled(_metric_labelled)
    def metric(self, X, whitened=True):
        """PPA-induced metric ``M(x) = J(x)^T Lambda^{-1} J(x)`` at each row (paper eq. 20-21).

        ``d^2(x, x + dx) = dx^T M(x) dx``. With ``whitened=True`` ``Lambda`` holds the variances
        of the PPA coefficients (:func:`ppa_dask.geometry.coefficient_variances`: ``explained_variance_``,
        and for ``n_components=k < d - 1`` an equal share of the residual variance for each
        residual coordinate), the generalised Mahalanobis metric: the Euclidean distance
        between nearby points after ``PPA(whiten=True)``. For degree 1 it is the inverse
        covariance of the data. ``whitened=False`` takes ``Lambda = I`` (``M = J^T J``).

        Parameters
        ----------
        X : array-like, dask.array.Array, xarray.DataArray or xarray.Dataset
            Of shape (n_samples, n_features) for arrays; xarray input of a model fitted on
            xarray, stacked as in :meth:`transform`.
        whitened : bool, default=True

        Returns
        -------
        M : ndarray, dask.array.Array or xarray.DataArray
            Arrays: shape (n_samples, n_features, n_features), symmetric positive definite;
            lazy when ``X`` is a Dask array. xarray input: a DataArray named ``"metric"`` with
            the dimensions ``(<feature dim>, <feature dim>_2)`` where the feature dimension
            was (the second a copy of the first, its coordinates suffixed ``_2``: ``band`` and
            ``band_2``, ``wavelength`` and ``wavelength_2``), and the input's sample
            dimensions, coordinates and attrs; NaN for samples with a NaN and for features
            dropped at fit.

        Examples
        --------
        >>> import numpy as np
        >>> from ppa_dask import PPA
        >>> X = np.random.default_rng(0).normal(size=(1000, 3)) @ [[2, 1, 0], [0, 1, 0], [0, 0, 1]]
        >>> M = PPA(degree=1).fit(X).metric(X[:2])
        >>> bool(np.allclose(M[0], np.linalg.inv(np.cov(X.T))))
        True
        """
        J = self.jacobian(X)
        weights = 1.0 / coefficient_variances(self) if whitened else None
        if is_dask(J):
            return J.map_blocks(metric_from_jacobian, weights, dtype=np.float64)
        return metric_from_jacobian(J, weights)

    @labelled(_errors_labelled)
    def reconstruction_errors(self, X, per_sample=None):
        """Squared reconstruction error for k = 0..n_steps components, in one pass.

        The error with ``k`` components is ``||x - inverse_transform(transform(x)[:, :k])||^2``
        (k = 0 is the error of the mean alone), computed from the residual norms without
        inverting.

        Parameters
        ----------
        X : array-like, dask.array.Array, xarray.DataArray or xarray.Dataset
            Of shape (n_samples, n_features) for arrays; xarray input of a model fitted on
            xarray, stacked as in :meth:`transform`.
        per_sample : bool, optional
            Each sample's errors (True) or their mean over the samples (False). Default: the
            mean for arrays, per sample (a map) for xarray input.

        Returns
        -------
        errors : ndarray, dask.array.Array or xarray.DataArray
            The mean: shape (n_steps + 1,), always computed (also for Dask input). Per sample:
            shape (n_samples, n_steps + 1), lazy for a Dask array. xarray input: a DataArray
            named ``"reconstruction_errors"`` with a dimension ``k`` (coordinate
            0..n_steps) where the feature dimension was, and the input's sample dimensions,
            coordinates and attrs (NaN for samples with a NaN); with ``per_sample=False`` the
            mean over the valid samples, over ``k`` only.

        Examples
        --------
        >>> import numpy as np
        >>> from ppa_dask import PPA
        >>> X = np.random.default_rng(0).normal(size=(500, 3)) * [3.0, 2.0, 1.0]
        >>> model = PPA(degree=2, random_state=0).fit(X)
        >>> e = model.reconstruction_errors(X, per_sample=True)
        >>> e.shape, bool(np.allclose(e.mean(axis=0), model.reconstruction_errors(X)))
        ((500, 3), True)
        """
        X, lazy = self._check_input(X)
        model = self.model_params()
        if self._wide:
            norms = _wide.residual_norms(X, model)
            if per_sample:
                return norms
            (total,) = compute(norms.sum(axis=0)) if lazy else (norms.sum(axis=0),)
            return total / X.shape[0]
        if per_sample:
            k = len(model.steps) + 1
            if lazy:
                return X.map_blocks(
                    self._squared_residuals,
                    model,
                    dtype=np.float64,
                    chunks=(X.chunks[0], (k,)),
                    meta=np.empty((0, 0)),
                )
            with one_blas_thread():
                return self._squared_residuals(X, model)
        if lazy:
            import dask

            chunk = dask.delayed(kernels.residual_norms_block, pure=True)
            parts = [chunk(block, model) for block in X.to_delayed().ravel()]
            (total,) = compute(tree_reduce(parts, sum, 8))
        else:
            with one_blas_thread():
                total = kernels.residual_norms_block(X, model)
        return total / X.shape[0]

    @staticmethod
    def _squared_residuals(X, model):
        """``||residual after k steps||^2`` of each row, k = 0..n_steps: shape (n, n_steps + 1)."""
        X = np.asarray(X, dtype=np.float64)
        bad = ~np.isfinite(X)
        if bad.any():
            cols = np.flatnonzero(bad.any(axis=0)).tolist()
            raise ValueError(
                f"X contains {int(bad.sum())} NaN or inf values in columns {cols}; PPA needs "
                "finite input."
            )
        out = np.empty((X.shape[0], len(model.steps) + 1))
        Yt = kernels.centred_block(X, model.mean)
        out[:, 0] = np.einsum("jn,jn->n", Yt, Yt)
        for p, step in enumerate(model.steps):
            _, Yt = kernels.step_forward(Yt, step, out=Yt)
            out[:, p + 1] = np.einsum("jn,jn->n", Yt, Yt)
        return out

    def save(self, path, overwrite=False):
        """Save the fitted model to a Zarr v3 group of plain arrays plus JSON (no pickle).

        See :func:`ppa_dask.store.save_model`; the file is written to a temporary sibling and
        renamed into place. Returns the absolute path.

        Examples
        --------
        >>> import os, tempfile, numpy as np
        >>> from ppa_dask import PPA
        >>> X = np.random.default_rng(0).normal(size=(300, 3))
        >>> model = PPA(degree=2, random_state=0).fit(X)
        >>> path = model.save(os.path.join(tempfile.mkdtemp(), "ppa.zarr"))
        >>> bool(np.array_equal(PPA.load(path).transform(X), model.transform(X)))
        True
        """
        return save_model(self, path, overwrite=overwrite)

    @classmethod
    def load(cls, path):
        """Load a model saved by :meth:`save`; the file is checked before anything is built.

        Raises :class:`ppa_dask.store.ModelFileError` for a missing, truncated, tampered or
        future-version file, and when the file holds another estimator class.
        """
        model = load_model(path)
        if not isinstance(model, cls):
            raise ModelFileError(
                f"{path!r} holds a {type(model).__name__}, not a {cls.__name__}", "invalid"
            )
        return model

    def check_fitted_state(self):
        """Check that the fitted attributes agree with the parameters and with each other.

        :func:`ppa_dask.store.load_model` calls this on every PPA it reads (raising
        :class:`~ppa_dask.store.ModelFileError` with ``reason="invalid"``), so a file whose
        checksums were rewritten to match wrong numbers is refused instead of giving wrong
        shapes or broadcasting errors later.

        Raises
        ------
        ValueError
            Naming the first attribute that is wrong and what was expected of it.

        Examples
        --------
        >>> import numpy as np
        >>> from ppa_dask import PPA
        >>> model = PPA(degree=2).fit(np.random.default_rng(0).normal(size=(200, 3)))
        >>> model.check_fitted_state()  # a fitted model passes
        >>> model.n_components_ = 99
        >>> model.check_fitted_state()
        Traceback (most recent call last):
        ...
        ValueError: fitted attribute n_components_ must be 3 (n_components=None, 3 features), got 99
        """
        check_is_fitted(self)

        def bad(name, expected, got):
            raise ValueError(f"fitted attribute {name} must be {expected}, got {got}")

        def integer(name, low):
            value = getattr(self, name, None)
            if not (isinstance(value, numbers.Integral) and not isinstance(value, bool)):
                bad(name, f"an int >= {low}", repr(value))
            if value < low:
                bad(name, f"an int >= {low}", value)
            return int(value)

        def array(name, shape, kind="f", finite=True):
            value = getattr(self, name, None)
            if not isinstance(value, np.ndarray):
                bad(name, f"an array of shape {shape}", type(value).__name__)
            expected = "float64" if kind == "f" else "an integer dtype"
            if (value.dtype != np.float64) if kind == "f" else (value.dtype.kind not in "iu"):
                bad(name, f"an array of {expected}", f"dtype {value.dtype}")
            if value.shape != shape:
                bad(name, f"an array of shape {shape}", f"shape {value.shape}")
            if finite and kind == "f" and not np.isfinite(value).all():
                bad(name, "finite", "NaN or inf values")
            return value

        d = integer("n_features_in_", 2)
        try:
            candidates, fixed = self._candidate_degrees()
            check_params(
                {"n_components": AnyOf(None, Integer(1, d, closed="left"))},
                {"n_components": self.n_components},
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the parameters do not fit n_features_in_ = {d}: {exc}") from None
        k = self.n_components
        n_steps = d - 1 if k is None else int(k)
        n_out = d if k is None else int(k)
        if integer("n_components_", 1) != n_out:
            bad(
                "n_components_",
                f"{n_out} (n_components={k!r}, {d} features)",
                self.n_components_,
            )
        integer("n_samples_", 1)
        rank = integer("rank_", 0)
        if rank > d:
            bad("rank_", f"an int <= n_features_in_ = {d}", rank)
        degrees = array("degrees_", (n_steps,), kind="i")
        # the steps past the rank are linear whatever the candidates
        outside = sorted(set(degrees[:rank].tolist()) - set(candidates))
        if (degrees[rank:] != 1).any():
            bad("degrees_", f"1 past the rank (steps {rank + 1} on, rank_ = {rank})", degrees)
        if outside:
            bad(
                "degrees_",
                f"degrees among the candidates {candidates} (degree={self.degree!r})",
                outside,
            )
        array("mean_", (d,))
        vectors = array("leading_vectors_", (n_steps, d))
        if not np.allclose(vectors @ vectors.T, np.eye(n_steps), atol=1e-8):
            bad("leading_vectors_", "orthonormal rows", "rows that are not")
        array("coefficients_", (n_steps, d, int(degrees.max()) + 1))
        intervals = array("basis_intervals_", (n_steps, 2))
        if not (intervals[:, 1] > 0).all():
            bad("basis_intervals_", "(offset, scale) pairs with scale > 0", intervals.tolist())
        ranges = array("alpha_ranges_", (n_steps, 2))
        if not (ranges[:, 0] <= ranges[:, 1]).all():
            bad("alpha_ranges_", "(low, high) pairs with low <= high", ranges.tolist())
        solver = getattr(self, "solver_", None)
        if solver not in ("covariance", "gram", "krylov"):
            bad("solver_", "'covariance', 'gram' or 'krylov'", repr(solver))
        if solver == "covariance":
            array("residual_basis_", (d, d - n_steps))
        elif self.residual_basis_ is not None:
            bad(
                "residual_basis_",
                f"None (solver_ = {solver!r})",
                type(self.residual_basis_).__name__,
            )
        for name, size in (("explained_variance_", n_out), ("residual_variance_", n_steps + 1)):
            if (array(name, (size,)) < 0).any():
                bad(name, "non-negative", getattr(self, name).tolist())
        if fixed:
            for name in ("cv_scores_", "fold_seed_"):
                if getattr(self, name, None) is not None:
                    bad(name, f"None (degree={self.degree!r} is fixed)", type(getattr(self, name)))
        else:
            array("cv_scores_", (n_steps, len(candidates)))
            integer("fold_seed_", 0)
        names = getattr(self, "feature_names_in_", None)
        if names is not None and np.shape(names) != (d,):
            bad("feature_names_in_", f"{d} names", np.shape(names))

    def complete_fitted_state(self):
        """Fill in fitted attributes that files written by older versions do not hold.

        :func:`ppa_dask.store.load_model` (and the member files of ensembles) call this on
        every PPA they build, before :meth:`check_fitted_state`. ``rank_`` (added with the
        rank rule) is derived from ``residual_variance_`` with the tolerance of
        :func:`~ppa_dask.ppa.algebra.rank_rtol` for float64 input: the first ``k`` whose
        residual is at most the tolerance; a model whose residual after its last step is above
        it gets ``n_features_in_`` (the covariance left is not in the file); ``solver_``
        (added with the Gram path) is ``"covariance"``, the one solver before it. Attributes already
        present are left as they are.

        Examples
        --------
        >>> import numpy as np
        >>> from ppa_dask import PPA
        >>> X = np.random.default_rng(0).normal(size=(200, 2))
        >>> model = PPA(degree=2).fit(np.hstack([X, X[:, :1]]))  # rank 2 of 3
        >>> del model.rank_  # as read from an older file
        >>> model.complete_fitted_state()
        >>> model.rank_
        2
        """
        if not hasattr(self, "solver_") and hasattr(self, "residual_basis_"):
            self.solver_ = "covariance"  # the one solver before the Gram path
        if hasattr(self, "rank_") or not hasattr(self, "residual_variance_"):
            return
        residual = np.asarray(self.residual_variance_, dtype=float)
        d = int(self.n_features_in_)
        tol = _algebra.rank_rtol(d) * float(residual[0]) if residual.size else 0.0
        rank = _algebra.numerical_rank(residual.tolist(), tol)
        self.rank_ = d if rank is None else int(rank)

    @property
    def _n_features_out(self):
        return self.n_components_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags


def _transform_chunk(block, model, n_out, block_info=None):
    start = block_info[0]["array-location"][0][0] if block_info else 0
    return kernels.transform_block(block, model, n_out, start)


def _inverse_chunk(block, model, block_info=None):
    start = block_info[0]["array-location"][0][0] if block_info else 0
    return kernels.inverse_block(block, model, start)
