"""Runs on a disk that fills up, a run directory that turns read-only, and checkpoint writes
that a dead process left half done: one line and the last intact checkpoint, no traceback,
nothing half written left behind. The disk is a small tmpfs mounted for the test (root
only: tests/core/test_disk_full.py makes writes fail by hand everywhere else)."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from helpers import ENDLESS, ONE_WORKER, TINY, last_json, resume_main, train_main, wait_for

from fastrl.checkpoint import checkpoints_dir, latest_valid, verify

pytestmark = pytest.mark.timeout(300)

FULL = re.compile(r"fastrl\.train: run failed: no space left on device writing (\S+); "
                  r"([\d,]+) bytes free\. The last checkpoint, (\S+) \(global step "
                  r"[\d,]+\), is intact; free some space, then resume with: python -m "
                  r"fastrl\.train --resume (\S+)$")


@pytest.fixture
def small_disk(tmp_path):
    """A 64 MiB tmpfs at ``tmp_path/disk``, unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root only): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        if subprocess.run(["umount", str(disk)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def fill(disk: Path, leave: int) -> None:
    """Take all of ``disk``'s room but ``leave`` bytes, with a file of its own."""
    with (disk / "filler").open("wb") as f:
        while os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize > leave:
            room = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
            try:
                f.write(b"\0" * max(4096, min(1 << 20, room - leave)))
                f.flush()
            except OSError as e:
                assert e.errno == errno.ENOSPC
                break


def half_written(run: Path) -> list[Path]:
    """What a failed write may leave: temporary files and folders, empty crash reports."""
    return [p for p in run.rglob("*") if p.name.startswith(".tmp-")
            or (p.parent.name == "errors" and p.stat().st_size == 0)]


@pytest.mark.parametrize("leave", [0, 100 * 1024], ids=["full", "100KiB-left"])
def test_a_disk_that_fills_up_mid_run_ends_it_with_one_line(small_disk, leave,
                                                            no_shm_residue):
    # 100 KiB is less than one checkpoint of this net (its learner.pt is ~0.8 MB): the
    # next checkpoint fails in the middle of torch.save.
    cmd = [sys.executable, "-m", "fastrl.train", *TINY, *ENDLESS, "log.run_name=r",
           "log.checkpoint_every_steps=256", "algo.hidden_sizes=[256,256]",
           f"log.run_dir={small_disk}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    run = small_disk / "r"
    try:
        wait_for(lambda: latest_valid(run)[0] is not None, proc, 120)
        fill(small_disk, leave)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            for p in psutil.Process(proc.pid).children(recursive=True):
                p.kill()
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "Exception in thread" not in err, err
    found = FULL.match(err.strip().splitlines()[-1])
    assert found, err
    assert Path(found[1]).is_relative_to(run) and Path(found[4]) == run
    verify(Path(found[3]))  # the one it names is intact
    assert latest_valid(run)[0].path == Path(found[3])
    assert not half_written(run), half_written(run)
    assert not (checkpoints_dir(run) / ".parked").exists()


def test_resuming_a_read_only_run_directory_is_one_line_and_exit_2(small_disk, capfd,
                                                                   no_shm_residue):
    proc = train_main([*TINY, *ONE_WORKER, "algo.total_steps=512", "log.run_name=r"],
                      small_disk, capfd)
    assert proc.returncode == 0, proc.stderr
    remounted = subprocess.run(["mount", "-o", "remount,ro", str(small_disk)],
                               capture_output=True, text=True)
    assert remounted.returncode == 0, remounted.stderr
    resumed = resume_main(small_disk / "r", ["algo.total_steps=1024"], capfd)
    assert resumed.returncode == 2, resumed.stderr
    assert resumed.stderr.strip().splitlines() == [
        f"fastrl.train: error: --resume {small_disk / 'r'}: cannot write in the run "
        "directory (Read-only file system); a resumed run writes checkpoints and logs there"]


@pytest.mark.parametrize("pages", [1, 4])
def test_a_resume_the_disk_fills_under_is_one_line_and_keeps_the_run(pages, small_disk, capfd,
                                                                     no_shm_residue):
    # A page or a few left: the resume's check that it can write passes, and one of its own
    # writes (resume.log, config.yaml, a parked worker state's copy, logs) does not fit.
    proc = train_main([*TINY, *ONE_WORKER, "algo.total_steps=512", "log.run_name=r"],
                      small_disk, capfd)
    assert proc.returncode == 0, proc.stderr
    run = small_disk / "r"
    fill(small_disk, pages * 4096)
    resumed = resume_main(run, ["algo.total_steps=1024"], capfd)
    assert resumed.returncode == 1, resumed.stderr
    assert "Traceback" not in resumed.stderr, resumed.stderr
    found = FULL.match(resumed.stderr.strip().splitlines()[-1])
    assert found and Path(found[4]) == run, resumed.stderr
    # (whole: the run's, or the resume's with its override, written before the disk filled)
    assert yaml.safe_load((run / "config.yaml").read_text())["algo"]["total_steps"] in (512, 1024)
    assert not half_written(run)
    (small_disk / "filler").unlink()
    assert resume_main(run, ["algo.total_steps=1024"], capfd).returncode == 0


def test_half_written_checkpoints_of_dead_processes_are_removed_on_resume(tmp_path, capfd,
                                                                        no_shm_residue):
    proc = train_main([*TINY, *ONE_WORKER, "algo.total_steps=512", "log.run_name=r"],
                      tmp_path, capfd)
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "r"
    dead = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # (no process has it)
    stale = checkpoints_dir(run) / f".tmp-000009-step768-{dead}"  # a learner killed mid-write
    stale.mkdir()
    (stale / "learner.pt").write_bytes(b"half a checkpoint")
    started = time.time()
    resumed = resume_main(run, ["algo.total_steps=768"], capfd)
    assert resumed.returncode == 0, resumed.stderr
    assert not stale.exists() and last_json(resumed.stdout)["global_step"] == 768
    assert not half_written(run)
    assert latest_valid(run)[0].path.stat().st_mtime >= started - 1
