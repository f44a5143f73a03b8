"""Deterministic asynchrony (infra.deterministic, fastrl.plan.SlotSchedule): two runs of one
seed train on the same data in every data mode, however differently their envs' steps are
timed, and so end with bit-identical weights and episode logs, through a stop and a resume
too, and a fork of a periodic checkpoint (its workers parked for it); the schedule's keys
never run ahead of the update that takes a slot, and the weights kept, or published when a
run resumes, cover every key a worker may still need."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
import torch
from helpers import (
    STRAIGHT,
    TINY,
    last_json,
    resume_main,
    same_weights,
    sigterm_when,
    train_main,
)

from fastrl import Trainer
from fastrl.algos.base import DataMode
from fastrl.checkpoint import latest_valid
from fastrl.config import ConfigError, load_config
from fastrl.plan import SlotSchedule, slot_schedule

ROOT = Path(__file__).resolve().parents[2]
QUIET = ["log.tensorboard=false", "log.console=false", "algo.target_return=null",
         "log.eval_every_steps=1000000"]
APPO = ["algo.name=appo", "infra.max_policy_lag=null", "algo.gae_lambda=0.95"]
RUNS = {  # a few thousand steps: many updates, and orderings that timing would change
    "ppo-lag1": ("configs/cartpole_ppo.yaml", ["algo.total_steps=8000"],
                 "scripted_envs:JitterCartPole-v0"),
    "appo": ("configs/cartpole_ppo.yaml", [*APPO, "algo.total_steps=8000"],
             "scripted_envs:JitterCartPole-v0"),
    "dqn": ("configs/cartpole_dqn.yaml", ["algo.total_steps=4000",
                                          "algo.replay.learning_starts=1000"],
            "scripted_envs:JitterCartPole-v0"),
    "sac": ("configs/pendulum_sac.yaml", ["algo.total_steps=1500",
                                          "algo.replay.learning_starts=500",
                                          "algo.replay.batch_size=64"],
            "scripted_envs:JitterPendulum-v0"),
}


def trained(config: str, overrides: list[str], run_dir: Path) -> tuple[str, list[tuple]]:
    """The SHA-256 of the saved model and the (step, return, length) of every episode."""
    cfg = load_config(ROOT / config, overrides + QUIET + [f"log.run_dir={run_dir}"])
    assert slot_schedule(cfg) is not None, "the run would not be deterministic"
    return outcome(Trainer(cfg).fit().run_dir)


def outcome(run_dir: Path | str) -> tuple[str, list[tuple]]:
    """A finished run's SHA-256 of its saved model and (step, return, length) of every
    episode."""
    model = torch.load(Path(run_dir) / "model.pt", weights_only=True)["model"]
    digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in model.values()))
    with (Path(run_dir) / "episodes.csv").open() as f:
        episodes = [(r["step"], r["return"], r["length"]) for r in csv.DictReader(f)]
    return digest.hexdigest(), episodes


@pytest.fixture(scope="module")
def first_runs(tmp_path_factory):
    """``first_runs(name)``: the run folder and :func:`trained` outcome of ``RUNS[name]``,
    made on first use (with a periodic checkpoint half way), shared after that."""
    made: dict[str, tuple[Path, tuple]] = {}

    def get(name: str) -> tuple[Path, tuple]:
        if name not in made:
            config, overrides, _ = RUNS[name]
            total = next(int(o.split("=")[1]) for o in overrides
                         if o.startswith("algo.total_steps="))
            run_dir = tmp_path_factory.mktemp(name)
            made[name] = run_dir / "a", trained(
                config, [*overrides, f"log.checkpoint_every_steps={total // 2}",
                         "log.run_name=a"], run_dir)
        return made[name]

    return get


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", list(RUNS))
def test_two_runs_of_one_seed_are_bit_identical(name, first_runs, tmp_path, no_shm_residue):
    config, overrides, jittery = RUNS[name]
    _, first = first_runs(name)
    # the same envs, each step late by a random fraction of a millisecond
    second = trained(config, overrides + [f"env.id={jittery}"], tmp_path / "b")
    assert first[1], "no episode ended"
    assert first == second


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["appo", "dqn", "sac"])
def test_a_fork_of_a_periodic_checkpoint_trains_what_the_run_did(name, first_runs, tmp_path,
                                                                 no_shm_residue):
    # The workers parked as they started their first slots after the checkpoint (ASYNC:
    # whole updates; REPLAY: one slot at a time), so the fork collects the very same data.
    run, first = first_runs(name)
    manifests = {p: json.loads((p / "manifest.json").read_text())
                 for p in (run / "checkpoints").iterdir()}
    periodic = [p for p, manifest in manifests.items() if not manifest["final"]]
    assert len(periodic) == 1 and manifests[periodic[0]]["worker_states"] == [0, 1]
    fork = Trainer.resume(periodic[0], fork=tmp_path / "fork").fit()
    assert outcome(fork.run_dir) == first


@pytest.mark.timeout(300)
def test_appo_stop_and_resume_is_bit_identical_to_a_straight_run(launch, tmp_path, capfd):
    straight = train_main([*TINY, *APPO, *STRAIGHT, "log.run_name=straight"], tmp_path, capfd)
    assert straight.returncode == 0, straight.stderr
    interrupted = launch([*APPO, *STRAIGHT, "log.run_name=interrupted"])
    run = tmp_path / "interrupted"
    sigterm_when(interrupted, lambda: latest_valid(run)[0] is not None)
    out, err = interrupted.communicate(timeout=60)
    assert interrupted.returncode == 0, err
    assert 0 < last_json(out)["global_step"] < int(STRAIGHT[0].split("=")[1])
    resumed = resume_main(run, [], capfd)
    assert resumed.returncode == 0, resumed.stderr
    assert same_weights(tmp_path / "straight", run), "resumed weights differ"


def schedule(data: DataMode, workers=3, batch_slots=2, ring_slots=2, lag=16) -> SlotSchedule:
    return SlotSchedule(data, workers, batch_slots, ring_slots, lag)


@pytest.mark.parametrize("s", [schedule(DataMode.ASYNC), schedule(DataMode.ASYNC, lag=1),
                               schedule(DataMode.ASYNC, 2, 4, 3, 0),
                               schedule(DataMode.SYNC, 3, 3, 2, 1)])
def test_a_slot_s_key_lags_its_update_by_less_than_the_weights_kept(s):
    for seq in range(40):
        for worker in range(s.workers):
            g = seq * s.workers + worker
            update = g // s.batch_slots
            key = s.weights_key(worker, seq)
            # published before the update that takes the slot (no wait for itself), kept
            # until then, and within the lag bound
            assert 0 <= update - key < s.banks
            assert update - key <= s.lag


def test_a_replay_slot_s_weights_are_published_as_the_slot_it_refills_is_taken():
    s = schedule(DataMode.REPLAY)
    assert s.banks == s.delay + 1 == 7
    assert [s.weights_key(w, 2) for w in range(3)] == [6, 7, 8]  # slots 6..8, by number


def test_fresh_rings_continue_the_run_wide_order():
    s = schedule(DataMode.ASYNC, workers=3, batch_slots=2)
    next_slot = s.next_slot(version=5, global_step=0, slot_steps=1)  # update 5 takes 10, 11
    starts = [s.first_seq(w, next_slot) for w in range(3)]
    firsts = sorted(seq * 3 + w for w, seq in enumerate(starts))
    assert firsts == [10, 11, 12]  # no slot before 10 exists, none after it is missing


@pytest.mark.parametrize("s", [schedule(DataMode.ASYNC), schedule(DataMode.ASYNC, 2, 4, 3, 0),
                               schedule(DataMode.SYNC, 3, 3, 2, 1),
                               schedule(DataMode.SYNC, 2, 2, 2, 5)])
def test_a_resumed_run_publishes_every_key_its_rings_first_slots_need(s):
    # What OnPolicyFeed.begin publishes at version v: keys v - banks + 1 .. v.
    for version in (0, 3, 40):
        slot = s.next_slot(version, 0, 1)
        for worker in range(s.workers):
            key = s.weights_key(worker, s.first_seq(worker, slot))
            assert max(0, version - s.banks + 1) <= key <= version


def test_deterministic_is_on_by_default_and_refused_where_it_would_keep_too_much():
    cfg = load_config(None, ["algo.name=ppo", "infra.max_policy_lag=1"])
    assert slot_schedule(cfg).banks == 2
    assert slot_schedule(load_config(None, ["infra.deterministic=false"])) is None
    big = ["infra.max_policy_lag=100"]
    assert slot_schedule(load_config(None, big)) is None  # unset: off where too costly
    with pytest.raises(ConfigError, match=r"infra.deterministic=true.* 101 copies"):
        slot_schedule(load_config(None, big + ["infra.deterministic=true"]))
    assert slot_schedule(load_config(None, ["algo.name=none"])) is None
