"""``python -m ralp.bench``: plain PS vs RALP on a real or simulated cluster, bytes measured."""
