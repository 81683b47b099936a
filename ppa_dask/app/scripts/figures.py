"""The figures of the paper scripts under ``pipelines/``: a canvas without pyplot, PNG files.

:func:`new_figure` makes a matplotlib Figure on an Agg canvas (no pyplot state, no display),
:func:`matplotlib_headless` gives pyplot on the Agg backend for the scripts that draw with it,
and :func:`save_figure` writes a PNG.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = [
    "matplotlib_headless",
    "new_figure",
    "save_figure",
]


def new_figure(nrows=1, ncols=1, figsize=(6, 4), projection=None, squeeze=False):
    """A matplotlib Figure on an Agg canvas and its axes (array of shape (nrows, ncols)).

    ``nrows=0`` returns ``(figure, None)`` for figures that add their own axes.

    Examples
    --------
    >>> fig, axes = new_figure(1, 2)
    >>> axes.shape
    (1, 2)
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    if nrows == 0:  # the caller lays out its own axes
        return fig, None
    if projection is None:
        axes = fig.subplots(nrows, ncols, squeeze=squeeze)
    else:
        axes = np.array(
            [
                [
                    fig.add_subplot(nrows, ncols, i * ncols + j + 1, projection=projection)
                    for j in range(ncols)
                ]
                for i in range(nrows)
            ]
        )
    return fig, axes


def matplotlib_headless():
    """``matplotlib.pyplot`` on the Agg backend (no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, directory, name, dpi=110):
    """Write ``fig`` as the PNG ``directory/name``; return its path.

    A figure without a layout engine (pyplot's default) is laid out tightly first, and one
    made by pyplot is closed afterwards (the scripts draw many).

    Examples
    --------
    >>> import os, tempfile
    >>> fig, axes = new_figure()
    >>> os.path.exists(save_figure(fig, tempfile.mkdtemp(), "f.png"))
    True
    """
    path = os.path.join(directory, name)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, format="png", dpi=dpi)
    if getattr(fig.canvas, "manager", None) is not None:
        matplotlib_headless().close(fig)
    return path
