"""FedSplit with K-means feature-map selection (Shi thesis §6.2-6.3, Algorithm 5)."""
