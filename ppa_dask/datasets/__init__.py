"""Data sets: seeded synthetic generators, the hyperspectral cube, the paper's toy data and the
bundled real data sets.

Synthetic samples (:mod:`.synthetic`: helix and curved manifolds whose values depend only on
the seed and the row index, never on chunking, and :func:`write_zarr` for large stores), the
cube (:mod:`.cube`: band x y x x spectra with clouds), a climate field with a curved leading
mode (:mod:`.field`: an ENSO-like SST anomaly whose warm and cold phases differ in shape), the
two parabolas of the PPA paper (:mod:`.toys`) and loaders of the real data sets shipped
compressed in ``data/`` (:mod:`.loaders`, with their provenance), among them a real Landsat 8
scene, one GeoTIFF per band (:func:`.load_landsat_crop`).

>>> from ppa_dask.datasets import make_helix
"""

from ppa_dask.datasets.cube import cube_wavelengths, make_cube
from ppa_dask.datasets.field import make_enso_field
from ppa_dask.datasets.loaders import (
    LANDSAT_BANDS,
    LANDSAT_SCENE_ID,
    PAPER_DATASETS,
    PAPER_SHAPES,
    PAPER_TABLE2_MINUTES,
    REGRESSION_DATASETS,
    SEGMENTATION_DROPPED,
    load_abalone,
    load_breast_cancer_wisconsin,
    load_covid_italy,
    load_cpu_act,
    load_house_8l,
    load_japanese_vowels,
    load_landsat_crop,
    load_magic_gamma,
    load_page_blocks,
    load_paper_dataset,
    load_regression_dataset,
    load_sat,
    load_segmentation,
    load_vehicles,
)
from ppa_dask.datasets.synthetic import (
    curved_manifold_eigenvalues,
    generate_rows,
    generated_dask_array,
    make_curved_manifold,
    make_demo_blocks,
    make_helix,
    rotation_matrix,
    write_zarr,
)
from ppa_dask.datasets.toys import make_parabolas

#: The bundled tables by name, each loader returning ``(X, y)`` with ``return_X_y=True``: what a
#: pipeline file's ``data: {source: dataset, name: ...}`` may name.
TABLE_LOADERS = {
    "abalone": load_abalone,
    "breast_cancer_wisconsin": load_breast_cancer_wisconsin,
    "cpu_act": load_cpu_act,
    "house_8l": load_house_8l,
    "japanese_vowels": load_japanese_vowels,
    "magic_gamma": load_magic_gamma,
    "page_blocks": load_page_blocks,
    "sat": load_sat,
    "segmentation": load_segmentation,
    "vehicles": load_vehicles,
}

__all__ = [
    "make_helix",
    "make_curved_manifold",
    "curved_manifold_eigenvalues",
    "rotation_matrix",
    "generate_rows",
    "make_demo_blocks",
    "generated_dask_array",
    "write_zarr",
    "make_cube",
    "cube_wavelengths",
    "make_enso_field",
    "make_parabolas",
    "PAPER_DATASETS",
    "PAPER_SHAPES",
    "PAPER_TABLE2_MINUTES",
    "SEGMENTATION_DROPPED",
    "load_paper_dataset",
    "TABLE_LOADERS",
    "load_magic_gamma",
    "load_japanese_vowels",
    "load_page_blocks",
    "load_sat",
    "load_segmentation",
    "load_vehicles",
    "load_breast_cancer_wisconsin",
    "load_abalone",
    "load_cpu_act",
    "load_house_8l",
    "REGRESSION_DATASETS",
    "load_regression_dataset",
    "load_covid_italy",
    "LANDSAT_SCENE_ID",
    "LANDSAT_BANDS",
    "load_landsat_crop",
]
