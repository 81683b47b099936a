"""Principal curves, surfaces and volumes drawn from the inverted PPA grid (paper Fig. 7)."""

import numpy as np
import pytest
from conftest import noisy_helix, random_nonlinear

from ppa_dask import PPA
from ppa_dask.plotting import principal_grids


@pytest.fixture(scope="module")
def helix_model():
    X = noisy_helix(n=1500, noise=0.15, seed=2)
    return PPA(degree=range(1, 10), cv=2, random_state=0).fit(X), X


def test_principal_surface_png_and_plotted_points_are_the_inverse_of_the_grid(
    helix_model, tmp_path
):
    model, X = helix_model
    path = tmp_path / "surface.png"
    grid = principal_grids(
        model, X, dims=(0, 1), n_lines=5, n_points=50, input_dims=(0, 2), path=path
    )
    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"

    # the red curve: coefficient 1 on a uniform grid, the rest 0, mapped back by the inverse
    np.testing.assert_allclose(grid.curve, model.inverse_transform(grid.curve_coefficients))
    assert np.allclose(np.diff(grid.curve_coefficients[:, 0], 2), 0)
    assert grid.curve_coefficients.shape == (50, 1)
    # it is the curve of one-component reconstructions: those of the data lie on it
    R1 = model.transform(X)[:, :1]
    lo, hi = grid.curve_coefficients[[0, -1], 0]
    rec = model.inverse_transform(R1[(R1[:, 0] > lo) & (R1[:, 0] < hi)])
    gaps = np.linalg.norm(rec[:, None, :] - grid.curve[None, :, :], axis=2).min(axis=1)
    assert gaps.max() < np.linalg.norm(np.diff(grid.curve, axis=0), axis=1).max()

    # grey grid: 5 lines along each of the two dimensions through the other's grid values
    assert len(grid.lines) == 10 and grid.levels.shape == (2, 5)
    for coef, line in zip(grid.line_coefficients, grid.lines):
        np.testing.assert_allclose(line, model.inverse_transform(coef))
    fixed = sorted({float(c[0, 1]) for c in grid.line_coefficients[:5]})
    np.testing.assert_allclose(fixed, grid.levels[1])

    # what matplotlib holds is those points, projected on the chosen input dimensions
    drawn = [np.column_stack(line.get_data()) for line in grid.ax.get_lines()]
    np.testing.assert_allclose(drawn[-1], grid.curve[:, [0, 2]])
    for artist, line in zip(drawn[:-1], grid.lines):
        np.testing.assert_allclose(artist, line[:, [0, 2]])
    scattered = grid.ax.collections[0].get_offsets()
    np.testing.assert_allclose(scattered, X[:, [0, 2]])


def test_grid_spans_the_central_range_of_the_coefficients(helix_model):
    model, X = helix_model
    grid = principal_grids(model, X, dims=(0,), n_lines=4, quantiles=(0.05, 0.95))
    R = model.transform(X)
    np.testing.assert_allclose(
        grid.curve_coefficients[[0, -1], 0], np.quantile(R[:, 0], [0.05, 0.95])
    )
    assert grid.lines == []


def test_principal_volume_in_3d_and_whitened_models(tmp_path):
    X = random_nonlinear(n=1500, d=5, seed=3)
    model = PPA(degree=3, whiten=True, random_state=0).fit(X)
    path = tmp_path / "volume.png"
    grid = principal_grids(
        model,
        X,
        dims=(0, 1, 2),
        n_lines=3,
        n_points=20,
        input_dims=(0, 1, 2),
        path=path,
        max_scatter=500,
    )
    assert path.stat().st_size > 1000
    assert len(grid.lines) == 3 * 3 * 3
    assert grid.curve_coefficients.shape == (20, 1)
    assert all(coef.shape == (20, 3) for coef in grid.line_coefficients)
    for coef, line in zip(grid.line_coefficients, grid.lines):
        np.testing.assert_allclose(line, model.inverse_transform(coef))
    assert len(grid.ax.collections[0].get_offsets()) == 500


def test_bad_arguments_raise_clear_errors(helix_model):
    model, X = helix_model
    with pytest.raises(ValueError, match="dims must be distinct"):
        principal_grids(model, X, dims=(0, 3))
    with pytest.raises(ValueError, match="1 to 3"):
        principal_grids(model, X, dims=())
    with pytest.raises(ValueError, match="input_dims must hold 2 or 3"):
        principal_grids(model, X, input_dims=(1,))
    with pytest.raises(ValueError, match=r"shape \(n_samples, 3\)"):
        principal_grids(model, X[:, :2])
    with pytest.raises(ValueError, match="n_lines"):
        principal_grids(model, X, n_lines=1)
