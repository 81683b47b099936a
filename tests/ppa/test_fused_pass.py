"""The compiled per-row mathematics equals the same quantities computed plainly with numpy.

``ppa_dask.ppa.fused`` holds the basis (Chebyshev values and derivatives, continued along the tangent
outside the training range), a step's update and its inverse, and the fused step pass that applies
the previous step and accumulates the next step's Chebyshev sums, cross moments, orthogonal norms
and range per fold in one sweep. Here every output is recomputed independently with
``numpy.polynomial.chebyshev`` (chebvander, chebder, chebval), explicit boolean fold masks and
plain array arithmetic.
"""

import numpy as np
import pytest
from numpy.polynomial import chebyshev

from ppa_dask.ppa import fused as _fused
from ppa_dask.ppa import kernels


def _step(rng, f, degree, lo=-1.0, hi=1.0):
    e = rng.normal(size=f)
    e /= np.linalg.norm(e)
    return kernels.StepParams(e, 0.1 * rng.normal(size=(f, degree + 1)), 0.3, 2.5, lo, hi)


def _plain_basis(t, degree, lo=-np.inf, hi=np.inf, derivatives=0):
    """[V, V', ...] (n, degree+1) continued along the tangent outside [lo, hi], by numpy."""
    tc = np.clip(t, lo, hi)
    unit = np.eye(degree + 1)

    def derivative(k, x):
        return np.column_stack(
            [chebyshev.chebval(x, chebyshev.chebder(unit[j], k)) for j in range(degree + 1)]
        )

    out = [derivative(k, tc) for k in range(derivatives + 1)]
    beyond = tc != t
    slope = derivative(1, tc)
    out[0] = out[0] + slope * (t - tc)[:, None]
    for k in range(1, derivatives + 1):
        out[k][beyond] = slope[beyond] if k == 1 else 0.0
    return out


def _plain_step(Y, step):
    """(alpha, y - e alpha - U v(t)) by numpy."""
    alpha = step.direction @ Y
    V = _plain_basis((alpha - step.offset) / step.scale, step.coef.shape[1] - 1, step.lo, step.hi)[
        0
    ]
    return alpha, Y - np.outer(step.direction, alpha) - step.coef @ V.T


@pytest.mark.parametrize("lo, hi", [(-np.inf, np.inf), (-0.4, 0.5)])
def test_basis_and_derivatives_equal_numpy_polynomial(lo, hi):
    t = np.linspace(-1.6, 1.4, 701)
    ours = kernels.basis_with_extension(t, 7, lo, hi, derivatives=3)
    for k, (mine, plain) in enumerate(zip(ours, _plain_basis(t, 7, lo, hi, 3))):
        np.testing.assert_allclose(mine, plain, rtol=1e-12, atol=1e-9, err_msg=f"derivative {k}")
    if np.isinf(lo):
        for mine, plain in zip(kernels.chebyshev_basis(t, 7, 3), ours):
            np.testing.assert_array_equal(mine, plain)


def test_step_update_and_its_inverse_equal_numpy():
    rng = np.random.default_rng(3)
    Y = rng.normal(size=(6, 1001))
    step = _step(rng, 6, 4, lo=-0.3, hi=0.6)  # many rows beyond the training range
    alpha, moved = kernels.step_forward(Y, step)
    plain_alpha, plain_moved = _plain_step(Y, step)
    np.testing.assert_allclose(alpha, plain_alpha, rtol=0, atol=1e-13)
    np.testing.assert_allclose(moved, plain_moved, rtol=0, atol=1e-12)
    np.testing.assert_allclose(kernels.step_inverse(moved, alpha, step), Y, rtol=0, atol=1e-12)
    inplace = Y.copy()
    kernels.step_forward(inplace, step, out=inplace)
    np.testing.assert_array_equal(inplace, moved)


def _plain_moments(Y, start, e, offset, scale, degree, seed, n_folds):
    alpha = e @ Y
    t = (alpha - offset) / scale
    V = chebyshev.chebvander(t, 2 * degree)  # (n, 2g+1)
    folds = kernels.fold_labels(start, start + Y.shape[1], seed, n_folds)
    out = []
    for fold in range(n_folds):
        rows = folds == fold if n_folds > 1 else np.ones(Y.shape[1], bool)
        z = np.sum(Y[:, rows] ** 2, axis=0) - alpha[rows] ** 2
        out.append(
            (
                V[rows].sum(axis=0),
                Y[:, rows] @ V[rows, : degree + 1],
                z.sum() if n_folds > 1 else 0.0,
                rows.sum(),
            )
        )
    return out, t.min(), t.max()


@pytest.mark.parametrize("n_folds", [1, 2, 3])
@pytest.mark.parametrize("with_step", [False, True])
def test_fused_pass_equals_plain_numpy(n_folds, with_step):
    rng = np.random.default_rng(n_folds + 10 * with_step)
    f, n, degree = 7, 3001, 4  # n not a multiple of the kernel's chunk
    Y = rng.normal(size=(f, n)) * np.linspace(2, 0.5, f)[:, None]
    # a narrow training range for the previous step: many rows use the linear continuation
    step = _step(rng, f, 3, lo=-0.4, hi=0.5) if with_step else None
    e = rng.normal(size=f)
    e /= np.linalg.norm(e)
    original = Y.copy()
    out = np.full((f, n + 5), np.nan)
    spec = kernels.StepSpec(e, 0.1, 3.0, degree, seed=9, n_folds=n_folds)
    sums, yv, zz, counts, tmin, tmax = _fused.fused_step_pass(
        Y, 1234, step, spec, out=out, out_offset=5
    )
    np.testing.assert_array_equal(Y, original)  # the input is only read
    expected = original if step is None else _plain_step(original, step)[1]
    np.testing.assert_allclose(out[:, 5:], expected, rtol=0, atol=1e-13)
    assert np.isnan(out[:, :5]).all()
    plain, pmin, pmax = _plain_moments(expected, 1234, e, 0.1, 3.0, degree, 9, n_folds)
    for fold, (psums, pyv, pzz, pcount) in enumerate(plain):
        assert counts[fold] == pcount
        np.testing.assert_allclose(sums[fold], psums, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(yv[fold], pyv, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(zz[fold], pzz, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose([tmin, tmax], [pmin, pmax], rtol=1e-13)  # alpha may use FMAs


def test_in_place_update_and_gram_from_the_product_identity():
    rng = np.random.default_rng(4)
    f, n, degree = 5, 1000, 3
    Y = rng.normal(size=(f, n))
    step = _step(rng, f, 2, lo=-np.inf, hi=np.inf)
    expected = _plain_step(Y, step)[1]
    e = np.eye(f)[0]
    spec = kernels.StepSpec(e, 0.0, 1.0, degree, 0, 1)
    residual, moments = kernels.pass_kernel(Y, 0, None, (step,), spec, keep=True, in_place=True)
    assert np.shares_memory(residual, Y) and residual.shape == Y.shape
    np.testing.assert_allclose(Y, expected, atol=1e-13)
    V = chebyshev.chebvander(expected[0], degree)
    np.testing.assert_allclose(moments["vv"][0], V.T @ V, rtol=1e-12, atol=1e-9)


def test_samples_are_centred_in_the_same_sweep():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, 4)) + 7.0
    mean = X.mean(axis=0)
    e = np.array([0.0, 1.0, 0.0, 0.0])
    spec = kernels.StepSpec(e, 0.0, 3.0, 2, 1, 2)
    residual, moments = kernels.pass_kernel(X, 0, mean, (), spec, keep=True)
    np.testing.assert_allclose(residual, (X - mean).T, atol=1e-13)
    plain, _, _ = _plain_moments((X - mean).T, 0, e, 0.0, 3.0, 2, 1, 2)
    for fold, (_, pyv, _pzz, pcount) in enumerate(plain):
        assert moments["n"][fold] == pcount
        np.testing.assert_allclose(moments["yv"][fold], pyv, rtol=1e-12, atol=1e-9)


def test_centred_moments_equal_numpy():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(3001, 7)) * 0.01 + 1e4  # a large offset: the two-pass scatter is exact
    mean, scatter = _fused.centred_moments(X)
    Xc = X - X.mean(axis=0)
    np.testing.assert_allclose(mean, X.mean(axis=0), rtol=1e-14)
    np.testing.assert_allclose(scatter, Xc.T @ Xc, rtol=1e-10)


def test_empty_block_gives_empty_moments():
    spec = kernels.StepSpec(np.eye(3)[0], 0.0, 1.0, 2, seed=0, n_folds=2)
    sums, yv, zz, counts, tmin, tmax = _fused.fused_step_pass(np.zeros((3, 0)), 0, None, spec)
    assert counts.tolist() == [0, 0] and not sums.any() and not yv.any()
    assert (tmin, tmax) == (np.inf, -np.inf)


def test_fold_hash_matches_the_documented_splitmix64():
    """row_hash is SplitMix64 of ``key + (i + 1) * golden`` with ``key = SplitMix64(seed)``."""

    def splitmix64(z):
        z &= 2**64 - 1
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return z ^ (z >> 31)

    key = splitmix64(17)
    expected = [splitmix64(key + (i + 1) * 0x9E3779B97F4A7C15) for i in range(40, 50)]
    assert kernels.row_hash(40, 50, 17).tolist() == expected


def test_change_of_frame_is_exact():
    """With a rotation the kept residual and the moments are those of ``Q^T y``."""
    rng = np.random.default_rng(8)
    f, n, degree = 6, 2000, 3
    Y = rng.normal(size=(f, n))
    step = _step(rng, f, 2)
    Q = np.linalg.qr(rng.normal(size=(f, 3)))[0]
    e = np.array([0.6, 0.8, 0.0])
    Z = Q.T @ _plain_step(Y, step)[1]
    spec = kernels.StepSpec(e, 0.0, 2.0, degree, 3, 2)
    residual, moments = kernels.pass_kernel(
        Y.copy(), 50, None, (step,), spec, keep=True, rotation=Q
    )
    np.testing.assert_allclose(residual, Z, atol=1e-13)
    # in place: the smaller frame's residual is written over the leading rows of the input
    inplace, moments_inplace = kernels.pass_kernel(
        Y, 50, None, (step,), spec, keep=True, in_place=True, rotation=Q
    )
    assert np.shares_memory(inplace, Y)
    np.testing.assert_allclose(inplace, Z, atol=1e-13)
    np.testing.assert_allclose(moments_inplace["yv"], moments["yv"], rtol=1e-13)
    plain, _, _ = _plain_moments(Z, 50, e, 0.0, 2.0, degree, 3, 2)
    for fold, (_, pyv, pzz, pcount) in enumerate(plain):
        assert moments["n"][fold] == pcount
        np.testing.assert_allclose(moments["yv"][fold], pyv, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(moments["zz"][fold], pzz, rtol=1e-12, atol=1e-9)


@pytest.mark.slow
def test_import_and_fit_without_a_writable_numba_cache():
    """Where numba finds nowhere to write its cache (read-only install, no usable home), it
    refuses ``cache=True`` at import; the kernels then compile per process and give the same fit."""
    import subprocess
    import sys

    script = (
        "import numba.core.caching as caching\n"
        "caching.CacheImpl._locator_classes = []  # no cache location anywhere\n"
        "import json\n"
        "import numpy as np\n"
        "from ppa_dask import PPA\n"
        "X = np.random.default_rng(0).normal(size=(400, 4)) * [3, 2, 1, 0.5]\n"
        "model = PPA(degree=(1, 2, 3), random_state=0).fit(X)\n"
        "print(json.dumps(model.transform(X[:3]).tolist()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    import json

    from ppa_dask import PPA

    X = np.random.default_rng(0).normal(size=(400, 4)) * [3, 2, 1, 0.5]
    expected = PPA(degree=(1, 2, 3), random_state=0).fit(X).transform(X[:3])
    np.testing.assert_allclose(json.loads(done.stdout), expected, rtol=0, atol=1e-12)


def _plain_ahead_moments(Y, start, E, offsets, scales, degree, seed, n_folds):
    """Per direction ``E[j]``: the plain fold moments on ``Y``, with ``zz`` orthogonal to the
    directions ``E[:j + 1]`` (what a pass gathering steps ahead returns for each)."""
    out = []
    for j, (e, offset, scale) in enumerate(zip(E, offsets, scales)):
        plain, pmin, pmax = _plain_moments(Y, start, e, offset, scale, degree, seed, n_folds)
        folds = kernels.fold_labels(start, start + Y.shape[1], seed, n_folds)
        earlier = (E[: j + 1] @ Y) ** 2  # alpha_i^2 of every direction up to this one
        for fold, entry in enumerate(plain):
            rows = folds == fold
            z = np.sum(Y[:, rows] ** 2) - earlier[:, rows].sum() if n_folds > 1 else 0.0
            plain[fold] = (*entry[:2], z, entry[3])
        out.append((plain, pmin, pmax))
    return out


@pytest.mark.parametrize("n_ahead", [1, 3])  # 2 directions: folds weighted; 4: rows gathered
@pytest.mark.parametrize("n_folds", [1, 2, 3])
def test_pending_steps_and_steps_ahead_in_one_sweep_equal_numpy(n_folds, n_ahead):
    """Several fitted steps applied chunk by chunk in the sweep (one curved, with rows beyond its
    training range, and linear ones), then the moments of the step and of the steps gathered
    ahead, each equal to numpy's on the residual the steps leave, fold by fold."""
    assert _fused.GATHER_FROM in (3, 4)  # the two cases below take both strategies
    rng = np.random.default_rng(20 + n_folds + n_ahead)
    f, n, degree = 6, 2501, 3
    Y = rng.normal(size=(f, n)) * np.linspace(2, 0.5, f)[:, None]
    steps = [
        _step(rng, f, 3, lo=-0.4, hi=0.5),
        _step(rng, f, 1),
        _step(rng, f, 1, lo=-0.2, hi=0.3),
    ]
    expected = Y
    for step in steps:
        expected = _plain_step(expected, step)[1]
    E = np.linalg.qr(rng.normal(size=(f, 1 + n_ahead)))[0].T
    offsets, scales = rng.normal(size=1 + n_ahead) * 0.1, 2.0 + rng.uniform(size=1 + n_ahead)
    out = np.empty((f, n))
    ahead = tuple(zip(E[1:], offsets[1:], scales[1:]))
    spec = kernels.StepSpec(E[0], offsets[0], scales[0], degree, 4, n_folds, ahead=ahead)
    parts = _fused.fused_step_pass(Y, 77, steps, spec, out=out)
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)
    plain = _plain_ahead_moments(expected, 77, E, offsets, scales, degree, 4, n_folds)
    assert len(parts) == 1 + n_ahead
    for (sums, yv, zz, counts, tmin, tmax), (folds, pmin, pmax) in zip(parts, plain):
        for fold, (psums, pyv, pzz, pcount) in enumerate(folds):
            assert counts[fold] == pcount
            np.testing.assert_allclose(sums[fold], psums, rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(yv[fold], pyv, rtol=1e-12, atol=1e-9)
            np.testing.assert_allclose(zz[fold], pzz, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose([tmin, tmax], [pmin, pmax], rtol=1e-13)


def test_samples_centred_and_every_fitted_step_applied_in_one_sweep():
    """Recomputing the residual from the source (``residual_cache="recompute"``): the pass
    centres the samples and re-applies every fitted step, float64 in one sweep, float32 and
    non-contiguous input slice by slice; each equals numpy."""
    rng = np.random.default_rng(31)
    X = (rng.normal(size=(2100, 5)) + 4.0).astype(np.float32).astype(np.float64)
    mean = X.mean(axis=0)
    steps = (_step(rng, 5, 2), _step(rng, 5, 1))
    expected = (X - mean).T
    for step in steps:
        expected = _plain_step(expected, step)[1]
    e = np.linalg.qr(rng.normal(size=(5, 1)))[0][:, 0]
    plain, _, _ = _plain_moments(expected, 0, e, 0.0, 3.0, 2, 1, 2)
    for source in (X, X.astype(np.float32), np.asfortranarray(X)):
        spec = kernels.StepSpec(e, 0.0, 3.0, 2, 1, 2)
        residual, moments = kernels.pass_kernel(
            source, 0, mean, steps, spec, keep=True, sub_block=700
        )
        np.testing.assert_allclose(residual, expected, atol=1e-12)
        for fold, (_, pyv, _pzz, pcount) in enumerate(plain):
            assert moments["n"][fold] == pcount
            np.testing.assert_allclose(moments["yv"][fold], pyv, rtol=1e-12, atol=1e-9)
