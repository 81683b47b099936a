"""The PPA paper's toy data: two noisy parabolas (Figs. 3 and 4, section 5.1)."""

from __future__ import annotations

import numpy as np

from ppa_dask.utils.params import Integer, Real, check_params
from ppa_dask.utils.seeds import RANDOM_STATE, resolve_seed

__all__ = ["make_parabolas"]


def make_parabolas(n_samples=1000, curvature=1.5, gap=0.4, noise=0.05, random_state=None):
    """Two classes on parallel noisy parabolas (the data of the paper's Figs. 3 and 4).

    Class ``c`` (0 or 1, alternating rows, so any prefix is balanced) lies on
    ``y = curvature * x^2 + c * gap`` with ``x ~ Uniform(-1, 1)``, plus isotropic Gaussian
    noise of standard deviation ``noise``. The classes are not linearly separable; where the
    arms are steep (large ``curvature * |x|``) the Euclidean distance between the two curves,
    about ``gap / sqrt(1 + (2 curvature x)^2)``, is much smaller than ``gap``, which is what
    makes the problem hard for Euclidean k-NN. Along the parabolas the data vary most along
    ``x`` for ``curvature`` up to about 1.9 (the first principal direction is horizontal, so
    the conditional mean of ``y`` is a degree-2 polynomial of the first PCA coefficient).

    Parameters
    ----------
    n_samples : int, default=1000
    curvature : float, default=1.5
        Coefficient of ``x^2`` ("high curvature"; the paper's low-curvature case is about 0.5).
    gap : float, default=0.4
        Vertical distance between the two parabolas.
    noise : float, default=0.05
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
        A Generator is drawn from directly; anything else gives its integer seed.

    Returns
    -------
    X : ndarray of shape (n_samples, 2)
    y : ndarray of shape (n_samples,), int

    Examples
    --------
    >>> from ppa_dask.datasets import make_parabolas
    >>> X, y = make_parabolas(6, random_state=0)
    >>> X.shape, y.tolist()
    ((6, 2), [0, 1, 0, 1, 0, 1])
    """
    spec = {
        "n_samples": Integer(1),
        "curvature": Real(0),
        "gap": Real(0),
        "noise": Real(0),
        "random_state": RANDOM_STATE,
    }
    values = dict(
        n_samples=n_samples, curvature=curvature, gap=gap, noise=noise, random_state=random_state
    )
    n_samples, curvature, gap, noise, random_state = check_params(spec, values).values()
    # a Generator is drawn from directly (as numpy.random.default_rng does); anything else
    # through its integer seed, so an int gives the same data as before
    if not isinstance(random_state, np.random.Generator):
        random_state = resolve_seed(random_state)
    rng = np.random.default_rng(random_state)
    labels = np.arange(n_samples) % 2
    x = rng.uniform(-1.0, 1.0, n_samples)
    X = np.column_stack([x, curvature * x**2 + labels * gap])
    X += noise * rng.normal(size=X.shape)
    return X, labels
