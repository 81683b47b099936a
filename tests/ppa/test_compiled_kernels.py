"""The compiled kernels have one signature each, are compiled once per machine and loaded from
numba's on-disk cache everywhere else, and every input layout reaches that one signature.

* After :func:`ppa_dask.ppa.fused.compile_kernels` every kernel holds exactly its entry of
  ``SIGNATURES``, and a fit, transform and inverse on float32, Fortran-ordered, strided and
  read-only input add none (numba would otherwise compile a specialisation per literal argument
  or per array type).
* A fresh process with an empty ``NUMBA_CACHE_DIR`` compiles every kernel; the next fresh process
  with that cache (a worker) loads every one from it and fits without a single cache miss; two
  processes started together on an empty cache compile once (the file lock), not twice.
* Only the kernels whose own code runs hot (the step pass, the step update, the centred
  moments) are optimised at numba's full level; the others at level 1, unless the user set
  ``NUMBA_OPT``.
* The results do not depend on the layout: a pass over a float32, F-ordered, strided or
  read-only block, and a whole fit on such input, equal those on the float64 C-ordered block
  (whose moments tests/ppa/test_fused_pass.py checks against numpy) to 1e-12.

Times are never asserted here (``ppa-dask bench --only compile`` measures them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import random_nonlinear

from ppa_dask import PPA
from ppa_dask.ppa import fused, kernels

# fresh interpreters compiling or loading the numba kernels
pytestmark = pytest.mark.slow


# a child's report: the kernels' record, their signatures and numba's cache counters
CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from ppa_dask.ppa import fused
    record = fused.compile_kernels()
    if "fit" in sys.argv[1:]:
        from ppa_dask import PPA
        X = np.random.default_rng(0).normal(size=(3000, 5))
        X[:, 4] += X[:, 0] ** 2
        PPA(degree=range(1, 4), cv=2, random_state=0).fit(X).inverse_transform(
            PPA(degree=2).fit(X).transform(X)
        )
    kernels = {}
    for name in fused.SIGNATURES:
        k = getattr(fused, name)
        kernels[name] = dict(
            signatures=[str(s) for s in k.signatures],
            hits=sum(k.stats.cache_hits.values()),
            misses=sum(k.stats.cache_misses.values()),
        )
    print(json.dumps(dict(record=record, kernels=kernels)))
    """
)


def _child(cache, *args):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), OMP_NUM_THREADS="1")
    env.pop("NUMBA_DISABLE_JIT", None)
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _report(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _signatures():
    return {name: [tuple(s) for s in getattr(fused, name).signatures] for name in fused.SIGNATURES}


def _expected():
    return {name: [tuple(sig)] for name, sig in fused.SIGNATURES.items()}


def test_every_kernel_has_exactly_its_one_signature_whatever_the_input():
    record = fused.compile_kernels()
    assert sorted(record["compiled"] + record["loaded"]) == sorted(fused.SIGNATURES)
    assert _signatures() == _expected()
    X = random_nonlinear(1500, 5, seed=3)
    ro = X.copy()
    ro.flags.writeable = False
    for data in (X, np.asfortranarray(X), X.astype(np.float32), ro, np.repeat(X, 2, 1)[:, ::2]):
        model = PPA(degree=range(1, 4), cv=2, random_state=0).fit(data)
        model.inverse_transform(model.transform(data))
        kernels.fold_labels(0, 100, 1, 3)
        kernels.basis_with_extension(np.linspace(-2, 2, 9), 3, -1.0, 1.0, derivatives=2)
    # nothing compiled beside the declared signatures (numba's default would add literal-0
    # and layout specialisations of the helpers at every call site)
    assert _signatures() == _expected()


def _pass(block, center=None, columns=None, steps=(), rotation=None):
    rng = np.random.default_rng(7)
    f = (len(columns) if columns is not None else block.shape[1]) if center is not None else None
    f = f if f is not None else block.shape[0]
    m = f if rotation is None else rotation.shape[1]
    e = rng.normal(size=m)
    e /= np.linalg.norm(e)
    ahead = [(np.roll(e, 1), 0.1, 1.5), (np.roll(e, 2), -0.2, 2.0)]
    spec = kernels.StepSpec(e, 0.05, 1.7, 4, 11, 3, ahead=tuple(ahead))
    return kernels.pass_kernel(
        block, 40, center, list(steps), spec, rotation=rotation, columns=columns
    )


def _assert_same(a, b):
    (ra, ma), (rb, mb) = a, b
    np.testing.assert_allclose(ra, rb, rtol=1e-12, atol=1e-12)
    for da, db in zip([ma, *ma["ahead"]], [mb, *mb["ahead"]]):
        for key in ("n", "vv", "yv", "zz", "tmin", "tmax"):
            np.testing.assert_allclose(da[key], db[key], rtol=1e-12, atol=1e-9, err_msg=key)


@pytest.mark.parametrize("kind", ["float32", "F", "strided", "readonly"])
def test_a_pass_over_any_layout_equals_the_float64_c_block(kind):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20_000, 6)).astype(np.float32).astype(np.float64)  # float32-exact
    mean = X.mean(0)
    e = rng.normal(size=6)
    step = kernels.StepParams(
        e / np.linalg.norm(e), 0.1 * rng.normal(size=(6, 4)), 0.0, 2.0, -1, 1
    )
    Q = np.linalg.qr(rng.normal(size=(6, 4)))[0]

    def variant(A):
        if kind == "float32":
            return A.astype(np.float32)
        if kind == "F":
            return np.asfortranarray(A)
        if kind == "strided":
            return np.repeat(A, 2, axis=1)[:, ::2]
        A = A.copy()
        A.flags.writeable = False
        return A

    # a source block (rows of samples, centred in the pass), some columns of it, a residual
    # block (features as rows) with a pending step and a change of frame
    Yt = np.ascontiguousarray((X - mean).T).astype(np.float32).astype(np.float64)
    _assert_same(_pass(variant(X), center=mean), _pass(X, center=mean))
    cols = np.array([4, 0, 2])
    _assert_same(
        _pass(variant(X), center=mean[cols], columns=cols),
        _pass(X, center=mean[cols], columns=cols),
    )
    _assert_same(_pass(variant(Yt), steps=[step], rotation=Q), _pass(Yt, steps=[step], rotation=Q))


@pytest.mark.parametrize("kind", ["float32", "F", "readonly"])
def test_a_fit_on_any_layout_equals_the_fit_on_float64_c(kind):
    X = random_nonlinear(3000, 5, seed=4).astype(np.float32).astype(np.float64)
    data = {
        "float32": X.astype(np.float32),
        "F": np.asfortranarray(X),
        "readonly": np.frombuffer(X.tobytes(), dtype=np.float64).reshape(X.shape),
    }[kind]
    ours = PPA(degree=range(1, 5), cv=2, random_state=0).fit(data)
    ref = PPA(degree=range(1, 5), cv=2, random_state=0).fit(X)
    assert list(ours.degrees_) == list(ref.degrees_)
    Z, Zr = ours.transform(X), ref.transform(X)
    np.testing.assert_allclose(Z, Zr, rtol=1e-12, atol=1e-12 * np.abs(Zr).max())
    np.testing.assert_allclose(
        ours.residual_variance_, ref.residual_variance_, rtol=1e-12, atol=1e-15
    )


def test_a_fresh_process_compiles_once_and_the_next_one_loads_everything(tmp_path):
    cache = tmp_path / "numba-cache"
    first = _report(_child(cache))
    assert sorted(first["record"]["compiled"]) == sorted(fused.SIGNATURES)
    assert first["record"]["loaded"] == []
    assert first["record"]["cache_dir"].startswith(str(cache))
    # a worker: a fresh process with the same cache folder fits without compiling anything
    second = _report(_child(cache, "fit"))
    assert second["record"]["compiled"] == []
    assert sorted(second["record"]["loaded"]) == sorted(fused.SIGNATURES)
    for name, k in second["kernels"].items():
        assert k["misses"] == 0 and k["hits"] == 1, (name, k)
        assert k["signatures"] == [str(tuple(fused.SIGNATURES[name]))], name


def test_processes_started_together_on_an_empty_cache_compile_it_once(tmp_path):
    cache = tmp_path / "numba-cache"
    procs = [_child(cache) for _ in range(2)]
    reports = [_report(p) for p in procs]
    compiled = [set(r["record"]["compiled"]) for r in reports]
    # the lock is taken kernel by kernel: each kernel was compiled by one of them and loaded
    # from the cache by the other, never compiled twice
    assert compiled[0].isdisjoint(compiled[1]), reports
    assert compiled[0] | compiled[1] == set(fused.SIGNATURES), reports
    for report, own in zip(reports, compiled):
        assert set(report["record"]["loaded"]) == set(fused.SIGNATURES) - own
    assert sum(r["record"]["waited_s"] for r in reports) > 0


# a fresh process compiling every kernel, with the LLVM optimisation level each one's module
# was optimised at (numba reads it from its config at that moment)
LEVELS = textwrap.dedent(
    """
    import json
    from numba.core import codegen, config
    seen = {}
    optimise = codegen.CPUCodeLibrary._optimize_final_module
    def spy(library):
        seen.setdefault(library.name, int(config.OPT))
        return optimise(library)
    codegen.CPUCodeLibrary._optimize_final_module = spy
    from ppa_dask.ppa import fused
    record = fused.compile_kernels()
    print(json.dumps(dict(compiled=record["compiled"], levels=seen, after=int(config.OPT))))
    """
)


@pytest.mark.parametrize("user_level", [None, "2"])
def test_only_the_pass_and_step_kernels_get_the_full_optimisation(tmp_path, user_level):
    # the others are inlined into those (and optimised again there) or memory-bound: level 1
    # cuts the machine's first compile; a user's NUMBA_OPT is left to rule them all
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    env.pop("NUMBA_DISABLE_JIT", None)
    env.pop("NUMBA_OPT", None)
    if user_level is not None:
        env["NUMBA_OPT"] = user_level
    out = subprocess.run(
        [sys.executable, "-c", LEVELS], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(report["compiled"]) == sorted(fused.SIGNATURES)
    default = 3 if user_level is None else int(user_level)
    for name in fused.SIGNATURES:
        light = user_level is None and name not in fused.FULLY_OPTIMISED
        assert report["levels"][name] == (1 if light else default), (name, report["levels"])
    assert report["after"] == default  # numba's own level is given back


# a process that needs only the fold hash while another compiles everything: it waits for the
# hash's kernels and loads them, and leaves the others alone
HASH_ONLY = textwrap.dedent(
    """
    import json, sys, time
    from ppa_dask.ppa import fused
    t0 = time.perf_counter()
    h = fused.row_hash(0, 5, 3).tolist()
    seconds = time.perf_counter() - t0
    ready = [name for name in fused.SIGNATURES if getattr(fused, name).signatures]
    print(json.dumps(dict(hash=h, ready=ready, seconds=seconds)))
    """
)


def test_a_process_needing_only_the_hash_does_not_wait_for_every_kernel(tmp_path):
    cache = tmp_path / "numba-cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    env.pop("NUMBA_DISABLE_JIT", None)
    # the machine's first process compiles every kernel in the background (a CLI command)
    starter = textwrap.dedent(
        """
        import json
        from ppa_dask.ppa import fused
        from ppa_dask.ppa import first_run
        started = first_run.compile_in_background()
        print(json.dumps(dict(started=started, record=first_run.background_record(),
                              complete=fused.cache_is_complete())))
        """
    )
    first = subprocess.Popen(
        [sys.executable, "-c", starter], env=env, stdout=subprocess.PIPE, text=True
    )
    hasher = subprocess.Popen(
        [sys.executable, "-c", HASH_ONLY], env=env, stdout=subprocess.PIPE, text=True
    )
    report = json.loads(hasher.communicate(timeout=600)[0].strip().splitlines()[-1])
    started = json.loads(first.communicate(timeout=600)[0].strip().splitlines()[-1])
    assert hasher.returncode == 0 and first.returncode == 0
    assert report["hash"] == fused.row_hash(0, 5, 3).tolist()
    assert report["ready"] == list(fused.ORDER[:3])  # the hash's kernels, nothing else
    # the child compiled what the hasher did not, and the cache is now complete
    assert started["started"] == "process"
    record = started["record"]
    assert set(record["compiled"]) | set(record["loaded"]) == set(fused.SIGNATURES)
    assert set(record["compiled"]) >= set(fused.ORDER[3:])
    assert started["complete"] is True
    # the next command on this machine starts nothing: the workers load the cache
    again = subprocess.run(
        [sys.executable, "-c", starter], env=env, capture_output=True, text=True, timeout=600
    )
    assert json.loads(again.stdout.strip().splitlines()[-1])["started"] is None


def test_without_a_writable_cache_the_kernels_still_compile_and_run(tmp_path):
    # a read-only installation with no usable cache folder: numba refuses cache=True, the
    # kernels are compiled in the process (no lock, no cache_dir) and give the same numbers
    code = textwrap.dedent(
        """
        import json, numba.core.config as config
        from numba.core import caching
        # no locator can write: what numba meets in a read-only site-packages without a home
        caching.CacheImpl._locator_classes = []
        import numpy as np
        from ppa_dask.ppa import fused
        record = fused.compile_kernels()
        print(json.dumps(dict(record=record, hash=fused.row_hash(0, 4, 9).tolist())))
        """
    )
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["record"]["cache_dir"] is None
    assert sorted(report["record"]["compiled"]) == sorted(fused.SIGNATURES)
    assert report["hash"] == fused.row_hash(0, 4, 9).tolist()
