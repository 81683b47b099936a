"""
A real scene: Landsat 8 with fill values
========================================

:func:`ppa_dask.datasets.load_landsat_crop` ships 512 x 512 pixels of a Landsat 8 scene (the
blue, green and red bands B2, B3, B4 on the Itaipu reservoir, 2020-05-18; US public domain) as
three GeoTIFFs, one band per file as Landsat files come. The upper right corner of the crop lies
outside the scene: every band is 0 there, and the files carry no no-data tag, so nothing tells
a reader that those zeros are not data.

:func:`ppa_dask.store.open_cube` reads the three files as one cube (bands named from what
differs between the file names) and ``nodata=0`` declares the zeros missing: a pixel that is 0
in any band is NaN in every band, left out of the fit and NaN in the components. PPA is fitted on
the valid pixels, its components are shown as images and its reconstruction error is compared
with PCA's at ``k = 1, 2``; a second fit, taking the zeros as data, shows what goes wrong
otherwise (and the warning ppa-dask gives when it sees such a fit).
"""

import os
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA

from ppa_dask import PPA
from ppa_dask.datasets import load_landsat_crop
from ppa_dask.plotting import robust_limits
from ppa_dask.store import open_cube
from ppa_dask.utils.warnings import NoDataWarning

paths = load_landsat_crop(return_paths=True)  # ..._B2.TIF, ..._B3.TIF, ..._B4.TIF
print([os.path.basename(p) for p in paths])
scene = open_cube(paths, nodata=0).load()  # (band, y, x) float64, NaN outside the scene
fill = scene.isnull().all("band")
print(scene.band.values.tolist(), dict(scene.sizes), f"fill: {float(fill.mean()):.1%}")

model = PPA(random_state=0).fit(scene, feature_dim="band")  # degree per step chosen in 1..5
comps = model.transform(scene)  # DataArray (component, y, x), NaN outside the scene
print("degree per step:", model.degrees_, " no-data value:", model.xarray_layout_["nodata"])

# %%
# The scene in natural colour (red, green, blue = B4, B3, B2, each stretched between the 2nd
# and 98th percentiles of its valid pixels; the fill is white) and the three PPA components.
# The first follows brightness (water and forest dark, bare fields bright), the second sets the
# open water apart from the land, the third holds what is left. The colour scales of the
# components are robust too (:func:`ppa_dask.plotting.robust_limits`), so the few brightest
# fields do not flatten the rest.


def stretch(band):
    low, high = robust_limits(band)
    return np.clip((band - low) / (high - low), 0.0, 1.0)


rgb = np.dstack([stretch(scene.sel(band=b).values) for b in ("B4", "B3", "B2")])
rgb[fill.values] = 1.0

fig, axes = plt.subplots(1, 4, figsize=(14, 3.9))
axes[0].imshow(rgb)
axes[0].set_title("RGB (B4, B3, B2)")
for i, ax in enumerate(axes[1:]):
    image = comps.isel(component=i).values
    vmin, vmax = robust_limits(image)
    im = ax.imshow(image, cmap="viridis", vmin=vmin, vmax=vmax)
    ax.set_title(f"PPA component {i + 1}")
    fig.colorbar(im, ax=ax, shrink=0.75)
for ax in axes:
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
plt.show()

# %%
# PPA beside PCA: the mean squared reconstruction error of the valid pixels with ``k = 1, 2``
# components (``k = 3`` reconstructs exactly). PPA's comes from
# :meth:`~ppa_dask.PPA.reconstruction_errors` (the mean over the valid pixels of a cube); PCA
# is scikit-learn's, fitted on the same pixels stacked by hand.
#
# Fitted on every pixel instead (the zeros taken as data), both models spend themselves on the
# fill: the first component of that fit is the scene mask (right), the total variance of the
# pixels is 26 times that of the valid ones, and PPA seems to beat PCA by far at ``k = 1``
# because its first curve bends through the cluster of zeros. Measured on the valid pixels,
# both models are worse than the ones fitted on them alone.

# The pixels stacked by hand for PCA, as float64 (scikit-learn's PCA computes its mean in the
# input's dtype, and uint16 or float32 values of this size lose digits).
raw = open_cube(paths).load()  # no no-data declared: uint16, zeros kept
X_all = raw.values.reshape(3, -1).T.astype(np.float64)
X_valid = X_all[~fill.values.ravel()]


def pca_errors(X_fit, X_eval):
    out = []
    for k in (1, 2):
        pca = PCA(n_components=k).fit(X_fit)
        residual = X_eval - pca.inverse_transform(pca.transform(X_eval))
        out.append(np.mean(np.sum(residual**2, axis=1)))
    return np.array(out)


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    naive = PPA(random_state=0).fit(raw, feature_dim="band")  # the zeros fitted as data
for w in caught:
    if issubclass(w.category, NoDataWarning):
        print("warning:", w.message)
errors = {
    "fit on valid pixels": (
        model.reconstruction_errors(scene, per_sample=False).values[1:3],
        pca_errors(X_valid, X_valid),
    ),
    "fit on all pixels": (
        naive.reconstruction_errors(scene, per_sample=False).values[1:3],
        pca_errors(X_all, X_valid),
    ),
}
print(f"total variance: valid pixels {X_valid.var(0).sum():.4g}, all {X_all.var(0).sum():.4g}")
for name, (ppa_err, pca_err) in errors.items():
    print(f"{name}: MSE on the valid pixels, k = 1, 2:  PPA", ppa_err.round(0), " PCA",
          pca_err.round(0), f" PPA / PCA {np.round(ppa_err / pca_err, 3)}")  # fmt: skip

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), width_ratios=(1.4, 1))
width = 0.2
for j, (name, (ppa_err, pca_err)) in enumerate(errors.items()):
    shift = (2 * j - 1.5) * width
    ax1.bar(np.arange(2) + shift, pca_err, width, color="C0", alpha=1 - 0.5 * j,
            label=f"PCA, {name}")  # fmt: skip
    ax1.bar(np.arange(2) + shift + width, ppa_err, width, color="C1", alpha=1 - 0.5 * j,
            label=f"PPA, {name}")  # fmt: skip
ax1.set_xticks(range(2), ["k = 1", "k = 2"])
ax1.set_yscale("log")
ax1.set_ylabel("mean squared error, valid pixels (DN$^2$)")
ax1.legend(fontsize=8)
mask_like = naive.transform(raw).isel(component=0).values
vmin, vmax = robust_limits(mask_like)
im = ax2.imshow(mask_like, cmap="viridis", vmin=vmin, vmax=vmax)
ax2.set_title("component 1, zeros fitted as data")
ax2.set_xticks([])
ax2.set_yticks([])
fig.colorbar(im, ax=ax2, shrink=0.8)
fig.tight_layout()
plt.show()
