"""Named shared-memory segments: creation (supervisor only), attachment, cleanup (a new
owner also removes the segments of supervisors that are gone).

Only the supervisor creates and unlinks. Children attach by name and must not become owners
in Python's resource tracker: on 3.13+ they attach with ``track=False``; before 3.13 an
attach registers the name with the tracker that ``spawn`` children share with the
supervisor, where it is the same entry as the supervisor's (a set), so nothing is done --
an explicit ``unregister`` there would delete the supervisor's entry and lose the tracker's
cleanup if the supervisor itself is SIGKILLed.
"""

from __future__ import annotations

import os
import secrets
import sys
from multiprocessing import shared_memory

from fastrl.core.forkserver import process_alive

SHM_DIR = "/dev/shm"
PREFIX = "fastrl_"


class SharedMemoryFull(RuntimeError):
    """Not enough free space in /dev/shm for the run's segments, found before any process
    of the run starts: bad input (a config asking for more than this machine has), which
    every command-line tool reports with exit status 2. A shortage that appears while the
    run goes on kills a child with SIGBUS instead (exit status 1)."""


def shm_size_bytes() -> int:
    """Bytes /dev/shm holds in all, used or not."""
    st = os.statvfs(SHM_DIR)
    return st.f_blocks * st.f_frsize


def free_shm_bytes() -> int:
    """Bytes free in /dev/shm for an unprivileged writer."""
    try:
        st = os.statvfs(SHM_DIR)
    except FileNotFoundError:
        raise SharedMemoryFull(f"{SHM_DIR} does not exist here; fastrl needs POSIX shared "
                               "memory (a tmpfs at /dev/shm, as on Linux)") from None
    return st.f_bavail * st.f_frsize


def check_shm_space(needed: dict[str, int], knobs: str) -> None:
    """Raise :class:`SharedMemoryFull` unless the segments in ``needed`` fit in /dev/shm.

    ``needed`` maps a segment kind to its bytes; ``knobs`` names the config keys that shrink it.
    tmpfs allocates pages lazily, so an overfull segment would otherwise crash a child with
    SIGBUS in the middle of the run instead of failing here.
    """
    total = sum(needed.values())
    free = free_shm_bytes()
    if total > free:
        parts = ", ".join(f"{k} {v:,}" for k, v in needed.items())
        size = shm_size_bytes()
        room = f"holds {size:,} in all" if total > size else \
            f"has {free:,} free now (of {size:,}: other processes use the rest)"
        raise SharedMemoryFull(
            f"fastrl needs {total:,} bytes of shared memory ({parts}) but {SHM_DIR} {room}; "
            f"reduce {knobs}, or give {SHM_DIR} more space (docker run --shm-size)"
        )


class SegmentOwner:
    """Creates the run's segments and unlinks every one of them in :meth:`unlink_all`."""

    def __init__(self) -> None:
        remove_stale_segments()
        self.token = f"{os.getpid()}_{secrets.token_hex(4)}"
        self._segments: list[shared_memory.SharedMemory] = []

    def create(self, kind: str, nbytes: int) -> shared_memory.SharedMemory:
        """A new zero-filled segment named ``fastrl_<token>_<kind>``."""
        shm = shared_memory.SharedMemory(
            name=f"{PREFIX}{self.token}_{kind}", create=True, size=max(nbytes, 1)
        )
        self._segments.append(shm)
        return shm

    def unlink_all(self) -> None:
        """Close and unlink every segment created here; safe to call more than once."""
        while self._segments:
            shm = self._segments.pop()
            try:
                shm.close()
            except BufferError:
                pass  # a numpy view still exists in this process; unlink still frees the name
            try:
                shm.unlink()
            except FileNotFoundError:
                pass


def attach(name: str) -> shared_memory.SharedMemory:
    """Attach to an existing segment without taking ownership of it (see module doc)."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    return shared_memory.SharedMemory(name=name)


def leftover_segments(token: str = "") -> list[str]:
    """Names of fastrl segments in /dev/shm (of one run when ``token`` is given)."""
    try:
        names = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(PREFIX + token))


def remove_stale_segments() -> list[str]:
    """Unlink the fastrl segments whose creator (the pid in their name) is gone; returns
    their names.

    A killed supervisor's resource tracker unlinks its segments, unless the tracker died
    first (a tracker Python starts again knows none of them): then the next run's start
    is the first to know they are stale. A segment of a live process is never touched.
    """
    removed = []
    for name in leftover_segments():
        pid = name[len(PREFIX):].split("_")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            try:
                os.unlink(os.path.join(SHM_DIR, name))
                removed.append(name)
            except OSError:
                pass  # (another run's start took it, or it is not ours to remove)
    return removed

