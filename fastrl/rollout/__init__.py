"""Rollout worker layer: env stepping, policy inference, filling ring slots."""
