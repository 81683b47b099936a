"""
Reconstruction error: PPA against PCA
=====================================

Truncating PPA after ``k`` steps sets the residual left after step ``k`` to zero, so its
squared error is exactly that residual and never exceeds PCA's with ``k`` components on the
training data. :meth:`ppa_dask.PPA.reconstruction_errors` gives the error for every ``k`` in
one pass; here it is compared with scikit-learn's PCA on held-out data from
:func:`ppa_dask.datasets.make_curved_manifold` (a curved 3-D manifold in 8 dimensions).
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA

from ppa_dask import PPA
from ppa_dask.datasets import make_curved_manifold

d = 8
X = make_curved_manifold(8000, n_features=d, noise=0.05, random_state=0)
X_train, X_test = X[:4000], X[4000:]

ppa = PPA(degree=range(1, 6), random_state=0).fit(X_train)
ppa_err = ppa.reconstruction_errors(X_test)[1:]  # k = 1 .. d - 1

pca_err = []
for k in range(1, d):
    pca = PCA(n_components=k).fit(X_train)
    rec = pca.inverse_transform(pca.transform(X_test))
    pca_err.append(np.mean(np.sum((X_test - rec) ** 2, axis=1)))
pca_err = np.array(pca_err)
print("degree per step:", ppa.degrees_)
print("PPA / PCA (%):", (100 * ppa_err / pca_err).round(1))

# %%
# Mean squared reconstruction error on the held-out half against the number of components.

k = np.arange(1, d)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
ax1.semilogy(k, pca_err, "s-", label="PCA")
ax1.semilogy(k, ppa_err, "o-", label="PPA")
ax1.set_xlabel("components k")
ax1.set_ylabel("mean squared error (test)")
ax1.legend()
ax2.bar(k, 100 * ppa_err / pca_err, color="C1")
ax2.axhline(100, color="k", ls="--")
ax2.set_xlabel("components k")
ax2.set_ylabel("PPA error / PCA error (%)")
fig.tight_layout()
plt.show()
