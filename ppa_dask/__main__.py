"""``python -m ppa_dask``: the ``ppa-dask`` command."""

import sys

from ppa_dask.app.cli import main

sys.exit(main())
