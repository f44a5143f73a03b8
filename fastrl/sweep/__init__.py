"""Hyper-parameter sweeps: ``python -m fastrl.sweep`` (fastrl.sweep.__main__)."""
