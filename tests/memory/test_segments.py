"""The /dev/shm room check (fastrl.memory.segments.check_shm_space): a run larger than
/dev/shm, or than what is free in it now, is refused before any segment exists, naming the
bytes and the keys that shrink them; a run's start removes the segments of gone processes."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from fastrl.errors import INPUT_ERRORS
from fastrl.memory import segments
from fastrl.memory.segments import SharedMemoryFull, check_shm_space

MIB = 1 << 20


@pytest.fixture
def shm_of(monkeypatch):
    """Make /dev/shm look ``size`` bytes large with ``free`` of them free."""
    def set_room(size: int, free: int) -> None:
        st = SimpleNamespace(f_frsize=4096, f_blocks=size // 4096, f_bavail=free // 4096)
        monkeypatch.setattr(segments.os, "statvfs", lambda path: st)
    return set_room


def test_a_run_larger_than_dev_shm_is_bad_input_naming_its_size(shm_of):
    shm_of(size=64 * MIB, free=60 * MIB)
    with pytest.raises(SharedMemoryFull, match=r"needs 104,857,600 bytes .*\(rings 104,857,600\) "
                       r"but /dev/shm holds 67,108,864 in all; reduce infra.x"):
        check_shm_space({"rings": 100 * MIB}, knobs="infra.x")
    assert issubclass(SharedMemoryFull, INPUT_ERRORS)  # exit status 2 from every CLI


def test_a_run_that_fits_but_not_now_names_what_is_free(shm_of):
    shm_of(size=64 * MIB, free=8 * MIB)
    with pytest.raises(SharedMemoryFull, match=r"has 8,388,608 free now \(of 67,108,864"):
        check_shm_space({"rings": 10 * MIB, "weights": 1}, knobs="infra.x")
    check_shm_space({"rings": 8 * MIB - 1}, knobs="infra.x")  # what fits passes


def test_the_check_reads_the_real_dev_shm():
    st = os.statvfs("/dev/shm")
    assert segments.shm_size_bytes() == st.f_blocks * st.f_frsize >= segments.free_shm_bytes()


def test_a_new_owner_removes_the_segments_of_gone_processes_only():
    gone = f"{segments.PREFIX}{(1 << 22) + 1}_0000_ring0"  # (past any pid_max: no process)
    live = f"{segments.PREFIX}{os.getpid()}_0000_ring0"
    for name in (gone, live):
        with open(os.path.join(segments.SHM_DIR, name), "wb") as f:
            f.write(b"x")
    try:
        owner = segments.SegmentOwner()
        assert gone not in segments.leftover_segments() and live in segments.leftover_segments()
        owner.unlink_all()
    finally:
        for name in (gone, live):
            if os.path.exists(os.path.join(segments.SHM_DIR, name)):
                os.unlink(os.path.join(segments.SHM_DIR, name))
