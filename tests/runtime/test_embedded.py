"""The embedded API on the local runtime: Trainer arguments, callbacks, close(), stage timing,
checkpoints evaluated in their own process. (The serial runtime: test_serial.py.)"""

from __future__ import annotations

import functools
import os
import threading

import pytest
from helpers import ENDLESS, ONE_WORKER, make_cartpole, tb
from helpers import tiny_config as config

from examples import custom_env
from fastrl import Callback, Trainer, load_config
from fastrl.core.timing import JIT, STAGES
from fastrl.telemetry.metrics import metric_documented


class Recorder(Callback):
    """Records every hook call; returns a custom scalar from on_update."""

    def __init__(self) -> None:
        self.updates: list[tuple[int, dict]] = []
        self.evals: list[tuple[int, dict, str]] = []
        self.checkpoints: list[tuple[int, str]] = []

    def on_update(self, step, metrics):
        self.updates.append((step, dict(metrics)))
        return {"updates_seen": len(self.updates)}

    def on_eval(self, step, result, source):
        self.evals.append((step, result, source))

    def on_checkpoint(self, step, path):
        self.checkpoints.append((step, path))


def test_callbacks_metrics_schema_custom_scalars_and_timing(tmp_path, no_shm_residue, capsys):
    rec = Recorder()
    cfg = config(tmp_path, "algo.total_steps=2048", "log.checkpoint_every_steps=1024",
                 "log.eval_every_steps=1024", "log.console=true", "log.metrics_every_s=0")
    result = Trainer(cfg, env_fn=make_cartpole, callbacks=[rec]).fit()
    assert result.global_step == 2048
    # every update reached the callback (a report per update), with documented metrics only
    assert [s for s, _ in rec.updates] == list(range(64, 2049, 64))  # 2 workers x 2 envs x 16 steps
    undocumented = {k for _, m in rec.updates for k in m if not metric_documented(k)}
    assert not undocumented, f"missing from fastrl.telemetry.metrics.METRICS: {undocumented}"
    assert result.metrics == rec.updates[-1][1]
    # (the periodic one at 1024 runs beside training: it may not end before the last one)
    assert [(s, src) for s, _, src in rec.evals] in ([(2048, "learner")],
                                                     [(1024, "learner"), (2048, "learner")])
    assert rec.evals[-1][1] == result.eval
    assert [s for s, _ in rec.checkpoints] == [1024, 2048]
    assert rec.checkpoints[-1][1] == result.checkpoint
    assert os.path.isdir(result.checkpoint)
    # the callback's own scalar went to TensorBoard at each update's step
    assert tb(result.run_dir, "custom/updates_seen")[-1] == (2048, 32.0)
    # the env factory was recorded as an import string: the run dir alone rebuilds the env
    assert load_config(result.run_dir / "config.yaml").env.fn == "helpers:make_cartpole"
    # time per stage of every process, in the result, TensorBoard and the end-of-run table
    assert set(result.timing) == {"learner", "worker 0", "worker 1"}
    learner = result.timing["learner"]
    assert set(learner) == {*STAGES, JIT}  # (jit: seconds compiling, inside the stages)
    assert learner["train"] > 0 and learner["checkpoint"] > 0 and learner["evaluate"] > 0
    assert sum(learner[s] for s in STAGES) < result.wall_s and learner[JIT] >= 0
    for i in range(2):
        worker = result.timing[f"worker {i}"]
        assert worker["rollout"] > 0 and sum(worker[s] for s in STAGES if s in worker) < \
            result.wall_s and JIT in worker
    assert tb(result.run_dir, "timing/learner/train_s")[-1][1] > 0
    assert tb(result.run_dir, "timing/workers/rollout_s")[-1][1] > 0
    err = capsys.readouterr().err
    assert "time per stage" in err and "workers (mean of 2)" in err and "(numba jit)" in err


class Boom(Callback):
    """Fails from step 512 on."""

    def on_update(self, step, metrics):
        if step >= 512:
            raise RuntimeError("callback failed on purpose")


def test_metrics_are_reported_once_per_interval_and_at_the_end(tmp_path, no_shm_residue):
    rec = Recorder()
    cfg = config(tmp_path, "algo.total_steps=1024", "log.metrics_every_s=1000")
    Trainer(cfg, env_fn=make_cartpole, callbacks=[rec]).fit()
    # the first update opens the interval; the last one is always reported
    assert [s for s, _ in rec.updates] == [64, 1024]
    assert rec.updates[-1][1]["policy_version"] == 16  # every update counted, 15 unreported

def test_a_failing_callback_stops_the_run_and_fit_reraises(tmp_path, no_shm_residue):
    cfg = config(tmp_path, *ENDLESS, *ONE_WORKER)
    with pytest.raises(RuntimeError, match="on purpose"):
        Trainer(cfg, callbacks=[Boom()]).fit()
    (run_dir,) = tmp_path.iterdir()
    assert list((run_dir / "checkpoints").iterdir()), "the graceful stop writes a checkpoint"


def test_close_stops_a_fit_running_in_another_thread(tmp_path, no_shm_residue):
    first_update = threading.Event()

    class Signal(Callback):
        def on_update(self, step, metrics):
            first_update.set()

    results = []
    with Trainer(config(tmp_path, *ENDLESS, *ONE_WORKER), callbacks=[Signal()]) as trainer:
        thread = threading.Thread(target=lambda: results.append(trainer.fit()))
        thread.start()
        assert first_update.wait(120), "no update within 120 s"
    # leaving the with block called close(): the run stopped gracefully and cleaned up
    thread.join(5)
    assert not thread.is_alive()
    (result,) = results
    assert result.stopped and not result.stopped_by_signal and result.checkpoint is not None
    with pytest.raises(RuntimeError, match="closed"):
        trainer.fit()


def test_close_from_a_callback_stops_the_run_without_waiting_for_itself(tmp_path,
                                                                         no_shm_residue):
    class CloseAt512(Callback):
        def on_update(self, step, metrics):
            if step >= 512:
                trainer.close()

    trainer = Trainer(config(tmp_path, *ENDLESS, *ONE_WORKER), callbacks=[CloseAt512()])
    result = trainer.fit()
    assert result.stopped and 512 <= result.global_step < 5000


def test_a_callback_returning_no_dict_stops_the_run(tmp_path, no_shm_residue):
    class Wrong(Callback):
        def on_update(self, step, metrics):
            return 1.0

    with pytest.raises(TypeError, match="Wrong.on_update returned 1.0: a hook returns None "
                                        "or a dict of scalars"):
        Trainer(config(tmp_path, *ENDLESS, *ONE_WORKER), callbacks=[Wrong()]).fit()


def test_checkpoints_are_evaluated_in_their_own_process(tmp_path, no_shm_residue):
    # The env factory is a partial: the config cannot name it, the eval process gets it
    # from the run (gymnasium.make('GoalReach') would fail).
    rec = Recorder()
    cfg = config(tmp_path, "env.id=GoalReach", "algo.total_steps=1024",
                 "log.checkpoint_every_steps=512", "log.eval_on_checkpoint=true",
                 "log.keep_checkpoints=5")
    result = Trainer(cfg, env_fn=functools.partial(custom_env.make_env),
                     callbacks=[rec]).fit()
    assert load_config(result.run_dir / "config.yaml").env.fn == ""
    written = [path for _, path in rec.checkpoints]
    assert len(written) == 2  # one while the learner trains, the last after it finished
    # every checkpoint was evaluated (the last after the learner finished), in order
    assert sorted(result.checkpoint_evals) == [os.path.basename(p) for p in written]
    assert [(s, src) for s, _, src in rec.evals if src != "learner"] == \
        [(s, p) for s, p in rec.checkpoints]
    for path in written:
        assert (result.run_dir / "evals" / f"{os.path.basename(path)}.json").is_file()
    # the final checkpoint holds the final weights: its evaluation is the learner's last one
    final = result.checkpoint_evals[os.path.basename(result.checkpoint)]
    assert final["return_mean"] == result.eval["return_mean"]
    assert [s for s, _ in tb(result.run_dir, "eval_ckpt/return_mean")] == [512, 1024]
