"""The helpers of the paper scripts: the Python scripts in ``pipelines/``, one per experiment.

Not the YAML pipeline (:mod:`ppa_dask.app.pipeline`, ``ppa-dask run``) and not scikit-learn's
``Pipeline``: the scripts of the PPA paper's section 5 (``paper_*.py``), the feature-bagging
stability experiments (``stability_*.py``) and the VSK experiments (``vsk_*.py``) share these
modules, by concept, so each script holds only its experiment:

* :mod:`.options`: their command-line options (:func:`~.options.base_parser`,
  :func:`~.options.paper_datasets_parser`, :func:`~.options.stability_parser`,
  :func:`~.options.csv_list`);
* :mod:`.tasks`: the cluster, the fan-out of independent tasks in order and resumable grids
  (:func:`~.tasks.cluster`, :func:`~.tasks.run_fanout`, :func:`~.tasks.fan_out`,
  :func:`~.tasks.run_grid`);
* :mod:`.output`: the tables (CSV and Markdown), ``report.md`` and JSON files they write;
* :mod:`.figures`: Agg figures and PNG files;
* :mod:`.selection`: the VSK paper's SVM grids and its weighted-F1 grid search.

Their data come from :mod:`ppa_dask.datasets` and their task seeds from
:func:`ppa_dask.utils.seeds.task_seed`. The scripts use only these and the package's public
API, so they need no ``sys.path`` edits.
"""
