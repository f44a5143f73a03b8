"""W&B and MLflow (log.wandb, log.mlflow) with the real libraries, offline: W&B writes its
run files, MLflow a local SQLite store. What each received is read back through its own
API (W&B's protobuf records, MLflow's client) and compared with the run's own files:
episodes.csv, the TensorBoard scalars, the config, the model and its ONNX export. A
resumed run continues both tracked runs; an unreachable server never stops a run."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from helpers import ONE_WORKER, TINY, last_json, resume_main, tb, train_main, wandb_records

pytest.importorskip("wandb")
mlflow_client = pytest.importorskip("mlflow.tracking").MlflowClient

pytestmark = pytest.mark.timeout(300)


def tracked(tmp_path) -> list[str]:
    """Overrides that turn both trackers on, offline, in ``tmp_path``."""
    return ["log.wandb.enabled=true", "log.wandb.mode=offline", "log.mlflow.enabled=true",
            f"log.mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db",
            f"log.mlflow.artifact_location={tmp_path}/mlflow-artifacts"]


def episodes(run) -> list[tuple[int, float]]:
    with (run / "episodes.csv").open() as f:
        return [(int(float(r["step"])), float(r["return"])) for r in csv.DictReader(f)]


def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    """The same steps and values (float32, as TensorBoard keeps them)."""
    return [s for s, _ in a] == [s for s, _ in b] and \
        np.array_equal(np.float32([v for _, v in a]), np.float32([v for _, v in b]))


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tracked")
    proc = train_main([*TINY, *ONE_WORKER, *tracked(tmp), "algo.total_steps=1024",
                       "algo.target_return=null", "log.eval_every_steps=512",
                       "log.run_name=r"], tmp)
    assert proc.returncode == 0, proc.stderr
    return tmp / "r", tmp


def test_mlflow_gets_every_scalar_the_config_the_tables_and_the_model(tracked_run):
    run, tmp = tracked_run
    client = mlflow_client(f"sqlite:///{tmp}/mlflow.db")
    got = client.get_run((run / "mlflow.id").read_text().strip())
    assert got.info.status == "FINISHED" and got.info.run_name == "r"
    assert got.data.params["algo.lr"] == "0.00025" and got.data.params["seed"] == "1"

    def history(tag):
        return sorted((m.step, m.value) for m in client.get_metric_history(got.info.run_id, tag))

    assert episodes(run) and same(history("episode/return"), episodes(run))
    for tag in ("loss/policy_loss", "eval/return_mean", "train/steps_per_sec"):
        assert tb(run, tag) and same(history(tag), tb(run, tag)), tag
    files = {a.path for a in client.list_artifacts(got.info.run_id)} | \
        {a.path for a in client.list_artifacts(got.info.run_id, "tables")}
    assert {"model.pt", "model.onnx", "config.yaml", "tables/episodes.csv",
            "tables/evals.csv"} <= files
    table = client.download_artifacts(got.info.run_id, "tables/episodes.csv", str(tmp))
    assert open(table).read() == (run / "episodes.csv").read_text()


def test_wandb_gets_every_scalar_the_config_the_tables_and_the_model(tracked_run):
    run, _ = tracked_run
    records = wandb_records(run)
    (started,) = records["run"]
    assert started.run_id == (run / "wandb.id").read_text().strip()
    config = {i.key: i.value_json for i in started.config.update}
    assert config["algo.lr"] == "0.00025"

    def history(tag):
        return [(h["global_step"], h[tag]) for h in records["history"] if tag in h]

    assert same(history("episode/return"), episodes(run))
    for tag in ("loss/policy_loss", "eval/return_mean", "train/steps_per_sec"):
        assert same(history(tag), tb(run, tag)), tag
    kinds = {(a.name.split(f"{started.run_id}-", 1)[-1], a.type) for a in records["artifact"]}
    assert {("model-pt", "model"), ("model-onnx", "model"), ("config-yaml", "file"),
            ("episodes", "run_table"), ("evals", "run_table")} <= kinds
    assert records["exit"][0].exit_code == 0


def test_a_resumed_run_continues_both_tracked_runs(tmp_path, capfd):
    proc = train_main([*TINY, *ONE_WORKER, *tracked(tmp_path), "algo.total_steps=512",
                       "algo.target_return=null", "log.run_name=r"], tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "r"
    ids = {key: (run / f"{key}.id").read_text() for key in ("wandb", "mlflow")}
    resumed = resume_main(run, ["algo.total_steps=1024"], capfd)
    assert resumed.returncode == 0, resumed.stderr
    assert ids == {key: (run / f"{key}.id").read_text() for key in ("wandb", "mlflow")}
    client = mlflow_client(f"sqlite:///{tmp_path}/mlflow.db")
    steps = {m.step for m in client.get_metric_history(ids["mlflow"].strip(),
                                                       "loss/policy_loss")}
    assert min(steps) <= 512 < max(steps) == 1024
    assert len(client.search_runs([client.get_run(ids["mlflow"].strip())
                                   .info.experiment_id])) == 1
    starts = wandb_records(run)["run"]
    assert [r.run_id for r in starts] == [ids["wandb"].strip()] * 2


def test_an_unreachable_tracking_server_never_stops_the_run(tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    proc = train_main([*TINY, *ONE_WORKER, "algo.total_steps=1024", "algo.target_return=null",
                       "log.mlflow.enabled=true", "log.mlflow.tracking_uri=http://127.0.0.1:9",
                       "log.run_name=r"], tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    assert last_json(proc.stdout)["global_step"] == 1024
    assert (tmp_path / "r" / "model.pt").is_file() and episodes(tmp_path / "r")
    assert proc.stderr.count("fastrl: MLflow failed (") == 1, proc.stderr
    assert "the run goes on and logs no more to MLflow" in proc.stderr
