"""KAFAL, knowledge-aware federated active learning (Cao et al., ICCV 2023): algorithm kernels.

- ``pools``: a client's labelled and unlabelled pools, labels revealed only through an oracle.
- ``ksas``: knowledge-specialised active sampling scores (Eq. 1-3).
- ``kcfu``: the knowledge-compensatory local loss (Eq. 4-6).
- ``queries``: the query strategies (KAFAL and the paper's baselines) and which may sample with the global model.
"""
