"""
Hyperspectral cube components as images
=======================================

:func:`ppa_dask.datasets.make_cube` makes a synthetic hyperspectral-like cube: every pixel's
spectrum is a smooth nonlinear function of three latent fields (vegetation fraction, moisture,
illumination), with clouds as NaN. PPA fits the DataArray directly, with ``band`` as the
feature dimension and every other dimension a sample dimension; ``transform`` returns the
components as images with the coordinates kept and the cloudy pixels NaN.
"""

import matplotlib.pyplot as plt
import numpy as np

from ppa_dask import PPA
from ppa_dask.datasets import make_cube
from ppa_dask.plotting import robust_limits

cube = make_cube(n_bands=16, ny=64, nx=64, random_state=0)  # numpy-backed; chunks= for Dask
refl = cube["reflectance"]  # (band, y, x)
# the first three steps only (n_components=3); degree per step chosen in 1..3
model = PPA(n_components=3, degree=range(1, 4), random_state=0).fit(refl, feature_dim="band")
comps = model.transform(refl)  # DataArray (component, y, x), NaN under clouds
print(comps.dims, comps.shape, "degrees:", model.degrees_)

# %%
# The first three PPA components beside the true latent fields. Each component follows mostly
# one field (the absolute correlations over the cloud-free pixels are printed below); the cloud
# gaps are white. The colour scales run from the 2nd to the 98th percentile of each image
# (:func:`ppa_dask.plotting.robust_limits`, as the pipelines' component plots), so a few
# extreme pixels do not flatten the rest.

values = comps.values.reshape(3, -1)
clear = np.isfinite(values[0])
for name in ["vegetation", "moisture", "illumination"]:
    field = cube[name].values.ravel()[clear]
    corr = [abs(np.corrcoef(values[i, clear], field)[0, 1]) for i in range(3)]
    print(f"|corr| of {name:12s} with components 1-3:", np.round(corr, 2))

fig, axes = plt.subplots(2, 3, figsize=(10, 6.5))
for i, ax in enumerate(axes[0]):
    image = comps.isel(component=i).values
    vmin, vmax = robust_limits(image)
    im = ax.imshow(image, cmap="viridis", vmin=vmin, vmax=vmax)
    ax.set_title(f"PPA component {i + 1}")
    fig.colorbar(im, ax=ax, shrink=0.8)
for ax, name in zip(axes[1], ["vegetation", "moisture", "illumination"]):
    im = ax.imshow(cube[name].values, cmap="magma")
    ax.set_title(f"true {name}")
    fig.colorbar(im, ax=ax, shrink=0.8)
for ax in axes.ravel():
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
plt.show()
