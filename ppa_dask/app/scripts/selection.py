"""Model selection of the VSK scripts under ``pipelines/`` (Campi et al. 2021, section 6.1).

The paper's SVM grids (:data:`C_GRID`, :data:`GAMMA_GRID`, :func:`search_grids`,
:func:`svm_grid`), its score, the
class-weighted F1 (:func:`weighted_f1`, :func:`weighted_f1_scorer`), and the grid search by it
(:func:`tuned`).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "C_GRID",
    "GAMMA_GRID",
    "search_grids",
    "svm_grid",
    "tuned",
    "weighted_f1",
    "weighted_f1_scorer",
]


#: The VSK paper's SVM grids (section 6.1): C = 2^-6 .. 2^5, gamma = 10^-6 .. 10^1.
C_GRID = tuple(2.0**k for k in range(-6, 6))


GAMMA_GRID = tuple(10.0**k for k in range(-6, 2))


def search_grids(coarse=False):
    """The paper's C and gamma grids, or every other value of each (``--coarse-grid``).

    Examples
    --------
    >>> [len(grid) for grid in search_grids()], [len(grid) for grid in search_grids(True)]
    ([12, 8], [6, 4])
    """
    step = 2 if coarse else 1
    return C_GRID[::step], GAMMA_GRID[::step]


def svm_grid(kernel, prefix="", C_grid=C_GRID, gamma_grid=GAMMA_GRID):
    """The paper's parameter grid for an SVC (``prefix`` e.g. ``"svc__"`` inside a Pipeline).

    Examples
    --------
    >>> sorted(svm_grid("rbf", "svc__"))
    ['svc__C', 'svc__gamma']
    """
    grid = {prefix + "C": list(C_grid)}
    if kernel == "rbf":
        grid[prefix + "gamma"] = list(gamma_grid)
    return grid


def weighted_f1(y_true, y_pred):
    """The class-weighted F1 score, computed as ``sklearn.metrics.f1_score(y_true, y_pred,
    average="weighted")`` computes it (the same operations in the same order, so the same
    float), without its input validation.

    Per label of ``y_true`` or ``y_pred``: ``F1 = 2 tp / (n_true + n_pred)`` (0 when both are
    0), averaged with the weights ``n_true``. In a grid search of small SVMs scikit-learn's
    checks of the labels cost several times the fit itself (the VSK breast cancer pipeline
    spent half its time there, measured with cProfile); the equality is tested.

    Examples
    --------
    >>> round(weighted_f1([0, 0, 1, 1], [0, 1, 1, 1]), 6)
    0.733333
    """
    y_true, y_pred = np.asarray(y_true).ravel(), np.asarray(y_pred).ravel()
    if y_true.shape != y_pred.shape or not y_true.size:
        raise ValueError(
            f"y_true and y_pred must be non-empty and of one length, got {y_true.size} and "
            f"{y_pred.size} labels"
        )
    labels, index = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    n, k = y_true.size, labels.size
    true, pred = index[:n], index[n:]
    n_true = np.bincount(true, minlength=k)
    n_pred = np.bincount(pred, minlength=k)
    tp = np.bincount(true[true == pred], minlength=k)
    denominator = 1.0 * n_true.astype(np.float64) + n_pred.astype(np.float64)
    empty = denominator == 0
    denominator[empty] = 1
    f1 = (2.0 * tp.astype(np.float64)) / denominator
    f1[empty] = 0.0
    return float(np.average(f1, weights=n_true))


def weighted_f1_scorer(estimator, X, y):
    """A scorer (``scoring=`` of a search) of :func:`weighted_f1` on ``estimator.predict(X)``."""
    return weighted_f1(y, estimator.predict(X))


def tuned(estimator, grid, cv=5):
    """GridSearchCV by weighted F1 (the paper's score; :func:`weighted_f1_scorer`), in
    process, errors raised."""
    from sklearn.model_selection import GridSearchCV

    return GridSearchCV(
        estimator, grid, cv=cv, scoring=weighted_f1_scorer, n_jobs=1, error_score="raise"
    )
