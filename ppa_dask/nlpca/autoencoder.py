"""Hierarchical nonlinear PCA (Scholz et al.): a tanh autoencoder with ordered components.

The network is ``d -> h -> k -> h -> d``: a tanh encoding layer, a linear bottleneck of
``k = n_components`` units, a tanh decoding layer and a linear output layer. It is trained on the
hierarchical error

.. math::

    E(\\theta) = \\sum_{i=1}^{k} \\frac{1}{n d} \\sum_{n} \\lVert x_n - f_i(x_n) \\rVert^2
                 + \\alpha \\sum_{\\ell} \\lVert W_\\ell \\rVert_F^2,

where ``f_i`` decodes with only the first ``i`` bottleneck units (the others set to zero). Each
term asks the first ``i`` units to be the best ``i``-unit code on their own, so unit 1 is the
best one-dimensional nonlinear component, unit 2 the best addition to it, and so on: the
components are ordered like PCA's. The objective and its gradient (backpropagation written out
in numpy, vectorised over samples) are the public functions :func:`hierarchical_loss`,
:func:`pack_weights`, :func:`unpack_weights` and :func:`initial_weights`, so that tests can
check the gradient against finite differences.

>>> from ppa_dask.nlpca import NLPCA
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.optimize import minimize
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted, validate_data

from ppa_dask.store import register_estimator
from ppa_dask.utils.arrays import is_dask
from ppa_dask.utils.blas import one_blas_thread
from ppa_dask.utils.params import check_float, check_int
from ppa_dask.utils.seeds import estimator_seed

__all__ = [
    "NLPCA",
    "default_hidden",
    "hierarchical_loss",
    "initial_weights",
    "layer_shapes",
    "pack_weights",
    "unpack_weights",
]


def default_hidden(n_features):
    """Units of each tanh layer when ``hidden=None``: ``max(2 * n_features, 10)``.

    Examples
    --------
    >>> default_hidden(2), default_hidden(18)
    (10, 36)
    """
    return max(2 * int(n_features), 10)


def layer_shapes(n_features, hidden, n_components):
    """Shapes of the four weight matrices ``d x h, h x k, k x h, h x d`` of the network.

    Examples
    --------
    >>> layer_shapes(3, 5, 1)
    [(3, 5), (5, 1), (1, 5), (5, 3)]
    """
    d, h, k = int(n_features), int(hidden), int(n_components)
    return [(d, h), (h, k), (k, h), (h, d)]


def pack_weights(coefs, intercepts):
    """One flat parameter vector from the weight matrices and bias vectors (layer by layer).

    Examples
    --------
    >>> import numpy as np
    >>> pack_weights([np.ones((2, 1))], [np.zeros(1)]).tolist()
    [1.0, 1.0, 0.0]
    """
    parts = []
    for W, b in zip(coefs, intercepts):
        parts += [np.ravel(W), np.ravel(b)]
    return np.concatenate(parts).astype(np.float64)


def unpack_weights(theta, shapes):
    """Weight matrices and bias vectors (views of ``theta``) for the given layer shapes.

    Examples
    --------
    >>> import numpy as np
    >>> coefs, intercepts = unpack_weights(np.arange(3.0), [(2, 1)])
    >>> coefs[0].shape, intercepts[0].tolist()
    ((2, 1), [2.0])
    """
    coefs, intercepts, start = [], [], 0
    for rows, cols in shapes:
        coefs.append(theta[start : start + rows * cols].reshape(rows, cols))
        start += rows * cols
        intercepts.append(theta[start : start + cols])
        start += cols
    if start != theta.size:
        raise ValueError(f"theta has {theta.size} entries; the layer shapes need {start}")
    return coefs, intercepts


def initial_weights(shapes, rng):
    """Random starting weights: ``N(0, 1 / fan_in)`` matrices, zero biases, packed.

    LeCun-style scaling keeps every tanh pre-activation of unit variance on standardised
    input, in the range where tanh is neither linear nor saturated.

    Examples
    --------
    >>> import numpy as np
    >>> initial_weights(layer_shapes(2, 3, 1), np.random.default_rng(0)).shape
    (27,)
    """
    coefs = [rng.normal(0.0, 1.0 / np.sqrt(rows), size=(rows, cols)) for rows, cols in shapes]
    intercepts = [np.zeros(cols) for _, cols in shapes]
    return pack_weights(coefs, intercepts)


def _encode(Xs, coefs, intercepts):
    """Hidden activations and bottleneck values of standardised rows."""
    A1 = np.tanh(Xs @ coefs[0] + intercepts[0])
    return A1, A1 @ coefs[1] + intercepts[1]


def _decode(Z, coefs, intercepts):
    """Standardised reconstruction from the first ``m = Z.shape[1]`` bottleneck units.

    The remaining units are zero, so only the first ``m`` rows of the decoding matrix act.
    """
    m = Z.shape[1]
    A3 = np.tanh(Z @ coefs[2][:m] + intercepts[2])
    return A3, A3 @ coefs[3] + intercepts[3]


def hierarchical_loss(theta, Xs, shapes, alpha):
    """The hierarchical error with weight decay, and its gradient (backpropagation).

    Parameters
    ----------
    theta : ndarray of shape (n_weights,)
        Packed weights (:func:`pack_weights` order).
    Xs : ndarray of shape (n_samples, n_features)
        Standardised training rows.
    shapes : list of tuple
        :func:`layer_shapes` of the network.
    alpha : float
        Weight-decay coefficient on the weight matrices (biases are not penalised).

    Returns
    -------
    loss : float
        ``sum_i mean((Xs - f_i(Xs))**2) + alpha * sum_l ||W_l||^2``, the mean taken over all
        ``n_samples * n_features`` entries and ``f_i`` using the first ``i`` bottleneck units.
    grad : ndarray of shape (n_weights,)

    Examples
    --------
    >>> import numpy as np
    >>> shapes = layer_shapes(2, 3, 1)
    >>> theta = np.zeros(sum(r * c + c for r, c in shapes))
    >>> Xs = np.array([[1.0, -1.0], [-1.0, 1.0]])
    >>> loss, grad = hierarchical_loss(theta, Xs, shapes, 0.0)
    >>> loss  # zero weights reconstruct every row as 0: the mean squared entry
    1.0
    """
    coefs, intercepts = unpack_weights(theta, shapes)
    W1, W2, W3, W4 = coefs
    grad = np.zeros_like(theta)
    gcoefs, gints = unpack_weights(grad, shapes)
    n, d = Xs.shape
    k = W2.shape[1]
    A1, Z = _encode(Xs, coefs, intercepts)
    dZ = np.zeros_like(Z)
    loss = 0.0
    # one decoder pass per level of the hierarchy; k is small, the samples are vectorised
    for i in range(1, k + 1):
        A3, Y = _decode(Z[:, :i], coefs, intercepts)
        R = Y - Xs
        loss += float(np.vdot(R, R)) / (n * d)
        dY = (2.0 / (n * d)) * R
        gcoefs[3] += A3.T @ dY
        gints[3] += dY.sum(axis=0)
        dP3 = (dY @ W4.T) * (1.0 - A3 * A3)
        gcoefs[2][:i] += Z[:, :i].T @ dP3
        gints[2] += dP3.sum(axis=0)
        # units i+1..k were zero in this pass: no gradient reaches them from it
        dZ[:, :i] += dP3 @ W3[:i].T
    gcoefs[1] += A1.T @ dZ
    gints[1] += dZ.sum(axis=0)
    dP1 = (dZ @ W2.T) * (1.0 - A1 * A1)
    gcoefs[0] += Xs.T @ dP1
    gints[0] += dP1.sum(axis=0)
    for W, gW in zip(coefs, gcoefs):
        loss += alpha * float(np.vdot(W, W))
        gW += 2.0 * alpha * W
    return loss, grad


def _recorder(curve):
    """An L-BFGS-B callback appending each iteration's objective to ``curve``."""

    # scipy passes the OptimizeResult only to a callback whose sole parameter has this name
    def record(intermediate_result):
        curve.append(float(intermediate_result.fun))

    return record


def _reject_dask(X, name):
    if is_dask(X):
        raise TypeError(
            f"NLPCA works on numpy arrays in memory, got a Dask array for {name}: call "
            f"{name}.compute() (or fit on a random subsample of rows first); the paper's data "
            "sets are small and the fit is many passes of full-batch L-BFGS"
        )


@register_estimator
class NLPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Hierarchical nonlinear PCA: an autoencoder whose bottleneck units are ordered like PCA's.

    The NLPCA of Scholz et al., the neural-network baseline of the PPA paper (Laparra et al.,
    2014, Fig. 8 and Table 2). The network ``d -> h -> k -> h -> d`` has tanh hidden layers, a
    linear bottleneck of ``k = n_components`` units and a linear output. It minimises the
    hierarchical error, the sum over ``i = 1..k`` of the mean squared reconstruction error when
    only the first ``i`` bottleneck units are used (the others set to zero), plus
    ``alpha * sum ||W||^2`` on the weight matrices. Inputs are centred and divided by their
    overall standard deviation (one number, so the relative scales of the features are kept,
    as in the reconstruction error being compared) inside the model; outputs are scaled back.
    The weights are fitted by L-BFGS-B on the analytic gradient
    (:func:`hierarchical_loss`) from ``n_restarts`` random starts, keeping the best.

    Parameters
    ----------
    n_components : int, default=1
        Bottleneck units ``k``, ``1 <= k < n_features``.
    hidden : int or None, default=None
        Units of each tanh layer. None takes ``max(2 * n_features, 10)``: the hidden layers
        must be wider than the input to bend it (the paper notes that they are "typically
        assumed" so), about two tanh units per input direction approximate a quadratic, and at
        least 10 lets one curve of 2-D data be followed. More units fit training data better
        and generalise worse (the paper's Fig. 8).
    alpha : float, default=1e-3
        Weight-decay coefficient on the weight matrices (not the biases), in the units of the
        error: the per-entry mean squared error of standardised data, where the mean alone
        scores 1. The network has more weights than a small data set has rows to pin them
        (Vehicles: ~1,500 weights, 423 training rows), so weight decay is what keeps it from
        fitting noise: on Vehicles, 1e-4 gave a test error up to twice PCA's at k = 3 and 1e-3
        a test error below PCA's at k = 1, 2, 3, while on a noisy line 1e-3 costs about 2 % of
        training error against PCA. Raise it for fewer rows per weight.
    n_restarts : int, default=3
        Random initialisations; the restart with the lowest training objective is kept. The
        objective is nonconvex, so one start may end in a poor local minimum; restart ``r``
        uses its own seed, a function of ``random_state`` and ``r`` only, so more restarts
        never give a worse training objective.
    max_iter : int, default=1000
        Most L-BFGS-B iterations per restart.
    tol : float, default=1e-7
        A restart stops when an iteration lowers the objective by less than ``tol`` relative to
        its value (L-BFGS-B's ``ftol``) or the largest gradient entry falls below ``tol``
        (``gtol``).
    random_state : int, RandomState, Generator or None, default=None
        Seeds the initial weights (one integer seed via
        :func:`ppa_dask.utils.seeds.estimator_seed`, one derived seed per restart).

    Attributes
    ----------
    coefs_ : list of ndarray
        The weight matrices, of shapes ``(d, h), (h, k), (k, h), (h, d)``, acting on
        standardised rows (``x W + b``).
    intercepts_ : list of ndarray
        The biases, of lengths ``h, k, h, d``.
    mean_ : ndarray of shape (n_features,)
        Mean of the training data, subtracted before the network.
    scale_ : float
        Overall standard deviation of the centred training data (1.0 for constant data).
    hidden_ : int
        Units of each tanh layer.
    n_components_ : int
    n_features_in_ : int
    loss_ : float
        Training objective (hierarchical error plus weight decay) of the kept restart.
    loss_curve_ : ndarray of shape (n_iter + 1,)
        Objective of the kept restart at its start and after each iteration.
    n_iter_ : int
        L-BFGS-B iterations of the kept restart.
    converged_ : bool
        Whether the kept restart stopped by ``tol`` rather than by ``max_iter``.
    best_restart_ : int
        Index of the kept restart.
    restart_losses_ : ndarray of shape (n_restarts,)
        Final training objective of every restart.
    restart_n_iter_ : ndarray of shape (n_restarts,)
        L-BFGS-B iterations of every restart.
    reconstruction_errors_ : ndarray of shape (n_components,)
        Training mean squared reconstruction error per row (in input units, summed over
        features) with the first ``1, ..., k`` units: non-increasing in ``i`` for a good fit.
    seed_ : int
        The integer seed drawn from ``random_state``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.decomposition import PCA
    >>> from ppa_dask.nlpca import NLPCA
    >>> rng = np.random.default_rng(0)
    >>> t = rng.uniform(-1, 1, 300)
    >>> X = np.column_stack([t, t**2]) + 0.02 * rng.normal(size=(300, 2))
    >>> model = NLPCA(n_components=1, random_state=0).fit(X)
    >>> Z = model.transform(X)  # one curvilinear coordinate per row
    >>> X_nl = model.inverse_transform(Z)
    >>> pca = PCA(1).fit(X)
    >>> X_lin = pca.inverse_transform(pca.transform(X))
    >>> bool(np.mean((X - X_nl) ** 2) < 0.2 * np.mean((X - X_lin) ** 2))
    True
    """

    def __init__(
        self,
        n_components=1,
        hidden=None,
        alpha=1e-3,
        n_restarts=3,
        max_iter=1000,
        tol=1e-7,
        random_state=None,
    ):
        self.n_components = n_components
        self.hidden = hidden
        self.alpha = alpha
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _check_params(self, n_features):
        k = check_int("n_components", self.n_components, minimum=1)
        if k >= n_features:
            raise ValueError(
                "n_components must be below the number of features (a bottleneck narrower "
                f"than the input); got n_components = {k} with n_features = {n_features}"
            )
        if self.hidden is None:
            hidden = default_hidden(n_features)
        else:
            hidden = check_int("hidden", self.hidden, minimum=1)
        alpha = check_float("alpha", self.alpha, minimum=0.0)
        n_restarts = check_int("n_restarts", self.n_restarts, minimum=1)
        max_iter = check_int("max_iter", self.max_iter, minimum=1)
        tol = check_float("tol", self.tol, minimum=0.0)
        # names random_state in its error
        seed = estimator_seed(self.random_state)
        return k, hidden, alpha, n_restarts, max_iter, tol, seed

    def fit(self, X, y=None):
        """Fit the autoencoder to ``X`` from ``n_restarts`` random starts.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numpy input only; a Dask array raises a TypeError (compute or subsample it).
        y : None
            Ignored.

        Returns
        -------
        self : NLPCA
        """
        _reject_dask(X, "X")
        X = validate_data(self, X, dtype=np.float64)
        n, d = X.shape
        k, hidden, alpha, n_restarts, max_iter, tol, seed = self._check_params(d)
        mean = X.mean(axis=0)
        scale = float(np.sqrt(np.mean((X - mean) ** 2)))
        # constant data: any scale reconstructs it; 1 keeps the weights finite
        scale = scale if scale > 0 and np.isfinite(scale) else 1.0
        Xs = (X - mean) / scale
        shapes = layer_shapes(d, hidden, k)
        options = {"maxiter": max_iter, "ftol": tol, "gtol": tol}

        results = []
        with one_blas_thread():
            for r in range(n_restarts):
                # restart r's seed depends on (seed, r) only: restarts 0..r-1 are the same runs
                # whatever n_restarts is
                rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(r,)))
                theta0 = initial_weights(shapes, rng)
                curve = [hierarchical_loss(theta0, Xs, shapes, alpha)[0]]

                res = minimize(
                    hierarchical_loss,
                    theta0,
                    args=(Xs, shapes, alpha),
                    jac=True,
                    method="L-BFGS-B",
                    options=options,
                    callback=_recorder(curve),
                )
                results.append((float(res.fun), res, curve))

        losses = np.array([loss for loss, _, _ in results])
        best = int(np.argmin(losses))
        loss, res, curve = results[best]
        coefs, intercepts = unpack_weights(np.array(res.x, dtype=np.float64), shapes)
        self.coefs_ = [np.array(W) for W in coefs]
        self.intercepts_ = [np.array(b) for b in intercepts]
        self.mean_ = mean
        self.scale_ = scale
        self.hidden_ = hidden
        self.n_components_ = k
        self.loss_ = loss
        self.loss_curve_ = np.array(curve)
        self.n_iter_ = int(res.nit)
        self.converged_ = bool(res.status == 0)
        self.best_restart_ = best
        self.restart_losses_ = losses
        self.restart_n_iter_ = np.array([int(r.nit) for _, r, _ in results])
        self.seed_ = seed
        self.reconstruction_errors_ = self.reconstruction_errors(X)
        if res.status == 1:
            warnings.warn(
                f"NLPCA: the best of {n_restarts} restart(s) stopped at max_iter={max_iter} "
                f"before reaching tol={tol}; increase max_iter for a closer fit",
                ConvergenceWarning,
                stacklevel=2,
            )
        return self

    def transform(self, X):
        """Bottleneck values (the nonlinear components) of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
            Column ``i`` is unit ``i`` of the bottleneck; the columns are ordered by the
            hierarchy (the first alone is the best one-unit code).
        """
        check_is_fitted(self)
        _reject_dask(X, "X")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        with one_blas_thread():
            _, Z = _encode((X - self.mean_) / self.scale_, self.coefs_, self.intercepts_)
        return Z

    def inverse_transform(self, X):
        """Decode bottleneck values; missing trailing units are taken as zero.

        Parameters
        ----------
        X : array-like of shape (n_samples, m), 1 <= m <= n_components
            Values of the first ``m`` bottleneck units, as returned by ``transform`` (or its
            first ``m`` columns). Units ``m + 1 .. k`` are set to zero, the convention of the
            hierarchical training, so ``inverse_transform(transform(X)[:, :m])`` is the
            ``m``-component reconstruction.

        Returns
        -------
        X_rec : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        _reject_dask(X, "X")
        Z = check_array(X, dtype=np.float64, input_name="X")
        m = Z.shape[1]
        if not 1 <= m <= self.n_components_:
            raise ValueError(
                f"X has {m} columns; inverse_transform expects between 1 and n_components_ = "
                f"{self.n_components_} bottleneck values"
            )
        with one_blas_thread():
            _, Y = _decode(Z, self.coefs_, self.intercepts_)
        return Y * self.scale_ + self.mean_

    def reconstruction_errors(self, X):
        """Mean squared reconstruction error per row with the first ``1, ..., k`` units.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        errors : ndarray of shape (n_components,)
            ``errors[i - 1]`` is the mean over rows of
            ``||x - inverse_transform(transform(x)[:, :i])||^2`` (input units).
        """
        X = np.asarray(validate_data(self, X, dtype=np.float64, reset=False))
        Z = self.transform(X)
        errors = []
        for i in range(1, self.n_components_ + 1):
            R = X - self.inverse_transform(Z[:, :i])
            errors.append(float(np.vdot(R, R)) / X.shape[0])
        return np.array(errors)

    @property
    def _n_features_out(self):
        return self.n_components_
