"""Going back to a checkpoint and forking from one (``--resume RUN/checkpoints/<name>``,
``--fork NAME``): the newer checkpoints are set aside and what they logged is dropped; a
fork continues in a run directory of its own, records its parent, leaves the parent as it
is, and is bit-identical to the run it forks when no key changes (from a periodic
checkpoint too: the workers park for it)."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from helpers import (
    ONE_WORKER,
    TINY,
    last_json,
    same_weights,
    tb,
    train_main,
)

from fastrl.checkpoint import latest_valid

pytestmark = pytest.mark.timeout(300)


def _checkpoints(run) -> list[str]:
    """The run's live checkpoint folders, oldest first."""
    return sorted(p.name for p in (run / "checkpoints").iterdir() if p.name[0].isdigit())


def test_resume_from_an_older_checkpoint_sets_the_newer_ones_aside(tmp_path, capfd):
    proc = train_main([*TINY, *ONE_WORKER, "algo.total_steps=1024", "algo.target_return=null",
                       "log.checkpoint_every_steps=256", "log.run_name=r"], tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "r"
    *_, older, newest = _checkpoints(run)
    step = int(older.split("step")[1])

    def train(*args: str):
        return train_main(list(args), tmp_path, capfd)

    resumed = train("--resume", str(run / "checkpoints" / older))
    assert resumed.returncode == 0, resumed.stderr
    assert f"from {older} at global step {step:,}; config changes: none" in resumed.stderr
    assert f"set {newest} aside as superseded-{newest}" in resumed.stderr
    assert last_json(resumed.stdout)["global_step"] == 1024
    # what the abandoned checkpoints' steps logged is gone: no step twice, in order
    steps = [s for s, _ in tb(run, "loss/policy_loss")]
    assert steps == sorted(set(steps)) and steps[-1] == 1024
    with (run / "episodes.csv").open() as f:
        ended = [float(row["step"]) for row in csv.DictReader(f)]
    assert ended == sorted(ended) and ended[-1] > step

    # a set-aside checkpoint only forks; a folder out of its run, or a taken name, is refused
    aside = run / "checkpoints" / f"superseded-{newest}"
    again = train("--resume", str(aside))
    assert again.returncode == 2 and "continue it in a run directory of its own with " \
        "--fork NAME" in again.stderr
    loose = shutil.copytree(aside, tmp_path / "loose")
    assert "a checkpoint folder outside a run's checkpoints/ folder" in \
        train("--resume", str(loose)).stderr
    taken = train("--resume", str(run), "--fork", "loose")
    assert taken.returncode == 2 and "exists already" in taken.stderr
    with pytest.raises(SystemExit):  # (argparse's exit 2)
        train("--fork", "x")
    assert "--fork needs --resume PATH" in capfd.readouterr().err

    forked = train("--resume", str(aside), "--fork", "lr", "algo.lr=0.001",
                   "algo.total_steps=1280")
    assert forked.returncode == 0, forked.stderr
    fork = tmp_path / "lr"
    assert _checkpoints(fork)[0] == newest  # (its own name back)
    assert json.loads((fork / "fork.json").read_text())["changes"] == [
        "algo.lr: 0.00025 -> 0.001", "algo.total_steps: 1024 -> 1280"]
    assert last_json(forked.stdout)["global_step"] == 1280


def test_a_fork_without_changes_is_the_run_it_forks_bit_for_bit(tmp_path, straight_run,
                                                                 capfd):
    # A periodic checkpoint holds the workers' states as they started the slot after it
    # (they park there for it), so going back to one replays the run exactly; a graceful
    # stop's final one holds them too (tests/runtime/test_resume.py).
    straight = straight_run(2)
    parent = {p.name: (p / "manifest.json").read_text()
              for p in (straight / "checkpoints").iterdir()}
    periodic = [ckpt for ckpt in sorted((straight / "checkpoints").iterdir())
                if not json.loads((ckpt / "manifest.json").read_text())["final"]]
    assert periodic, "the straight run kept no periodic checkpoint"
    manifest = json.loads((periodic[0] / "manifest.json").read_text())
    assert manifest["worker_states"] == [0, 1]
    forked = train_main(["--resume", str(periodic[0]), "--fork", str(tmp_path / "forked")],
                        tmp_path, capfd)
    assert forked.returncode == 0, forked.stderr
    fork = tmp_path / "forked"
    assert same_weights(straight, fork), "the fork's weights differ from the straight run's"
    assert parent == {p.name: (p / "manifest.json").read_text()
                      for p in (straight / "checkpoints").iterdir()}
    # (the one change: train_main's log.run_dir, where the test's runs go)
    record = {"run": str(straight.resolve()), "checkpoint": periodic[0].name,
              "global_step": manifest["global_step"],
              "changes": [f"log.run_dir: {str(straight.parent)!r} -> {str(tmp_path)!r}"]}
    assert json.loads((fork / "fork.json").read_text()) == record
    assert latest_valid(fork)[0].manifest["parent"] == record
