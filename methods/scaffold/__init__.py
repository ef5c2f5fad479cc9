"""SCAFFOLD (Karimireddy et al., ICML 2020, Algorithm 1, option II): FedAvg with control variates."""
