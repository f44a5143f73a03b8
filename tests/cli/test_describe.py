"""python -m fastrl.describe: the architecture report agrees with the plan the supervisor would
use, its text and JSON agree, bad cross-layer configs are refused with their keys, and
python -m fastrl.train prints the short form at start-up."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import CONFIGS, TINY

from fastrl.config import ConfigError, load_config
from fastrl.describe import WIDTH, describe, human_bytes, main, render, summary
from fastrl.learner.offpolicy import make_buffer
from fastrl.memory.control import RunControl
from fastrl.plan import plan_run

SHIPPED = sorted(CONFIGS.glob("*.yaml"))
DQN = ["algo.name=dqn", "algo.replay.capacity=1000", "algo.replay.batch_size=32",
       "algo.replay.learning_starts=64", "algo.total_steps=4096"]


def report_of(overrides: list[str], path: str | None = None) -> tuple[dict, object]:
    """The describe report of a planned config, and the plan."""
    plan = plan_run(load_config(path, overrides))
    return describe(plan), plan


@pytest.mark.parametrize("shape", [["infra.num_workers=3", "infra.envs_per_worker=5",
                                    "infra.rollout_len=7", "infra.ring_slots=3",
                                    "algo.num_minibatches=5"],
                                   TINY])
def test_numbers_are_the_plans(shape):
    report, plan = report_of(shape)
    cfg, infra = plan.cfg, plan.cfg.infra
    buffer, shm = report["buffer"], report["shared_memory"]
    assert buffer["slot_bytes"] == plan.layout.nbytes
    assert buffer["ring_bytes"] == plan.ring_bytes
    assert buffer["rings"] == infra.num_workers and buffer["ring_slots"] == infra.ring_slots
    assert shm["total_bytes"] == \
        infra.num_workers * plan.ring_bytes + plan.weights_bytes + RunControl.nbytes()
    assert shm["total_bytes"] == sum(plan.shm_bytes().values())
    assert shm["segments"] == infra.num_workers + 1  # a ring per worker and the weights
    assert buffer["mode"] == "on-policy"
    assert buffer["batch_size"] == infra.num_workers * infra.envs_per_worker * infra.rollout_len
    assert report["rollout"]["total_envs"] == infra.num_workers * infra.envs_per_worker
    assert report["weights"] == {"transport": "shared-memory seqlock",
                                 "num_params": plan.num_params, "bytes": plan.weights_bytes,
                                 "selfplay": None}
    assert report["learner"]["device"] == plan.device
    assert report["learner"]["policy"].endswith(type(plan.policy()).__name__)
    assert report["run"]["processes"]["total"] == infra.num_workers + 2
    assert report["logging"]["tensorboard"] == f"{cfg.log.run_dir}/<new run>/tb"


def test_json_and_text_say_the_same(capsys):
    args = [*DQN, "algo.replay.prioritized=true", "infra.num_workers=3"]
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == describe(plan_run(load_config(None, args)))
    assert main(args) == 0
    text = capsys.readouterr().out
    assert text.strip() == render(report)
    buffer, replay = report["buffer"], report["buffer"]["replay"]
    for size in (buffer["slot_bytes"], buffer["ring_bytes"], buffer["rings_bytes"],
                 replay["bytes"], report["weights"]["bytes"],
                 report["shared_memory"]["total_bytes"]):
        assert human_bytes(size) in text
    assert "3 worker processes" in text and "PrioritizedReplayBuffer of 1,000" in text
    assert f"{report['weights']['num_params']:,} float32 params" in text
    short = summary(report).splitlines()
    assert len(short) <= 6
    assert human_bytes(report["shared_memory"]["total_bytes"]) in short[-1]
    assert "5 processes (supervisor, learner, 3 workers)" in short[0]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_config_is_drawn_inside_its_boxes(path):
    report, _ = report_of([], str(path))
    lines = render(report).splitlines()
    boxed = [line for line in lines if line[:1] in "┌│└"]
    assert len(boxed) > 20 and all(len(line) == WIDTH for line in boxed), \
        [line for line in boxed if len(line) != WIDTH]
    assert sum(line.startswith("┌") for line in lines) == 4  # the four layers


def test_serial_runtime_is_one_process_without_segments():
    report, plan = report_of([*TINY, "infra.runtime=serial"])
    assert report["run"]["processes"]["total"] == 1
    assert report["rollout"]["processes"] == 0 and report["learner"]["processes"] == 0
    assert report["shared_memory"] == {"segments": 0, "by_kind": {}, "total_bytes": 0}
    assert report["buffer"]["memory"] == "process"
    assert report["buffer"]["ring_bytes"] == plan.ring_bytes  # the rings still exist
    text = render(report)
    assert "everything runs in the calling process" in text
    assert "no shared-memory segments" in text and "in shared memory" not in text
    assert "shared memory: none" in summary(report)


@pytest.mark.parametrize("env,prioritized,n_step", [("CartPole-v1", False, 1),
                                                    ("CartPole-v1", True, 3),
                                                    ("Pendulum-v1", True, 1)])
def test_off_policy_shows_the_replay_buffer_and_its_bytes(env, prioritized, n_step):
    algo = "dqn" if env == "CartPole-v1" else "sac"
    overrides = [*DQN, f"algo.name={algo}", f"env.id={env}", f"algo.replay.n_step={n_step}",
                 f"algo.replay.prioritized={str(prioritized).lower()}"]
    report, plan = report_of(overrides)
    replay = report["buffer"]["replay"]
    # the buffer the learner would make: its class, and every array it allocates
    buffer = make_buffer(plan.cfg, plan.obs_space, plan.act_space)
    arrays = [*buffer.storage.values(), *buffer.tail.values()]
    if prioritized:
        arrays.append(buffer._tree)
    assert replay["class"] == type(buffer).__name__
    assert replay["capacity"] == buffer.capacity == 1000
    assert replay["bytes"] == sum(a.nbytes for a in arrays)
    assert report["buffer"]["mode"] == "off-policy" and report["buffer"]["batch_size"] == 32
    assert f"{type(buffer).__name__} of 1,000 ({human_bytes(replay['bytes'])})" in \
        summary(report)


def test_algo_none_has_no_batch_checkpoints_or_evaluation():
    report, _ = report_of(["algo.name=none"])
    assert report["buffer"]["mode"] == "drain" and report["buffer"]["batch_size"] is None
    assert report["logging"]["checkpoints"] is None and report["logging"]["evaluation"] is None
    assert "releases every slot unread" in render(report)


def test_the_envpool_backend_is_named_with_its_task():
    report, _ = report_of(["env.id=ALE/Pong-v5", "env.backend=envpool",
                           "infra.envs_per_worker=3"])
    assert report["env"]["source"] == "envpool"
    assert "envpool.make_gymnasium('Pong-v5', num_envs=3" in " ".join(render(report).split())


def test_a_resumed_run_names_its_folder():
    plan = plan_run(load_config(None, ["log.tensorboard=true"]))
    assert describe(plan, run_dir="runs/old")["logging"]["tensorboard"] == "runs/old/tb"


def test_human_bytes():
    assert human_bytes(1023) == "1023 B"
    assert human_bytes(1024) == "1.0 KiB"
    assert human_bytes(3 * 2**20 + 2**19) == "3.5 MiB"
    assert human_bytes(5 * 2**30) == "5.0 GiB"


# --- configs that leave a layer unspecified or inconsistent --------------------------------
REJECTED = {
    "off-policy run ends before learning starts": (
        ["algo.name=dqn", "algo.total_steps=5000"],
        ["algo.total_steps=5000", "learning_starts=10000", "before its first update"]),
    "off-policy run ends before one batch": (
        [*DQN, "algo.replay.learning_starts=0", "algo.replay.batch_size=512",
         "algo.total_steps=512"],
        ["algo.total_steps=512", "batch_size=512"]),
    "policy lag bound off-policy": (
        ["algo.name=sac", "env.id=Pendulum-v1", "infra.max_policy_lag=2"],
        ["infra.max_policy_lag=2", "appo or ppo", "max_ahead_steps"]),
    "policy lag bound without training": (
        ["algo.name=none", "infra.max_policy_lag=1"], ["infra.max_policy_lag=1"]),
    "checkpoint evaluation without checkpoints": (
        ["algo.name=none", "log.eval_on_checkpoint=true"],
        ["log.eval_on_checkpoint=true", "algo.name=none"]),
    "pinned workers in one process": (
        ["infra.runtime=serial", "infra.pin_workers=true"],
        ["infra.pin_workers=true", "infra.runtime=local"]),
    "replay smaller than a batch": (
        ["algo.name=dqn", "algo.replay.capacity=100"], ["algo.replay.capacity=100"]),
}


@pytest.mark.parametrize("overrides,words", REJECTED.values(), ids=REJECTED.keys())
def test_inconsistent_layers_exit_2_naming_the_keys(overrides, words, capsys):
    assert main(overrides) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("fastrl.describe: error: config key")
    for word in words:
        assert word in captured.err


@pytest.mark.parametrize("overrides", [
    ["algo.name=dqn", "algo.total_steps=10001"],  # one step past learning_starts
    ["infra.max_policy_lag=2"],  # ppo
    ["algo.name=none"], ["infra.runtime=serial"], ["infra.pin_workers=true"],
    ["algo.name=dqn", "log.eval_on_checkpoint=true"],
])
def test_the_nearest_legitimate_configs_pass(overrides):
    load_config(None, overrides)


def test_an_empty_env_id_is_refused(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("env:\n  id: ''\n")
    assert main([str(path)]) == 2
    assert "config key 'env.id' is empty" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="env.id"):
        load_config(path, ["env.fn=scripted_envs:make"])  # a factory still needs a name


def test_cli_module_exit_status_and_error_line():
    proc = subprocess.run([sys.executable, "-m", "fastrl.describe", "algo.name=dqn",
                           "algo.total_steps=100"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("fastrl.describe: error: config key 'algo.total_steps=100'")


def test_train_prints_the_summary_before_the_run(tmp_path, no_shm_residue):
    """The summary comes before fit(): a run whose folder exists already is refused by
    fit() (exit 2, unchanged) after the summary was printed, without training for seconds."""
    (tmp_path / "taken").mkdir()
    args = [*TINY, "log.run_name=taken", f"log.run_dir={tmp_path}"]
    expected = summary(describe(plan_run(load_config(None, args)))).splitlines()
    proc = subprocess.run([sys.executable, "-m", "fastrl.train", *args], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.splitlines()
    assert err[:len(expected)] == expected
    assert f"{tmp_path}/taken/tb" in expected[-1]
    assert "already exists" in err[-1]


@pytest.mark.parametrize("address", [None, "10.0.0.1:6379"])
def test_ray_runtime_shows_actors_and_how_slots_and_weights_travel(address):
    overrides = [*TINY, "infra.runtime=ray", "infra.num_workers=3"]
    report, plan = report_of(overrides + ([f"infra.ray_address={address}"] if address else []))
    processes = report["run"]["processes"]
    assert processes["ray_actors"] == 3 and processes["workers"] == 0
    assert processes["total"] == 2  # supervisor and learner; the actors are Ray's
    assert report["run"]["ray_address"] == address
    assert report["shared_memory"]["segments"] == 4  # the learner's rings and weights stay
    assert "object store" in report["weights"]["transport"]
    text = render(report)
    cluster = f"the Ray cluster at {address}" if address else "a local Ray started for the run"
    assert f"+ 3 worker actors on {cluster}" in text
    assert "3 workers as Ray actors" in text and "Ray's object store" in text
    local, _ = report_of(TINY)
    assert local["run"]["processes"]["ray_actors"] == 0


def test_an_atari_run_shows_its_preprocessing_and_uint8_frame_bytes():
    report, plan = report_of([], str(CONFIGS / "atari_ppo.yaml"))
    text = render(report)
    assert "gymnasium.make('ALE/Pong-v5'); frame skip 4" in text
    assert "84x84 grayscale, 4 stacked" in " ".join(text.split())  # (the box wraps lines)
    obs = next(f for f in plan.layout.fields if f.name == "obs")
    assert obs.dtype == "uint8" and obs.nbytes == 128 * 4 * 4 * 84 * 84  # T x E x frames


def one_line(report: dict) -> str:
    """The rendered report without its box's borders and line breaks (the box wraps lines)."""
    return " ".join(render(report).replace("│", " ").split())


def test_final_observations_are_kept_per_env_only_where_episodes_can_be_cut():
    report, plan = report_of([], str(CONFIGS / "atari_ppo.yaml"))
    infra, kept = plan.cfg.infra, report["buffer"]["final_obs"]
    # ALE's frame limit bounds a game's truncations: one row covers a 128-step slot
    assert kept["max_episode_steps"] == 13_495 and kept["rows_per_env"] == 1
    frames_per_env = infra.rollout_len - 1  # the uint8 4x84x84 frames no longer stored
    assert kept["rings_bytes_saved"] == frames_per_env * 4 * 84 * 84 * \
        infra.envs_per_worker * infra.ring_slots * infra.num_workers
    text = one_line(report)
    assert "final observations: 1 row per env a slot, as episodes are truncated at 13,495" \
        in text and f"{human_bytes(kept['rings_bytes_saved'])} less ring memory" in text
    # an env that may truncate at any step keeps one per step
    report, _ = report_of([*TINY, "env.id=scripted_envs:Count-v0"])
    assert report["buffer"]["final_obs"] == \
        {"rows_per_env": 16, "max_episode_steps": None, "rings_bytes_saved": 0}
    assert "16 per env a slot, one per step" in one_line(report)


def test_a_dict_observation_s_leaves_and_mask_are_shown():
    report, plan = report_of(["env.id=scripted_envs:PickLegal-v0", *TINY])
    leaves = {x["name"]: x for x in report["env"]["observation_leaves"]}
    assert set(leaves) == {"action_mask", "aux.0", "aux.1", "cue", "observation"}
    assert leaves["aux.1"]["bytes"] == 16 and leaves["observation"]["dtype"] == "float32"
    assert report["env"]["action_mask"] == "action_mask"
    text = one_line(report)
    assert f"stored as one {plan.layout.fields[0].shape[-1]} B record a step of 5 leaves" \
        in text
    assert "observation float32(6,) 24 B" in text
    assert "action mask: the observations' 'action_mask'; only legal actions" in text
    plain = describe(plan_run(load_config(None, TINY)))
    assert plain["env"]["observation_leaves"] is None and plain["env"]["action_mask"] is None


@pytest.mark.parametrize("core, floats", [("lstm", 24), ("gru", 12)])
def test_a_recurrent_run_says_so_and_its_slots_hold_the_states(core, floats):
    report, plan = report_of([*TINY, f"algo.core={core}", "algo.core_size=12"])
    assert report["rollout"]["core"] == {"kind": core, "size": 12, "shared": True,
                                         "state_floats": floats}
    state = next(f for f in plan.layout.fields if f.name == "core_state")
    assert state.shape == (plan.cfg.infra.envs_per_worker, floats)
    # the states are not final observations: the rows saved are counted without them
    assert report["buffer"]["final_obs"]["rings_bytes_saved"] == \
        report_of(TINY)[0]["buffer"]["final_obs"]["rings_bytes_saved"]
    article = "an" if core == "lstm" else "a"
    assert f"recurrent: {article} {core.upper()} core of 12 units; each env's state " \
        f"({floats} floats) is kept by its worker" in one_line(report)
    assert report_of(TINY)[0]["rollout"]["core"] is None
    own, _ = report_of([*TINY, f"algo.core={core}", "algo.core_size=12",
                        "algo.shared_core=false"])
    assert own["rollout"]["core"]["state_floats"] == 2 * floats
    assert f"{core.upper()} core of 12 units for the actor and one for the critic; each " \
        f"env's state ({2 * floats} floats)" in one_line(own)


def test_a_multi_agent_run_shows_agents_times_envs_rows():
    report, plan = report_of([*TINY, "env.fn=scripted_envs:Relay", "infra.envs_per_worker=6"])
    assert report["env"]["agents"] == ["runner_0", "runner_1", "chaser_0"]
    assert report["env"]["agent_groups"] == ["runner", "chaser"]
    assert "weight" in {f.name for f in plan.layout.fields}
    # (Relay declares no max_episode_steps: one final observation per step, nothing saved)
    assert report["buffer"]["final_obs"]["rings_bytes_saved"] == 0
    text = one_line(report)
    assert "2 envs x 3 agents = 6 rows each, 12 in total" in text
    assert "agents: runner_0, runner_1, chaser_0 (groups: runner, chaser)" in text
    assert "2 x 2 envs x 3 agents = 6 rows on CPU = 12 rows" in summary(report)
    single, plan = report_of(TINY)
    assert single["env"]["agents"] is None and "weight" not in plan.layout.offsets
    grouped, plan = report_of([*TINY, "env.fn=scripted_envs:Relay", "infra.envs_per_worker=6",
                               "algo.policy_per_group=true"])
    assert "(groups: runner, chaser), one row each, one network per group" in one_line(grouped)
    assert grouped["learner"]["policy"].endswith("GroupedActorCritic")


def test_a_self_play_run_shows_its_pool_in_the_weights_segment():
    report, plan = report_of([*TINY, "env.id=fastrl/Duel-v0", "selfplay.enabled=true",
                              "selfplay.pool_size=4", "selfplay.snapshot_every=5"])
    sp = report["weights"]["selfplay"]
    assert sp["pool_size"] == 4 and sp["pool_banks"] == plan.pool_banks >= 5
    assert report["weights"]["bytes"] == report_of([*TINY, "env.id=fastrl/Duel-v0"])[0][
        "weights"]["bytes"] + sp["pool_bytes"]
    assert "self-play: env g's learner in seat g % 2" in one_line(report)
    assert "evaluations play the env's own baseline" in one_line(report)
    assert report_of(TINY)[0]["weights"]["selfplay"] is None


def test_a_feature_s_part_comes_from_its_row_of_the_table(monkeypatch):
    # A new feature adds one row (its module's part and lines), no function of describe's.
    from fastrl import describe as module

    row = ("learner", "widget", lambda plan: {"teeth": plan.cfg.seed},
           lambda part: [f"widget with {part['teeth']} teeth"])
    monkeypatch.setattr(module, "FEATURE_PARTS", (*module.FEATURE_PARTS, row))
    report, _ = report_of([*TINY, "seed=7"])
    assert report["learner"]["widget"] == {"teeth": 7}
    assert "widget with 7 teeth" in one_line(report)
    quiet = (*module.FEATURE_PARTS[:-1], (*row[:2], lambda plan: None, row[3]))
    monkeypatch.setattr(module, "FEATURE_PARTS", quiet)
    report, _ = report_of(TINY)
    assert report["learner"]["widget"] is None and "widget" not in one_line(report)
