"""How a run runs: the composed config, its setup, the training loop, warm starts and signals."""
