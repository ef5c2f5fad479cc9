"""FedFSC / FedFSC+ / FSCProx: few-shot fine-tuning of the classifier (Shi thesis Ch. 4, §4.2-4.4, Alg. 1 and 2)."""
