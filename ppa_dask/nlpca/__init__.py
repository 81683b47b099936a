"""Nonlinear PCA (NLPCA): Scholz et al.'s hierarchical autoencoder, the PPA paper's baseline.

:class:`NLPCA` is a scikit-learn transformer: a ``d -> h -> k -> h -> d`` network with tanh
hidden layers and a linear bottleneck, trained by L-BFGS-B on the hierarchical reconstruction
error (so its components are ordered like PCA's) with weight decay, from several seeded random
restarts. Its fitted state is arrays and numbers only, so it is stored in the package's
JSON+arrays model files. Numpy input only: the paper's data sets are small.

>>> from ppa_dask.nlpca import NLPCA
"""

from ppa_dask.nlpca.autoencoder import NLPCA

__all__ = ["NLPCA"]
