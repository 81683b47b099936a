"""The seed policy: how ``random_state`` becomes integer seeds, and how seeds reach estimators.

>>> resolve_seed(7)
7
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["SEED_MAX", "estimator_seed", "resolve_seed", "set_random_state"]

#: Exclusive upper bound of the seeds handed to estimators (scikit-learn takes int32 seeds).
SEED_MAX = np.iinfo(np.int32).max


def resolve_seed(random_state) -> int:
    """Turn ``random_state`` into a non-negative integer seed."""
    if random_state is None:
        # 63 bits: plenty of entropy, and JSON/int64 friendly for attributes.
        return int(np.random.SeedSequence().entropy) % 2**63
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63))
    if isinstance(random_state, (bool, np.bool_)) or not isinstance(
        random_state, numbers.Integral
    ):
        raise ValueError(
            "random_state must be None, a non-negative int or a "
            f"numpy.random.Generator, got {random_state!r}"
        )
    seed = int(random_state)
    if seed < 0:
        raise ValueError(f"random_state must be non-negative, got {seed}")
    return seed


def set_random_state(estimator, seed):
    """Set the estimator's ``random_state`` to ``seed``; nested ones get values drawn from it."""
    keys = sorted(k for k in estimator.get_params(deep=True) if k.endswith("random_state"))
    nested = [k for k in keys if k != "random_state"]
    values = {"random_state": int(seed)} if "random_state" in keys else {}
    if nested:
        draws = np.random.default_rng(seed).integers(SEED_MAX, size=len(nested))
        values.update({k: int(v) for k, v in zip(nested, draws)})
    if values:
        estimator.set_params(**values)
    return estimator


def estimator_seed(random_state):
    """One integer seed from an estimator's ``random_state``, in scikit-learn's manner.

    ``check_random_state`` accepts None, an int or a ``RandomState``; one draw below
    :data:`SEED_MAX` follows, so an int always maps to the same seed and a ``RandomState``
    advances.

    Examples
    --------
    >>> estimator_seed(0) == estimator_seed(0)
    True
    """
    from sklearn.utils import check_random_state

    return int(check_random_state(random_state).randint(SEED_MAX))
