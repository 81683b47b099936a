"""The fused step pass, compiled with numba: the hot loop of every PPA fit.

One sweep over a feature-major residual block ``Y`` (``(f, n)``; or a block of samples
``(n, d)`` with the mean to subtract, for the first step) does what a step pass needs
(:func:`ppa_dask.ppa.kernels.pass_kernel` calls it): optionally apply the fitted steps not yet
applied (``y <- y - e' alpha' - U' v(t')`` for each, with the basis continued linearly outside
``[lo', hi']``), optionally re-express the result in a smaller orthonormal frame, then accumulate
the moments of the step being fitted and of the steps gathered ahead: the sums of the Chebyshev
polynomials ``T_0 .. T_2g`` of its coordinate ``t`` (the Gram matrix follows from the product
identity), the cross moments ``sum y T_k(t)``, the squared norms orthogonal to the leading vector
(for cross-validation) and the range of ``t``, per cross-validation fold. From
:data:`GATHER_FROM` directions on, each fold's rows of a chunk are first gathered into a
contiguous block, so each row costs one cross-moment product per direction (into its own fold's
sums) instead of one per fold.

One call sweeps any number of *segments* of ``Y`` (blocks side by side), each with sums of
its own, exactly as a call of its own would: a grouped pass (docs/design.md section 3.11) runs
a group's blocks in one call instead of one call per block, whose Python cost (packing the
arguments, numba's dispatch, a moments dict per block) was about 60 microseconds a block
(:func:`fused_step_segments`; :func:`fused_step_pass` is the one-segment case).

Why compiled: in numpy each of these is a separate sweep over memory with a temporary array
(about 48 element-wise operations per row besides the products), which made a pass take 4-5x
the time of one fused sweep; numba walks the rows in chunks of :data:`CHUNK` kept in L1 cache,
with loops that LLVM vectorises across rows. ``fastmath`` is limited to ``reassoc`` (lets the
sums vectorise: their order changes, by ~1e-15 relative) and ``contract`` (fused
multiply-adds); there is no ``nnan``/``ninf``, so clipping keeps IEEE semantics. Every inner
loop indexes a 1-D row view with the bare loop variable: 2-D indexing does not vectorise.

Fold membership is hashed here too (SplitMix64 of the seed and the global row index), so no
label array is built or stored; :func:`row_hash` is the same function for callers outside.

Compiled once per machine: every kernel has one explicit signature (:data:`SIGNATURES`: float64,
C-contiguous, read-only where it only reads; the wrappers below bring any input to it, and numba
converts a writable array to the read-only type for free), and :func:`compile_kernels` compiles
them all, or loads them from numba's on-disk cache, then disables further specialisation. Left
to itself numba compiled each helper once per distinct argument type at each call site (a
constant ``0`` is a literal type of its own), 16 specialisations instead of 11, and every worker
process compiled them at the same time. A kernel's first call in a process gives it and the
kernels before it in :data:`ORDER` their signatures, each under a file lock of its own in the
cache folder, so concurrent processes on a fresh machine compile each kernel once and load it
everywhere else, and a process that needs only the fold hash does not wait for the step pass.
On a machine's first run a child process compiles every kernel into the cache
(:mod:`ppa_dask.ppa.first_run`; the ``ppa-dask`` command starts it first thing, while the
package is still being imported, :mod:`ppa_dask.launch`) while the package is imported, the
cluster starts and the data are read
(the pipeline's checks, which hash rows, wait only for the hash's kernels); the workers wait for
the kernels they call and load them.

Where the first compile goes (numba 0.68, one process, an empty cache, CPU seconds on a loaded
machine): ``_fused_kernel`` 7.7 (4.5 of them in LLVM), ``_step_kernel`` 1.8, ``_extended_fill``
1.3, ``_centred_moments_kernel`` 1.2, ``_direction_moments`` 1.2, the rest 0.1-0.9 each; 16.4
in all, 9.6 in LLVM (each caller's module re-optimises the callees linked into it). Since that
re-optimisation is done at the caller's level, only the kernels whose own code runs hot are
compiled at numba's full level (:data:`FULLY_OPTIMISED`); the rest at level 1 cut the compile
by about an eighth, the kernels' speed measured the same.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time

import numpy as np
from numba import njit
from numba import types as _nt
from numba.core import config as numba_config
from numba.core.compiler_lock import global_compiler_lock

__all__ = [
    "CHUNK",
    "COMPILE_LOCK_TIMEOUT",
    "FULLY_OPTIMISED",
    "GATHER_FROM",
    "SIGNATURES",
    "apply_step",
    "ORDER",
    "cache_dir",
    "cache_is_complete",
    "compile_missing",
    "compile_kernels",
    "centred_moments",
    "chebyshev_rows",
    "fused_step_pass",
    "fused_step_segments",
    "row_hash",
]

#: rows per inner chunk: the chunk's residual, basis and scratch rows stay in L1 cache
CHUNK = 256

_FASTMATH = {"reassoc", "contract"}


#: the kernels in the order :func:`compile_kernels` compiles them (callees before callers)
_KERNELS = {}


def _compiled(**options):
    """``numba.njit(cache=True, nogil=True, **options)``, or without the on-disk cache when there
    is nowhere to write it (a read-only installation and no usable home or ``NUMBA_CACHE_DIR``:
    numba then refuses ``cache=True`` at import); the kernels are then compiled once per process
    instead of once per installation. Numba's cache goes beside this file when its folder is
    writable, else to ``NUMBA_CACHE_DIR`` when set (it is then the only place looked at), else to
    the user's cache folder (``~/.cache/numba``)."""

    def decorate(func):
        try:
            kernel = njit(cache=True, nogil=True, **options)(func)
        except RuntimeError:
            kernel = njit(cache=False, nogil=True, **options)(func)
        _KERNELS[func.__name__] = kernel
        return kernel

    return decorate


def _array(ndim, dtype=_nt.float64, readonly=False, layout="C"):
    return _nt.Array(dtype, ndim, layout, readonly=readonly)


_i8, _u8, _f8, _b1 = _nt.int64, _nt.uint64, _nt.float64, _nt.boolean
_R1, _R2, _R3 = (_array(k, readonly=True) for k in (1, 2, 3))  # read only
_W1, _W2, _W3 = (_array(k) for k in (1, 2, 3))  # written
_RI1 = _array(1, _nt.int64, readonly=True)
_RI2 = _array(2, _nt.int64, readonly=True)

#: The one signature of each kernel (argument types; numba infers the result). Arrays are
#: float64 and C-contiguous (a step's coefficients, a slice of the padded stack of them, also
#: strided); those a kernel only reads are typed read-only, so a read-only input (a memory map,
#: a buffer from a store) needs no specialisation of its own.
SIGNATURES = {
    "_splitmix64": (_u8,),
    "_hash_key": (_u8,),
    "_row_hash_range": (_i8, _i8, _u8),
    "_chebyshev_fill": (_R1, _i8, _i8, _i8, _W3),
    "_extended_fill": (_R1, _i8, _i8, _f8, _f8, _i8, _W3, _W1, _W1),
    "_alpha_chunk": (_R2, _i8, _i8, _R1, _W1),
    "_shift_chunk": (
        _R1,
        _i8,
        _f8,
        _R1,
        _array(2, readonly=True, layout="A"),
        _R2,
        _R2,
        _i8,
        _W2,
        _i8,
    ),  # fmt: skip
    "_cross_moments": (_R2, _R2, _i8, _i8, _i8, _W2),
    "_centred_moments_kernel": (_R2,),
    "_direction_moments": (
        _R2,
        _i8,
        _i8,
        _R1,
        _f8,
        _f8,
        _i8,
        _W1,
        _W1,
        _W3,
        _W1,
        _W1,
        _W1,
        _W2,
    ),  # fmt: skip
    "_fused_kernel": (
        _R2,
        _b1,
        _R1,
        _RI1,
        _b1,
        _W2,
        _b1,
        _R2,
        _R3,
        _RI1,
        _R2,
        _b1,
        _R2,
        _R2,
        _R1,
        _R1,
        _i8,
        _RI2,
        _u8,
        _i8,
    ),  # fmt: skip
    "_step_kernel": (_R2, _R1, _b1, _f8, _R1, _R2, _f8, _f8, _f8, _f8, _W2, _W1),
}

#: The kernels LLVM optimises at numba's default level (3) when each is compiled on its own;
#: the others at level 1, which cut the first compile by about an eighth. Those others are either
#: inlined into these three, whose modules LLVM optimises again at level 3 with every callee
#: linked in (their own level only shapes what goes in: the fits measured the same), or called
#: from Python on work whose pace is set by memory (the Chebyshev rows, the fold hash). The
#: centred moments stay at 3: at level 1 the fit's first pass was 10-15 % slower. A user's own
#: ``NUMBA_OPT`` overrides both levels.
FULLY_OPTIMISED = ("_centred_moments_kernel", "_fused_kernel", "_step_kernel")
_LIGHT_OPTIMISATION = 1

#: Seconds a process waits for another one compiling a kernel into the same cache before it
#: compiles it itself (a process that dies releases the lock at once).
COMPILE_LOCK_TIMEOUT = 600.0
_LOCK_FILE = "ppa_dask-compile-{}.lock"  # one per kernel

#: the order kernels are compiled in: callees before callers, and what a fit needs first (the
#: fold hash, the first pass's moments, the step pass) before what it needs last (transform)
ORDER = tuple(SIGNATURES)

_compile_state = {"thread": None, "error": None, "waited_s": 0.0, "work_s": 0.0}
_compile_guard = threading.RLock()  # one thread compiles (or loads) a kernel at a time
_done = {}  # kernel name -> "compiled" or "loaded", once it has its signature in this process


@contextlib.contextmanager
def _machine_lock(folder, name, timeout):
    """An exclusive ``flock`` on kernel ``name``'s file in ``folder`` (the cache), waited for at most
    ``timeout`` seconds; yields the seconds waited. Without ``fcntl`` (Windows) or a writable
    folder it is no lock: each process then compiles for itself."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield 0.0
        return
    try:
        fd = os.open(os.path.join(folder, _LOCK_FILE.format(name)), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield 0.0
        return
    t0 = time.perf_counter()
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.perf_counter() - t0 > timeout:
                    break  # compile without it rather than wait for ever
                time.sleep(0.02)
        yield time.perf_counter() - t0
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def _optimisation_for(name):
    """numba's LLVM optimisation level set for compiling kernel ``name`` (see
    :data:`FULLY_OPTIMISED`), under numba's compiler lock so that nothing else this process
    compiles meanwhile sees it; as it was when the user set ``NUMBA_OPT``."""
    if name in FULLY_OPTIMISED or "NUMBA_OPT" in os.environ:
        yield
        return
    with global_compiler_lock:
        saved = numba_config.OPT
        numba_config.OPT = type(saved)(_LIGHT_OPTIMISATION)
        try:
            yield
        finally:
            numba_config.OPT = saved


def cache_dir():
    """numba's on-disk cache folder of the kernels, or None without one (a read-only
    installation with no writable cache location)."""
    return _KERNELS["_fused_kernel"].stats.cache_path


def _ensure(upto, timeout=COMPILE_LOCK_TIMEOUT):
    """Give every kernel of :data:`ORDER` up to ``upto`` (a name) its signature in this process:
    compiled, or loaded from the on-disk cache. The machine-wide lock is taken per kernel, so a
    process that needs only the first kernels (the fold hash) waits for those, not for all of
    them, and processes sharing a cache each compile a different kernel or load it. One lock
    file per kernel: with a single one, a process compiling kernel after kernel re-took it at
    once each time and a process polling for it waited for them all (measured: the demo's
    client waited 45 s for the fold hash, compiled in its first second)."""
    folder = cache_dir()
    for name in ORDER[: ORDER.index(upto) + 1]:
        if name in _done:
            continue
        with _compile_guard:
            if name in _done:  # another thread of this process did it meanwhile
                continue
            kernel = _KERNELS[name]
            sig = SIGNATURES[name]
            lock = _machine_lock(folder, name, timeout) if folder else contextlib.nullcontext(0.0)
            with lock as waited:
                t1 = time.perf_counter()
                misses = sum(kernel.stats.cache_misses.values())
                if sig not in kernel.signatures:
                    with _optimisation_for(name):
                        kernel.compile(sig)
                how = "compiled" if sum(kernel.stats.cache_misses.values()) > misses else "loaded"
                # from now on a call converts to this signature (a literal 0 to int64, a
                # writable array to read-only, C to any layout) instead of compiling another
                kernel.disable_compile()
                _compile_state["work_s"] += time.perf_counter() - t1
            _compile_state["waited_s"] += waited
            _done[name] = how


def _record(seconds):
    return {
        "seconds": seconds,
        "waited_s": _compile_state["waited_s"],
        "work_s": _compile_state["work_s"],
        "compiled": [name for name in ORDER if _done.get(name) == "compiled"],
        "loaded": [name for name in ORDER if _done.get(name) == "loaded"],
        "cache_dir": cache_dir(),
    }


def _run_compile(timeout):
    try:
        _ensure(ORDER[-1], timeout)
    except BaseException as exc:  # re-raised in the thread that waits for it
        _compile_state["error"] = exc


def compile_kernels(wait=True, timeout=COMPILE_LOCK_TIMEOUT):
    """Compile every kernel for its one signature, or load it from numba's on-disk cache.

    Runs once per process (a kernel's first call does it for that kernel and those before it
    in :data:`ORDER`): the first process on a machine compiles and writes the cache (about
    6-10 s of LLVM on a quiet core), every later one loads it (a fraction of a second).
    Processes sharing a cache folder take turns kernel by kernel through a file lock there, so
    each kernel is compiled once per machine and a process started while another compiles
    waits for the kernels it needs and loads them.

    Parameters
    ----------
    wait : bool
        False: start it in a background thread and return None at once; a later call with
        ``wait=True`` waits for that thread (a kernel's first call waits only for its own).
    timeout : float
        Seconds to wait for another process's lock, per kernel, before compiling anyway.

    Returns
    -------
    dict or None
        ``seconds`` (wall time of this call, locks included), ``waited_s`` (for the locks),
        ``work_s`` (compiling or loading), ``compiled`` and ``loaded`` (kernel names: compiled
        in this process, loaded from the cache) and ``cache_dir`` (None without an on-disk
        cache).

    Examples
    --------
    >>> record = compile_kernels()
    >>> sorted(record["compiled"] + record["loaded"]) == sorted(SIGNATURES)
    True
    """
    t0 = time.perf_counter()
    with _compile_guard:
        if _compile_state["thread"] is None:
            thread = threading.Thread(
                target=_run_compile, args=(timeout,), name="ppa-dask-compile", daemon=True
            )
            _compile_state["thread"] = thread
            thread.start()
        thread = _compile_state["thread"]
    if not wait:
        return None
    thread.join()
    if _compile_state["error"] is not None:
        raise _compile_state["error"]
    return _record(time.perf_counter() - t0)


def cache_is_complete():
    """Whether numba's on-disk cache holds an entry for every kernel, newer than this file
    (False without an on-disk cache). An entry made for another CPU counts too: numba then
    compiles that kernel once in each process, under the lock."""
    folder = cache_dir()
    if not folder or not os.path.isdir(folder):
        return False
    stem = os.path.splitext(os.path.basename(__file__))[0]
    source = os.path.getmtime(__file__)
    names = os.listdir(folder)
    for name in ORDER:
        found = [f for f in names if f.startswith(f"{stem}.{name}-") and f.endswith(".nbi")]
        if not any(os.path.getmtime(os.path.join(folder, f)) >= source for f in found):
            return False
    return True


def compile_missing():
    """:func:`compile_kernels` when the on-disk cache lacks a kernel; else None, nothing loaded.

    What the child of :func:`ppa_dask.ppa.first_run.compile_in_background` runs (this file
    imported alone): on a machine whose cache is complete it costs only its own start. None
    also without an on-disk cache, where a child's compile would serve no other process.

    Examples
    --------
    >>> record = compile_missing()
    >>> record is None or sorted(record["compiled"] + record["loaded"]) == sorted(SIGNATURES)
    True
    """
    if cache_dir() is None or cache_is_complete():
        return None
    return compile_kernels()


def _kernels_ready(name):
    if name not in _done:
        _ensure(name)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_MASK64 = 0xFFFFFFFFFFFFFFFF


@_compiled()
def _splitmix64(z):
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@_compiled()
def _hash_key(seed):
    return _splitmix64(np.uint64(seed))


@_compiled()
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
    _kernels_ready("_row_hash_range")
    start, stop = int(start), int(stop)
    return _row_hash_range(
        np.int64(start), np.int64(max(stop, start)), np.uint64(int(seed) & _MASK64)
    )


# --------------------------------------------------------------------------------------------
# the basis and the step update, per chunk: the one implementation, used by the fused pass below
# and (through kernels.py) by transform, inverse, Jacobian and the geometry
# --------------------------------------------------------------------------------------------


@_compiled(fastmath=_FASTMATH, boundscheck=False)
def _chebyshev_fill(t, L, degree, derivatives, out):
    """``out[k, j, :L]`` = the k-th derivative of ``T_j`` at ``t[:L]`` (k <= derivatives).

    Recurrences: ``T_{j+1} = 2 t T_j - T_{j-1}``, and for the k-th derivative
    ``D^k T_{j+1} = 2 t D^k T_j - D^k T_{j-1} + 2k D^{k-1} T_j``.
    """
    for k in range(derivatives + 1):
        D = out[k]
        first = D[0]
        value = 1.0 if k == 0 else 0.0
        for r in range(L):
            first[r] = value
        if degree >= 1:
            second = D[1]
            if k == 0:
                for r in range(L):
                    second[r] = t[r]
            else:
                value = 1.0 if k == 1 else 0.0
                for r in range(L):
                    second[r] = value
        for j in range(1, degree):
            Dn, Dj, Dm = D[j + 1], D[j], D[j - 1]
            if k == 0:
                for r in range(L):
                    Dn[r] = 2.0 * t[r] * Dj[r] - Dm[r]
            else:
                lower = out[k - 1, j]
                c = 2.0 * k
                for r in range(L):
                    Dn[r] = 2.0 * t[r] * Dj[r] - Dm[r] + c * lower[r]


@_compiled(fastmath=_FASTMATH, boundscheck=False)
def _extended_fill(t, L, degree, lo, hi, derivatives, out, tc, edge):
    """:func:`_chebyshev_fill` continued along the tangent outside ``[lo, hi]``: values gain the
    end's slope times the distance, the first derivative freezes at the end, higher ones are 0.
    ``tc`` (>= L) and ``edge`` (degree + 1) are scratch."""
    n_out = 0
    for r in range(L):
        c = min(max(t[r], lo), hi)
        tc[r] = c
        n_out += c != t[r]
    _chebyshev_fill(tc, L, degree, derivatives, out)
    if n_out:  # rare: rows beyond the training range
        for r in range(L):
            x = tc[r]
            if x != t[r]:
                edge[0] = 0.0
                if degree >= 1:
                    edge[1] = 1.0
                for j in range(1, degree):
                    edge[j + 1] = 2.0 * x * edge[j] - edge[j - 1] + 2.0 * out[0, j, r]
                dist = t[r] - x
                for j in range(degree + 1):
                    out[0, j, r] += edge[j] * dist
                    if derivatives >= 1:
                        out[1, j, r] = edge[j]
                    for k in range(2, derivatives + 1):
                        out[k, j, r] = 0.0


@_compiled(fastmath=_FASTMATH, boundscheck=False)
def _alpha_chunk(Y, a, L, e, alpha):
    """``alpha[:L] = e . y`` for the columns ``a .. a+L`` of ``Y``."""
    for r in range(L):
        alpha[r] = 0.0
    for i in range(Y.shape[0]):
        ei = e[i]
        yi = Y[i, a : a + L]
        for r in range(L):
            alpha[r] += ei * yi[r]


@_compiled(fastmath=_FASTMATH, boundscheck=False)
def _shift_chunk(alpha, L, sign, e, U, V, Yin, a_in, Yout, a_out):
    """``y_out = y_in + sign (e alpha + U v)`` for ``L`` columns (``sign = -1``: a step forward,
    ``+1``: undone). Three basis terms per sweep: fewer loads and stores than one at a time."""
    gp = U.shape[1]
    for i in range(Yin.shape[0]):
        ei = sign * e[i]
        yi = Yin[i, a_in : a_in + L]
        yo = Yout[i, a_out : a_out + L]
        for r in range(L):
            yo[r] = yi[r] + ei * alpha[r]
        k = 0
        while k + 3 <= gp:
            u0, u1, u2 = sign * U[i, k], sign * U[i, k + 1], sign * U[i, k + 2]
            v0, v1, v2 = V[k], V[k + 1], V[k + 2]
            for r in range(L):
                yo[r] += u0 * v0[r] + u1 * v1[r] + u2 * v2[r]
            k += 3
        while k < gp:
            u0 = sign * U[i, k]
            v0 = V[k]
            for r in range(L):
                yo[r] += u0 * v0[r]
            k += 1


@_compiled(fastmath=_FASTMATH, boundscheck=False)
def _step_kernel(Y, alpha, given, sign, e, U, off, sc, lo, hi, out, alpha_out):
    f, n = Y.shape
    gp = U.shape[1]
    ap = np.empty(CHUNK)
    tp = np.empty(CHUNK)
    tc = np.empty(CHUNK)
    V3 = np.empty((1, gp, CHUNK))
    edge = np.empty(gp)
    for a in range(0, n, CHUNK):
        L = min(n, a + CHUNK) - a
        if given:
            for r in range(L):
                ap[r] = alpha[a + r]
        else:
            _alpha_chunk(Y, a, L, e, ap)
        for r in range(L):
            tp[r] = (ap[r] - off) / sc
            alpha_out[a + r] = ap[r]
        _extended_fill(tp, L, gp - 1, lo, hi, 0, V3, tc, edge)
        _shift_chunk(ap, L, sign, e, U, V3[0], Y, a, out, a)


def apply_step(Y, step, out, alpha=None):
    """Move a feature-major block ``Y`` (``(f, n)``, float64, C-contiguous) by a fitted step.

    Without ``alpha``: forward, ``out = y - e alpha - U v(t)`` with ``alpha = e . y``. With
    ``alpha`` (the step's coefficients): undone, ``out = y + e alpha + U v(t)``. ``out`` may be
    ``Y``. Returns ``alpha``.
    """
    _kernels_ready("_step_kernel")
    n = Y.shape[1]
    given = alpha is not None
    alpha_in = np.ascontiguousarray(alpha, dtype=np.float64) if given else _NO_CENTER
    alpha_out = np.empty(n)
    _step_kernel(
        Y,
        alpha_in,
        given,
        1.0 if given else -1.0,
        np.ascontiguousarray(step.direction, dtype=np.float64),
        np.ascontiguousarray(step.coef, dtype=np.float64),
        float(step.offset),
        float(step.scale),
        float(step.lo),
        float(step.hi),
        out,
        alpha_out,
    )
    return alpha_out


def chebyshev_rows(t, degree, derivatives, lo=-np.inf, hi=np.inf, out=None):
    """Rows ``(derivatives + 1, degree + 1, n)``: the Chebyshev basis of ``t`` and its
    derivatives, continued along the tangent outside ``[lo, hi]`` (none with the defaults);
    written into ``out`` when given."""
    _kernels_ready("_extended_fill")
    t = np.ascontiguousarray(t, dtype=np.float64)
    n = t.shape[0]
    shape = (int(derivatives) + 1, int(degree) + 1, n)
    direct = out is not None and _writable_c(out) and out.shape == shape
    rows = out if direct else np.empty(shape)
    _extended_fill(
        t,
        n,
        int(degree),
        float(lo),
        float(hi),
        int(derivatives),
        rows,
        np.empty(n),
        np.empty(int(degree) + 1),
    )
    if out is not None and not direct:
        out[...] = rows
        rows = out
    return rows


def _writable_c(a):
    """Whether ``a`` is of the type the kernels write: float64, C-contiguous, writable."""
    return a.dtype == np.float64 and a.flags.c_contiguous and a.flags.writeable


@_compiled(fastmath=_FASTMATH, boundscheck=False)
def _cross_moments(Ys, T, rows, cols, L, acc):
    """``acc[i, k] += sum_r Ys[i, r] T[k, r]`` in 2 x 3 blocks: six sums per sweep over five
    rows, instead of two loads per multiply-add (the loads, not the arithmetic, set the pace)."""
    i = 0
    while i + 2 <= rows:
        y0, y1 = Ys[i], Ys[i + 1]
        k = 0
        while k + 3 <= cols:
            t0, t1, t2 = T[k], T[k + 1], T[k + 2]
            s00 = s01 = s02 = s10 = s11 = s12 = 0.0
            for r in range(L):
                a0, a1 = y0[r], y1[r]
                b0, b1, b2 = t0[r], t1[r], t2[r]
                s00 += a0 * b0
                s01 += a0 * b1
                s02 += a0 * b2
                s10 += a1 * b0
                s11 += a1 * b1
                s12 += a1 * b2
            acc[i, k] += s00
            acc[i, k + 1] += s01
            acc[i, k + 2] += s02
            acc[i + 1, k] += s10
            acc[i + 1, k + 1] += s11
            acc[i + 1, k + 2] += s12
            k += 3
        while k < cols:
            tk = T[k]
            s0 = s1 = 0.0
            for r in range(L):
                s0 += y0[r] * tk[r]
                s1 += y1[r] * tk[r]
            acc[i, k] += s0
            acc[i + 1, k] += s1
            k += 1
        i += 2
    while i < rows:
        yi = Ys[i]
        for k in range(cols):
            tk = T[k]
            s = 0.0
            for r in range(L):
                s += yi[r] * tk[r]
            acc[i, k] += s
        i += 1


#: directions per pass from which each fold's rows are gathered into a contiguous block (one
#: cross-moment product per row and direction) rather than weighted (one product per fold): the
#: gather costs about one direction's product, so it pays from three directions on
GATHER_FROM = 3


@_compiled(fastmath=_FASTMATH, boundscheck=False)
def _direction_moments(Ys, rows, L, e, off, sc, g1, al, tn, T3, lane_lo, lane_hi, sums, yv):
    """One direction's moments on the columns ``:L`` of ``Ys``: ``al = e . y``, its Chebyshev
    rows ``T3[0]`` (``T_0 .. T_{len(sums)-1}``), their sums into ``sums``, the cross moments of
    ``T_0 .. T_{g1-1}`` into ``yv`` and the per-lane range of ``t``."""
    for r in range(L):
        al[r] = 0.0
    for i in range(rows):
        en = e[i]
        ys = Ys[i]
        for r in range(L):
            al[r] += en * ys[r]
    for r in range(L):
        t = (al[r] - off) / sc
        tn[r] = t
        lane_lo[r] = min(lane_lo[r], t)
        lane_hi[r] = max(lane_hi[r], t)
    m = sums.shape[0]
    _chebyshev_fill(tn, L, m - 1, 0, T3)
    T = T3[0]
    for k in range(m):
        Tk = T[k]
        s = 0.0
        for r in range(L):
            s += Tk[r]
        sums[k] += s
    _cross_moments(Ys, T, rows, g1, L, yv)


@_compiled(fastmath=_FASTMATH, boundscheck=False)
def _fused_kernel(
    Y,
    source,
    center,
    columns,
    pick,
    out,
    store,
    E_prev,
    U_prev,
    g_prev,
    P_prev,
    has_rotation,
    Q,
    E,
    offs,
    scs,
    degree,
    segments,
    seed,
    n_folds,
):
    # each segment (a block, or a slice of one) is swept with sums of its own, exactly as a
    # call of its own would be: from row ``segments[s, 0]`` of Y (column, feature-major),
    # ``segments[s, 1]`` rows, the first of global index ``segments[s, 2]`` (the fold hash),
    # written from column ``segments[s, 3]`` of ``out``; one call sweeps a group's blocks
    if source:  # blocks of samples (n, d), centred and transposed here
        f = Y.shape[1]
        if pick:  # only these columns of it, in this order
            f = columns.shape[0]
    else:
        f = Y.shape[0]
    fz = Q.shape[1] if has_rotation else f  # rows of the residual the moments are taken on
    K = E_prev.shape[0]  # fitted steps to apply first
    gp = U_prev.shape[2]  # their largest basis size (degree + 1)
    m = 2 * degree + 1  # T_0 .. T_2g: the Gram matrix comes from their sums
    g1 = degree + 1
    J = E.shape[0]  # directions: the step being fitted, then the steps gathered ahead
    folded = n_folds > 1
    gather = folded and J >= GATHER_FROM
    last = n_folds - 1
    key = _hash_key(seed)
    nf = np.uint64(n_folds)
    Yu = np.empty((f, CHUNK))  # the chunk's updated residual
    Ys = np.empty((fz, CHUNK)) if has_rotation else Yu  # ... in the frame of the moments
    Yf = np.empty((fz, CHUNK)) if gather else Ys  # ... the rows of one fold, gathered
    ap = np.empty(CHUNK)
    tp = np.empty(CHUNK)
    tcp = np.empty(CHUNK)
    Tp3 = np.empty((1, gp, CHUNK))
    Tp = Tp3[0]
    dtmp = np.empty(gp)
    al = np.empty(CHUNK)
    tn = np.empty(CHUNK)
    T3 = np.empty((1, m, CHUNK))
    T = T3[0]
    Tw = np.empty((g1, CHUNK))
    yy = np.empty(CHUNK)
    lab = np.empty(CHUNK, dtype=np.int64)
    order = np.empty(CHUNK, dtype=np.int64)
    wts = np.empty((max(n_folds - 1, 1), CHUNK))
    # np.empty and a fill, not np.zeros / np.full: each of those, per dimension count, is one
    # more function numba compiles on a machine's first run
    S = segments.shape[0]
    sums_all = np.empty((S, J, n_folds, m))
    yv_all = np.empty((S, J, n_folds, fz, g1))
    zz_all = np.empty((S, J, n_folds))
    counts_all = np.empty((S, n_folds), dtype=np.int64)
    tmin_all = np.empty((S, J))
    tmax_all = np.empty((S, J))
    tmin_lane = np.empty((J, CHUNK))  # per-lane extremes vectorise; reduced at the end
    tmax_lane = np.empty((J, CHUNK))
    for seg in range(S):
        y0, n, start, o0 = segments[seg, 0], segments[seg, 1], segments[seg, 2], segments[seg, 3]
        sums = sums_all[seg]
        sums[:] = 0.0
        yv = yv_all[seg]
        yv[:] = 0.0
        zz = zz_all[seg]
        zz[:] = 0.0
        counts = counts_all[seg]
        counts[:] = 0
        tmin_lane[:] = np.inf
        tmax_lane[:] = -np.inf
        for a in range(0, n, CHUNK):
            b = min(n, a + CHUNK)
            L = b - a
            if source and pick:
                for r in range(L):
                    row = Y[y0 + a + r]
                    for i in range(f):
                        Yu[i, r] = row[columns[i]] - center[i]
            elif source:
                for r in range(L):  # rows read in order, the transpose written into L1
                    row = Y[y0 + a + r]
                    for i in range(f):
                        Yu[i, r] = row[i] - center[i]
            elif K == 0:
                for i in range(f):
                    yi = Y[i, y0 + a : y0 + b]
                    yu = Yu[i]
                    for r in range(L):
                        yu[r] = yi[r]
            for s in range(K):
                # ---- the fitted steps not yet applied, in order: y <- y - e alpha - U v(t) ----
                # (the first reads the block, the others update the chunk in cache)
                gs = g_prev[s]
                es = E_prev[s]
                Us = U_prev[s, :, :gs]
                # one call site per helper: each is inlined, so a second one doubled its code
                first = s == 0 and not source
                Yin = Y if first else Yu
                a_in = y0 + a if first else 0
                _alpha_chunk(Yin, a_in, L, es, ap)
                off_s, sc_s = P_prev[s, 0], P_prev[s, 1]
                for r in range(L):
                    tp[r] = (ap[r] - off_s) / sc_s
                _extended_fill(tp, L, gs - 1, P_prev[s, 2], P_prev[s, 3], 0, Tp3, tcp, dtmp)
                _shift_chunk(ap, L, -1.0, es, Us, Tp, Yin, a_in, Yu, 0)
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
            if store:
                for i in range(fz):
                    ys = Ys[i]
                    oi = out[i, o0 + a : o0 + b]
                    for r in range(L):
                        oi[r] = ys[r]
            if folded:
                # folds and squared norms are shared by every direction of the pass
                for r in range(L):
                    h = _splitmix64(key + (np.uint64(start + a + r) + np.uint64(1)) * _GOLDEN)
                    lab[r] = np.int64(h % nf)
            if not gather:
                # ---- moments on all rows (the last fold holds the total until the end), then
                # each other fold's with 0/1 weights ----
                counts[last] += L
                for fo in range(last):
                    wf = wts[fo]
                    c = 0
                    for r in range(L):
                        hit = lab[r] == fo
                        wf[r] = 1.0 if hit else 0.0
                        c += hit
                    counts[fo] += c
                if folded:
                    for r in range(L):
                        yy[r] = 0.0
                    for i in range(fz):
                        ys = Ys[i]
                        for r in range(L):
                            yy[r] += ys[r] * ys[r]
            # gathered: one group per fold (its rows, one product per row); else one of all rows.
            # One call site of _direction_moments for both (it is inlined: two doubled its code)
            for grp in range(n_folds if gather else 1):
                if gather:
                    fo = grp
                    c = 0
                    for r in range(L):
                        if lab[r] == fo:
                            order[c] = r
                            c += 1
                    counts[fo] += c
                    if c == 0:
                        continue
                    for q in range(c):
                        yy[q] = 0.0
                    for i in range(fz):
                        ys = Ys[i]
                        yf = Yf[i]
                        for q in range(c):
                            v = ys[order[q]]
                            yf[q] = v
                            yy[q] += v * v
                else:
                    fo = last
                    c = L
                for j in range(J):
                    _direction_moments(
                        Yf, fz, c, E[j], offs[j], scs[j], g1, al, tn, T3,
                        tmin_lane[j], tmax_lane[j], sums[j, fo], yv[j, fo],
                    )  # fmt: skip
                    if gather:
                        # the norm orthogonal to this and every earlier direction of the pass:
                        # gathered ahead, step j's residual is this one without the earlier ones
                        s = 0.0
                        for q in range(c):
                            v = yy[q] - al[q] * al[q]
                            yy[q] = v
                            s += v
                        zz[j, fo] += s
                        continue
                    if not folded:
                        continue
                    for r in range(L):
                        yy[r] -= al[r] * al[r]
                    s = 0.0
                    for r in range(L):
                        s += yy[r]
                    zz[j, last] += s
                    for fw in range(last):
                        wf = wts[fw]
                        sj = sums[j, fw]
                        for k in range(m):
                            Tk = T[k]
                            s = 0.0
                            for r in range(L):
                                s += Tk[r] * wf[r]
                            sj[k] += s
                        for k in range(g1):
                            Tk = T[k]
                            Twk = Tw[k]
                            for r in range(L):
                                Twk[r] = Tk[r] * wf[r]
                        _cross_moments(Ys, Tw, fz, g1, L, yv[j, fw])
                        s = 0.0
                        for r in range(L):
                            s += yy[r] * wf[r]
                        zz[j, fw] += s
        # the last fold held the total: make it the total minus the others
        if folded and not gather:
            for fo in range(last):
                counts[last] -= counts[fo]
                for j in range(J):
                    zz[j, last] -= zz[j, fo]
                    for k in range(m):
                        sums[j, last, k] -= sums[j, fo, k]
                    for i in range(fz):
                        for k in range(g1):
                            yv[j, last, i, k] -= yv[j, fo, i, k]
        tmin = tmin_all[seg]
        tmin[:] = np.inf
        tmax = tmax_all[seg]
        tmax[:] = -np.inf
        for j in range(J):
            for r in range(CHUNK):
                tmin[j] = min(tmin[j], tmin_lane[j, r])
                tmax[j] = max(tmax[j], tmax_lane[j, r])
    return sums_all, yv_all, zz_all, counts_all, tmin_all, tmax_all


@_compiled(fastmath=_FASTMATH, boundscheck=False)
def _centred_moments_kernel(X):
    n, d = X.shape
    flat = X.ravel()
    width = CHUNK * d
    lane = np.empty(width)  # sweep 1, the mean: contiguous sums, lane j holds column j % d
    lane[:] = 0.0
    for a in range(0, n * d, width):
        L = min(n * d, a + width) - a
        part = flat[a : a + L]
        for j in range(L):
            lane[j] += part[j]
    mean = np.empty(d)
    mean[:] = 0.0
    for j in range(width):
        mean[j % d] += lane[j]
    for i in range(d):
        mean[i] /= max(n, 1)
    Yc = np.empty((d, CHUNK))
    scatter = np.empty((d, d))
    scatter[:] = 0.0
    for a in range(0, n, CHUNK):  # sweep 2: the scatter about the mean (two-pass, no cancellation)
        L = min(n, a + CHUNK) - a
        for r in range(L):
            row = X[a + r]
            for i in range(d):
                Yc[i, r] = row[i] - mean[i]
        _cross_moments(Yc, Yc, d, d, L, scatter)
    return mean, scatter


def centred_moments(X):
    """Mean and scatter about the mean, ``sum (x - m)(x - m)^T``, of a block of samples ``(n, d)``
    (float64, C-contiguous), in two compiled sweeps."""
    _kernels_ready("_centred_moments_kernel")
    return _centred_moments_kernel(X)


_NO_OUTPUT = np.zeros((1, 1))
_NO_CENTER = np.zeros(1)
_NO_COLUMNS = np.zeros(1, dtype=np.int64)


def fused_step_pass(
    Y, start, step, spec, out=None, out_offset=0, rotation=None, center=None, columns=None
):
    """Apply fitted steps (or none) to a residual block and take the next step's raw moments.

    Parameters
    ----------
    Y : ndarray of shape (f, n), or (n, f) with ``center``
        Feature-major residual block (float64, C-contiguous); read only, unless it is ``out``.
        With ``center`` (the mean, shape (f,)), a block of samples as rows instead: the
        residual is ``(Y - center)^T``.
    columns : ndarray of int or None
        With ``center``: the columns of ``Y`` the samples are made of, in order (the residual is
        ``(Y[:, columns] - center)^T``, read in place: no copy of the selection is made).
    start : int
        Global index of the block's first row (for the fold hash).
    step : kernels.StepParams, sequence of them, or None
        The fitted steps to apply first, in order (their vectors in ``Y``'s frame): all of them
        chunk by chunk in the same sweep, so each costs a few products per row, not a sweep
        over memory.
    rotation : ndarray of shape (f, m) or None
        Orthonormal columns: after the update the residual is re-expressed as ``z = Q^T y`` (a
        smaller frame holding it exactly); ``spec.direction``, the moments and ``out`` are then
        in that frame.
    spec : kernels.StepSpec
        The step being fitted: leading vector (in the frame of the moments), basis coordinate
        ``t = (alpha - offset) / scale``, largest candidate degree, fold seed and count, and
        the steps gathered ahead (:func:`ppa_dask.ppa.algebra.linear_lookahead`), whose moments
        are taken in the same sweep on the same residual, each ``zz`` orthogonal to
        ``spec.direction`` and to every earlier direction of ``spec.ahead`` (the directions
        must be orthonormal). It is unpacked here, for the compiled call, and nowhere else.
    out : ndarray of shape (f or m, N) or None
        Where the updated residual goes, columns ``out_offset .. out_offset + n`` (may be ``Y``
        itself); None keeps nothing.

    Returns
    -------
    sums : (n_folds, 2 degree + 1), yv : (n_folds, f, degree + 1), zz : (n_folds,),
    counts : (n_folds,), tmin, tmax
        Per fold ``f``: ``sum T_k(t)``, ``sum y T_k(t)``, ``sum ||y||^2 - alpha^2`` (0 unless
        ``n_folds > 1``) and the row count, all rows (not the complement) of each fold. With
        ``spec.ahead``, a list of such tuples: the step's, then one per direction ahead.
    """
    segments = np.array([[0, Y.shape[0] if center is not None else Y.shape[1], start, out_offset]])
    sums, yv, zz, counts, tmin, tmax = fused_step_segments(
        Y, segments, step, spec, out=out, rotation=rotation, center=center, columns=columns
    )
    parts = [
        (sums[0, j], yv[0, j], zz[0, j], counts[0].copy() if j else counts[0],
         float(tmin[0, j]), float(tmax[0, j]))
        for j in range(sums.shape[1])
    ]  # fmt: skip
    return parts if spec.ahead else parts[0]


def fused_step_segments(
    Y, segments, step, spec, out=None, rotation=None, center=None, columns=None
):
    """:func:`fused_step_pass` over many segments of ``Y`` in one compiled call, each with
    moments of its own: a group of blocks stored side by side (a held group's residual, a batch
    of source blocks) costs one call, not one per block, and each block's moments are bit for
    bit those of a call of its own (the same sweep, the same sums, in the same order).

    Parameters
    ----------
    Y : ndarray of shape (f, N), or (N, f) with ``center``
        The segments' rows side by side (float64, C-contiguous; read only, unless it is
        ``out``).
    segments : ndarray of int of shape (S, 4)
        Per segment: its first row (column of a feature-major ``Y``), its number of rows, the
        global index of its first row (the fold hash) and the column of ``out`` it is written
        from.
    step, spec, out, rotation, center, columns
        As in :func:`fused_step_pass`.

    Returns
    -------
    sums : (S, J, n_folds, 2 degree + 1), yv : (S, J, n_folds, f, degree + 1),
    zz : (S, J, n_folds), counts : (S, n_folds), tmin, tmax : (S, J)
        :func:`fused_step_pass`'s values of every segment (``J`` directions: the step's, then
        those of ``spec.ahead``).

    Examples
    --------
    >>> from ppa_dask.ppa.kernels import StepSpec
    >>> Y = np.random.default_rng(0).normal(size=(3, 500))
    >>> spec = StepSpec(np.array([1.0, 0.0, 0.0]), 0.0, 3.0, 2)
    >>> both = fused_step_segments(Y, np.array([[0, 200, 0, 0], [200, 300, 200, 0]]), None, spec)
    >>> alone = fused_step_pass(np.ascontiguousarray(Y[:, 200:]), 200, None, spec)
    >>> bool(np.array_equal(both[1][1, 0], alone[1]))
    True
    """
    _kernels_ready("_fused_kernel")
    source = center is not None
    pick = source and columns is not None
    f = (len(columns) if pick else Y.shape[1]) if source else Y.shape[0]
    columns = np.ascontiguousarray(columns, dtype=np.int64) if pick else _NO_COLUMNS
    if pick and columns.size and not (columns.min() >= 0 and columns.max() < Y.shape[1]):
        raise IndexError(f"columns must lie in 0 .. {Y.shape[1] - 1}")
    steps = () if step is None else (step,) if hasattr(step, "direction") else tuple(step)
    K = len(steps)
    widest = max([s.coef.shape[1] for s in steps], default=1)
    E_prev = np.zeros((K, f))
    U_prev = np.zeros((K, f, widest))
    g_prev = np.zeros(K, dtype=np.int64)
    P_prev = np.zeros((K, 4))
    for s, st in enumerate(steps):
        E_prev[s] = st.direction
        g_prev[s] = st.coef.shape[1]
        U_prev[s, :, : g_prev[s]] = st.coef
        P_prev[s] = st.offset, st.scale, st.lo, st.hi
    store = out is not None
    has_rotation = rotation is not None
    Q = np.ascontiguousarray(rotation, dtype=np.float64) if has_rotation else _NO_OUTPUT
    center = np.ascontiguousarray(center, dtype=np.float64) if source else _NO_CENTER
    direction = np.ascontiguousarray(spec.direction, dtype=np.float64)
    ahead = tuple(spec.ahead)
    if not ahead:
        E = direction[None]
        offs, scs = np.array([float(spec.offset)]), np.array([float(spec.scale)])
    else:
        directions = [np.asarray(a[0], dtype=np.float64) for a in ahead]
        E = np.ascontiguousarray(np.vstack([direction[None], *directions]), dtype=np.float64)
        offs = np.array([float(spec.offset)] + [float(a[1]) for a in ahead])
        scs = np.array([float(spec.scale)] + [float(a[2]) for a in ahead])
    return _fused_kernel(
        Y,
        source,
        center,
        columns,
        pick,
        out if store else _NO_OUTPUT,
        store,
        E_prev,
        U_prev,
        g_prev,
        P_prev,
        has_rotation,
        Q,
        E,
        offs,
        scs,
        int(spec.max_degree),
        np.ascontiguousarray(segments, dtype=np.int64),
        np.uint64(int(spec.seed) & _MASK64),
        int(spec.n_folds),
    )
