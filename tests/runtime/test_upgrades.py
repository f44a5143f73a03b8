"""Upgrades keep runs resumable (docs/faults-and-resume.md, "Upgrades"): the run directories
of tests/fixtures/runs/, written by earlier fastrl commits (tests/fixtures/write_runs.py),
resume with today's code; a checkpoint of a newer format, or a broken one, is refused in one
line naming the versions; today's checkpoints hold what the newest fixtures do (a change
to what a checkpoint holds adds a set)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from fixtures.write_runs import KINDS, SMALL
from helpers import CONFIGS, TESTS, last_json, resume_main, train_main

from fastrl.checkpoint import FORMAT, latest_valid
from fastrl.core.version import __version__
from fastrl.resume import load_parked

FIXTURES = sorted(p for p in (TESTS / "fixtures" / "runs").glob("*/*") if p.is_dir())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_run_an_earlier_fastrl_wrote_resumes_where_it_stopped(fixture, tmp_path, capfd):
    run = shutil.copytree(fixture, tmp_path / "run")
    ckpt = latest_valid(run)[0]
    assert ckpt is not None and ckpt.manifest["worker_states"] == [0]
    resumed = resume_main(run, [f"algo.total_steps={2 * ckpt.global_step}"], capfd)
    assert resumed.returncode == 0, resumed.stderr
    assert f"at global step {ckpt.global_step:,}" in resumed.stderr
    assert last_json(resumed.stdout)["global_step"] == 2 * ckpt.global_step


def test_a_newer_or_a_broken_checkpoint_is_refused_in_one_line_naming_the_versions(
        tmp_path, capfd):
    run = shutil.copytree(next(p for p in FIXTURES if p.name == "ppo"), tmp_path / "run")
    ckpt = latest_valid(run)[0]
    manifest = ckpt.path / "manifest.json"
    saved = manifest.read_text()
    newer = json.loads(saved) | {"format": FORMAT + 1, "fastrl_version": "9.1.0"}
    manifest.write_text(json.dumps(newer))
    refused = resume_main(run, [], capfd)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    line = next(x for x in refused.stderr.splitlines() if "9.1.0" in x)
    assert f"in checkpoint format {FORMAT + 1}; this fastrl {__version__} reads format " \
        f"{FORMAT}: resume it with a fastrl that reads format {FORMAT + 1}" in line
    assert ckpt.path.is_dir()  # (not set aside: intact, for the later fastrl)

    manifest.write_text(saved)
    learner = ckpt.path / "learner.pt"
    data = bytearray(learner.read_bytes())
    data[len(data) // 2] ^= 0xFF
    learner.write_bytes(bytes(data))
    refused = train_main(["--resume", str(ckpt.path)], tmp_path, capfd)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    line = next(x for x in refused.stderr.splitlines() if "learner.pt" in x)
    assert f"does not match its SHA-256 (corrupted); written by fastrl " \
        f"{json.loads(saved)['fastrl_version']}" in line and \
        f"this fastrl {__version__} reads format {FORMAT}" in line


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_checkpoint_holds_what_the_newest_fixture_holds(kind, tmp_path, capfd):
    # A change to what a checkpoint holds must come with a new set of fixtures
    # (python tests/fixtures/write_runs.py): the newest set is today's layout.
    config, overrides = KINDS[kind]
    proc = train_main([*([str(CONFIGS / config)] if config else []), *SMALL, *overrides,
                       "log.run_name=run"], tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    newest = max((p for p in FIXTURES if p.name == kind),
                 key=lambda p: json.loads((p / "written.json").read_text())["committed"])
    assert layout(latest_valid(tmp_path / "run")[0].path) == \
        layout(latest_valid(newest)[0].path), f"write a new set of fixtures ({newest} differs)"


def layout(ckpt: Path) -> dict:
    """What a checkpoint holds, by name: its files, its manifest's keys, and the keys (three
    levels deep) of its learner's state and of its first worker's parked state."""
    manifest = json.loads((ckpt / "manifest.json").read_text())
    return {"files": sorted(manifest["files"]), "manifest": sorted(manifest),
            "learner": keys(torch.load(ckpt / "learner.pt", weights_only=True)),
            "worker": keys(load_parked(str(ckpt / "worker-0.pkl")))}


def keys(state, depth: int = 3) -> list[str]:
    """The dotted key paths of nested dicts, ``depth`` levels deep."""
    if not isinstance(state, dict) or depth == 0:
        return []
    return sorted(f"{k}{'.' + sub if sub else ''}" for k, v in state.items()
                  for sub in (keys(v, depth - 1) or [""]))
