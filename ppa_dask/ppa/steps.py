"""The step loop of a PPA fit: small algebra on the client between a driver's passes.

:func:`fit_steps` runs the whole sequence of steps through a
:class:`~ppa_dask.ppa.drivers.Driver` (one pass for the moments, one per step, fewer when the
lookahead confirms its guesses) and returns the fitted attributes; it knows nothing of the
estimator but the :class:`StepSettings` it is given. The degree policy is in one place:
:func:`check_rows` refuses, before any pass, row counts too small for the candidate degrees (and
for the training folds of the cross-validation, a function of the fold seed and the row index);
:func:`choose_degree` makes each step's choice from its pass's per-fold moments. The lookahead
gathers steps ahead on the hypothesis that they are linear (degree 1), so it is off where no
step can be linear and what it gathered is dropped after a step of another degree.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ppa_dask.ppa import algebra as _algebra
from ppa_dask.ppa import kernels
from ppa_dask.ppa.drivers import AUTO_LOOKAHEAD_MAX, StepSpec
from ppa_dask.utils.compute import current_client
from ppa_dask.utils.events import publish_step, wait_published

__all__ = [
    "StepSettings",
    "check_rows",
    "choose_degree",
    "fit_steps",
    "fitted_attributes",
    "refine_direction",
]

# rows kept on the client to estimate each step's range of alpha before its pass
RANGE_SAMPLE_ROWS = 8192


@dataclass(frozen=True)
class StepSettings:
    """What the step loop needs of the estimator's parameters, checked.

    Parameters
    ----------
    candidates : tuple of int
        The candidate degrees, ascending (:func:`ppa_dask.utils.params.candidate_degrees`); one
        degree means no cross-validation.
    n_steps : int
        Steps to fit.
    seed : int
        The fit's seed (fold labels, range sample).
    cv : int
        Folds of the cross-validation (ignored with one candidate degree).
    lookahead : "auto" or int
        Steps a pass gathers ahead.
    leading_vector : {"pca", "gd"}
    gd_max_iter : int
    gd_tol : float
    rank_rtol : float
        A step whose residual variance is at most this times the total is fitted linear, and
        so is every step after it (:func:`ppa_dask.ppa.algebra.rank_rtol`).
    last_variance : bool
        Whether the variance along the first residual axis is reported too (``n_components``
        None: the model then has ``n_features`` components).

    Examples
    --------
    >>> s = StepSettings(candidates=(1, 2, 3), n_steps=2, seed=0, cv=3)
    >>> s.fixed, s.n_folds, s.max_degree
    (False, 3, 3)
    """

    candidates: tuple
    n_steps: int
    seed: int
    cv: int = 2
    lookahead: object = "auto"
    leading_vector: str = "pca"
    gd_max_iter: int = 0
    gd_tol: float = 0.0
    rank_rtol: float = 0.0
    last_variance: bool = False

    @property
    def fixed(self):
        """One candidate degree: no cross-validation."""
        return len(self.candidates) == 1

    @property
    def n_folds(self):
        """Folds each step's pass accumulates its moments in (1 without cross-validation)."""
        return 1 if self.fixed else int(self.cv)

    @property
    def max_degree(self):
        return self.candidates[-1]


# ---------------------------------------------------------------------------------------------
# the degree policy
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def min_samples_for_folds(seed, n_folds, need):
    """Fewest rows ``m`` for which every training fold (all folds but one) of rows ``0 .. m-1``
    holds at least ``need`` rows, under the fit's fold labels (:func:`kernels.fold_labels`).

    A training fold's size ``m - count_f(m)`` never shrinks as rows are added, so the first
    ``m`` that works is the answer for every larger row count too.

    Examples
    --------
    >>> m = min_samples_for_folds(0, 2, 4)
    >>> labels = kernels.fold_labels(0, m, 0, 2)
    >>> int(m - np.bincount(labels).max()) >= 4
    True
    """
    # m - count_f(m) <= m - m / n_folds for the largest fold, so no m under
    # need * n_folds / (n_folds - 1) works: the labels up to there are only counted, and from
    # there on scanned a block at a time. Time is linear in the answer and memory one block,
    # whatever the degree (a candidate degree of 3,000,000 once cost 37 s and gigabytes here)
    lower = need if n_folds < 2 else -(-need * n_folds // (n_folds - 1))
    counts = np.zeros(n_folds, dtype=np.int64)
    start, block = 0, 2**20
    while start < lower - 1:
        stop = min(start + block, lower - 1)
        counts += np.bincount(kernels.fold_labels(start, stop, seed, n_folds), minlength=n_folds)
        start = stop
    block = max(64, 2**20 // n_folds)
    while True:
        labels = kernels.fold_labels(start, start + block, seed, n_folds)
        running = counts + np.cumsum(labels[:, None] == np.arange(n_folds), axis=0)
        rows = np.arange(start + 1, start + block + 1)
        enough = np.flatnonzero(rows - running.max(axis=1) >= need)
        if enough.size:
            return start + int(enough[0]) + 1
        counts, start = running[-1], start + block


def check_rows(n_samples, candidates, cv, fold_seed=None):
    """Refuse too few rows for the candidate degrees, before any pass.

    One degree ``g`` needs ``g + 1`` rows. Several are cross-validated: every training fold of
    the folds of ``fold_seed`` needs ``max(candidates) + 1`` rows (the folds are a function of
    the seed and the row index, so the check is exact); without a seed (not known yet) nothing
    is checked for them.

    Raises
    ------
    ValueError
        Naming the row count, the degree and, with folds, the smallest training fold and the
        row count from which the folds are large enough.

    Examples
    --------
    >>> check_rows(3, [2], cv=2)
    >>> check_rows(2, [2], cv=2)
    Traceback (most recent call last):
    ...
    ValueError: X has 2 sample(s); degree 2 needs at least 3 rows.
    """
    max_degree = candidates[-1]
    if len(candidates) == 1:
        if n_samples < max_degree + 1:
            raise ValueError(
                f"X has {n_samples} sample(s); degree {max_degree} needs at least "
                f"{max_degree + 1} rows."
            )
        return
    if fold_seed is None:
        return
    folds = int(cv)
    if folds > n_samples:
        # refused before the folds are counted: the count allocates per fold
        raise ValueError(
            f"X has {n_samples} sample(s); {folds}-fold cross-validation needs at least as "
            "many samples as folds. Use fewer folds (cv) or more samples."
        )
    needed = min_samples_for_folds(fold_seed, folds, max_degree + 1)
    if n_samples < needed:
        labels = kernels.fold_labels(0, n_samples, fold_seed, folds)
        smallest = n_samples - int(np.bincount(labels, minlength=folds).max())
        raise ValueError(
            f"X has {n_samples} sample(s); in {folds}-fold cross-validation of degrees "
            f"up to {max_degree} with these folds (fold seed {fold_seed}) the smallest "
            f"training fold has {smallest} rows; degree {max_degree} needs at least "
            f"{max_degree + 1}, which the folds reach from {needed} samples. Use more "
            "samples, fewer folds or lower degrees."
        )


def choose_degree(moments, e, candidates, residual_variance, n_rows, past_rank=False):
    """A step's degree from its pass's moments: ``(degree, scores)``.

    One candidate is the degree (``scores`` None). Several: each training fold (the
    ``n_rows`` of the fit less a fold's ``moments["n"]``) must hold ``max(candidates) + 1``
    rows; each
    candidate is scored by cross-validation from the per-fold moments
    (:func:`ppa_dask.ppa.algebra.cv_scores`) and the lowest within rounding of the best is
    chosen (:func:`ppa_dask.ppa.algebra.choose_degree`; ``residual_variance`` sets the
    rounding). ``past_rank`` (the residual is rounding) makes the step linear whatever the
    scores: no polynomial on rounding.

    Raises
    ------
    ValueError
        A training fold too small for the highest degree.

    Examples
    --------
    >>> choose_degree({}, None, [3], 1.0, n_rows=10)
    (3, None)
    >>> choose_degree({}, None, [3], 1.0, n_rows=10, past_rank=True)
    (1, None)
    """
    if len(candidates) == 1:
        chosen, scores = candidates[0], None
    else:
        max_degree = candidates[-1]
        smallest = int((n_rows - moments["n"]).min())
        if smallest < max_degree + 1:
            raise ValueError(
                f"a cross-validation training fold has {smallest} rows; degree "
                f"{max_degree} needs at least {max_degree + 1}. Use fewer folds, lower "
                "degrees or more samples."
            )
        scores = _algebra.cv_scores(moments, e, candidates)
        chosen = _algebra.choose_degree(scores, candidates, residual_variance)
    if past_rank:
        chosen = 1
    return chosen, scores


def _trailing_linear(degrees):
    """How many of the last steps in ``degrees`` are linear (degree 1), in a row."""
    run = 0
    for g in reversed(degrees):
        if g != 1:
            break
        run += 1
    return run


def _lookahead(settings, driver):
    """``(n_ahead, grow)``: the steps a pass may gather ahead and whether ``"auto"`` grows them.

    None where no step can be linear (the lowest candidate degree is above 1: the guess is a
    linear step) nor under PPA-GD (its direction is not the eigenvector the guess follows).
    """
    s = settings
    n_ahead = driver.auto_lookahead() if s.lookahead == "auto" else int(s.lookahead)
    if s.leading_vector == "gd" or s.candidates[0] != 1:
        n_ahead = 0
    return n_ahead, s.lookahead == "auto" and n_ahead > 0


def _gather_depth(n_ahead, grow, candidates, degrees):
    """Steps the next pass gathers ahead, on the hypothesis that they are linear.

    In full after a linear step or an isolated curved one (the late steps of spectra are long
    linear runs), else (at the first step, within a run of curved steps) one step: little is
    lost where the hypothesis fails, and the first linear step after curved ones still finds
    its successor. ``grow`` ("auto"): after a run of linear steps as many as that run (at most
    ``AUTO_LOOKAHEAD_MAX``), so a speculation that fails wastes no more gathering than the run
    it follows confirmed.
    """
    L = n_ahead if candidates == [1] or 1 in degrees[-2:] else min(n_ahead, 1)
    if grow and n_ahead == L:
        L = max(L, min(_trailing_linear(degrees), AUTO_LOOKAHEAD_MAX))
    return L


# ---------------------------------------------------------------------------------------------
# the loop
# ---------------------------------------------------------------------------------------------


def report_nonfinite(n_nan, n_inf, name="X"):
    """Refuse data holding NaN or inf, naming how many and in which columns."""
    bad = n_nan + n_inf
    if bad.any():
        cols = np.flatnonzero(bad).tolist()
        raise ValueError(
            f"{name} contains {int(n_nan.sum())} NaN and {int(n_inf.sum())} inf values, in "
            f"columns {cols}; PPA needs finite input (drop or impute those samples)."
        )


def range_sample_index(n_total, seed):
    """The rows kept on the client for each step's range of alpha (sorted global indices)."""
    if n_total <= RANGE_SAMPLE_ROWS:
        return np.arange(n_total)  # every row: what the sorted draw below gives
    return np.sort(
        np.random.default_rng([seed, n_total]).choice(
            n_total, size=RANGE_SAMPLE_ROWS, replace=False
        )
    )


def fit_steps(driver, settings, progress=None, owner=None):
    """The sequence of steps through ``driver``: the fitted attributes of a PPA, as a dict.

    Parameters
    ----------
    driver : ppa_dask.ppa.drivers.Driver
        Runs the passes (it is not closed).
    settings : StepSettings
    progress : callable, optional
        Called as ``progress(p, k)`` after step ``p`` of ``k``.
    owner : object, optional
        The fit's identity on the dashboard's step records (the estimator).

    Returns
    -------
    dict
        ``mean_``, ``leading_vectors_``, ``coefficients_``, ... in the units of the data the
        driver reads.

    Examples
    --------
    >>> from ppa_dask.ppa.drivers import NumpyDriver
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> fitted = fit_steps(NumpyDriver(X), StepSettings(candidates=(1, 2), n_steps=2, seed=0))
    >>> fitted["degrees_"].shape, fitted["cv_scores_"].shape
    ((2,), (2, 2))
    """
    s = settings
    candidates, n_steps, seed = list(s.candidates), s.n_steps, s.seed
    n_folds, max_degree = s.n_folds, s.max_degree
    first = driver.first_pass(range_sample_index(driver.n_samples, seed))
    report_nonfinite(first["n_nan"], first["n_inf"])
    n, mean = first["n"], first["mean"]
    C = first["scatter"] / n
    d = mean.shape[0]
    total_variance = float(np.trace(C))
    rank_tol = s.rank_rtol * total_variance
    past_rank = False  # once the residual is rounding, every later step is linear
    # the fixed row sample follows the fitted steps on the client, so each step's basis
    # interval (the range of its alpha) is known before that step's pass
    sample = kernels.centred_block(first["sample"], mean)  # feature-major, like residuals
    basis = np.eye(d)
    steps, degrees, scores, variances, residual = [], [], [], [], [total_variance]
    gd = s.leading_vector == "gd"
    gd_history = []
    n_ahead, grow = _lookahead(s, driver)
    ahead = []  # (prediction, moments) of the next steps, valid while the steps are linear
    # the dashboard's step records go to a distributed Client's scheduler: looked up once
    publishing = current_client() is not None
    published = []  # the records' sends: they go out while the next pass runs
    for p in range(n_steps):
        past_rank = past_rank or residual[-1] <= rank_tol
        e, variance, next_basis = _algebra.leading_direction(C, basis)
        offset, scale = _algebra.basis_interval(e @ sample, total_variance)
        gathered = ahead.pop(0) if ahead else None
        if gathered is not None and _algebra.confirms(gathered[0], e, offset, scale):
            # every step since the pass that gathered this one was linear: its moments
            # are this step's, taken at the predicted spec (equal up to rounding)
            (e, variance, next_basis, offset, scale), moments = gathered
        else:
            L = _gather_depth(n_ahead, grow, candidates, degrees)
            predictions = _algebra.linear_lookahead(
                C, e, next_basis, sample, total_variance, min(L, n_steps - 1 - p)
            )
            spec = StepSpec(
                e,
                offset,
                scale,
                max_degree,
                seed,
                n_folds,
                subspace=basis,
                ahead=tuple((q.direction, q.offset, q.scale) for q in predictions),
            )
            # PPA-GD reads the residual again after this pass, so it is kept even at the
            # last step
            moments = driver.step_pass(mean, steps, spec, last=p == n_steps - 1 and not gd)
            gathered = _algebra.deflate_ahead(
                moments.pop("ahead", []), [e] + [q.direction for q in predictions]
            )
            ahead = list(zip(predictions, gathered))
        # residual[-1] is the trace of C (clamped at 0, as algebra.choose_degree clamps it)
        chosen, step_scores = choose_degree(moments, e, candidates, residual[-1], n, past_rank)
        if step_scores is not None:
            scores.append(step_scores)
        if gd and past_rank:
            # nothing to descend on: the objective is rounding at every direction
            f0 = residual[-1]
            gd_history.append(
                dict(objective_start=f0, objective=f0, n_iter=0, n_passes=0,
                     converged=True, angle=0.0)
            )  # fmt: skip
        elif gd:
            moved, record = refine_direction(
                driver, mean, steps, e, chosen, basis, sample, total_variance,
                s.gd_max_iter, s.gd_tol,
            )  # fmt: skip
            gd_history.append(record)
            if moved is not None:
                # the best trial's pass holds the step's moments at its e: fit from them
                e, offset, scale, moments = moved
                variance = max(float(e @ C @ e), 0.0)  # alpha's variance, for any unit e
                next_basis = _algebra.complement_basis(basis, e)
        if chosen != 1:
            ahead = []  # gathered on the hypothesis that this step is linear
        U, S_vv, S_zv = _algebra.fit_step(moments, e, next_basis, chosen)
        lo, hi = float(moments["tmin"]), float(moments["tmax"])
        step = kernels.StepParams(e, U, offset, scale, lo, hi)
        steps.append(step)
        degrees.append(chosen)
        variances.append(variance)
        C = _algebra.next_covariance(C, e, U, S_vv, S_zv, n)
        residual.append(max(float(np.trace(C)), 0.0))
        basis = next_basis
        kernels.step_forward(sample, step, out=sample)  # the fit's own copy: in place
        # the step's record for the dashboard page (only under a distributed Client)
        if publishing:
            published.append(publish_step(
                owner, step=p, n_steps=n_steps, n_samples=n, n_features=d, degree=chosen,
                candidates=candidates, cv_scores=scores[-1] if scores else None,
                variance=variance, residual=residual[-1],
            ))  # fmt: skip
        if progress is not None:
            progress(p + 1, n_steps)
    wait_published(published)

    # orient the residual axes so that [e_1 .. e_k, residual basis] is a rotation: then every
    # factor of the Jacobian is a shear of a rotation and det J = +1, not just |det J| = 1
    residual_basis = basis.copy()
    frame = np.vstack([np.array([st.direction for st in steps]), residual_basis.T])
    if np.linalg.det(frame) < 0:
        residual_basis[:, 0] *= -1
    if s.last_variance:
        last = residual_basis[:, 0]
        variances.append(max(float(last @ C @ last), 0.0))
    reduced = basis.T @ C @ basis  # the covariance left, in its own subspace
    rank = _algebra.numerical_rank(residual, rank_tol, np.linalg.eigvalsh(reduced))
    return fitted_attributes(
        s, mean, steps, degrees, scores, variances, residual, n, rank, residual_basis,
        gd_history if gd else None,
    )  # fmt: skip


def fitted_attributes(
    settings, mean, steps, degrees, scores, variances, residual, n, rank, residual_basis=None,
    gd_history=None,
):  # fmt: skip
    """The fitted attributes of a PPA from its steps, as every step loop returns them.

    ``steps`` are :class:`~ppa_dask.ppa.kernels.StepParams`; ``variances`` the variance along
    each output (``ddof=0``; reported with scikit-learn's ``ddof=1``); ``residual`` the residual
    variance after 0..k steps; ``rank`` the numerical rank.
    """
    d = mean.shape[0]
    padded = np.zeros((len(steps), d, max(degrees) + 1))
    for p, step in enumerate(steps):
        padded[p, :, : step.coef.shape[1]] = step.coef
    ddof = n / (n - 1) if n > 1 else 1.0
    explained = np.asarray(variances) * ddof
    return dict(
        mean_=mean,
        leading_vectors_=np.array([st.direction for st in steps]),
        coefficients_=padded,
        basis_intervals_=np.array([[st.offset, st.scale] for st in steps]),
        alpha_ranges_=np.array(
            [[st.offset + st.lo * st.scale, st.offset + st.hi * st.scale] for st in steps]
        ),
        residual_basis_=residual_basis,
        degrees_=np.array(degrees, dtype=int),
        cv_scores_=None if settings.fixed else np.array(scores),
        explained_variance_=explained,
        residual_variance_=np.array(residual),
        n_components_=len(explained),
        n_samples_=int(n),
        rank_=int(rank),
        fold_seed_=settings.seed if not settings.fixed else None,
        gd_history_=gd_history,
    )


def refine_direction(driver, mean, steps, e, degree, basis, sample, total_variance, max_iter, tol):
    """PPA-GD for one step: descend from the eigenvector ``e`` on the step's objective.

    Each evaluation is one ``objective_pass`` of ``driver`` at a trial unit vector of the
    residual subspace ``span(basis)``, with the degree held at ``degree`` and the basis interval
    recomputed from the row sample for that vector (the objective does not depend on the
    interval: the polynomials of a degree span the same space on any interval); at most
    ``max_iter + 1`` evaluations, stopping at ``tol``. Returns ``(moved, record)``: ``moved`` is
    ``(e, offset, scale, step moments)`` of the best point when it beats the start, else None
    (the step is then the PCA-based one, unchanged).
    """

    def evaluate(direction):
        offset, scale = _algebra.basis_interval(direction @ sample, total_variance)
        spec = StepSpec(direction, offset, scale, degree, 0, 1, subspace=basis)
        moments = driver.objective_pass(mean, steps, spec)
        f, gradient = _algebra.gd_objective(moments, direction, basis, scale)
        return f, gradient, (offset, scale, moments)

    (best, f, _, payload), info = _algebra.sphere_minimize(
        evaluate, e, basis, max_evals=int(max_iter) + 1, tol=float(tol)
    )
    f_start = info["f_start"]
    record = dict(
        objective_start=float(f_start),
        objective=float(f),
        n_iter=int(info["n_iter"]),
        n_passes=int(info["n_evals"]),
        converged=bool(info["converged"]),
        angle=float(np.arccos(min(1.0, abs(float(best @ e))))),
    )
    if f >= f_start:
        return None, dict(record, objective=float(f_start), angle=0.0)
    offset, scale, moments = payload
    return (best, offset, scale, _algebra.objective_fit_moments(moments)), record
