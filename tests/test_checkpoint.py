"""Checkpoint files (fastrl.checkpoint) without processes: atomic layout, manifest,
verification, fallback, retention, compatibility checks."""

from __future__ import annotations

import json

import pytest
from gymnasium import spaces

from fastrl.checkpoint import (
    CheckpointError,
    check_resumable,
    latest_valid,
    load_for_resume,
    save_checkpoint,
    verify,
)

OBS, ACT = spaces.Box(-1, 1, (4,)), spaces.Discrete(2)
INFO = {"env_id": "CartPole-v1", "observation_space": repr(OBS), "action_space": repr(ACT),
        "param_shapes": {"w": [4, 2]}}


def save(run, step: int, keep: int = 3, payload: bytes = b"x" * 1000):
    """A checkpoint of ``run`` at ``step`` with a learner.pt of ``payload`` and a rings.npz."""
    writers = {"learner.pt": lambda p: p.write_bytes(payload),
               "rings.npz": lambda p: p.write_bytes(b"rings")}
    return save_checkpoint(run, step, writers, INFO, keep)


def test_manifest_records_versions_step_and_checksums(tmp_path):
    path = save(tmp_path, 128)
    manifest = json.loads((path / "manifest.json").read_text())
    assert path.name == "000000-step128" and manifest["global_step"] == 128
    for key in ("fastrl_version", "git_sha", "gymnasium_version", "torch_version", "env_id"):
        assert key in manifest
    assert manifest["files"]["learner.pt"]["bytes"] == 1000
    assert len(manifest["files"]["learner.pt"]["sha256"]) == 64
    assert verify(path).global_step == 128


def test_only_the_newest_k_are_kept_and_temporary_folders_are_ignored(tmp_path):
    for step in (10, 20, 30, 40):
        save(tmp_path, step, keep=2)
    (tmp_path / "checkpoints" / ".tmp-000009-step50-123").mkdir()  # a write cut short
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == [".tmp-000009-step50-123", "000002-step30", "000003-step40"]
    assert latest_valid(tmp_path)[0].global_step == 40


@pytest.mark.parametrize("damage, message", [
    (lambda p: (p / "learner.pt").write_bytes(b"x" * 10), "has 10 bytes"),
    (lambda p: (p / "learner.pt").write_bytes(b"y" * 1000), "does not match its SHA-256"),
    (lambda p: (p / "rings.npz").unlink(), "rings.npz is missing"),
    (lambda p: (p / "manifest.json").unlink(), "no manifest.json"),
    (lambda p: (p / "manifest.json").write_text("{"), "unreadable manifest.json"),
])
def test_damaged_newest_checkpoint_is_detected_and_skipped(tmp_path, damage, message):
    save(tmp_path, 100)
    damage(save(tmp_path, 200))
    ckpt, notes = load_for_resume(tmp_path)
    assert ckpt.global_step == 100
    assert len(notes) == 1 and message in notes[0] and "falling back to 000000-step100" in notes[0]


def test_no_valid_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointError, match="none was written"):
        load_for_resume(tmp_path)
    (save(tmp_path, 5) / "learner.pt").write_bytes(b"")
    with pytest.raises(CheckpointError, match="(?s)no valid checkpoint .*has 0 bytes"):
        load_for_resume(tmp_path)


def test_resume_compatibility_names_what_differs(tmp_path):
    ckpt = verify(save(tmp_path, 1))
    check_resumable(ckpt, "CartPole-v1", OBS, ACT, {"w": [4, 2]})
    with pytest.raises(CheckpointError, match="trained env.id='CartPole-v1'.*'Acrobot-v1'"):
        check_resumable(ckpt, "Acrobot-v1", OBS, ACT, {"w": [4, 2]})
    with pytest.raises(CheckpointError, match=r"observation space Box.*\(4,\).*has Box.*\(6,\)"):
        check_resumable(ckpt, "CartPole-v1", spaces.Box(-1, 1, (6,)), ACT, {"w": [4, 2]})
    with pytest.raises(CheckpointError, match=r"w of shape \[4, 2\].*\[4, 3\]"):
        check_resumable(ckpt, "CartPole-v1", OBS, ACT, {"w": [4, 3]})


def test_resume_refuses_another_algorithm_or_a_replay_buffer_of_another_shape(tmp_path):
    replay = {"capacity": 1000, "n_step": 3, "gamma": 0.99, "prioritized": True, "alpha": 0.6,
              "num_envs": 8}
    writers = {"learner.pt": lambda p: p.write_bytes(b"x")}
    ckpt = verify(save_checkpoint(tmp_path, 1, writers, {**INFO, "algo": "dqn",
                                                         "replay": replay}, 3))
    check_resumable(ckpt, "CartPole-v1", OBS, ACT, {"w": [4, 2]}, "dqn", dict(replay))
    with pytest.raises(CheckpointError, match="trained algo.name=dqn.*algo.name=ppo"):
        check_resumable(ckpt, "CartPole-v1", OBS, ACT, {"w": [4, 2]}, "ppo", None)
    with pytest.raises(CheckpointError, match="replay buffer does not fit.*n_step=3 -> 1"):
        check_resumable(ckpt, "CartPole-v1", OBS, ACT, {"w": [4, 2]}, "dqn",
                        {**replay, "n_step": 1})
