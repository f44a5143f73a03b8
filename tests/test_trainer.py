"""The Trainer (fastrl.trainer) before a run: what it refuses before anything starts, and
the run directory it claims."""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest
from helpers import tiny_config as config

from fastrl import Trainer
from fastrl.config import ConfigError
from fastrl.trainer import make_run_dir


def test_unpicklable_env_factory_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(ConfigError, match="env_fn=.*cannot be sent to worker processes"):
        Trainer(config(tmp_path), env_fn=lambda: gym.make("CartPole-v1"))
    assert not list(tmp_path.iterdir())


def claim_together(cfg, n: int) -> tuple[list[Path], list[ConfigError]]:
    """``make_run_dir(cfg)`` in ``n`` threads released at once: the run folders made, and
    the errors."""
    start, made, failed = threading.Barrier(n), [], []

    def one():
        start.wait(timeout=30)
        try:
            made.append(make_run_dir(cfg))
        except ConfigError as e:
            failed.append(e)

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return made, failed


def test_runs_started_in_the_same_second_get_folders_of_their_own(tmp_path, monkeypatch):
    # Threads in lock-step stand in for processes started together: mkdir is the claim.
    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20261204-120000")
    cfg = config(tmp_path)
    base = "CartPole-v1_ppo_s1_20261204-120000"
    for round_ in range(10):
        parent = tmp_path / f"r{round_}"
        cfg.log.run_dir = str(parent)
        made, failed = claim_together(cfg, 6)
        assert not failed, failed[0]
        assert len(set(made)) == 6 and all((p / "config.yaml").is_file() for p in made)
        assert sorted(p.name for p in parent.iterdir()) == sorted(
            [base] + [f"{base}-{n}" for n in range(1, 6)])


def test_an_explicit_run_name_that_exists_is_refused(tmp_path):
    assert make_run_dir(config(tmp_path, "log.run_name=sweep/a")) == tmp_path / "sweep" / "a"
    cfg = config(tmp_path, "log.run_name=mine")
    make_run_dir(cfg)
    with pytest.raises(ConfigError, match="mine already exists; choose a new name, or "
                                          "continue it with --resume"):
        make_run_dir(cfg)


def test_a_run_directory_that_cannot_be_written_is_refused_before_a_resume(
        checkpointed_run, monkeypatch):
    before = {p.name: p.stat().st_mtime_ns for p in checkpointed_run.iterdir()}

    def read_only(self, data):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "write_bytes", read_only)
    with pytest.raises(ConfigError, match=f"--resume {checkpointed_run}: cannot write in the "
                                          "run directory \\(Read-only file system\\)"):
        Trainer.resume(checkpointed_run)
    assert {p.name: p.stat().st_mtime_ns for p in checkpointed_run.iterdir()} == before
