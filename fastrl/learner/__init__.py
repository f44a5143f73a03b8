"""Learner layer: the process that owns the model and trains it."""
