"""The application: the ``ppa-dask`` command, clusters, batch pipelines, the paper's experiments
and figures.

:mod:`.cli` (the command), :mod:`.cluster` (LocalCluster, cluster files, progress on the
client), :mod:`.pipeline` (YAML pipelines with stages and resume markers), :mod:`.demo` (the
main job, ``ppa-dask demo``, as generated pipelines), :mod:`.experiments` (the PPA paper's
section 5 tasks), :mod:`.baseline` (the PCA baseline every comparison uses),
:mod:`.plotting` (principal curves and surfaces) and :mod:`.reports` (the helpers of the
scripts under ``pipelines/``).
"""
