"""Declarative checks of parameter values: one vocabulary, one error naming the parameter.

A *constraint* says what a value may be and converts it (an ``int`` for :class:`Integer`, a
``float`` for :class:`Real`); a *spec* maps parameter names to constraints, and
:func:`check_params` checks a mapping of values against it. Every failure raises
:class:`InvalidParameterError` with the message ``"<name> must be <expected>, got <value>"``.

>>> spec = {"n_samples": Integer(1), "noise": Real(0), "kind": Options("curved", "helix")}
>>> check_params(spec, {"n_samples": 5, "noise": 0, "kind": "helix"})
{'n_samples': 5, 'noise': 0.0, 'kind': 'helix'}
>>> try:
...     check_params(spec, {"n_samples": 0, "noise": 0, "kind": "helix"})
... except InvalidParameterError as e:
...     print(e)
n_samples must be an int >= 1, got 0
"""

from __future__ import annotations

import difflib
import itertools
import math
import numbers
import os

import numpy as np

__all__ = [
    "AnyOf",
    "Constraint",
    "Instance",
    "Integer",
    "InvalidParameterError",
    "MAX_CANDIDATE_DEGREES",
    "Options",
    "PATH",
    "RESIDUAL_CACHES",
    "Real",
    "SOLVERS",
    "candidate_degrees",
    "check_float",
    "check_int",
    "check_param",
    "check_params",
    "did_you_mean",
    "is_int",
    "is_real",
    "parse_degree_text",
    "too_many_components",
    "unknown_key",
]

#: PPA's ``residual_cache`` and ``solver`` choices (the estimator's constraints and the
#: command's ``--residual-cache`` and ``--solver``, read here without importing the engine)
RESIDUAL_CACHES = ("auto", "persist", "checkpoint", "recompute")
SOLVERS = ("auto", "covariance", "gram", "krylov")


class InvalidParameterError(ValueError, TypeError):
    """A parameter value outside its constraint.

    Both a ``ValueError`` and a ``TypeError`` (as scikit-learn's own parameter error), so code
    that caught either for a wrong value or a wrong type keeps working.
    """


def is_int(value):
    """True for integers, numpy's included, but not for bools.

    >>> is_int(3), is_int(np.int64(3)), is_int(True), is_int(3.0)
    (True, True, False, False)
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_real(value):
    """True for real numbers (ints included), but not for bools.

    >>> is_real(0.5), is_real(2), is_real(False), is_real("1")
    (True, True, False, False)
    """
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


class Constraint:
    """What a parameter may be: :meth:`accepts` tests, :meth:`convert` normalises."""

    #: Phrase completing "<name> must be ...".
    expected = "valid"

    def accepts(self, value) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def convert(self, value):
        return value

    def check(self, name, value):
        """``value`` converted, or :class:`InvalidParameterError` naming ``name``."""
        if not self.accepts(value):
            raise InvalidParameterError(f"{name} must be {self.expected}, got {value!r}")
        return self.convert(value)


def _bounds(lo, hi, closed):
    """``">= 1"``, ``"in (0, 1]"``: the range of an :class:`Integer` or :class:`Real`."""
    left, right = closed in ("both", "left"), closed in ("both", "right")
    if lo is not None and hi is not None:
        return f"in {'[' if left else '('}{lo}, {hi}{']' if right else ')'}"
    if lo is not None:
        return f"{'>=' if left else '>'} {lo}"
    if hi is not None:
        return f"{'<=' if right else '<'} {hi}"
    return ""


class _Range(Constraint):
    _CLOSED = ("both", "left", "right", "neither")

    def __init__(self, lo=None, hi=None, closed="both", *, expected=None):
        if closed not in self._CLOSED:
            raise ValueError(f"closed must be one of {self._CLOSED}, got {closed!r}")
        self.lo, self.hi, self.closed = lo, hi, closed
        # a range relative to the data reads better in its own words ("k < n_features = 4")
        self._expected = expected

    def _in_range(self, v):
        left, right = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.lo is not None and (v < self.lo if left else v <= self.lo):
            return False
        return not (self.hi is not None and (v > self.hi if right else v >= self.hi))

    def __repr__(self):
        return f"{type(self).__name__}({self.lo!r}, {self.hi!r}, closed={self.closed!r})"


class Integer(_Range):
    """An integer (not a bool) in a range; converted to ``int``.

    ``closed`` says which bounds belong to the range (``"both"``, ``"left"``, ``"right"`` or
    ``"neither"``); ``expected`` replaces the generated description.

    >>> Integer(1, 5).check("k", 5), Integer(0, 5, closed="left").expected
    (5, 'an int in [0, 5)')
    """

    @property
    def expected(self):
        if self._expected is not None:
            return self._expected
        bounds = _bounds(self.lo, self.hi, self.closed)
        return f"an int {bounds}" if bounds else "an int"

    def accepts(self, value):
        return is_int(value) and self._in_range(int(value))

    def convert(self, value):
        return int(value)


class Real(_Range):
    """A finite real number (ints included, bools not) in a range; converted to ``float``.

    >>> Real(0, 1, closed="right").check("p", 1), Real(0, closed="neither").expected
    (1.0, 'a finite number > 0')
    """

    @property
    def expected(self):
        if self._expected is not None:
            return self._expected
        bounds = _bounds(self.lo, self.hi, self.closed)
        return f"a finite number {bounds}" if bounds else "a finite number"

    def accepts(self, value):
        return is_real(value) and math.isfinite(value) and self._in_range(float(value))

    def convert(self, value):
        return float(value)


class Options(Constraint):
    """One of the given values (compared with their types, so ``1`` is not ``True``).

    >>> Options("pca", "gd").expected
    "one of ('pca', 'gd')"
    """

    def __init__(self, *values):
        self.values = values

    @property
    def expected(self):
        return f"one of {self.values}"

    def accepts(self, value):
        for v in self.values:
            # True == 1, but a bool is not an option that an int stands for (nor the reverse)
            if isinstance(v, (bool, np.bool_)) != isinstance(value, (bool, np.bool_)):
                continue
            try:
                if bool(v == value):
                    return True
            except (TypeError, ValueError):  # an array compared with an option
                continue
        return False


class Instance(Constraint):
    """An instance of the given types, described as ``expected``.

    >>> Instance(str, os.PathLike, expected="a path").check("path", "a/b")
    'a/b'
    """

    def __init__(self, *types, expected):
        self.types, self.expected = types, expected

    def accepts(self, value):
        return isinstance(value, self.types)


class AnyOf(Constraint):
    """Any of the constraints; ``None`` among them stands for the value None.

    >>> AnyOf(None, Integer(1)).expected
    'None or an int >= 1'
    """

    def __init__(self, *constraints):
        self.constraints = constraints

    @property
    def expected(self):
        return " or ".join("None" if c is None else c.expected for c in self.constraints)

    def _match(self, value):
        for c in self.constraints:
            if (c is None and value is None) or (c is not None and c.accepts(value)):
                return c
        return False

    def accepts(self, value):
        return self._match(value) is not False

    def convert(self, value):
        c = self._match(value)
        return None if c is None else c.convert(value)


def check_param(name, value, constraint):
    """``value`` checked against ``constraint`` and converted.

    >>> check_param("cv", 3, Integer(2))
    3
    """
    return constraint.check(name, value)


def check_params(spec, values):
    """Check each ``values[name]`` against ``spec[name]``; the converted values, in spec order.

    Parameters
    ----------
    spec : mapping of str to Constraint
    values : mapping of str to object
        Must hold every name of ``spec`` (others are ignored).

    Returns
    -------
    dict

    Raises
    ------
    InvalidParameterError
        On the first value its constraint refuses, naming the parameter, what was expected and
        the value given.

    Examples
    --------
    >>> check_params({"B": Integer(1)}, {"B": 10, "other": "x"})
    {'B': 10}
    """
    return {name: constraint.check(name, values[name]) for name, constraint in spec.items()}


def check_int(name: str, value, minimum: int) -> int:
    """``value`` as an int >= ``minimum`` (shorthand for ``Integer(minimum).check``).

    >>> check_int("n_samples", 5, minimum=1)
    5
    """
    return Integer(minimum).check(name, value)


def check_float(name: str, value, *, minimum=None, strict=False) -> float:
    """``value`` as a finite float, >= ``minimum`` (> with ``strict``).

    >>> check_float("noise", 0, minimum=0.0)
    0.0
    """
    return Real(minimum, closed="neither" if strict else "both").check(name, value)


#: A filesystem path (``str`` or ``os.PathLike``).
PATH = Instance(str, os.PathLike, expected="a path (str or os.PathLike)")


# ---------------------------------------------------------------------------------------------
# words shared by every front-end (the estimator, the CLI, the pipeline and cluster files)
# ---------------------------------------------------------------------------------------------


def did_you_mean(word, allowed):
    """``" (did you mean 'x'?)"`` naming the allowed word closest to ``word``, or ``""``.

    >>> did_you_mean("degre", ["cv", "degree"]), did_you_mean("zzz", ["cv", "degree"])
    (" (did you mean 'degree'?)", '')
    """
    close = difflib.get_close_matches(str(word), list(allowed), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_key(name, key, allowed):
    """The refusal of a key a mapping does not take: ``name`` is the key as the file spells it
    (``model.degre``), ``allowed`` the keys it takes (listed sorted).

    >>> unknown_key("model.degre", "degre", ["degree", "cv"])
    "model.degre: unknown key (did you mean 'degree'?); expected one of cv, degree"
    """
    allowed = sorted(allowed)
    return f"{name}: unknown key{did_you_mean(key, allowed)}; expected one of {', '.join(allowed)}"


#: What :func:`parse_degree_text` reads, in the words of its refusal.
DEGREE_TEXT = "a degree >= 1, a range such as 1-5 or a list such as 1,2,4"
#: Most candidate degrees a PPA cross-validates (each is scored in every step's pass).
MAX_CANDIDATE_DEGREES = 1000


def parse_degree_text(text):
    """The degree(s) a text names: ``"3"`` -> 3, ``"1-5"`` -> [1, 2, 3, 4, 5], ``"1,2,4"`` ->
    [1, 2, 4] (as written; :func:`candidate_degrees` sorts them).

    Raises ``ValueError`` ("expected <DEGREE_TEXT>; got '<text>'") for anything else, for
    a degree below 1, and for a range of more than :data:`MAX_CANDIDATE_DEGREES` degrees
    (refused before its list is made: ``1-100000000000`` would fill the memory).

    >>> parse_degree_text("3"), parse_degree_text("1-3"), parse_degree_text("4,2")
    (3, [1, 2, 3], [4, 2])
    >>> parse_degree_text("1-100000000000")
    Traceback (most recent call last):
    ...
    ValueError: '1-100000000000' names 100,000,000,000 candidate degrees; at most 1000 are cross-validated
    """
    try:
        if "-" in text:
            lo, hi = (int(t) for t in text.split("-"))
            if hi - lo + 1 > MAX_CANDIDATE_DEGREES:
                raise OverflowError(hi - lo + 1)
            values = list(range(lo, hi + 1))
        else:
            values = [int(t) for t in text.split(",")]
    except ValueError:
        values = []
    except OverflowError as exc:
        raise ValueError(
            f"{text!r} names {exc.args[0]:,} candidate degrees; at most {MAX_CANDIDATE_DEGREES} "
            "are cross-validated"
        ) from None
    if not values or min(values) < 1:
        raise ValueError(f"expected {DEGREE_TEXT}; got {text!r}")
    return values[0] if len(values) == 1 else values


def candidate_degrees(degree, limit=None):
    """The candidate degrees ``degree`` stands for, sorted and distinct: an int >= 1, or an
    iterable of such ints (cross-validated per step when there are several).

    Parameters
    ----------
    degree : int or iterable of int
    limit : int, optional
        Most candidates allowed; an iterable holding more is refused before it is read whole
        (``range(1, 10**15)`` is a small object).

    Returns
    -------
    list of int

    Raises
    ------
    TypeError
        For a value that is not an int nor an iterable of ints (bools are not ints here).
    ValueError
        For no candidate, one below 1, or more than ``limit``.

    Examples
    --------
    >>> candidate_degrees(3), candidate_degrees([4, 2, 4])
    ([3], [2, 4])
    """
    if is_int(degree):
        candidates = [int(degree)]
    else:
        too_many = (
            f"degree holds more than {limit} candidate degrees ({degree!r:.60}); at most "
            f"{limit} are cross-validated"
        )
        if limit is not None:
            try:
                count = len(degree)
            except OverflowError:  # (a range longer than sys.maxsize)
                count = limit + 1
            except TypeError:  # no length: take one more than allowed, at most
                count = None
            if count is not None and count > limit:
                raise ValueError(too_many)
        try:
            items = degree if limit is None else itertools.islice(degree, limit + 1)
            candidates = list(items)
        except TypeError:
            raise TypeError(
                f"degree must be an int or an iterable of ints, got {degree!r}"
            ) from None
        if limit is not None and len(candidates) > limit:
            raise ValueError(too_many)
        if not candidates:
            raise ValueError("degree must not be an empty iterable of candidate degrees")
        if not all(is_int(g) for g in candidates):
            raise TypeError(f"degree candidates must be ints, got {candidates!r}")
        candidates = sorted({int(g) for g in candidates})
    if candidates[0] < 1:
        raise ValueError(f"degree must be >= 1, got {degree!r}")
    return candidates


def too_many_components(key, wanted, available, model):
    """The refusal of more components than a model has, or None: one sentence for the CLI's
    ``--components`` and the pipeline's ``transform.components`` (``key``), naming the model.

    Examples
    --------
    >>> too_many_components("--components", 99, 6, "MODEL 'm.zarr'")
    "--components 99: MODEL 'm.zarr' has 6 components"
    >>> too_many_components("--components", 3, 6, "MODEL 'm.zarr'") is None
    True
    """
    if wanted is None or wanted <= available:
        return None
    return f"{key} {wanted}: {model} has {available} components"
