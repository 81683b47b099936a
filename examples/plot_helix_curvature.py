"""
Curvature and torsion of a helix
================================

The first curvilinear axis of a PPA model fitted to a helix follows the helix. Its
Frenet-Serret frame and generalised curvatures are exact derivatives of the fitted map
(:func:`ppa_dask.geometry.frenet_serret`), so they can be compared with the helix's own:
for ``(a cos t, a sin t, b t)`` the curvature is ``a / (a^2 + b^2)`` and the torsion
``b / (a^2 + b^2)`` (:func:`ppa_dask.app.experiments.helix_curvatures`), the PPA paper's
Figs. 5-6.
"""

import matplotlib.pyplot as plt
import numpy as np

from ppa_dask import PPA
from ppa_dask.app.experiments import helix_curvatures
from ppa_dask.datasets import make_helix
from ppa_dask.geometry import frenet_serret

a, b = 2.0, 0.8
X = make_helix(2000, a=a, b=b, noise=0.1, random_state=0)
model = PPA(degree=range(1, 16), random_state=0).fit(X)
frames, chi = frenet_serret(model, X, axis=0)
theory = helix_curvatures(a, b)
print("degree per step:", model.degrees_)
print("median estimate:", np.median(chi, axis=0).round(3), "theory:", theory.round(3))

# %%
# Curvature (``chi_1``) and torsion (``chi_2``) at each sample against its first PPA
# coefficient ``alpha_1`` (the position along the first curvilinear axis), with the theoretical
# values as dashed lines. Near the ends of the training range the polynomials have little data
# and the estimates spread.

alpha1 = model.transform(X)[:, 0]
order = np.argsort(alpha1)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
for i, (ax, label) in enumerate(zip(axes, ["curvature $\\chi_1$", "torsion $\\chi_2$"])):
    ax.plot(alpha1[order], chi[order, i], ".", ms=2, alpha=0.5, label="PPA, first axis")
    ax.axhline(theory[i], color="k", ls="--", label="theory")
    ax.set_xlabel("first PPA coefficient $\\alpha_1$")
    ax.set_ylabel(label)
    ax.set_ylim(theory[i] - 0.4, theory[i] + 0.4)
    ax.legend(loc="upper right")
fig.suptitle(f"helix a = {a}, b = {b}, noise 0.1, 2000 points")
fig.tight_layout()
plt.show()
