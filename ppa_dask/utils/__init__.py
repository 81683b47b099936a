"""Shared helpers: the leaf of the package, importing nothing else of ``ppa_dask``.

Each mechanism the rest of the package relies on is written here once: array-type checks and
input validation for numpy and Dask (:mod:`.arrays`), the seed policy (:mod:`.seeds`), the
one-BLAS-thread limiter (:mod:`.blas`), tree reductions, compute helpers and the fan-out of
independent tasks (:mod:`.compute`, :mod:`.fanout`), atomic file writes (:mod:`.files`), the
text progress reporter (:mod:`.progress`), declarative parameter checks (:mod:`.params`), the
Markdown pipe-table writer (:mod:`.tables`) and the warning classes (:mod:`.warnings`).
Names here are public within the package; users need none of them.
"""
