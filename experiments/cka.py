"""Linear centred kernel alignment (CKA; Kornblith et al. 2019) between two models' representations.

CKA(X, Y) = ⟨HKH, HLH⟩_F / (‖HKH‖_F ‖HLH‖_F) with K = XXᵀ, L = YYᵀ and H the centring matrix: 1 for
representations equal up to rotation and isotropic scaling, near 0 for unrelated ones. The Gram form
costs O(n²·d), so wide feature maps (16×32×32 at WRN's low level) stay cheap for batches of a few hundred.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def _centred_gram(features: torch.Tensor) -> torch.Tensor:
    x = features.reshape(len(features), -1).double()
    gram = x @ x.T
    mean_rows = gram.mean(dim=0, keepdim=True)
    return gram - mean_rows - mean_rows.T + gram.mean()


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """CKA between representations of the same ``n`` inputs (``n × …``; trailing dimensions are flattened)."""
    if len(x) != len(y):
        raise ValueError(f"representations of different inputs: {len(x)} and {len(y)} rows")
    gram_x, gram_y = _centred_gram(x), _centred_gram(y)
    return float((gram_x * gram_y).sum() / (gram_x.norm() * gram_y.norm()))


def cka_matrix(batches: Sequence[Sequence[torch.Tensor]]) -> np.ndarray:
    """Models × models CKA, averaged over batches: ``batches[b][m]`` is model m's representation of batch b."""
    num_models = len(batches[0])
    matrix = np.zeros((num_models, num_models))
    for batch in batches:
        grams = [_centred_gram(features) for features in batch]
        norms = [g.norm() for g in grams]
        for i in range(num_models):
            for j in range(i, num_models):
                value = float((grams[i] * grams[j]).sum() / (norms[i] * norms[j]))
                matrix[i, j] += value
                if i != j:
                    matrix[j, i] += value
    return matrix / len(batches)


def mean_off_diagonal(matrix: np.ndarray) -> float:
    """The average similarity between distinct models (the paper's Fig. 4)."""
    n = len(matrix)
    return float((matrix.sum() - np.trace(matrix)) / (n * n - n)) if n > 1 else float("nan")
