"""The trackers a run logs to, each behind the same five calls (made in a thread of its
own: fastrl.tracking.background): ``start``, ``scalars``, ``table``, ``artifact`` and
``finish``. Their libraries are imported on ``start`` only: each is an extra of its own
(``pip install -c constraints.txt -e ".[wandb]"``, ``".[mlflow]"``)."""

from __future__ import annotations

import csv
import time
from pathlib import Path
from typing import Any

from fastrl.tracking.config import MlflowConfig, WandbConfig

#: rows of one scalar batch: ``(env step, {tag: value})``
Rows = list[tuple[int, dict[str, float]]]


def read_table(path: Path) -> tuple[list[str], list[list[Any]]]:
    """A CSV file's header and rows, numbers as floats and empty cells as None."""
    def value(cell: str) -> Any:
        if cell == "":
            return None
        try:
            return float(cell)
        except ValueError:
            return cell

    with path.open(newline="") as f:
        header, *rows = list(csv.reader(f))
    return header, [[value(c) for c in row] for row in rows]


class WandbRun:
    """A Weights & Biases run: scalars against the run's env step (``global_step``, W&B's
    own step only counting calls), the config as its config, tables as ``wandb.Table``,
    files as artifacts. Its files go into ``RUN_DIR/wandb``."""

    name, key = "W&B", "wandb"

    def __init__(self, cfg: WandbConfig) -> None:
        self.cfg, self.run = cfg, None

    def start(self, run_dir: Path, name: str, params: dict[str, Any], run_id: str | None
              ) -> str:
        """Start the run (``run_id``: continue that one); returns its id."""
        import wandb

        cfg = self.cfg
        self.run = wandb.init(
            project=cfg.project, entity=cfg.entity, group=cfg.group, tags=cfg.tags,
            name=name, config=params, id=run_id, resume="allow" if run_id else None,
            dir=str(run_dir), mode=cfg.mode, reinit="create_new",
            settings=wandb.Settings(console="off", silent=True))
        self.run.define_metric("global_step")
        self.run.define_metric("*", step_metric="global_step")
        return self.run.id

    def scalars(self, rows: Rows) -> None:
        """Each row's scalars at its env step."""
        for step, values in rows:
            self.run.log({"global_step": step, **values})

    def table(self, path: Path) -> None:
        """A CSV file of the run as a table named after it."""
        import wandb

        header, rows = read_table(path)
        self.run.log({path.stem: wandb.Table(columns=header, data=rows)})

    def artifact(self, path: Path) -> None:
        """A file of the run as an artifact (the model's type: ``model``)."""
        import wandb

        kind = "model" if path.suffix in (".pt", ".onnx") else "file"
        artifact = wandb.Artifact(f"{self.run.id}-{path.name.replace('.', '-')}", type=kind)
        artifact.add_file(str(path))
        self.run.log_artifact(artifact)

    def finish(self, failed: bool) -> None:
        """End the run (uploading what is left, online)."""
        self.run.finish(exit_code=1 if failed else 0)


class MlflowRun:
    """An MLflow run of experiment ``log.mlflow.experiment``: scalars as metrics at their
    env step, the config as parameters, tables and files as artifacts (tables under
    ``tables/``)."""

    name, key = "MLflow", "mlflow"
    BATCH = 1000  # metrics per log_batch call, MLflow's limit
    PARAMS = 100  # parameters per call, MLflow's limit

    def __init__(self, cfg: MlflowConfig) -> None:
        self.cfg, self.client, self.run_id = cfg, None, None

    def start(self, run_dir: Path, name: str, params: dict[str, Any], run_id: str | None
              ) -> str:
        """Start the run, its parameters logged (``run_id``: continue that one, whose
        parameters MLflow keeps as they were); returns its id."""
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        cfg = self.cfg
        self.client = client = MlflowClient(tracking_uri=cfg.tracking_uri)
        if run_id is not None:
            self.run_id = run_id
            client.update_run(run_id, status="RUNNING")
            return run_id
        experiment = client.get_experiment_by_name(cfg.experiment)
        experiment_id = experiment.experiment_id if experiment else \
            client.create_experiment(cfg.experiment, artifact_location=cfg.artifact_location)
        self.run_id = client.create_run(experiment_id, run_name=name).info.run_id
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), self.PARAMS):
            client.log_batch(self.run_id, params=items[i:i + self.PARAMS])
        return self.run_id

    def scalars(self, rows: Rows) -> None:
        """Each row's scalars as metrics at its env step."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, float(value), now, step)
                   for step, values in rows for key, value in values.items()]
        for i in range(0, len(metrics), self.BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + self.BATCH])

    def table(self, path: Path) -> None:
        """A CSV file of the run under ``tables/``."""
        self.client.log_artifact(self.run_id, str(path), "tables")

    def artifact(self, path: Path) -> None:
        """A file of the run."""
        self.client.log_artifact(self.run_id, str(path))

    def finish(self, failed: bool) -> None:
        """End the run: FINISHED, or FAILED."""
        self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")
