"""Server-side strategies: cohort selection by partition id and aggregation of the trained arrays."""
