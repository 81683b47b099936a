"""The package's warning classes, one per condition, shared by the layers that issue them."""

from __future__ import annotations

import inspect
import os
import warnings

__all__ = ["RankDeficientWarning", "NoDataWarning", "MissingSamplesWarning", "warn"]


class RankDeficientWarning(UserWarning):
    """The data are rank deficient: their columns are (numerically) linearly dependent.

    Issued once per fit by :class:`ppa_dask.PPA` when the residual after some steps is
    rounding (the model's ``rank_`` is below its number of features; the steps past the rank
    are fitted linear), and by :func:`ppa_dask.information.multi_information_reduction`
    (``rank_deficient="warn"``), whose true ``Delta I`` is then infinite and whose finite
    estimate is the resolution floor of the entropy estimator.

    Examples
    --------
    >>> import warnings, numpy as np
    >>> from ppa_dask import PPA
    >>> X = np.random.default_rng(0).normal(size=(300, 2))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     model = PPA(degree=2, random_state=0).fit(np.hstack([X, X]))
    >>> model.rank_, [w.category.__name__ for w in caught]
    (2, ['RankDeficientWarning'])
    """


class NoDataWarning(UserWarning):
    """A fill-like value may be no-data: nothing declares one, and the value (exactly 0, the
    dtype's minimum or maximum, or a common sentinel such as -9999 or 1e20), the minimum or
    maximum of every band, fills at least 1 % of the samples in every band.

    Issued once per fit of a cube read from a file (:func:`ppa_dask.store.open_cube`,
    ``ppa-dask fit``, a pipeline's load stage) whose no-data value is neither declared
    (``nodata=``, ``--nodata``, ``data.nodata``) nor tagged in the file: such pixels, fitted as
    data, dominate the variance.

    Examples
    --------
    >>> issubclass(NoDataWarning, UserWarning)
    True
    """


class MissingSamplesWarning(UserWarning):
    """Samples missing in some features only (NaN there) were left out of a fit, as
    ``nan_policy="drop_samples"`` asked: their count, the features concerned and the first
    samples (:class:`ppa_dask.store.stacker.Stacker`).

    Examples
    --------
    >>> issubclass(MissingSamplesWarning, UserWarning)
    True
    """


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn(message, category):
    """``warnings.warn`` attributed to the first caller outside ppa-dask (the user's line).

    The stack level is counted from the frames rather than fixed, so the warning points at the
    user's call however deep inside the package it is issued (Python 3.12's
    ``skip_file_prefixes``, written for 3.11).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn("a message", RankDeficientWarning)
    >>> caught[0].category.__name__, caught[0].message.args[0]
    ('RankDeficientWarning', 'a message')
    """
    level, frame = 1, inspect.currentframe().f_back
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, category, stacklevel=level + 1)
