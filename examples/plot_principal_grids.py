"""
Principal curves and surfaces
=============================

A fitted PPA model is invertible, so a uniform grid in its first one or two coefficients can be
mapped back to the input space: the line of the first coefficient (the others at zero) is the
*principal curve*, the grid of the first two a *principal surface* (the PPA paper's Fig. 7).
:func:`ppa_dask.plotting.principal_grids` draws them over the data.

The data here are a bent sheet in 3-D: a parabola in ``(x0, x1)`` swept along a third,
slightly curved direction.
"""

import matplotlib.pyplot as plt
import numpy as np

from ppa_dask import PPA
from ppa_dask.plotting import principal_grids

rng = np.random.default_rng(0)
n = 3000
u = rng.uniform(-1.5, 1.5, n)
v = rng.uniform(-1.0, 1.0, n)
X = np.column_stack([2.0 * u, u**2 + 0.3 * v**2, v]) + 0.05 * rng.normal(size=(n, 3))

model = PPA(degree=range(1, 5), random_state=0).fit(X)
print("degree per step:", model.degrees_)

# %%
# The principal curve (left) and surface (right) on the plane of the first two inputs,
# and the surface in 3-D.

fig = plt.figure(figsize=(12, 4))
ax1 = fig.add_subplot(1, 3, 1)
principal_grids(model, X, dims=(0,), input_dims=(0, 1), ax=ax1, max_scatter=1500)
ax1.set_title("principal curve")
ax2 = fig.add_subplot(1, 3, 2)
principal_grids(model, X, dims=(0, 1), n_lines=7, input_dims=(0, 1), ax=ax2, max_scatter=1500)
ax2.set_title("principal surface, (x0, x1)")
ax3 = fig.add_subplot(1, 3, 3, projection="3d")
principal_grids(model, X, dims=(0, 1), n_lines=7, input_dims=(0, 1, 2), ax=ax3, max_scatter=1500)
ax3.set_title("principal surface, 3-D")
fig.tight_layout()
plt.show()
