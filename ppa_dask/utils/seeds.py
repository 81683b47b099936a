"""The seed policy: what ``random_state`` may be, how it becomes integer seeds, and how child
seeds are derived from keys.

What ``random_state`` may be
----------------------------
Every public entry point of the package that takes a ``random_state`` accepts the same four
kinds of value, checked by :func:`check_seed` (or the :data:`RANDOM_STATE` constraint):

* ``None``: fresh randomness (a new seed per call, or numpy's global ``RandomState`` for the
  scikit-learn style estimators, exactly as scikit-learn does);
* an int ``>= 0`` (numpy integers too; any size);
* a :class:`numpy.random.Generator` or a :class:`numpy.random.RandomState`: one seed is drawn
  from it (so it advances and two calls differ).

Anything else (a negative int, a float, a bool, a string, ...) raises
:class:`~ppa_dask.utils.params.InvalidParameterError` (a ``ValueError`` and a ``TypeError``)
naming the parameter and listing the four kinds.

How it becomes an integer seed
------------------------------
An int seed is used as it is, except by the scikit-learn style estimators. Two variants exist
because results already published depend on both:

* :func:`resolve_seed` - the int itself; ``None``, a Generator or a RandomState give one draw
  below ``high``, by default ``2**63`` (:data:`DATA_SEED_MAX`: plenty of entropy, int64- and
  JSON-friendly, recorded in the data's attributes) for the data generators and the entropy
  estimators; :func:`ensemble_seed` is the same below :data:`SEED_MAX` (int32, what members'
  ``random_state`` takes) for the feature-bagging ensembles and the instability estimates.
* :func:`estimator_seed` - scikit-learn's mapping (``check_random_state(random_state)`` and one
  draw below :data:`SEED_MAX`), used by :class:`~ppa_dask.PPA` and, through
  :func:`as_random_state`, by the VSK models that draw from a ``RandomState``.

Child seeds from keys
---------------------
:func:`child_seed` derives the seed of one task or member from a tuple of keys (ints >= 0 and
strings; a string enters through its CRC-32, so adding other keys never changes a seed). The
ensembles, the paper experiments and the pipelines all use it. Its two derivations, again kept
for the numbers they already produce:

* ``child_seed(*keys)``: the first 32-bit word of ``SeedSequence(keys)`` - tasks of the
  experiments and the scripts under ``pipelines/``, through :func:`task_seed` (the run's
  ``--seed`` first, checked, then the task's keys);
* ``child_seed(*keys, high=h)``: the first draw below ``h`` of :func:`key_rng` ``(*keys)`` (the
  generator ``default_rng(keys)``) - the ensembles' member seeds and row-hash seeds.

>>> resolve_seed(7), child_seed(0, "sat", 3) == child_seed(0, "sat", 3)
(7, True)
"""

from __future__ import annotations

import zlib

import numpy as np
from sklearn.utils import check_random_state as _sklearn_random_state

from ppa_dask.utils.params import Constraint, Integer, InvalidParameterError, check_param, is_int

__all__ = [
    "DATA_SEED_MAX",
    "RANDOM_STATE",
    "SEED_MAX",
    "as_random_state",
    "check_seed",
    "child_seed",
    "ensemble_seed",
    "estimator_seed",
    "key_rng",
    "key_words",
    "resolve_seed",
    "set_random_state",
    "task_seed",
]

#: Exclusive upper bound of the seeds handed to estimators (scikit-learn takes int32 seeds).
SEED_MAX = np.iinfo(np.int32).max
#: Exclusive upper bound of the seeds the data generators draw (63 bits).
DATA_SEED_MAX = 2**63
# seeds RandomState(seed) takes directly; larger ones go through a SeedSequence
_LEGACY_SEED_END = 2**32


class _RandomState(Constraint):
    """The ``random_state`` constraint of the policy (see the module docstring)."""

    expected = "None, an int >= 0, a numpy.random.Generator or a numpy.random.RandomState"

    def accepts(self, value):
        if value is None or isinstance(value, (np.random.Generator, np.random.RandomState)):
            return True
        return is_int(value) and value >= 0

    def convert(self, value):
        return int(value) if is_int(value) else value


#: Constraint for :func:`ppa_dask.utils.params.check_params` specs.
RANDOM_STATE = _RandomState()


def check_seed(random_state, name="random_state"):
    """``random_state`` if the policy accepts it (an int comes back as a Python int).

    Parameters
    ----------
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
    name : str
        The parameter's name, for the error.

    Raises
    ------
    InvalidParameterError
        For anything else, naming ``name``.

    Examples
    --------
    >>> check_seed(3), check_seed(None)
    (3, None)
    """
    return RANDOM_STATE.check(name, random_state)


def resolve_seed(random_state, *, high=DATA_SEED_MAX, name="random_state") -> int:
    """One non-negative integer seed from ``random_state``.

    An int is returned as it is; ``None`` gives a fresh seed, a Generator or RandomState one
    draw, all below ``high``.

    Parameters
    ----------
    random_state : None, int >= 0, numpy.random.Generator or numpy.random.RandomState
    high : int, default=DATA_SEED_MAX
        Exclusive bound of drawn seeds: :data:`DATA_SEED_MAX` for data, :data:`SEED_MAX` for
        the ensembles.
    name : str
        The parameter's name, for the error.

    Examples
    --------
    >>> resolve_seed(7)
    7
    >>> resolve_seed(np.random.default_rng(0), high=10) < 10
    True
    """
    random_state = check_seed(random_state, name)
    if random_state is None:
        return int(np.random.SeedSequence().entropy) % high
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(high))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(high, dtype=np.int64))
    return random_state


def ensemble_seed(random_state, name="random_state") -> int:
    """The seed of an ensemble or an instability estimate: :func:`resolve_seed` below
    :data:`SEED_MAX` (an int as it is; a draw fits the members' int32 ``random_state``).

    Examples
    --------
    >>> ensemble_seed(12)
    12
    >>> ensemble_seed(np.random.RandomState(1)) == np.random.RandomState(1).randint(SEED_MAX)
    True
    """
    return resolve_seed(random_state, high=SEED_MAX, name=name)


def as_random_state(random_state, name="random_state") -> np.random.RandomState:
    """A ``RandomState`` from ``random_state``, as scikit-learn's ``check_random_state``.

    ``None`` is numpy's global one, an int ``s < 2**32`` gives ``RandomState(s)`` (a larger one
    seeds through a ``SeedSequence``), a RandomState is returned itself and a Generator seeds a
    new one with one draw.

    Examples
    --------
    >>> as_random_state(0).randint(100) == np.random.RandomState(0).randint(100)
    True
    """
    random_state = check_seed(random_state, name)
    if isinstance(random_state, np.random.Generator):
        return np.random.RandomState(int(random_state.integers(_LEGACY_SEED_END)))
    if is_int(random_state) and random_state >= _LEGACY_SEED_END:
        return np.random.RandomState(np.random.MT19937(random_state))
    return _sklearn_random_state(random_state)


def estimator_seed(random_state, name="random_state") -> int:
    """One integer seed from an estimator's ``random_state``, in scikit-learn's manner.

    One draw below :data:`SEED_MAX` from :func:`as_random_state`, so an int always maps to the
    same seed and a ``RandomState`` advances.

    Examples
    --------
    >>> estimator_seed(0) == estimator_seed(0)
    True
    """
    return int(as_random_state(random_state, name).randint(SEED_MAX))


def key_words(keys, name="keys"):
    """The keys as ints for a ``SeedSequence``: ints >= 0 as they are, strings by CRC-32.

    Examples
    --------
    >>> key_words((1, "a"))
    [1, 3904355907]
    """
    words = []
    for key in keys:
        if isinstance(key, str):
            words.append(zlib.crc32(key.encode("utf-8")))
        elif is_int(key) and key >= 0:
            words.append(int(key))
        else:
            raise InvalidParameterError(f"{name} must be strings or ints >= 0, got {key!r}")
    return words


def key_rng(*keys) -> np.random.Generator:
    """The generator of a tuple of keys: ``numpy.random.default_rng(key_words(keys))``.

    Examples
    --------
    >>> bool(key_rng(3, 1).random() == np.random.default_rng([3, 1]).random())
    True
    """
    return np.random.default_rng(key_words(keys))


def child_seed(*keys, high=None, name="keys") -> int:
    """The seed of the task or member named by ``keys`` (ints >= 0 and strings).

    Parameters
    ----------
    *keys : int >= 0 or str
        Usually the run's seed first, then what names the task: ``(seed, "split", "sat", 3)``.
    high : int, optional
        None: the first 32-bit word of ``SeedSequence(keys)``, in ``[0, 2**32)`` (tasks of the
        experiments and pipelines). An int: the first draw below ``high`` of
        :func:`key_rng` ``(*keys)`` (the ensembles' members).
    name : str
        What the keys are called in the error.

    Examples
    --------
    >>> child_seed(0, "sat", 3) == child_seed(0, "sat", 3) != child_seed(0, "sat", 4)
    True
    >>> child_seed(5, 0, 2, high=SEED_MAX) < SEED_MAX
    True
    """
    words = key_words(keys, name)
    if high is None:
        return int(np.random.SeedSequence(words).generate_state(1, np.uint32)[0])
    return int(np.random.default_rng(words).integers(high))


def task_seed(base_seed, *keys) -> int:
    """A 32-bit seed for one task of an experiment, from the run's base seed and its keys.

    ``keys`` are ints >= 0 or strings (strings enter through their CRC-32), so a repetition's
    seed does not change when other data sets or repetitions are added or removed, nor with the
    worker that runs it. This is :func:`child_seed` ``(base_seed, *keys)`` with ``base_seed``
    checked: the one task seed of the paper experiments (:mod:`ppa_dask.app.experiments`) and
    of every script under ``pipelines/``.

    Parameters
    ----------
    base_seed : int
        The run's seed (``--seed``), >= 0.
    *keys : int >= 0 or str
        What names the task: ``("split", "sat", 3)``.

    Returns
    -------
    int
        In ``[0, 2**32)``, usable as ``random_state`` anywhere.

    Examples
    --------
    >>> task_seed(0, "sat", 3) == task_seed(0, "sat", 3) != task_seed(0, "sat", 4)
    True
    >>> task_seed(0, 1, 2) == child_seed(0, 1, 2)
    True
    """
    base_seed = check_param("base_seed", base_seed, Integer(0))
    return child_seed(base_seed, *keys, name="task keys")


def set_random_state(estimator, seed):
    """Set the estimator's ``random_state`` to ``seed``; nested ones get values drawn from it.

    The nested parameters (sorted by name) take successive draws below :data:`SEED_MAX` of
    :func:`key_rng` ``(seed)``.

    Examples
    --------
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> set_random_state(DecisionTreeRegressor(), 3).random_state
    3
    """
    seed = resolve_seed(seed, name="seed")
    keys = sorted(k for k in estimator.get_params(deep=True) if k.endswith("random_state"))
    nested = [k for k in keys if k != "random_state"]
    values = {"random_state": seed} if "random_state" in keys else {}
    if nested:
        draws = key_rng(seed).integers(SEED_MAX, size=len(nested))
        values.update({k: int(v) for k, v in zip(nested, draws)})
    if values:
        estimator.set_params(**values)
    return estimator
