"""A full disk, made by writes that raise ENOSPC (instead of filling a
real tmpfs (tests/runtime/test_disk_faults.py): one error naming the file and the room left,
and nothing half written."""

from __future__ import annotations

import errno
import os
import pickle
from pathlib import Path

import pytest

from fastrl.checkpoint import save_checkpoint
from fastrl.core import files
from fastrl.core.files import DiskFull, out_of_space, telling_disk_full, write_atomically
from fastrl.core.process import EXIT_DISK_FULL, crash_report_path, report_crash


def no_room(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_disk_full_names_the_file_and_the_room_and_survives_pickling(tmp_path):
    e = DiskFull(tmp_path / "learner.pt", 12_345, "The last checkpoint, X, is intact.")
    assert str(e) == (f"no space left on device writing {tmp_path / 'learner.pt'}; 12,345 "
                      "bytes free. The last checkpoint, X, is intact.")
    assert isinstance(e, OSError)  # (handlers of failed writes catch it)
    again = pickle.loads(pickle.dumps(e))
    assert (again.path, again.free, again.then, str(again)) == (e.path, e.free, e.then, str(e))


def test_what_counts_as_a_full_disk(tmp_path, monkeypatch):
    assert out_of_space(OSError(errno.ENOSPC, "full"), tmp_path)
    assert out_of_space(OSError(errno.EDQUOT, "quota"), tmp_path)
    assert not out_of_space(OSError(errno.EACCES, "denied"), tmp_path)
    # torch.save says ENOSPC as a RuntimeError without an errno: told by the room left
    torch_says = RuntimeError("[enforce fail at inline_container.cc:672] unexpected pos")
    assert not out_of_space(torch_says, tmp_path)
    monkeypatch.setattr(files, "free_bytes", lambda path: 4096)
    assert out_of_space(torch_says, tmp_path)
    assert not out_of_space(ValueError("a bug"), tmp_path)


def test_a_failed_write_is_cleaned_up_and_told_as_disk_full(tmp_path, monkeypatch):
    cleaned = []
    with pytest.raises(DiskFull, match=f"writing {tmp_path / 'x'}; [0-9,]+ bytes free"):
        with telling_disk_full(tmp_path / "x", lambda: cleaned.append(1)):
            no_room()
    assert cleaned == [1]
    with pytest.raises(KeyError):  # any other error passes as it is, after the cleanup
        with telling_disk_full(tmp_path / "x", lambda: cleaned.append(2)):
            raise KeyError("k")
    assert cleaned == [1, 2]


def test_an_atomic_write_on_a_full_disk_leaves_neither_file(tmp_path, monkeypatch):
    target = tmp_path / "worker-0-12.pkl"
    monkeypatch.setattr(os, "fsync", no_room)
    with pytest.raises(DiskFull, match="worker-0-12.pkl"):
        write_atomically(target, b"state" * 1000)
    assert list(tmp_path.iterdir()) == []


def test_a_crash_report_the_disk_has_no_room_for_is_left_out(tmp_path, monkeypatch,
                                                               capfd):
    monkeypatch.setattr(os, "fsync", no_room)
    code = report_crash(str(tmp_path), "learner", DiskFull(tmp_path / "learner.pt", 0))
    assert code == EXIT_DISK_FULL  # the status tells it: no 0-byte report, no temp file
    assert not crash_report_path(tmp_path, "learner").exists()
    assert list((tmp_path / "errors").iterdir()) == [] and capfd.readouterr().err == ""
    # any other crash is never lost: its report goes to stderr
    assert report_crash(str(tmp_path), "learner", RuntimeError("boom")) == 1
    assert "RuntimeError: boom" in capfd.readouterr().err
    assert list((tmp_path / "errors").iterdir()) == []


def test_a_disk_full_crash_is_reported_as_its_one_line(tmp_path):
    code = report_crash(str(tmp_path), "learner", DiskFull(tmp_path / "model.pt", 10))
    assert code == EXIT_DISK_FULL
    assert crash_report_path(tmp_path, "learner").read_text() == (
        f"DiskFull: no space left on device writing {tmp_path / 'model.pt'}; 10 bytes free\n")
    assert report_crash(str(tmp_path), "worker 0", ValueError("x")) == 1


def test_a_folder_the_disk_has_no_room_for_is_a_full_disk_too(tmp_path, monkeypatch):
    # (on ext4 and xfs a new folder takes a block: a full disk refuses mkdir itself)
    monkeypatch.setattr(Path, "mkdir", lambda self, *a, **k: no_room())
    with pytest.raises(DiskFull, match="errors/learner.txt"):
        write_atomically(tmp_path / "errors" / "learner.txt", b"report")
    with pytest.raises(DiskFull, match="checkpoints; "):
        save_checkpoint(tmp_path, 10, {"learner.pt": lambda p: p.write_bytes(b"x")}, {}, 3)
    assert list(tmp_path.iterdir()) == []
