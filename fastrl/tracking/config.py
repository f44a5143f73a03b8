"""The ``log.wandb`` and ``log.mlflow`` sections: where a run is tracked besides its own
files (docs/tools.md, "Experiment tracking")."""

from __future__ import annotations

from dataclasses import dataclass

from fastrl.core.settings import setting

TRACKED = ("every TensorBoard scalar at its env step, the resolved config, the episode "
           "and evaluation tables, the curve PNGs, and the final model with its ONNX export")


@dataclass
class WandbConfig:
    """A Weights & Biases run (the ``wandb`` extra)."""

    enabled: bool = setting(False, f"log the run to Weights & Biases: {TRACKED}")
    project: str = setting("fastrl", "W&B project")
    entity: str | None = setting(None, "W&B entity (user or team); null: the account's default")
    group: str | None = setting(None, "W&B group of the run (a sweep's trials: its study)")
    tags: list[str] = setting([], "W&B tags of the run")
    mode: str = setting("online", "online, or offline: write the run's W&B files into the run "
                        "directory only (`wandb sync` uploads them later)",
                        choices=("online", "offline"))


@dataclass
class MlflowConfig:
    """An MLflow run (the ``mlflow`` extra)."""

    enabled: bool = setting(False, f"log the run to MLflow: {TRACKED}")
    tracking_uri: str | None = setting(None, "MLflow tracking URI (a server's http(s) address, "
                                       "or sqlite:///PATH.db); null: MLflow's own default "
                                       "(MLFLOW_TRACKING_URI, else ./mlruns)")
    experiment: str = setting("fastrl", "MLflow experiment (a sweep's trials: its study)")
    artifact_location: str | None = setting(None, "where an experiment fastrl creates keeps "
                                            "its artifacts; null: the tracking server's "
                                            "default")
