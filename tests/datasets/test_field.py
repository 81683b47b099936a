"""The ENSO-like field: a (time, latitude, longitude) SST anomaly whose leading mode is a curve
(warm and cold events differ in shape), land NaN, values a function of the seed only; and the
claim it exists for: a one-component PPA follows the curve, PCA's first EOF cannot."""

import numpy as np
import pytest
from sklearn.decomposition import PCA

from ppa_dask import PPA
from ppa_dask.datasets import make_enso_field
from ppa_dask.utils.params import InvalidParameterError

FEATURES = ("latitude", "longitude")


@pytest.fixture(scope="module")
def enso():
    return make_enso_field(return_modes=True)


def _ocean_rows(field):
    ocean = field.isel(time=0).notnull().values
    return field.values[:, ocean], ocean


def test_layout_coordinates_attrs_and_land():
    field = make_enso_field(n_times=12, n_lat=24, n_lon=72, random_state=3)
    assert field.dims == ("time", "latitude", "longitude") and field.shape == (12, 24, 72)
    assert field.name == "sst_anomaly" and field.dtype == np.float64
    assert field.attrs["units"] == "K" and field.attrs["long_name"]
    assert field["latitude"].attrs["units"] == "degrees_north"
    lat, lon = field["latitude"].values, field["longitude"].values
    assert np.allclose(lat, np.linspace(-57.5, 57.5, 24)) and np.allclose(np.diff(lon), 5.0)
    assert 0 < lon[0] < lon[-1] < 360
    assert str(field["time"].values[1])[:7] == "1980-02"
    # land is NaN at every date, the ocean nowhere: NaN cells are whole features
    nan = field.isnull().values
    assert (nan == nan[0]).all() and 0.15 < nan[0].mean() < 0.4
    # the tropical Pacific is open ocean
    pacific = field.sel(latitude=slice(-20, 20), longitude=slice(160, 255))
    assert pacific.notnull().all()
    assert not make_enso_field(n_times=12, n_lat=24, n_lon=72, land=False).isnull().any()


def test_values_depend_on_the_seed_only():
    a = make_enso_field(n_times=20, n_lat=12, n_lon=36, random_state=5)
    b = make_enso_field(n_times=20, n_lat=12, n_lon=36, random_state=5)
    c = make_enso_field(n_times=20, n_lat=12, n_lon=36, random_state=6)
    assert a.identical(b)
    assert not np.allclose(a.fillna(0).values, c.fillna(0).values)
    # the patterns are the grid's, the series the seed's
    _, ma = make_enso_field(n_times=20, n_lat=12, n_lon=36, random_state=5, return_modes=True)
    _, mc = make_enso_field(n_times=20, n_lat=12, n_lon=36, random_state=6, return_modes=True)
    assert ma["pattern"].identical(mc["pattern"]) and ma["asymmetry"].identical(mc["asymmetry"])
    assert not np.allclose(ma["index"].values, mc["index"].values)


def test_the_model_without_noise(enso):
    field, modes = enso
    clean = make_enso_field(noise=0.0)
    X, ocean = _ocean_rows(clean)
    s = modes["index"].values
    p1, p2 = modes["pattern"].values[ocean], modes["asymmetry"].values[ocean]
    assert abs(s.mean()) < 1e-12 and abs(s.std() - 1) < 1e-12
    assert abs(p1 @ p2) < 1e-9 * (p1 @ p1)  # the asymmetry is orthogonal to the mean pattern
    # the noise is what it says
    noisy, _ = _ocean_rows(field)
    assert abs((noisy - X).std() - 0.1) < 0.002
    # the ENSO mode is s P1 + (s^2 - 1) P2: its least-squares coefficients on the two patterns
    coef = np.linalg.lstsq(np.column_stack([p1, p2]), X.T, rcond=None)[0]
    assert np.allclose(coef[0], s, atol=0.05) and np.allclose(coef[1], s**2 - 1, atol=0.05)
    # along the equator, warm events are stronger than cold ones and peak further east; cold
    # events are cold across the Pacific
    equator = clean.sel(latitude=slice(-2, 2)).mean("latitude")
    warm, cold = equator[s > 1].mean("time"), equator[s < -1].mean("time")
    assert float(warm.max()) > 1.1 * -float(cold.min()) > 1
    assert float(warm.idxmax()) > float(cold.idxmin()) + 20
    assert float(cold.sel(longitude=slice(150, 280)).max()) < 0


def test_bad_parameters():
    with pytest.raises(InvalidParameterError, match="n_lat must be"):
        make_enso_field(n_lat=1)
    with pytest.raises(InvalidParameterError, match="land must be"):
        make_enso_field(land="yes")
    with pytest.raises(InvalidParameterError, match="noise must be"):
        make_enso_field(noise=-1)


def test_one_ppa_component_follows_the_curve_pca_cannot(enso):
    """The generator's purpose: one PPA component reconstructs the field far better than
    PCA's first EOF, and its warm + cold composite (zero for any linear mode but the sampling
    of the index) is the asymmetry pattern, which the EOF reconstruction lacks."""
    field, modes = enso
    model = PPA(n_components=2, degree=range(1, 4), random_state=0)
    model.fit(field, feature_dim=FEATURES)
    assert model.solver_ == "gram"  # thousands of ocean cells, 360 dates: the wide path
    assert model.degrees_[0] >= 2  # cross-validation finds the curve
    one = model.inverse_transform(model.transform(field).isel(component=slice(0, 1)))
    assert one.dims == field.dims and bool(one.isnull().equals(field.isnull()))

    X, ocean = _ocean_rows(field)
    ppa_rec = one.values[:, ocean]
    pca = PCA(1).fit(X)
    pca_rec = pca.inverse_transform(pca.transform(X))
    total = ((X - X.mean(axis=0)) ** 2).sum()
    ppa_error, pca_error = ((X - ppa_rec) ** 2).sum() / total, ((X - pca_rec) ** 2).sum() / total
    assert ppa_error < 0.75 * pca_error, (ppa_error, pca_error)

    s, truth = modes["index"].values, modes["asymmetry"].values[ocean]
    warm, cold, mean = s > 1, s < -1, X.mean(axis=0)

    def asymmetry(rec):
        return rec[warm].mean(axis=0) + rec[cold].mean(axis=0) - 2 * mean

    def agreement(rec):
        return np.corrcoef(asymmetry(rec), truth)[0, 1]

    def amplitude(rec):
        return np.linalg.norm(asymmetry(rec)) / np.linalg.norm(asymmetry(X))

    assert agreement(ppa_rec) > 0.95 and 0.8 < amplitude(ppa_rec) < 1.2
    assert agreement(pca_rec) < 0.5 and amplitude(pca_rec) < 0.4
