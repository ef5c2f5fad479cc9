"""Federated methods, one module (or small package) each."""
