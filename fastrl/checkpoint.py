"""Checkpoints: written atomically, verified on load, the newest K kept.

A checkpoint is a folder ``RUN_DIR/checkpoints/<seq>-step<global step>/`` holding

- ``learner.pt``: model, optimizer, step and update counts, schedules, RNG states
  (``torch.load(weights_only=True)`` reads it: tensors and plain containers only);
- ``rings.npz``: per ring, its cursors and the published slots the learner had not read yet;
- ``worker-<i>.pkl``: a worker's envs, episode bookkeeping and RNG states, where its envs
  can be pickled: the worker parked at the end of the run (graceful stop or finished run),
  or, for a periodic checkpoint of a run that takes one slot from every worker per update,
  as it started the slot after it (fastrl.learner.learner). A pickle runs code when loaded:
  resume only run directories you trust;
- ``config.yaml``: the config that wrote it;
- ``manifest.json`` (written last): versions, git SHA, config hash, env id and spaces,
  global step, and the size and SHA-256 of every other file.

Everything is written into a hidden temporary folder first (``.tmp-<name>-<pid>``), flushed,
and renamed into place: a checkpoint folder either is complete or does not exist. A write
that fails (a full disk: :class:`~fastrl.core.files.DiskFull`) removes its temporary folder;
one left by a process that died mid-write is removed by the next checkpoint, and when a run
starts or resumes (:func:`remove_stale_temps`). A folder whose manifest is missing or whose
files do not match it is reported and skipped when resuming, and renamed
``corrupt-<name>`` so that retention never counts it among the newest K; a run that goes
back to an older checkpoint renames the intact newer ones ``superseded-<name>``.

A fork (:func:`fork_run`) starts a new run directory from a checkpoint of another run; its
``fork.json`` names the parent, and every checkpoint it writes carries that in its
manifest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import psutil
import torch

from fastrl.core.files import telling_disk_full
from fastrl.core.version import __version__

CHECKPOINTS = "checkpoints"
MANIFEST = "manifest.json"
PARKED = ".parked"  # worker states left at the end of a run, for its final checkpoint
#: the checkpoint format this fastrl writes, and the oldest it resumes: every checkpoint
#: written since checkpoints exist (2026-12-02) is format 1 (docs/faults-and-resume.md,
#: "Upgrades"; tests/fixtures/runs/)
FORMAT = 1
OLDEST_FORMAT = 1
TEMP_PREFIX = ".tmp-"  # a checkpoint being written: .tmp-<seq>-step<N>-<pid>
CORRUPT_PREFIX = "corrupt-"  # a checkpoint that failed verification, set aside
SUPERSEDED_PREFIX = "superseded-"  # an intact one newer than the checkpoint a run went back to
FORK = "fork.json"  # a forked run's parent: its run, checkpoint, step and changed config keys
#: what a fork takes of its parent's run directory besides the checkpoint: the history up to
#: it (a resumed run drops the rows and scalars logged after its checkpoint's step)
HISTORY = ("episodes.csv", "evals.csv", "members.csv", "tb")


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, corrupt, or does not fit the config it is resumed with."""


class NewerFormat(CheckpointError):
    """A checkpoint in a format a later fastrl wrote: intact, but not for this fastrl (a
    resume refuses it instead of falling back to an older checkpoint)."""


def written_by(manifest: dict[str, Any]) -> str:
    """Which fastrl wrote a checkpoint, and what this one reads: the versions every
    refusal of a checkpoint names."""
    sha = manifest.get("git_sha")
    reads = f"format {FORMAT}" if OLDEST_FORMAT == FORMAT else \
        f"formats {OLDEST_FORMAT} to {FORMAT}"
    return (f"written by fastrl {manifest.get('fastrl_version', '(unknown)')}"
            f"{f' ({sha[:12]})' if sha else ''} in checkpoint format "
            f"{manifest.get('format')!r}; this fastrl {__version__} reads {reads}")


@dataclass(frozen=True)
class Checkpoint:
    """A verified checkpoint folder and its manifest."""

    path: Path
    manifest: dict[str, Any]

    @property
    def global_step(self) -> int:
        """Env steps trained when it was written."""
        return int(self.manifest["global_step"])

    def file(self, name: str) -> Path | None:
        """Path of one of its files, or None when it does not hold that file."""
        return self.path / name if name in self.manifest["files"] else None


def checkpoints_dir(run_dir: Path | str) -> Path:
    """Where a run keeps its checkpoints."""
    return Path(run_dir) / CHECKPOINTS


def parked_path(run_dir: Path | str, worker_id: int, write_seq: int) -> Path:
    """Where a worker leaves its state when it parks after publishing ``write_seq`` slots."""
    return checkpoints_dir(run_dir) / PARKED / f"worker-{worker_id}-{write_seq}.pkl"


@lru_cache(maxsize=1)
def git_sha() -> str | None:
    """The commit of the fastrl source in use, when it is a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sequence(name: str) -> int:
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() else -1


def _folders(run_dir: Path | str) -> list[Path]:
    """Checkpoint folders, newest first (temporary ones excluded)."""
    root = checkpoints_dir(run_dir)
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.is_dir() and _sequence(p.name) >= 0),
                  key=lambda p: _sequence(p.name), reverse=True)


def remove_stale_temps(run_dir: Path | str) -> list[Path]:
    """Remove the temporary folders of checkpoint writes whose process is gone (killed
    mid-write, or failed without cleaning up); returns what was removed."""
    root = checkpoints_dir(run_dir)
    removed = []
    for path in root.glob(f"{TEMP_PREFIX}*") if root.is_dir() else ():
        pid = path.name.rsplit("-", 1)[-1]
        if path.is_dir() and pid.isdigit() and int(pid) != os.getpid() and \
                not psutil.pid_exists(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def save_checkpoint(run_dir: Path | str, global_step: int,
                    writers: dict[str, Callable[[Path], None]], info: dict[str, Any],
                    keep: int) -> Path:
    """Write one checkpoint atomically and delete all but the newest ``keep``.

    ``writers`` maps a file name to a function that writes that file at the path it is
    given; ``info`` goes into the manifest beside the versions, step and checksums. A write
    that fails leaves nothing behind; on a full disk it raises
    :class:`~fastrl.core.files.DiskFull` naming the file.
    """
    root = checkpoints_dir(run_dir)
    with telling_disk_full(root):  # (a folder needs a block of its own on ext4 and xfs)
        root.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(run_dir)
    existing = _folders(run_dir)
    seq = _sequence(existing[0].name) + 1 if existing else 0
    final = root / f"{seq:06d}-step{global_step}"
    tmp = root / f"{TEMP_PREFIX}{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    with telling_disk_full(final, lambda: shutil.rmtree(tmp, ignore_errors=True)):
        tmp.mkdir()
    files = {}
    for name, write in writers.items():
        with telling_disk_full(final / name, lambda: shutil.rmtree(tmp, ignore_errors=True)):
            write(tmp / name)
            _fsync(tmp / name)
        files[name] = {"bytes": (tmp / name).stat().st_size, "sha256": _sha256(tmp / name)}
    manifest = {
        "format": FORMAT, "fastrl_version": __version__, "git_sha": git_sha(),
        "gymnasium_version": gymnasium.__version__, "torch_version": torch.__version__,
        "numpy_version": np.__version__, "global_step": global_step,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **info,
        **fork_parent(run_dir), "files": files,
    }
    with telling_disk_full(final / MANIFEST, lambda: shutil.rmtree(tmp, ignore_errors=True)):
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _fsync(tmp / MANIFEST)
        os.rename(tmp, final)
    _fsync(root)
    for old in _folders(run_dir)[keep:]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def verify(path: Path) -> Checkpoint:
    """Read a checkpoint's manifest and check every file against it."""
    try:
        manifest = json.loads((path / MANIFEST).read_text())
        files = manifest["files"]
        int(manifest["global_step"])
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no {MANIFEST} (incomplete write)") from None
    except (ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: unreadable {MANIFEST} ({e})") from None
    form = manifest.get("format")
    if isinstance(form, int) and form > FORMAT:
        raise NewerFormat(f"{path}: {written_by(manifest)}: resume it with a fastrl that "
                          f"reads format {form}")
    if not isinstance(form, int) or form < OLDEST_FORMAT:
        raise CheckpointError(f"{path}: {written_by(manifest)}")
    for name, meta in files.items():
        f = path / name
        if not f.is_file():
            broken = f"{name} is missing"
        elif f.stat().st_size != meta["bytes"]:
            broken = f"{name} has {f.stat().st_size} bytes, the manifest says {meta['bytes']} " \
                "(truncated?)"
        elif _sha256(f) != meta["sha256"]:
            broken = f"{name} does not match its SHA-256 (corrupted)"
        else:
            continue
        raise CheckpointError(f"{path}: {broken}; {written_by(manifest)}")
    return Checkpoint(path, manifest)


def latest_valid(run_dir: Path | str) -> tuple[Checkpoint | None, list[str]]:
    """The newest checkpoint that verifies, and one line per newer one that did not."""
    ckpt, skipped = _newest_valid(run_dir)
    return ckpt, [why for _, why in skipped]


def _newest_valid(run_dir: Path | str) -> tuple[Checkpoint | None, list[tuple[Path, str]]]:
    """The newest checkpoint that verifies, and each newer folder that did not with why."""
    skipped = []
    for path in _folders(run_dir):
        try:
            return verify(path), skipped
        except NewerFormat:
            raise  # (an older one would lose what a later fastrl trained)
        except CheckpointError as e:
            skipped.append((path, str(e)))
    return None, skipped


def set_aside(path: Path, prefix: str = CORRUPT_PREFIX) -> Path:
    """Rename a checkpoint folder to ``<prefix><name>`` beside it (``corrupt-``: it failed
    verification; ``-1``, ``-2``, ... when that name is taken): no resume or retention
    counts it any more. Returns its new path."""
    target, n = path.with_name(prefix + path.name), 1
    while target.exists():
        target, n = path.with_name(f"{prefix}{path.name}-{n}"), n + 1
    os.rename(path, target)
    return target


def load_for_resume(run_dir: Path | str) -> tuple[Checkpoint, list[str]]:
    """The checkpoint ``--resume`` continues from, and a note per newer folder it skipped
    (nothing is moved: :func:`set_aside_newer`); a clear error when there is none."""
    ckpt, skipped = _newest_valid(run_dir)
    if ckpt is None:
        why = "".join(f"\n  {s}" for _, s in skipped) or " (none was written)"
        raise CheckpointError(f"no valid checkpoint in {checkpoints_dir(run_dir)}{why}")
    return ckpt, [f"skipped {why}; falling back to {ckpt.path.name}" for _, why in skipped]


def set_aside_newer(run_dir: Path | str, ckpt: Checkpoint) -> list[str]:
    """Rename every checkpoint folder newer than ``ckpt``, the one a run resumes from
    (:func:`set_aside`): ``corrupt-<name>`` where it fails verification (those a resume
    from the run skipped), ``superseded-<name>`` where it is intact (a resume from an
    older checkpoint: kept, for a fork from it). Retention would otherwise count them
    among the newest K and delete the one resumed from instead, and a later resume of the
    run would take them. A note per folder."""
    notes = []
    for path in _folders(run_dir):
        if _sequence(path.name) <= _sequence(ckpt.path.name):
            continue
        try:
            verify(path)
            prefix = SUPERSEDED_PREFIX
        except NewerFormat:
            prefix = SUPERSEDED_PREFIX
        except CheckpointError:
            prefix = CORRUPT_PREFIX
        notes.append(f"set {path.name} aside as {set_aside(path, prefix).name}")
    return notes


def resume_target(path: Path | str) -> tuple[Path, Checkpoint | None]:
    """What ``--resume PATH`` names: the run directory, and the checkpoint folder of it
    that PATH is (verified), or None where PATH is the run directory itself (its newest
    valid checkpoint: :func:`load_for_resume`)."""
    path = Path(path)
    if not (path / MANIFEST).is_file():
        return path, None
    if path.parent.name != CHECKPOINTS:
        raise CheckpointError(
            f"{path}: a checkpoint folder outside a run's {CHECKPOINTS}/ folder; --resume "
            f"takes a run directory or one of its {CHECKPOINTS}/<checkpoint> folders")
    return path.parent.parent, verify(path)


def check_live(ckpt: Checkpoint) -> None:
    """Refuse to resume a run in place from a checkpoint that was set aside
    (:func:`set_aside_newer`): its run has gone on from an older one."""
    if _sequence(ckpt.path.name) < 0:
        raise CheckpointError(
            f"{ckpt.path}: this checkpoint was set aside when its run went back to an older "
            "one; continue it in a run directory of its own with --fork NAME")


def fork_run(ckpt: Checkpoint, new_dir: Path) -> Checkpoint:
    """Start the run directory ``new_dir`` from ``ckpt`` (a checkpoint folder of a run):
    the checkpoint, its files hard-linked where the file system allows (no file of a
    checkpoint is ever written again, only removed), else copied; the run's history up to
    it (:data:`HISTORY`, copied: the new run rewrites it); and the checkpoint's config. A
    checkpoint set aside as superseded takes back its own name there.
    Returns the checkpoint in ``new_dir``. Nothing is left of ``new_dir`` if a copy fails
    (a full disk raises :class:`~fastrl.core.files.DiskFull`)."""
    parent = ckpt.path.parent.parent
    with telling_disk_full(new_dir):
        new_dir.mkdir(parents=True)  # (FileExistsError for one that exists: never overwritten)
    try:
        with telling_disk_full(new_dir):
            name = ckpt.path.name.removeprefix(SUPERSEDED_PREFIX)  # (a live one there)
            copied = shutil.copytree(ckpt.path, checkpoints_dir(new_dir) / name,
                                     copy_function=_link_or_copy)
            for name in HISTORY:
                if (parent / name).is_dir():
                    shutil.copytree(parent / name, new_dir / name)
                elif (parent / name).is_file():
                    shutil.copyfile(parent / name, new_dir / name)
            shutil.copyfile(ckpt.path / "config.yaml", new_dir / "config.yaml")
    except BaseException:
        shutil.rmtree(new_dir, ignore_errors=True)
        raise
    return Checkpoint(copied, ckpt.manifest)


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link of ``src`` at ``dst``; a copy where the file system has none."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def write_fork(new_dir: Path, ckpt: Checkpoint, parent: Path, changes: list[str]) -> None:
    """Record where the run ``new_dir`` was forked from: ``parent`` (the run), its
    checkpoint ``ckpt``, its step and the config keys changed (``fork.json``; every
    checkpoint the new run writes carries it in its manifest as ``parent``)."""
    record = {"run": str(parent.resolve()), "checkpoint": ckpt.path.name,
              "global_step": ckpt.global_step, "changes": changes}
    (new_dir / FORK).write_text(json.dumps(record, indent=2) + "\n")


def fork_parent(run_dir: Path | str) -> dict[str, Any]:
    """``{"parent": ...}``: the :func:`write_fork` record of a forked run; empty for
    others."""
    path = Path(run_dir) / FORK
    return {"parent": json.loads(path.read_text())} if path.is_file() else {}


def find_checkpoint(path: Path | str) -> tuple[Checkpoint, list[str]]:
    """The checkpoint at ``path``: a checkpoint folder (verified), or a run directory (its
    newest valid checkpoint); and a note per newer folder of the run that was skipped as
    corrupt (nothing is moved: evaluating a run leaves it as it is)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path} does not exist")
    if (path / MANIFEST).is_file():
        return verify(path), []
    if checkpoints_dir(path).is_dir():
        return load_for_resume(path)
    raise CheckpointError(f"{path}: neither a checkpoint folder (no {MANIFEST}) nor a run "
                          f"directory (no {CHECKPOINTS}/)")


def describe_latest(run_dir: Path | str, first: str = "") -> str:
    """One sentence for error messages: where the newest intact checkpoint is, and how to
    resume from it after doing ``first`` ('free some space')."""
    ckpt, _ = latest_valid(run_dir)
    if ckpt is None:
        return "No checkpoint was written yet, so there is nothing to resume."
    then = f"{first}, then resume" if first else "resume"
    return (f"The last checkpoint, {ckpt.path} (global step {ckpt.global_step:,}), is intact; "
            f"{then} with: python -m fastrl.train --resume {run_dir}")
