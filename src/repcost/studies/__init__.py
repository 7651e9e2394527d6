"""Studies that check the framework on many runs: held-out recipe checks, descent probes (`python -m repcost.studies.<name>`)."""
