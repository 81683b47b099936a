"""
Nonlinear EOF: an asymmetric ENSO-like mode
===========================================

El Nino and La Nina are not mirror images: warm events are stronger and peak in the eastern
Pacific, cold events are weaker and sit further west. An EOF is a line in the space of maps,
``mean + alpha * EOF``, so its warm and cold phases are the same map with opposite signs; the
difference between them needs a second EOF that is not a mode of its own. A PPA component is a
curve, ``mean + alpha * v + g(alpha)``: one component can hold both shapes.

:func:`ppa_dask.datasets.make_enso_field` makes a monthly sea surface temperature anomaly on a
2.5 degree grid (land NaN) whose leading mode is ``s P1 + (s^2 - 1) P2``: ``P1`` the mean
pattern, ``P2`` the warm-cold asymmetry. PPA is fitted on the field as an xarray DataArray
(the ocean cells are the features, 5430 of them, so ``solver="auto"`` takes the Gram path),
with the cells weighted by ``sqrt(cos(latitude))`` as in EOF analysis; the EOF is scikit-learn's
PCA on the same weighted cells. Both one-component reconstructions are compared with the data:
their error, and the composites of warm and of cold events, whose sum is zero for any linear
mode.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA

from ppa_dask import PPA
from ppa_dask.datasets import make_enso_field
from ppa_dask.store import patterns

field = make_enso_field(random_state=0)  # (time, latitude, longitude): 360 months, 48 x 144
model = PPA(n_components=2, degree=range(1, 4), random_state=0)
model.fit(field, feature_dim=("latitude", "longitude"), coslat=True)
print(f"solver: {model.solver_}, degree per component (cross-validated): {model.degrees_}")

# one-component reconstructions, in kelvin; PPA's straight from the DataArray
R = model.transform(field)
ppa_rec = model.inverse_transform(R.isel(component=slice(0, 1)))

# the EOF: PCA of the same weighted ocean cells, its reconstruction divided back
ocean = field.isel(time=0).notnull().values
weights = np.sqrt(np.cos(np.deg2rad(field["latitude"].values)))[:, None] * np.ones(ocean.shape)
X = field.values[:, ocean] * weights[ocean]
eof = PCA(n_components=1).fit(X)
pca_rec = field.copy(data=np.full(field.shape, np.nan))
pca_rec.values[:, ocean] = eof.inverse_transform(eof.transform(X)) / weights[ocean]


def error_fraction(rec):
    """Area-weighted squared error, as a fraction of the area-weighted variance."""
    area = weights[ocean] ** 2
    x = field.values[:, ocean]
    return ((x - rec.values[:, ocean]) ** 2 * area).sum() / ((x - x.mean(0)) ** 2 * area).sum()


print(
    f"one-component error (fraction of the variance): PPA {error_fraction(ppa_rec):.3f}, "
    f"PCA {error_fraction(pca_rec):.3f}"
)

# the leading vectors agree: the difference is that PPA's component bends
first = patterns(model).isel(component=0).values[ocean]
print(
    f"|correlation| of PPA's leading pattern with EOF 1: "
    f"{abs(np.corrcoef(first, eof.components_[0] / weights[ocean])[0, 1]):.4f}"
)

# %%
# Warm and cold events from the data alone: a Nino-3.4-like index (the mean anomaly of
# 5 S - 5 N, 170 W - 120 W), standardised; events where it exceeds one standard deviation.
# The *asymmetry* is the warm composite plus the cold one: zero for a linear mode.

nino = field.sel(latitude=slice(-5, 5), longitude=slice(190, 240)).mean(("latitude", "longitude"))
nino = (nino - nino.mean()) / nino.std()
warm, cold = nino > 1, nino < -1
print(f"{int(warm.sum())} warm and {int(cold.sum())} cold months")


def asymmetry(data):
    anomaly = data - field.mean("time")
    return anomaly.sel(time=warm).mean("time") + anomaly.sel(time=cold).mean("time")


data_asym = asymmetry(field)
for name, rec in (("PPA", ppa_rec), ("PCA", pca_rec)):
    a = asymmetry(rec)
    r = np.corrcoef(a.values[ocean], data_asym.values[ocean])[0, 1]
    size = float(np.sqrt((a**2).sum() / (data_asym**2).sum()))
    print(f"{name} asymmetry: correlation with the data's {r:.3f}, amplitude {size:.2f} of it")

equator = slice(-2.5, 2.5)
for name, data in (("data", field), ("PPA", ppa_rec), ("PCA", pca_rec)):
    profile = (data - field.mean("time")).sel(latitude=equator).mean("latitude")
    w, c = profile.sel(time=warm).mean("time"), profile.sel(time=cold).mean("time")
    print(
        f"{name}: warm events peak at {float(w.idxmax()):.0f} E ({float(w.max()):+.2f} K), "
        f"cold events at {float(c.idxmin()):.0f} E ({float(c.min()):+.2f} K)"
    )

# %%
# Top: the warm and cold composites of the data and their sum. Bottom: the sum from each
# one-component reconstruction, and the composites along the equator (cold ones sign-flipped,
# so a linear mode draws the same curve twice).

fig, axes = plt.subplots(2, 3, figsize=(13, 5.6), layout="constrained")
lon, lat = field["longitude"], field["latitude"]
maps = [
    (axes[0, 0], (field - field.mean("time")).sel(time=warm).mean("time"), "data: warm events"),
    (axes[0, 1], (field - field.mean("time")).sel(time=cold).mean("time"), "data: cold events"),
    (axes[0, 2], data_asym, "data: warm + cold (asymmetry)"),
    (axes[1, 0], asymmetry(ppa_rec), "PPA, 1 component: warm + cold"),
    (axes[1, 1], asymmetry(pca_rec), "PCA (EOF 1): warm + cold"),
]
for ax, values, title in maps:
    limit = 2.0 if "events" in title else 0.8
    mesh = ax.pcolormesh(lon, lat, values, cmap="RdBu_r", vmin=-limit, vmax=limit)
    ax.set_facecolor("0.8")  # land
    ax.set_title(title, fontsize=10)
    ax.set_aspect("equal")
    ax.set_xlabel("longitude (E)", fontsize=8)
    ax.set_ylabel("latitude (N)", fontsize=8)
    fig.colorbar(mesh, ax=ax, shrink=0.8, label="K")
ax = axes[1, 2]
styles = {"data": dict(color="0.6", lw=5), "PPA": dict(color="C1"), "PCA": dict(color="C0")}
for name, data in (("data", field), ("PPA", ppa_rec), ("PCA", pca_rec)):
    profile = (data - field.mean("time")).sel(latitude=equator).mean("latitude")
    ax.plot(lon, profile.sel(time=warm).mean("time"), **styles[name], label=f"{name}: warm")
    ax.plot(lon, -profile.sel(time=cold).mean("time"), **styles[name], ls=":", label="-cold")
ax.set_xlim(120, 290)
ax.set_ylim(-0.3, 2.4)  # room for the legend
ax.set_title("along the equator: warm and -cold composites", fontsize=10)
ax.set_xlabel("longitude (degrees east)")
ax.set_ylabel("K")
ax.legend(fontsize=7, ncol=3, loc="upper left")
plt.show()
