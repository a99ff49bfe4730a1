"""The reward signal of a batch: diagnostics, dynamic sampling, a curriculum, and the collector that applies them."""
