"""What a run writes: its files and folder, the lock, checkpoints, the metrics log, plots and reports, and the
statistics a table of runs carries (``stats``)."""
