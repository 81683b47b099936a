"""The application: the ``ppa-dask`` command, batch pipelines, the benchmark, the papers'
experiments and figures (the clusters are :mod:`ppa_dask.cluster`, below the application).

Each module is one concept of the application, listed with one line in the module map of
docs/guide/layout.md (the one list of the package's modules, checked by
tests/test_architecture.py).
"""
