"""The ``cube`` section: PPA on a multispectral cube against xeofs and dask-ml, a plain scan, and
the same out-of-core fit with speculation on and off.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from ppa_dask.app.bench.harness import (
    anchor,
    interleaved,
    make_row,
    median,
    passes_of,
)
from ppa_dask.app.bench.sizes import (
    SPECULATION_PARAMS,
)
from ppa_dask.datasets import make_cube
from ppa_dask.ppa.estimator import PPA


def section_cube(s, say, tmp):
    bands, pixels = s["cube_bands"], s["cube_pixels"]
    path = os.path.join(tmp, "cube.zarr")
    ds = make_cube(
        n_bands=bands,
        ny=pixels,
        nx=pixels,
        cloud_fraction=0.0,
        random_state=0,
        chunks={"y": s["cube_chunk_y"]},
        path=path,
    )
    cube = ds["reflectance"]
    size = f"{bands} bands x {pixels} x {pixels} from Zarr, chunks of {s['cube_chunk_y']} rows"
    xeofs = anchor("xeofs.single")
    dask_ml = anchor("dask_ml.decomposition")

    def ppa3():
        m = PPA(n_components=3, random_state=0).fit(cube, feature_dim="band")
        m.transform(cube).compute()
        return m

    funcs = {
        "scan": lambda: cube.data.sum().compute(),
        "ppa3": ppa3,
        "full": lambda: PPA(random_state=0).fit(cube, feature_dim="band"),
    }
    if xeofs is not None:

        def eof():
            m = xeofs.EOF(n_modes=3, random_state=0)
            m.fit(cube, dim=("y", "x"))
            return m.scores().compute()

        funcs["xeofs"] = eof
    if dask_ml is not None:
        stacked = cube.stack(pixel=("y", "x")).transpose("pixel", "band").data
        stacked = stacked.rechunk({0: s["cube_chunk_y"] * pixels, 1: -1})
        funcs["dask_ml"] = lambda: dask_ml.PCA(n_components=3).fit_transform(stacked).compute()
    funcs["ppa3"]()  # warm-up: the workers import and compile
    with warnings.catch_warnings():
        # xeofs' pandas deprecations, once per fit, and distributed's warning about the graph
        # of xeofs' fit (64 MiB: its graph holds data; PPA's graphs stay small, checked)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        times, fitted = interleaved(funcs, s["cube_repeats"])
    med = {k: median(v) for k, v in times.items()}
    passes3, passes_full = passes_of(fitted["ppa3"]), passes_of(fitted["full"])
    say(
        "cube: "
        + ", ".join(f"{k} {v:.2f} s" for k, v in med.items())
        + f" ({passes_full} passes for the full fit)"
    )
    missing_xeofs = "not installed (xeofs; pip install 'ppa-dask[bench]')"
    missing_dask_ml = "not installed (dask-ml; pip install 'ppa-dask[bench]')"
    eof_label = "xeofs EOF(n_modes=3) fit + scores"
    rows = [
        make_row(
            "cube_ppa3_transform",
            f"cube: PPA with 3 components, fit + transform, {size}",
            eof_label,
            med["ppa3"],
            med.get("xeofs"),
            None if xeofs is None else med["ppa3"] / med["xeofs"],
            "PPA / xeofs",
            ("<=", 0.5),
            status="measured" if xeofs is not None else missing_xeofs,
            passes=passes3,
            times=times,
        ),
        make_row(
            "cube_full_ppa",
            f"cube: full PPA fit ({bands - 1} steps, degree 1..5 by CV), {size}",
            eof_label,
            med["full"],
            med.get("xeofs"),
            None if xeofs is None else med["full"] / med["xeofs"],
            "PPA / xeofs",
            ("<=", 1.0),
            status="measured" if xeofs is not None else missing_xeofs,
            passes=passes_full,
            times=times,
        ),
        make_row(
            "cube_dask_ml",
            f"cube: PPA with 3 components, fit + transform, {size}",
            "dask-ml PCA(n_components=3) fit + transform on the stacked array",
            med["ppa3"],
            med.get("dask_ml"),
            None if dask_ml is None else med["ppa3"] / med["dask_ml"],
            "PPA / dask-ml",
            status="measured" if dask_ml is not None else missing_dask_ml,
            passes=passes3,
            times=times,
        ),
        make_row(
            "cube_scan",
            f"cube: PPA with 3 components, fit + transform, {size}",
            "plain scan of the cube (sum)",
            med["ppa3"],
            med["scan"],
            med["ppa3"] / med["scan"],
            "PPA / scan",
            passes=passes3,
            times=times,
        ),
    ]
    rows.append(_speculation_row(s, say, tmp, cube, size))
    return rows


def _speculation_row(s, say, tmp, cube, size):
    figure = f"cube out of core (residual checkpointed): full PPA, {size}, speculation on"
    switch = _speculation_param()
    if switch is None:
        return make_row(
            "speculation",
            figure,
            "the same fit with speculation off",
            status="not available (PPA has no speculation parameter)",
        )
    name, on, off = switch

    def fit(value):
        return PPA(
            random_state=0,
            residual_cache="checkpoint",
            checkpoint_dir=os.path.join(tmp, "spec-checkpoints"),
            **{name: value},
        ).fit(cube, feature_dim="band")

    times, fitted = interleaved(
        {"on": lambda: fit(on), "off": lambda: fit(off)}, s["spec_repeats"]
    )
    t_on, t_off = median(times["on"]), median(times["off"])
    p_on, p_off = passes_of(fitted["on"]), passes_of(fitted["off"])
    say(f"speculation {name}={on!r}: {t_on:.2f} s ({p_on} passes); off: {t_off:.2f} s ({p_off})")
    # the bound on the passes: (steps of degree > 1) + ceil(linear steps / 8) + 2
    degrees = np.asarray(fitted["off"].degrees_)
    bound = int((degrees > 1).sum()) + math.ceil(int((degrees == 1).sum()) / 8) + 2
    row = make_row(
        "speculation",
        f"{figure} ({name}={on!r}; passes {p_on} on, {p_off} off, bound {bound})",
        f"the same fit with {name}={off!r}",
        t_on,
        t_off,
        t_on / t_off,
        "on / off",
        ("<=", 0.5),
        passes=p_on,
        times=times,
        baseline_passes=p_off,
        pass_bound=bound,
        note=f"passes {p_on} on (bound {bound}), {p_off} off",
    )
    if row["met"] and p_on > bound:
        row["met"] = False
    return row


def _speculation_param():
    """``(name, on, off)`` of PPA's speculation switch, or None if the estimator has none."""
    params = PPA().get_params()
    for name in SPECULATION_PARAMS:
        if name in params:
            default = params[name]
            if isinstance(default, bool) or default is None:
                return name, True, False
            # a count of steps ahead (or "auto"): the default on, 0 off
            return name, default if default else 2, 0
    return None
