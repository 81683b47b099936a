"""scikit-learn's estimator checks, with its array-API check run where it can run.

``parametrize_with_checks`` includes ``check_array_api_input`` (with the NumPy namespace for an
estimator that does not declare array-API support: enabling scikit-learn's array-API dispatch on
NumPy input must not change the results). That check raises SkipTest unless SCIPY_ARRAY_API is set
before SciPy is first imported, which would change SciPy's behaviour for the whole suite. So
:func:`estimator_checks` leaves it out of an ordinary run, and ``tests/ppa/test_array_api_checks.py``
runs exactly those checks in a child pytest with SCIPY_ARRAY_API=1: every check runs, none skips.
"""

from __future__ import annotations

import os

import pytest
from sklearn.utils.estimator_checks import check_array_api_input, parametrize_with_checks

# set only in the child run of tests/ppa/test_array_api_checks.py: then only the array-API checks
ARRAY_API_RUN = os.environ.get("SCIPY_ARRAY_API") is not None
# the estimators given to estimator_checks, one array-API check each (the child run counts them)
CHECKED = []


def _is_array_api(param):
    check = (param.values if hasattr(param, "values") else param)[1]
    return getattr(check, "func", check) is check_array_api_input


def estimator_checks(estimators, **options):
    """``parametrize_with_checks(estimators, **options)``, the array-API check where it runs."""
    estimators = list(estimators)
    CHECKED.extend(estimators)
    mark = parametrize_with_checks(estimators, **options)
    names, params = mark.args
    kept = [p for p in params if _is_array_api(p) == ARRAY_API_RUN]
    return pytest.mark.parametrize(names, kept, **mark.kwargs)
