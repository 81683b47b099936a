"""
Conditioning of variably scaled kernels
=======================================

A variably scaled kernel is an ordinary kernel on the augmented points ``(x, psi(x))``; the
Gaussian VSK Gram matrix is ``K(x) o K(psi)``. The Gaussian kernel matrix of close points
becomes numerically singular as the shape parameter ``gamma`` shrinks (flat kernels); the
scaling function spreads the points apart in the extra dimension, which keeps the VSK matrix
better conditioned (the VSK paper's Proposition 1). :func:`ppa_dask.vsk.vsk_gram` builds the
matrices and :func:`ppa_dask.vsk.condition_number` measures them.
"""

import matplotlib.pyplot as plt
import numpy as np

from ppa_dask.vsk import condition_number, spectral_ratio, vsk_gram

rng = np.random.default_rng(0)
X = np.sort(rng.uniform(0, 1, size=(30, 1)), axis=0)  # 30 points on [0, 1]
psi = np.sin(6 * X[:, 0]) + 0.5 * X[:, 0]  # a scaling function of the data

gammas = np.logspace(0, 4, 25)
cond_plain = [condition_number(vsk_gram(X, None, "rbf", gamma=g)) for g in gammas]
cond_vsk = [condition_number(vsk_gram(X, psi, "rbf", gamma=g)) for g in gammas]
ratio_plain = [spectral_ratio(vsk_gram(X, None, "rbf", gamma=g), normalized=True) for g in gammas]
ratio_vsk = [spectral_ratio(vsk_gram(X, psi, "rbf", gamma=g), normalized=True) for g in gammas]

# %%
# Condition number (``inf`` where numerically singular, drawn at the top of the axis) and the
# normalised spectral ratio against ``gamma``.

top = 1e17


def clip(values):
    """Condition numbers with ``inf`` (numerically singular) drawn at ``top``."""
    return np.minimum(np.asarray(values, dtype=float), top)


fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
ax1.loglog(gammas, clip(cond_plain), "s-", label="Gaussian kernel K(x)")
ax1.loglog(gammas, clip(cond_vsk), "o-", label="VSK K(x) o K(psi)")
ax1.set_xlabel("shape parameter gamma")
ax1.axhline(top, color="grey", ls=":", lw=1)
ax1.text(gammas[-1], top, "numerically singular", ha="right", va="bottom", color="grey")
ax1.set_ylabel("condition number")
ax1.legend()
ax2.semilogx(gammas, ratio_plain, "s-", label="Gaussian kernel")
ax2.semilogx(gammas, ratio_vsk, "o-", label="VSK")
ax2.set_xlabel("shape parameter gamma")
ax2.set_ylabel("normalised spectral ratio")
ax2.legend()
fig.tight_layout()
plt.show()
