"""The helpers of the paper scripts: the Python scripts in ``pipelines/``, one per experiment.

Not the YAML pipeline (:mod:`ppa_dask.app.pipeline`, ``ppa-dask run``) and not scikit-learn's
``Pipeline``: the scripts of the PPA paper's section 5 (``paper_*.py``), the feature-bagging
stability experiments (``stability_*.py``) and the VSK experiments (``vsk_*.py``) share these
modules, by concept, so each script holds only its experiment:

* :mod:`.options`: their command-line options (:func:`~.options.base_parser`,
  :func:`~.options.quick_defaults`, :func:`~.options.paper_datasets_parser`,
  :func:`~.options.stability_parser`, :func:`~.options.add_svm_search_options`,
  :func:`~.options.csv_list`);
* :mod:`.tasks`: the cluster, the fan-out of independent tasks in order and resumable grids
  (:func:`~.tasks.cluster`, :func:`~.tasks.run_fanout`, :func:`~.tasks.fan_out`,
  :func:`~.tasks.run_grid`, :func:`~.tasks.run_settings`);
* :mod:`.output`: the tables (CSV and Markdown), ``summary.json`` and ``report.md`` they write
  (:func:`~.output.write_table`, :func:`~.output.write_summary`, :func:`~.output.write_report`,
  :func:`~.output.write_grid_report`);
* :mod:`.figures`: Agg figures and PNG files;
* :mod:`.selection`: the VSK paper's SVM grids (:func:`~.selection.search_grids`) and its
  weighted-F1 grid search.

Their data come from :mod:`ppa_dask.datasets`, the PPA paper's data-set names and split seeds
from :mod:`ppa_dask.app.experiments` (:data:`~ppa_dask.app.experiments.DATASET_LABELS`,
:func:`~ppa_dask.app.experiments.split_seed`) and their task seeds from
:func:`ppa_dask.utils.seeds.task_seed`. The scripts use only these and the package's public
API, never one another (``tests/test_architecture.py``), so they need no ``sys.path`` edits.
"""
