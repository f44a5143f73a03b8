"""Stop and resume through real processes: the global step, the TensorBoard run and the
learning curve continue; stop-then-resume is bit-identical to an uninterrupted run; a
checkpoint that does not fit the config, or is corrupt, is refused or skipped clearly."""

from __future__ import annotations

import pytest
from helpers import (
    ONE_WORKER,
    TINY,
    interrupted_run,
    last_json,
    resume_main,
    run_dir_of,
    same_weights,
    sigterm_when,
    tb,
    train_main,
    wait_training,
)

from fastrl.checkpoint import latest_valid

pytestmark = pytest.mark.timeout(300)


@pytest.mark.slow  # trains to a bar: an evaluation return of 200
def test_sigterm_then_resume_continues_the_learning_curve(launch, tmp_path, capfd):
    args = ["algo.target_return=null", "algo.total_steps=90112", "log.eval_every_steps=8192",
            "log.eval_episodes=10", "seed=1"]
    proc = launch(args, tiny=False)
    wait_training(proc, tmp_path)
    run = run_dir_of(tmp_path)
    sigterm_when(proc, lambda: any(v >= 200 for _, v in tb(run, "eval/return_mean")))
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    stopped = last_json(out)
    assert stopped["stopped_by_signal"] and stopped["global_step"] < 90112
    ckpt, _ = latest_valid(run)
    assert ckpt.global_step == stopped["global_step"]
    before = tb(run, "eval/return_mean")

    # Only as far as the next evaluation: the rest of the 90112 steps would show nothing new.
    end = (ckpt.global_step // 8192 + 1) * 8192
    resumed = resume_main(run, [f"algo.total_steps={end}"], capfd)
    assert resumed.returncode == 0, resumed.stderr
    assert last_json(resumed.stdout)["global_step"] == end
    steps = [s for s, _ in tb(run, "loss/policy_loss")]
    assert steps == sorted(set(steps)), "a step was logged twice"
    assert ckpt.global_step + 512 in steps  # the first update after resume: one batch later
    after = [(s, v) for s, v in tb(run, "eval/return_mean") if s > ckpt.global_step]
    assert after, "no evaluation after resume"
    # A fresh policy returns ~10-40 on CartPole; the resumed one starts where it stopped.
    assert after[0][1] >= 0.5 * max(v for _, v in before[-2:]), (before, after)


@pytest.mark.parametrize("workers, overrides", [
    pytest.param(1, (), marks=pytest.mark.slow), (2, ()),
    # a recurrent policy: the workers' per-env states are parked and restored too
    pytest.param(2, ("algo.core=gru", "algo.core_size=8"), id="2-gru"),
    # a multi-agent env whose agents come and go: each agent's episode (and state) too
    pytest.param(2, ("env.fn=scripted_envs:Relay", "infra.envs_per_worker=6",
                     "algo.core=gru", "algo.core_size=8"), id="2-multi-agent-gru"),
    # self-play: the pool of snapshots is checkpointed, and the opponents drawn again
    pytest.param(2, ("env.id=fastrl/Duel-v0", "selfplay.enabled=true",
                     "selfplay.snapshot_every=2", "selfplay.pool_size=3",
                     "selfplay.latest_prob=0.2"), id="2-selfplay"),
    # a population: every member's optimizer, random streams and rows, computed at once,
    # and PBT's rounds, lineage and the settings it left
    pytest.param(2, ("population.size=2", "population.vary={algo.lr: [0.001, 0.002]}",
                     "population.pbt.every_steps=128"), id="2-population-pbt"),
])
def test_stop_and_resume_gives_bit_identical_weights(workers, overrides, launch, tmp_path,
                                                     straight_run, capfd):
    # Fixed seed, max_policy_lag=0: "train to S" equals "train, SIGTERM at a random moment,
    # --resume, train to S" parameter for parameter (CPU, learner_threads=1).
    straight = straight_run(workers, *overrides)
    run, stop_step = interrupted_run(launch, tmp_path, f"infra.num_workers={workers}",
                                     *overrides)
    resumed = resume_main(run, [], capfd)
    assert resumed.returncode == 0, resumed.stderr
    assert f"at global step {stop_step:,}" in resumed.stderr
    assert same_weights(straight, run), "resumed weights differ"


def test_resume_refuses_a_different_env_or_network_and_skips_corrupt_checkpoints(tmp_path,
                                                                                  capfd):
    proc = train_main([*TINY, *ONE_WORKER, "algo.total_steps=1024",
                       "log.checkpoint_every_steps=256",
                       "log.run_name=r"], tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "r"

    def resume(*overrides):
        return train_main(["--resume", str(run), *overrides], tmp_path, capfd)

    bad = resume("env.id=Acrobot-v1")
    assert bad.returncode == 2 and "it trained env.id='CartPole-v1'" in bad.stderr
    bad = resume("algo.hidden_sizes=[32]")
    assert bad.returncode == 2 and "algo.hidden_sizes must stay" in bad.stderr
    assert "Traceback" not in bad.stderr

    newest, _ = latest_valid(run)
    with (newest.path / "learner.pt").open("r+b") as f:
        f.truncate(100)
    # an infra change too: the saved (unstamped) slots and worker states are set aside,
    # the workers start fresh, and CRC checking of every new slot passes
    ok = resume("algo.total_steps=1280", "infra.check_slots=true")
    assert ok.returncode == 0, ok.stderr
    assert "learner.pt has 100 bytes" in ok.stderr and "falling back to" in ok.stderr
    assert "config changes: algo.total_steps: 1024 -> 1280; infra.check_slots: False -> " \
        "True" in ok.stderr
    assert "unread slots and its workers' episodes do not fit this run's rings " \
        "(check_slots: False -> True): the workers start fresh episodes" in ok.stderr
    assert last_json(ok.stdout)["global_step"] == 1280
    assert "algo.total_steps: 1024 -> 1280" in (run / "resume.log").read_text()
