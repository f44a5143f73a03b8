"""Evaluating checkpoints (fastrl.eval.checkpoints, fastrl.eval.cli in-process) of a tiny
finished CartPole PPO run: the numbers are those of a direct ``evaluate`` call, repeat exactly,
compare checkpoints on one suite; its JSON schema; incompatible or corrupt checkpoints and bad
suites are refused in one line. (The command as a process: tests/cli/test_eval_command.py.)"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from helpers import checkpoint_folders as folders

from fastrl.checkpoint import MANIFEST, written_by
from fastrl.envs.source import EnvSource
from fastrl.eval.checkpoints import checkpoint_report, evaluate_checkpoints
from fastrl.eval.cli import main
from fastrl.eval.harness import evaluate, evaluate_episodes
from fastrl.eval.policy import load_policy

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FLAT_KEYS = {"episodes", "return_mean", "return_std", "return_min", "return_max",
             "length_mean", "length_std", "length_min", "length_max"}
CARTPOLE = EnvSource("CartPole-v1")


@pytest.fixture
def run(checkpointed_run):
    """The shared finished run (checkpoints at steps 512, 1024, 1536); read only."""
    return checkpointed_run


def seed_stats(entry: dict) -> dict:
    """The flat statistics of a per-seed entry."""
    return {k: v for k, v in entry.items() if k in FLAT_KEYS}


def test_results_match_a_direct_evaluate_call(run):
    report = evaluate_checkpoints([run], {"num_seeds": 3, "episodes_per_seed": 2})
    (result,) = report["checkpoints"]
    assert result["checkpoint"] == str(folders(run)[-1]) and result["global_step"] == 1536
    policy = load_policy(run).policy
    seeds = [10_000, 10_001, 10_002]  # log.eval_seed of the run's config, 3 seeds
    assert result["summary"] == evaluate(policy, CARTPOLE, seeds, episodes_per_seed=2)
    assert [e["seed"] for e in result["per_seed"]] == seeds
    for entry in result["per_seed"]:
        alone = evaluate_episodes(policy, CARTPOLE, [entry["seed"]], episodes_per_seed=2)
        assert seed_stats(entry) == alone.summary()
        assert entry["returns"] == alone.returns[0].tolist()
        assert entry["lengths"] == alone.lengths[0].tolist()


def test_results_repeat_exactly(run):
    overrides = {"num_seeds": 4, "episodes_per_seed": 2}
    assert evaluate_checkpoints([run], overrides) == evaluate_checkpoints([run], overrides)


def test_json_schema(run, tmp_path, capsys):
    out = tmp_path / "sub" / "eval.json"
    assert main([str(run), "--seeds", "2", "--episodes-per-seed", "2", "--json",
                 "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text())
    assert printed.keys() == {"env_id", "suite", "device", "skipped", "checkpoint",
                              "global_step", "algo", "summary", "per_seed"}
    assert printed["skipped"] == []
    assert printed["env_id"] == "CartPole-v1" and printed["device"] == "cpu"
    assert printed["suite"] == {"first_seed": 10_000, "num_seeds": 2, "episodes_per_seed": 2,
                                "max_steps": 100_000}
    assert printed["checkpoint"] == str(folders(run)[-1]) and printed["algo"] == "ppo"
    assert printed["summary"].keys() == FLAT_KEYS
    assert all(type(v) is float for v in printed["summary"].values())
    assert printed["summary"]["episodes"] == 4.0
    for entry in printed["per_seed"]:
        assert entry.keys() == FLAT_KEYS | {"seed", "returns", "lengths"}
        assert len(entry["returns"]) == len(entry["lengths"]) == 2
        assert entry["return_mean"] == pytest.approx(np.mean(entry["returns"]))


def test_compares_checkpoints_on_one_suite(run, capsys):
    old, new = folders(run)[0], folders(run)[-1]
    assert main([str(old), str(new), "--seeds", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report.keys() == {"env_id", "suite", "device", "skipped", "checkpoints"}
    assert [r["global_step"] for r in report["checkpoints"]] == [512, 1536]
    for path, result in zip((old, new), report["checkpoints"]):
        alone = checkpoint_report(evaluate_checkpoints([path], {"num_seeds": 3}))
        assert alone["suite"] == report["suite"]
        assert result == {key: alone[key] for key in result}
    assert main([str(old), str(new), "--seeds", "3"]) == 0
    table = capsys.readouterr().out
    assert all(s in table for s in (old.name, new.name, "512", "1,536", "return mean"))


def test_refuses_checkpoints_of_another_env(run, tmp_path, capsys):
    other = tmp_path / folders(run)[-1].name
    shutil.copytree(folders(run)[-1], other)
    manifest = json.loads((other / MANIFEST).read_text())
    (other / MANIFEST).write_text(json.dumps({**manifest, "env_id": "Acrobot-v1"}))
    assert main([str(run), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fastrl.eval: error: cannot compare")
    assert "'Acrobot-v1'" in err and "'CartPole-v1'" in err


def test_refuses_a_corrupt_checkpoint_and_a_bad_suite(run, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(folders(run)[-1], broken)
    with (broken / "learner.pt").open("r+b") as f:
        f.truncate(100)
    assert main([str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"fastrl.eval: error: {broken}: learner.pt")
    assert "truncated" in err
    assert main([str(run), "--seeds", "0"]) == 2
    assert "--seeds" in capsys.readouterr().err


def test_a_run_whose_newest_checkpoint_is_corrupt_says_which_one_it_evaluates(
        run, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    newest = folders(copy)[-1]
    size = (newest / "learner.pt").stat().st_size
    with (newest / "learner.pt").open("r+b") as f:
        f.truncate(100)
    assert main([str(copy), "--seeds", "1", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["global_step"] == 1024 and report["checkpoint"] == str(folders(copy)[-2])
    versions = written_by(json.loads((newest / "manifest.json").read_text()))
    assert captured.err == (f"fastrl.eval: skipped {newest}: learner.pt has 100 bytes, the "
                            f"manifest says {size} (truncated?); {versions}; falling back to "
                            f"{folders(copy)[-2].name}\n")
    assert report["skipped"] == [captured.err.removeprefix("fastrl.eval: ").rstrip()]
    assert newest.is_dir()  # evaluating moves nothing
