"""The command-line options of the paper scripts under ``pipelines/``.

:func:`base_parser` holds the options of the PPA paper's scripts (``--output --repeats --quick
--seed --workers --record``) and :func:`quick_defaults` fills in the defaults that depend on
``--quick``; :func:`paper_datasets_parser` adds the paper's six data sets and PPA-GD's budget;
:func:`stability_parser` holds the options of the feature-bagging stability scripts
(``--output --workers --scheduler --seed --small --quiet --record``); :func:`csv_list` is the
argparse type of a comma-separated list. A bad value exits with status 2 and argparse's usage
line, before any work starts.
"""

from __future__ import annotations

import argparse

from ppa_dask.app.reproductions import add_record_option
from ppa_dask.datasets import PAPER_DATASETS

__all__ = [
    "add_svm_search_options",
    "base_parser",
    "check_svm_search_options",
    "csv_list",
    "paper_datasets_parser",
    "quick_defaults",
    "stability_parser",
]


def _nonnegative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _positive_int(text):
    value = _nonnegative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def base_parser(description, default_output):
    """The options every paper pipeline has; ``--repeats`` defaults to None (pipeline's own).

    Examples
    --------
    >>> args = base_parser("demo", "out").parse_args(["--quick", "--workers", "0"])
    >>> args.output, args.quick, args.workers, args.repeats
    ('out', True, 0, None)
    """
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--output",
        default=default_output,
        help=f"folder for tables and figures (default: {default_output})",
    )
    parser.add_argument(
        "--repeats",
        type=_positive_int,
        default=None,
        help="independent repetitions (random splits / data draws)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small settings (subsets, few repetitions) for tests and smoke runs",
    )
    parser.add_argument(
        "--seed",
        type=_nonnegative_int,
        default=0,
        help="base seed; every task's seed is derived from it (default: 0)",
    )
    parser.add_argument(
        "--workers",
        type=_nonnegative_int,
        default=2,
        help="Dask worker processes of the local cluster, one thread each; "
        "0 runs the tasks in this process (default: 2)",
    )
    add_record_option(parser)
    return parser


def quick_defaults(args, **defaults):
    """Give each option left at None its ``(quick, full)`` default by ``args.quick``; return
    ``args``.

    The options whose default depends on ``--quick`` default to None in the parser, so an
    explicit value (``--repeats 3 --quick``) is kept.

    Examples
    --------
    >>> args = base_parser("demo", "out").parse_args(["--quick"])
    >>> quick_defaults(args, repeats=(1, 10)).repeats
    1
    """
    for name, (quick, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    return args


def paper_datasets_parser(
    description, default_output, quick_gd_iter=5, add_options=None, check=None
):
    """A ``parse(argv)`` for the pipelines over the paper's six data sets (with PPA-GD).

    ``add_options(parser)`` adds a script's own options; ``check(args, error)`` validates the
    parsed values after the shared ones (``error(message)`` exits with status 2 and the usage).

    Examples
    --------
    >>> parse = paper_datasets_parser("demo", "out")
    >>> args = parse(["--quick", "--datasets", "vehicles"])
    >>> args.datasets, args.repeats, args.gd_max_iter
    (['vehicles'], 1, 5)
    """

    def parse(argv=None):
        parser = base_parser(description, default_output)
        parser.add_argument(
            "--datasets",
            type=csv_list(str),
            default=list(PAPER_DATASETS),
            help="comma-separated subset of " + ",".join(PAPER_DATASETS),
        )
        parser.add_argument(
            "--gd-max-iter",
            type=int,
            default=None,
            help=f"PPA-GD objective evaluations per step (default 20; quick {quick_gd_iter})",
        )
        if add_options is not None:
            add_options(parser)
        args = parser.parse_args(argv)
        unknown = [name for name in args.datasets if name not in PAPER_DATASETS]
        if unknown:
            parser.error(f"unknown data sets {unknown}; choose from {', '.join(PAPER_DATASETS)}")
        quick_defaults(args, repeats=(1, 10), gd_max_iter=(quick_gd_iter, 20))
        if args.gd_max_iter < 0:
            parser.error(f"--gd-max-iter must be >= 0, got {args.gd_max_iter}")
        if check is not None:
            check(args, parser.error)
        return args

    return parse


def stability_parser(description, default_output):
    """The options of the stability pipelines.

    Examples
    --------
    >>> args = stability_parser("demo", "out").parse_args(["--small"])
    >>> args.small, args.workers, args.scheduler
    (True, 2, None)
    """
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--output", default=default_output, help=f"output folder (default: {default_output})"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        help="local Dask workers, one thread each (0: run in this process)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        help="address of a running Dask scheduler to use instead of a local cluster",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    p.add_argument(
        "--small", action="store_true", help="a small grid that finishes in a minute or two"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_record_option(p)
    return p


#: The kernels of the VSK scripts' SVMs.
KERNELS = ("linear", "rbf")


def add_svm_search_options(parser):
    """The SVM grid-search options of the VSK classification scripts: ``--kernels``, ``--cv``
    and ``--coarse-grid`` (every other value of the paper's grids,
    :func:`ppa_dask.app.scripts.selection.search_grids`).

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_svm_search_options(p)
    >>> args = p.parse_args(["--kernels", "rbf", "--coarse-grid"])
    >>> args.kernels, args.cv, args.coarse_grid
    ('rbf', 5, True)
    """
    parser.add_argument(
        "--kernels", default=",".join(KERNELS), help="SVM kernels, comma separated (linear,rbf)"
    )
    parser.add_argument("--cv", type=int, default=5, help="folds of the grid search (default 5)")
    parser.add_argument(
        "--coarse-grid", action="store_true", help="every other grid value (a quick run)"
    )


def check_svm_search_options(args, error):
    """Turn ``args.kernels`` into a tuple of :data:`KERNELS`, or call ``error(message)``.

    Examples
    --------
    >>> import argparse
    >>> args = argparse.Namespace(kernels="linear,rbf")
    >>> check_svm_search_options(args, print)
    >>> args.kernels
    ('linear', 'rbf')
    >>> check_svm_search_options(argparse.Namespace(kernels="poly"), print)
    --kernels: expected linear and/or rbf, got poly
    """
    args.kernels = tuple(args.kernels.split(","))
    if not set(args.kernels) <= set(KERNELS):
        error(f"--kernels: expected linear and/or rbf, got {','.join(args.kernels)}")


def csv_list(kind):
    """argparse type: a comma-separated list of ``kind`` values.

    Examples
    --------
    >>> csv_list(int)("1,2,3")
    [1, 2, 3]
    """

    def parse(text):
        try:
            items = [kind(item) for item in text.split(",") if item.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list, got {text!r}"
            ) from None
        if not items:
            raise argparse.ArgumentTypeError("the list is empty")
        return items

    return parse
