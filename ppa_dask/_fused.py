"""The fused step pass, compiled with numba: the hot loop of every PPA fit.

One sweep over a feature-major residual block ``Y`` (``(f, n)``) does what a step pass needs
(:func:`ppa_dask.kernels.pass_kernel` calls it): optionally apply the previous fitted step
(``y <- y - e' alpha' - U' v(t')``, with the basis continued linearly outside ``[lo', hi']``),
optionally re-express the result in a smaller orthonormal frame, then accumulate the moments of the step being fitted: the sums of the Chebyshev polynomials
``T_0 .. T_2g`` of its coordinate ``t`` (the Gram matrix follows from the product identity),
the cross moments ``sum y T_k(t)``, the squared norms orthogonal to the leading vector (for
cross-validation) and the range of ``t``, per cross-validation fold.

Why compiled: in numpy each of these is a separate sweep over memory with a temporary array
(about 48 element-wise operations per row besides the products), which made a pass take 4-5x
the time of one fused sweep; numba walks the rows in chunks of :data:`CHUNK` kept in L1 cache,
with loops that LLVM vectorises across rows. ``fastmath`` is limited to ``reassoc`` (lets the
sums vectorise: their order changes, by ~1e-15 relative) and ``contract`` (fused
multiply-adds); there is no ``nnan``/``ninf``, so clipping keeps IEEE semantics. Every inner
loop indexes a 1-D row view with the bare loop variable: 2-D indexing does not vectorise.

Fold membership is hashed here too (SplitMix64 of the seed and the global row index), so no
label array is built or stored; :func:`row_hash` is the same function for callers outside.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["CHUNK", "fused_step_pass", "row_hash"]

#: rows per inner chunk: the chunk's residual, basis and scratch rows stay in L1 cache
CHUNK = 256

_FASTMATH = {"reassoc", "contract"}

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_MASK64 = 0xFFFFFFFFFFFFFFFF


@njit(cache=True, nogil=True)
def _splitmix64(z):
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def _hash_key(seed):
    return _splitmix64(np.uint64(seed))


@njit(cache=True, nogil=True)
def _row_hash_range(start, stop, seed):
    key = _hash_key(seed)
    out = np.empty(stop - start, dtype=np.uint64)
    for r in range(stop - start):
        out[r] = _splitmix64(key + (np.uint64(start + r) + np.uint64(1)) * _GOLDEN)
    return out


def row_hash(start, stop, seed):
    """64-bit SplitMix64 hash of the global row indices ``start .. stop-1`` under ``seed``.

    Examples
    --------
    >>> a = row_hash(0, 6, seed=1)
    >>> bool((a[2:] == row_hash(2, 6, seed=1)).all())
    True
    """
    start, stop = int(start), int(stop)
    return _row_hash_range(np.int64(start), np.int64(max(stop, start)),
                           np.uint64(int(seed) & _MASK64))


@njit(cache=True, nogil=True, fastmath=_FASTMATH, boundscheck=False)
def _fused_kernel(Y, out, out_offset, store, has_prev, e_prev, U_prev, off_p, sc_p, lo_p, hi_p,
                  has_rotation, Q, e, off, sc, degree, start, seed, n_folds):
    f, n = Y.shape
    fz = Q.shape[1] if has_rotation else f  # rows of the residual the moments are taken on
    gp = U_prev.shape[1]  # previous basis size (its degree + 1)
    m = 2 * degree + 1  # T_0 .. T_2g: the Gram matrix comes from their sums
    g1 = degree + 1
    nw = n_folds - 1  # folds accumulated with 0/1 weights; the last one is the total minus them
    key = _hash_key(seed)
    nf = np.uint64(n_folds)
    Yu = np.empty((f, CHUNK))  # the chunk's updated residual
    Ys = np.empty((fz, CHUNK)) if has_rotation else Yu  # ... in the frame of the moments
    ap = np.empty(CHUNK)
    tp = np.empty(CHUNK)
    tcp = np.empty(CHUNK)
    Tp = np.empty((gp, CHUNK))
    dtmp = np.empty(gp)
    shift = np.empty(CHUNK)
    al = np.empty(CHUNK)
    T = np.empty((m, CHUNK))
    yy = np.empty(CHUNK)
    lab = np.empty(CHUNK, dtype=np.int64)
    w = np.empty(CHUNK)
    Tw = np.empty((g1, CHUNK))
    sums = np.zeros((n_folds, m))
    yv = np.zeros((n_folds, fz, g1))
    zz = np.zeros(n_folds)
    counts = np.zeros(n_folds, dtype=np.int64)
    tmin_lane = np.full(CHUNK, np.inf)  # per-lane extremes vectorise; reduced at the end
    tmax_lane = np.full(CHUNK, -np.inf)
    for a in range(0, n, CHUNK):
        b = min(n, a + CHUNK)
        L = b - a
        if has_prev:
            # ---- the previous step: y <- y - e' alpha' - U' v(t') ----
            for r in range(L):
                ap[r] = 0.0
            for i in range(f):
                ei = e_prev[i]
                yi = Y[i, a:b]
                for r in range(L):
                    ap[r] += ei * yi[r]
            n_out = 0
            for r in range(L):
                t = (ap[r] - off_p) / sc_p
                tc = min(max(t, lo_p), hi_p)
                tp[r] = t
                tcp[r] = tc
                n_out += tc != t
            T0 = Tp[0]
            for r in range(L):
                T0[r] = 1.0
            if gp > 1:
                T1 = Tp[1]
                for r in range(L):
                    T1[r] = tcp[r]
            for j in range(1, gp - 1):
                Tn = Tp[j + 1]
                Tj = Tp[j]
                Tm = Tp[j - 1]
                for r in range(L):
                    Tn[r] = 2.0 * tcp[r] * Tj[r] - Tm[r]
            if n_out:
                # rare: the tangent (C1) continuation beyond the training range, as
                # kernels._extended_rows: values gain the end's slope times the distance
                for r in range(L):
                    if tcp[r] != tp[r]:
                        x = tcp[r]
                        dtmp[0] = 0.0
                        if gp > 1:
                            dtmp[1] = 1.0
                        for j in range(1, gp - 1):
                            dtmp[j + 1] = 2.0 * x * dtmp[j] - dtmp[j - 1] + 2.0 * Tp[j, r]
                        dist = tp[r] - x
                        for j in range(gp):
                            Tp[j, r] += dtmp[j] * dist
            for i in range(f):
                ei = e_prev[i]
                for r in range(L):
                    shift[r] = ei * ap[r]
                for k in range(gp):
                    u = U_prev[i, k]
                    Tk = Tp[k]
                    for r in range(L):
                        shift[r] += u * Tk[r]
                yi = Y[i, a:b]
                yu = Yu[i]
                for r in range(L):
                    yu[r] = yi[r] - shift[r]
        else:
            for i in range(f):
                yi = Y[i, a:b]
                yu = Yu[i]
                for r in range(L):
                    yu[r] = yi[r]
        if has_rotation:
            # into the smaller frame: z = Q^T y
            for j in range(fz):
                zj = Ys[j]
                for r in range(L):
                    zj[r] = 0.0
                for i in range(f):
                    q = Q[i, j]
                    yu = Yu[i]
                    for r in range(L):
                        zj[r] += q * yu[r]
        for r in range(L):
            al[r] = 0.0
        for i in range(fz):
            en = e[i]
            ys = Ys[i]
            for r in range(L):
                al[r] += en * ys[r]
        if store:
            for i in range(fz):
                ys = Ys[i]
                oi = out[i, out_offset + a:out_offset + b]
                for r in range(L):
                    oi[r] = ys[r]
        # ---- moments of the step being fitted ----
        T0 = T[0]
        T1 = T[1]
        for r in range(L):
            t = (al[r] - off) / sc
            T0[r] = 1.0
            T1[r] = t
            tmin_lane[r] = min(tmin_lane[r], t)
            tmax_lane[r] = max(tmax_lane[r], t)
        for j in range(1, m - 1):
            Tn = T[j + 1]
            Tj = T[j]
            Tm = T[j - 1]
            for r in range(L):
                Tn[r] = 2.0 * T1[r] * Tj[r] - Tm[r]
        last = n_folds - 1
        for k in range(m):
            Tk = T[k]
            s = 0.0
            for r in range(L):
                s += Tk[r]
            sums[last, k] += s
        for i in range(fz):
            ys = Ys[i]
            for k in range(g1):
                Tk = T[k]
                s = 0.0
                for r in range(L):
                    s += ys[r] * Tk[r]
                yv[last, i, k] += s
        counts[last] += L
        if nw > 0:
            for r in range(L):
                yy[r] = -al[r] * al[r]
            for i in range(fz):
                ys = Ys[i]
                for r in range(L):
                    yy[r] += ys[r] * ys[r]
            s = 0.0
            for r in range(L):
                s += yy[r]
            zz[last] += s
            for r in range(L):
                h = _splitmix64(key + (np.uint64(start + a + r) + np.uint64(1)) * _GOLDEN)
                lab[r] = np.int64(h % nf)
            for fo in range(nw):
                c = 0
                for r in range(L):
                    hit = lab[r] == fo
                    w[r] = 1.0 if hit else 0.0
                    c += hit
                counts[fo] += c
                for k in range(m):
                    Tk = T[k]
                    s = 0.0
                    for r in range(L):
                        s += Tk[r] * w[r]
                    sums[fo, k] += s
                for k in range(g1):
                    Tk = T[k]
                    Twk = Tw[k]
                    for r in range(L):
                        Twk[r] = Tk[r] * w[r]
                for i in range(fz):
                    ys = Ys[i]
                    for k in range(g1):
                        Twk = Tw[k]
                        s = 0.0
                        for r in range(L):
                            s += ys[r] * Twk[r]
                        yv[fo, i, k] += s
                s = 0.0
                for r in range(L):
                    s += yy[r] * w[r]
                zz[fo] += s
    tmin = np.inf
    tmax = -np.inf
    for r in range(CHUNK):
        tmin = min(tmin, tmin_lane[r])
        tmax = max(tmax, tmax_lane[r])
    return sums, yv, zz, counts, tmin, tmax


_NO_OUTPUT = np.zeros((1, 1))


def fused_step_pass(Y, start, step, direction, offset, scale, degree, seed, n_folds,
                    out=None, out_offset=0, rotation=None):
    """Apply ``step`` (or nothing) to a residual block and take the next step's raw moments.

    Parameters
    ----------
    Y : ndarray of shape (f, n)
        Feature-major residual block (float64, C-contiguous); read only, unless it is ``out``.
    start : int
        Global index of the block's first row (for the fold hash).
    step : kernels.StepParams or None
        The fitted step to apply first (its vectors in ``Y``'s frame), or None.
    rotation : ndarray of shape (f, m) or None
        Orthonormal columns: after the update the residual is re-expressed as ``z = Q^T y`` (a
        smaller frame holding it exactly); ``direction``, the moments and ``out`` are then in
        that frame.
    direction, offset, scale, degree, seed, n_folds
        The step being fitted: leading vector (in the frame of the moments), basis coordinate
        ``t = (alpha - offset) / scale``, largest candidate degree, fold seed and count.
    out : ndarray of shape (f or m, N) or None
        Where the updated residual goes, columns ``out_offset .. out_offset + n`` (may be ``Y``
        itself); None keeps nothing.

    Returns
    -------
    sums : (n_folds, 2 degree + 1), yv : (n_folds, f, degree + 1), zz : (n_folds,),
    counts : (n_folds,), tmin, tmax
        Per fold ``f``: ``sum T_k(t)``, ``sum y T_k(t)``, ``sum ||y||^2 - alpha^2`` (0 unless
        ``n_folds > 1``) and the row count, all rows (not the complement) of each fold.
    """
    if step is None:
        prev = (False, np.zeros(Y.shape[0]), np.zeros((Y.shape[0], 1)), 0.0, 1.0, -np.inf,
                np.inf)
    else:
        prev = (True, np.ascontiguousarray(step.direction, dtype=np.float64),
                np.ascontiguousarray(step.coef, dtype=np.float64), float(step.offset),
                float(step.scale), float(step.lo), float(step.hi))
    store = out is not None
    has_rotation = rotation is not None
    Q = np.ascontiguousarray(rotation, dtype=np.float64) if has_rotation else _NO_OUTPUT
    sums, yv, zz, counts, tmin, tmax = _fused_kernel(
        Y, out if store else _NO_OUTPUT, int(out_offset), store, *prev, has_rotation, Q,
        np.ascontiguousarray(direction, dtype=np.float64), float(offset), float(scale),
        int(degree), np.int64(start), np.uint64(int(seed) & _MASK64), int(n_folds),
    )
    # the last fold is accumulated as the total: make it the total minus the others
    if n_folds > 1:
        sums[-1] -= sums[:-1].sum(axis=0)
        yv[-1] -= yv[:-1].sum(axis=0)
        zz[-1] -= zz[:-1].sum()
        counts[-1] -= counts[:-1].sum()
    return sums, yv, zz, counts, float(tmin), float(tmax)
