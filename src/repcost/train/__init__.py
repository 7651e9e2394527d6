"""Training: the engine and its steps, optimisers, schedules, stopping, checkpoints, ensembles and stacked runs."""
