"""Checkpoint files (fastrl.checkpoint) without processes: atomic layout, manifest,
verification, fallback, retention, compatibility checks."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from gymnasium import spaces

from fastrl.checkpoint import (
    CheckpointError,
    describe_latest,
    find_checkpoint,
    latest_valid,
    load_for_resume,
    remove_stale_temps,
    save_checkpoint,
    set_aside_newer,
    verify,
)
from fastrl.core.files import DiskFull
from fastrl.resume import check_resumable

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


def dead_pid() -> int:
    """A pid no process has: above the kernel's largest."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_only_the_newest_k_are_kept_and_temporary_folders_are_ignored(tmp_path):
    for step in (10, 20, 30, 40):
        save(tmp_path, step, keep=2)
    # a write in progress in a live process (this test's parent)
    (tmp_path / "checkpoints" / f".tmp-000009-step50-{os.getppid()}").mkdir()
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == [f".tmp-000009-step50-{os.getppid()}", "000002-step30", "000003-step40"]
    assert latest_valid(tmp_path)[0].global_step == 40


def test_temporary_folders_of_dead_writers_are_removed_by_the_next_checkpoint(tmp_path):
    save(tmp_path, 10)
    root = tmp_path / "checkpoints"
    dead = root / f".tmp-000001-step20-{dead_pid()}"  # a learner killed mid-write
    (dead / "learner.pt").parent.mkdir()
    (dead / "learner.pt").write_bytes(b"half")
    live = root / f".tmp-000001-step20-{os.getppid()}"  # another writer, still alive
    live.mkdir()
    save(tmp_path, 30)
    assert not dead.exists() and live.is_dir()
    assert remove_stale_temps(tmp_path) == []  # (what a run's start calls)
    assert sorted(p.name for p in root.iterdir()) == [
        f".tmp-000001-step20-{os.getppid()}", "000000-step10", "000001-step30"]


def test_a_checkpoint_that_fails_on_a_full_disk_leaves_nothing_and_names_the_file(tmp_path):
    first = save(tmp_path, 10)

    def no_room(path):
        path.write_bytes(b"x" * 100)
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(DiskFull) as caught:
        save_checkpoint(tmp_path, 20, {"learner.pt": lambda p: p.write_bytes(b"ok"),
                                       "rings.npz": no_room}, INFO, 3)
    assert caught.value.path == tmp_path / "checkpoints" / "000001-step20" / "rings.npz"
    assert str(caught.value).startswith(f"no space left on device writing {caught.value.path}")
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == [first.name]
    assert describe_latest(tmp_path, "free some space") == (
        f"The last checkpoint, {first} (global step 10), is intact; free some space, then "
        f"resume with: python -m fastrl.train --resume {tmp_path}")


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


def test_a_resume_sets_corrupt_checkpoints_aside_so_retention_keeps_intact_ones(tmp_path):
    for step in (100, 200, 300):
        save(tmp_path, step)
    (tmp_path / "checkpoints" / "000002-step300" / "learner.pt").write_bytes(b"y" * 1000)
    # evaluating the run says what it skipped, and moves nothing
    ckpt, notes = find_checkpoint(tmp_path)
    assert ckpt.global_step == 200 and "000002-step300" in notes[0]
    assert (tmp_path / "checkpoints" / "000002-step300").is_dir()
    ckpt, notes = load_for_resume(tmp_path)
    assert ckpt.global_step == 200 and "falling back to 000001-step200" in notes[0]
    assert set_aside_newer(tmp_path, ckpt) == ["set 000002-step300 aside as "
                                               "corrupt-000002-step300"]
    # the resumed run checkpoints at the step the corrupt one had: the three newest intact
    # ones are kept, the corrupt one is not counted (nor deleted: it is evidence)
    save(tmp_path, 300)
    save(tmp_path, 400)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["000001-step200", "000002-step300", "000003-step400",
                     "corrupt-000002-step300"]
    assert all(verify(tmp_path / "checkpoints" / n) for n in names[:3])


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
