"""Pieces several methods share: custom-size client models and their own-model replies (FedAT, FedKAD, FedMD), the
metadata level (FedSplit, FedAT), state averaging and payload sizes."""
