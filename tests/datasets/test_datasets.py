"""Tests for ppa_dask.datasets (synthetic data generators)."""

import json
import os
import re

import numpy as np
import pytest

from ppa_dask.datasets import (
    curved_manifold_eigenvalues,
    generate_rows,
    generated_dask_array,
    make_curved_manifold,
    make_demo_blocks,
    make_helix,
    rotation_matrix,
    write_zarr,
)
from ppa_dask.datasets import synthetic as ds

G = ds._GEN_BLOCK


# ---------------------------------------------------------------- seeds ---


@pytest.mark.parametrize(
    "make",
    [
        lambda rs: make_helix(300, n_features=5, random_state=rs),
        lambda rs: make_curved_manifold(300, random_state=rs),
    ],
    ids=["helix", "curved"],
)
def test_same_seed_same_data_different_seed_differs(make):
    a, b, c = make(7), make(7), make(8)
    assert a.dtype == np.float64
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_random_state_none_gives_fresh_data_and_generator_is_accepted():
    a = make_curved_manifold(50, random_state=None)
    b = make_curved_manifold(50, random_state=None)
    assert not np.allclose(a, b)
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    np.testing.assert_array_equal(
        make_curved_manifold(50, random_state=g1), make_curved_manifold(50, random_state=g2)
    )


def test_rows_do_not_depend_on_n_samples_and_cross_block_boundary():
    n = G + 5000
    full = make_curved_manifold(n, n_features=5, random_state=11)
    np.testing.assert_array_equal(
        make_curved_manifold(100, n_features=5, random_state=11), full[:100]
    )
    part = generate_rows("curved", G - 3000, G + 2000, n_features=5, random_state=11)
    np.testing.assert_array_equal(part, full[G - 3000 : G + 2000])
    # the two generation blocks really are different streams
    assert not np.allclose(full[:100], full[G : G + 100])


def test_noise_does_not_change_latent_points():
    _, t0 = make_helix(500, noise=0.0, random_state=2, return_t=True)
    _, t1 = make_helix(500, noise=0.3, random_state=2, return_t=True)
    np.testing.assert_array_equal(t0, t1)


# ----------------------------------------------------------------- dask ---


@pytest.mark.parametrize("kind,p", [("curved", 6), ("helix", 4)])
@pytest.mark.slow
def test_dask_array_is_chunk_independent(kind, p):
    n = G + 4000  # spans two generation blocks
    small = generated_dask_array(kind, n, p, chunks=1000, random_state=5)
    big = generated_dask_array(kind, n, p, chunks=77777, random_state=5)
    assert small.chunks[0][0] == 1000 and big.chunks[0] == (n,)
    ref = generate_rows(kind, 0, n, n_features=p, random_state=5)
    a = small.compute(scheduler="threads")
    np.testing.assert_array_equal(a, ref)
    np.testing.assert_array_equal(big.compute(scheduler="sync"), ref)
    # column-split chunks and slicing give the same values too
    split = generated_dask_array(
        kind, n, p, chunks=((30000, n - 30000), (2, p - 2)), random_state=5
    )
    np.testing.assert_array_equal(split[G - 10 : G + 10].compute(), ref[G - 10 : G + 10])


def test_dask_array_none_seed_is_consistent_and_dtype():
    x = generated_dask_array("curved", 500, 4, chunks=100, random_state=None, dtype="float32")
    assert x.dtype == np.float32
    a, b = x.compute(), x.compute()
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, b)


def test_dask_array_default_chunks_are_generation_aligned_and_graph_is_small():
    x = generated_dask_array("curved", 10**7, 10, random_state=0)
    assert x.shape == (10**7, 10)
    assert x.chunks[1] == (10,)
    assert all(c % G == 0 for c in x.chunks[0][:-1])
    # nothing big is embedded in the graph
    assert len(x.__dask_graph__()) == x.numblocks[0]


def test_make_demo_blocks_concatenate_to_full_array():
    blocks = list(
        make_demo_blocks(
            2500, n_features=4, random_state=1, kind="helix", block_rows=1000, noise=0.2
        )
    )
    assert [b.shape for b in blocks] == [(1000, 4), (1000, 4), (500, 4)]
    np.testing.assert_array_equal(
        np.vstack(blocks), make_helix(2500, n_features=4, noise=0.2, random_state=1)
    )


# ---------------------------------------------------------------- helix ---


def test_noiseless_helix_lies_on_helix_3d():
    a, b, turns = 1.5, 0.5, 1.5
    X, t = make_helix(2000, a=a, b=b, noise=0.0, n_turns=turns, random_state=0, return_t=True)
    np.testing.assert_allclose(X[:, 0] ** 2 + X[:, 1] ** 2, a**2, rtol=1e-12)
    np.testing.assert_allclose(X[:, 2], b * t, rtol=1e-12)
    np.testing.assert_allclose(
        np.arctan2(X[:, 1], X[:, 0]) % (2 * np.pi), t % (2 * np.pi), atol=1e-9
    )
    assert t.min() >= 0 and t.max() < 2 * np.pi * turns
    assert t.max() > 0.95 * 2 * np.pi * turns  # t covers the whole range


def test_noiseless_helix_in_higher_dimensions():
    a, b, p = 2.0, 0.8, 7
    X, t = make_helix(1000, a=a, b=b, noise=0.0, n_features=p, random_state=4, return_t=True)
    assert X.shape == (1000, p)
    # the rotation preserves norms and distances
    np.testing.assert_allclose((X**2).sum(1), a**2 + (b * t) ** 2, rtol=1e-10)
    i, j = np.arange(0, 999, 2), np.arange(1, 1000, 2)
    d2 = ((X[i] - X[j]) ** 2).sum(1)
    expect = 2 * a**2 * (1 - np.cos(t[i] - t[j])) + b**2 * (t[i] - t[j]) ** 2
    np.testing.assert_allclose(d2, expect, rtol=1e-9, atol=1e-12)
    # undoing the exposed rotation gives the padded helix
    Y = X @ rotation_matrix(p, random_state=4)
    np.testing.assert_allclose(Y[:, :3], np.c_[a * np.cos(t), a * np.sin(t), b * t], atol=1e-12)
    np.testing.assert_allclose(Y[:, 3:], 0.0, atol=1e-12)


def test_helix_noise_level():
    X = make_helix(20000, noise=0.1, n_features=3, random_state=9)
    X0 = make_helix(20000, noise=0.0, n_features=3, random_state=9)
    assert abs((X - X0).std() - 0.1) < 0.005


def test_default_helix_first_pc_projection_is_monotone_in_t():
    X, t = make_helix(5000, noise=0.0, random_state=0, return_t=True)
    Xc = X - X.mean(0)
    e = np.linalg.eigh(Xc.T @ Xc)[1][:, -1]
    s = (Xc @ e)[np.argsort(t)]
    d = np.diff(s)
    assert (d > 0).all() or (d < 0).all()


# ----------------------------------------------------- curved manifold ---


def test_rotation_matrix_is_a_rotation():
    Q = rotation_matrix(9, random_state=3)
    np.testing.assert_allclose(Q.T @ Q, np.eye(9), atol=1e-12)
    assert np.linalg.det(Q) == pytest.approx(1.0)
    assert not np.allclose(Q, rotation_matrix(9, random_state=4))
    Q[0, 0] = 123.0  # returned copy is writable and does not corrupt the cache
    assert rotation_matrix(9, random_state=3)[0, 0] != 123.0


def test_curved_structure_after_undoing_rotation():
    X, u = make_curved_manifold(3000, n_features=8, noise=0.0, random_state=6, return_latent=True)
    Y = X @ rotation_matrix(8, random_state=6)
    u1, u2, u3 = u.T
    np.testing.assert_allclose(Y[:, 0], u1, atol=1e-12)
    np.testing.assert_allclose(Y[:, 1], 0.6 * u1**2 + u2, atol=1e-12)
    np.testing.assert_allclose(Y[:, 2], 0.8 * u2**2 + 0.15 * u1 * u2 + u3, atol=1e-12)
    assert np.abs(u).max(0) == pytest.approx([2.0, 1.2, 0.6], rel=0.01)
    # first padding coordinate is 0.2 * sqrt(5) * P2(v3)
    v3 = u3 / 0.6
    np.testing.assert_allclose(Y[:, 4], 0.2 * np.sqrt(5) * (1.5 * v3**2 - 0.5), atol=1e-12)


def test_curved_eigenvalues_are_distinct_and_match_the_sample():
    ev = curved_manifold_eigenvalues(10, noise=0.05)
    assert np.all(ev[:-1] / ev[1:] > 1.2)  # no ties
    X = make_curved_manifold(40000, n_features=10, noise=0.05, random_state=1)
    sv = np.linalg.eigvalsh(np.cov(X.T))[::-1]
    np.testing.assert_allclose(sv, ev, rtol=0.04)
    assert np.all(sv[:-1] / sv[1:] > 1.1)


def test_padding_polynomials_are_orthonormal_and_uncorrelated_with_main():
    # exact Gauss-Legendre check of the claim behind the block-diagonal spectrum
    x, w = np.polynomial.legendre.leggauss(30)
    g = np.stack(np.meshgrid(x, x, x, indexing="ij"), -1).reshape(-1, 3)
    wt = np.einsum("i,j,k->ijk", w / 2, w / 2, w / 2).reshape(-1)
    y = ds._curved_noiseless(g, 24)
    mean = wt @ y
    cov = ((y - mean) * wt[:, None]).T @ (y - mean)
    pads = cov[4:, 4:]
    np.testing.assert_allclose(pads, np.diag(0.04 * 0.64 ** np.arange(20)), atol=1e-10)
    np.testing.assert_allclose(cov[:4, 4:], 0.0, atol=1e-10)


def test_curved_is_nonlinear_ppa_style_fit_beats_pca():
    X = make_curved_manifold(20000, n_features=10, random_state=2)
    Xc = X - X.mean(0)
    w, V = np.linalg.eigh(np.cov(Xc.T))
    V = V[:, ::-1]
    s1, rest = Xc @ V[:, 0], Xc @ V[:, 1:]
    # linear prediction of the other PC scores from PC1 explains nothing...
    A1 = np.c_[np.ones_like(s1), s1]
    lin = rest - A1 @ np.linalg.lstsq(A1, rest, rcond=None)[0]
    # ...a quartic in PC1 explains a lot (PPA's first step)
    A4 = np.vander(s1 / np.abs(s1).max(), 5)
    quart = rest - A4 @ np.linalg.lstsq(A4, rest, rcond=None)[0]
    total = (rest**2).sum()
    assert (lin**2).sum() > 0.999 * total
    assert (quart**2).sum() < 0.75 * total


# ----------------------------------------------------------------- zarr ---


def _siblings(d):
    return sorted(os.listdir(d))


def test_write_zarr_round_trip(tmp_path):
    import zarr

    path = tmp_path / "sub" / "data.zarr"
    out = write_zarr(path, 3000, n_features=5, chunk_rows=700, random_state=13, noise=0.1)
    assert out == str(path.resolve())
    z = zarr.open_array(out, mode="r")
    assert z.metadata.zarr_format == 3
    assert z.shape == (3000, 5) and z.chunks == (700, 5) and z.dtype == np.float64
    np.testing.assert_array_equal(
        z[:], make_curved_manifold(3000, n_features=5, noise=0.1, random_state=13)
    )
    attrs = z.attrs["ppa_dask.datasets"]
    assert attrs["generator"] == "make_curved_manifold"
    assert attrs["kind"] == "curved"
    assert attrs["params"] == {"noise": 0.1}
    assert attrs["random_state"] == 13
    assert attrs["n_samples"] == 3000 and attrs["n_features"] == 5
    assert attrs["gen_block"] == G
    json.dumps(dict(z.attrs))
    assert _siblings(path.parent) == ["data.zarr"]  # no temp dir left behind


def test_write_zarr_helix_float32_and_recorded_random_seed(tmp_path):
    import zarr

    out = write_zarr(
        tmp_path / "h.zarr",
        1000,
        n_features=3,
        kind="helix",
        random_state=None,
        dtype="float32",
        a=3.0,
    )
    z = zarr.open_array(out, mode="r")
    assert z.dtype == np.float32
    attrs = z.attrs["ppa_dask.datasets"]
    assert attrs["params"] == {"a": 3.0, "b": 0.8, "noise": 0.1, "n_turns": 1.5}
    seed = attrs["random_state"]
    assert isinstance(seed, int)
    ref = make_helix(1000, a=3.0, random_state=seed).astype(np.float32)
    np.testing.assert_array_equal(z[:], ref)


def test_write_zarr_refuses_to_overwrite_then_overwrites(tmp_path):
    import zarr

    path = tmp_path / "d.zarr"
    write_zarr(path, 100, n_features=4, random_state=1)
    with pytest.raises(ValueError, match="already exists") as exc:
        write_zarr(path, 100, n_features=4, random_state=2)
    assert str(path) in str(exc.value)
    np.testing.assert_array_equal(
        zarr.open_array(str(path), mode="r")[:], make_curved_manifold(100, 4, random_state=1)
    )
    write_zarr(path, 200, n_features=4, random_state=2, overwrite=True)
    z = zarr.open_array(str(path), mode="r")
    assert z.shape == (200, 4)
    np.testing.assert_array_equal(z[:], make_curved_manifold(200, 4, random_state=2))
    assert _siblings(tmp_path) == ["d.zarr"]


def test_write_zarr_never_deletes_a_non_zarr_directory(tmp_path):
    d = tmp_path / "precious"
    d.mkdir()
    (d / "thesis.txt").write_text("keep me")
    with pytest.raises(ValueError, match="does not look like a Zarr store"):
        write_zarr(d, 10, n_features=4, random_state=0, overwrite=True)
    assert (d / "thesis.txt").read_text() == "keep me"


def test_write_zarr_interrupted_leaves_nothing(tmp_path, monkeypatch):
    import dask.array as da

    def boom(*args, **kwargs):
        raise KeyboardInterrupt("simulated interruption")

    monkeypatch.setattr(da, "store", boom)
    with pytest.raises(KeyboardInterrupt):
        write_zarr(tmp_path / "x.zarr", 1000, n_features=4, random_state=0)
    assert _siblings(tmp_path) == []


def test_write_zarr_failing_chunk_leaves_nothing(tmp_path, monkeypatch):
    real = ds._chunk_from_info

    def flaky(*args, block_info=None):
        if block_info[None]["array-location"][0][0] >= 600:
            raise RuntimeError("simulated worker failure")
        return real(*args, block_info=block_info)

    monkeypatch.setattr(ds, "_chunk_from_info", flaky)
    with pytest.raises(RuntimeError, match="simulated"):
        write_zarr(tmp_path / "x.zarr", 1000, n_features=4, chunk_rows=200, random_state=0)
    assert _siblings(tmp_path) == []


def test_write_zarr_output_opens_as_a_complete_result(tmp_path):
    from ppa_dask.store import open_array, open_input

    out = write_zarr(tmp_path / "r.zarr", 900, n_features=4, chunk_rows=400, random_state=5)
    x = open_array(out)  # refuses an array without the completion marker
    assert x.chunks == ((400, 400, 100), (4,))
    expected = make_curved_manifold(900, 4, random_state=5)
    np.testing.assert_array_equal(x.compute(), expected)
    np.testing.assert_array_equal(open_input(out).compute(), expected)


def test_write_zarr_interrupted_in_a_block_leaves_nothing_at_the_target(tmp_path, monkeypatch):
    spec = ds._KINDS["curved"]
    real = spec.block
    calls = []

    def failing_block(rng, lo, hi, n_features, params):
        calls.append(lo)
        if len(calls) > 1:  # the first chunk is stored, the second fails
            raise RuntimeError("simulated failure in the block generator")
        return real(rng, lo, hi, n_features, params)

    monkeypatch.setattr(spec, "block", failing_block)
    target = tmp_path / "x.zarr"
    with pytest.raises(RuntimeError, match="simulated failure in the block generator"):
        write_zarr(target, 1000, n_features=4, chunk_rows=300, random_state=0)
    assert len(calls) > 1
    assert not os.path.lexists(target)
    assert _siblings(tmp_path) == []


def test_write_zarr_on_distributed_client(tmp_path):
    import distributed
    import zarr

    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None
    ) as client:
        with distributed.get_task_stream(client) as ts:
            out = write_zarr(
                tmp_path / "c.zarr", 5000, n_features=4, chunk_rows=1000, random_state=3
            )
    # the work really ran on the cluster: one task (at least) per chunk
    assert len(ts.data) >= 5
    np.testing.assert_array_equal(
        zarr.open_array(out, mode="r")[:], make_curved_manifold(5000, 4, random_state=3)
    )


# ----------------------------------------------------------- bad inputs ---


@pytest.mark.parametrize(
    "call,param",
    [
        (lambda: make_helix(0), "n_samples"),
        (lambda: make_helix(10.5), "n_samples"),
        (lambda: make_helix(10, n_features=2), "n_features"),
        (lambda: make_helix(10, noise=-0.1), "noise"),
        (lambda: make_helix(10, a=0.0), "a"),
        (lambda: make_helix(10, n_turns=0), "n_turns"),
        (lambda: make_helix(10, b=float("nan")), "b"),
        (lambda: make_helix(10, random_state=-1), "random_state"),
        (lambda: make_helix(10, random_state="x"), "random_state"),
        (lambda: make_curved_manifold(0), "n_samples"),
        (lambda: make_curved_manifold(10, n_features=3), "n_features"),
        (lambda: make_curved_manifold(10, noise=-1), "noise"),
        (lambda: generate_rows("curved", 5, 5), "stop"),
        (lambda: generate_rows("curved", -1, 5), "start"),
        (lambda: generate_rows("spiral", 0, 5), "kind"),
        (lambda: make_demo_blocks(10, kind="spiral"), "kind"),
        (lambda: make_demo_blocks(10, block_rows=0), "block_rows"),
        (lambda: generated_dask_array("spiral", 10, 4, 5, 0), "generator_name"),
        (lambda: generated_dask_array("helix", 0, 4, 5, 0), "n_samples"),
        (lambda: generated_dask_array("helix", 10, 2, 5, 0), "n_features"),
        (lambda: generated_dask_array("curved", 10, 4, 0, 0), "chunks"),
        (lambda: generated_dask_array("curved", 10, 4, 5, 0, noise=-2), "noise"),
        (lambda: generated_dask_array("curved", 10, 4, 5, 0, dtype="int64"), "dtype"),
        (lambda: curved_manifold_eigenvalues(3), "n_features"),
        (lambda: rotation_matrix(0), "n_features"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_parameter(call, param):
    # the message opens with the parameter's name (a bare match="a" would accept any message)
    with pytest.raises(ValueError, match=rf"^{re.escape(param)} must be "):
        call()


@pytest.mark.parametrize(
    "kwargs,param",
    [
        ({"n_samples": 0}, "n_samples"),
        ({"n_samples": 10, "n_features": 3}, "n_features"),
        ({"n_samples": 10, "kind": "spiral"}, "kind"),
        ({"n_samples": 10, "noise": -1.0}, "noise"),
        ({"n_samples": 10, "chunk_rows": 0}, "chunk_rows"),
        ({"n_samples": 10, "dtype": "float16"}, "dtype"),
    ],
)
def test_write_zarr_bad_inputs(tmp_path, kwargs, param):
    with pytest.raises(ValueError, match=rf"^{re.escape(param)} must be "):
        write_zarr(tmp_path / "bad.zarr", **kwargs)
    assert _siblings(tmp_path) == []


def test_unknown_generator_parameter_is_rejected():
    with pytest.raises(TypeError, match="n_turns"):
        generate_rows("curved", 0, 5, n_turns=2)
