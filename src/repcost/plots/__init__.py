"""Matplotlib figure builders: arrays and tables in, matplotlib Figure out (no training, no I/O)."""
