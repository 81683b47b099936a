"""Execute a notebook of notebooks/ with small parameters, as the notebook tests do."""

import os

import nbformat

NOTEBOOKS = os.path.join(os.path.dirname(__file__), os.pardir, "notebooks")


def execute_notebook(name, parameters, workdir):
    """Run ``notebooks/<name>`` in ``workdir`` with its ``parameters``-tagged cell replaced.

    One BLAS thread in the kernel, inline figures; returns the executed notebook.
    """
    from nbclient import NotebookClient

    nb = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    cell.source = parameters
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        MPLBACKEND="module://matplotlib_inline.backend_inline",
    )
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    )
    client.execute(env=env)
    return nb


def outputs(nb):
    """Every output of every code cell."""
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
