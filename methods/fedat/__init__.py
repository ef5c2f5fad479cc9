"""FedAT: attention transfer and metadata training with custom-size client models (Shi thesis §5.2-5.3, Alg. 3)."""
