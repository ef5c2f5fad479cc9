"""FedKAD and FedMD: distillation to the client consensus (Shi thesis §5.5, Alg. 4; Li & Wang 2019)."""
