"""Hardened-softmax entropies of one client's data under several temperatures ρ (the paper's Fig. 1):
the lower ρ, the more samples sit near zero entropy and the more the uncertain ones stand out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from client_app.data_selection import hardened_entropy
from client_app.local_data import load_local_data
from models.training import predict_logits
from run_config import RunConfig, build_model_for, federated_split
from server_app.pretraining import initial_state


def entropies_by_temperature(logits: torch.Tensor, temperatures: Sequence[float]) -> dict[float, np.ndarray]:
    """ρ -> per-sample entropy (nats) of softmax(logits / ρ)."""
    return {float(rho): hardened_entropy(logits, rho).cpu().numpy() for rho in temperatures}


def client_entropies(
    config: RunConfig,
    partition_id: int,
    num_partitions: int,
    temperatures: Sequence[float],
    device: torch.device | None = None,
) -> dict[float, np.ndarray]:
    """Entropies of ``partition_id``'s data under the run's initial (pretrained) global model: what the
    client ranks by in its first round."""
    model = build_model_for(config)
    device = device or torch.device("cpu")
    model.load_state_dict(initial_state(config, device))
    model.to(device).eval()
    data = load_local_data(federated_split(config), partition_id, num_partitions)
    logits = predict_logits(model, data.inputs(device), config.eval_batch_size)
    return entropies_by_temperature(logits, temperatures)
