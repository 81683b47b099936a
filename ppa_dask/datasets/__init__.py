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

from ppa_dask.utils.lazy import attach as _attach

# each name is imported from its module on first use (ppa_dask.utils.lazy): the command's
# parsers read the bundled tables' names (.loaders) without scikit-learn
__getattr__, __dir__ = _attach(
    __name__,
    {
        "cube_wavelengths": "ppa_dask.datasets.cube",
        "make_cube": "ppa_dask.datasets.cube",
        "LANDSAT_BANDS": "ppa_dask.datasets.loaders",
        "LANDSAT_SCENE_ID": "ppa_dask.datasets.loaders",
        "PAPER_DATASETS": "ppa_dask.datasets.loaders",
        "PAPER_SHAPES": "ppa_dask.datasets.loaders",
        "PAPER_TABLE2_MINUTES": "ppa_dask.datasets.loaders",
        "REGRESSION_DATASETS": "ppa_dask.datasets.loaders",
        "SEGMENTATION_DROPPED": "ppa_dask.datasets.loaders",
        "TABLE_LOADERS": "ppa_dask.datasets.loaders",
        "load_abalone": "ppa_dask.datasets.loaders",
        "load_breast_cancer_wisconsin": "ppa_dask.datasets.loaders",
        "load_covid_italy": "ppa_dask.datasets.loaders",
        "load_cpu_act": "ppa_dask.datasets.loaders",
        "load_house_8l": "ppa_dask.datasets.loaders",
        "load_japanese_vowels": "ppa_dask.datasets.loaders",
        "load_landsat_crop": "ppa_dask.datasets.loaders",
        "load_magic_gamma": "ppa_dask.datasets.loaders",
        "load_page_blocks": "ppa_dask.datasets.loaders",
        "load_paper_dataset": "ppa_dask.datasets.loaders",
        "load_regression_dataset": "ppa_dask.datasets.loaders",
        "load_sat": "ppa_dask.datasets.loaders",
        "load_segmentation": "ppa_dask.datasets.loaders",
        "load_vehicles": "ppa_dask.datasets.loaders",
        "curved_manifold_eigenvalues": "ppa_dask.datasets.synthetic",
        "generate_rows": "ppa_dask.datasets.synthetic",
        "generated_dask_array": "ppa_dask.datasets.synthetic",
        "make_curved_manifold": "ppa_dask.datasets.synthetic",
        "make_demo_blocks": "ppa_dask.datasets.synthetic",
        "make_helix": "ppa_dask.datasets.synthetic",
        "rotation_matrix": "ppa_dask.datasets.synthetic",
        "write_zarr": "ppa_dask.datasets.synthetic",
        "make_parabolas": "ppa_dask.datasets.toys",
        "make_enso_field": "ppa_dask.datasets.field",
    },
)

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
