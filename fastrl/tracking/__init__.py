"""Experiment tracking beside a run's own files: Weights & Biases (``log.wandb``) and MLflow
(``log.mlflow``), each fed off the hot path (fastrl.tracking.background)."""
