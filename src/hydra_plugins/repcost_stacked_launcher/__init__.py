"""repcost's stacked launcher for Hydra: `hydra/launcher=stacked` (see stacked_launcher.py)."""
