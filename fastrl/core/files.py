"""Files written so that a reader never sees half of one, and a full disk told as one line."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from fastrl.core.errors import ExplainedError

#: A write that fails while its file system has less room than this counts as a full disk:
#: torch.save reports ENOSPC as a RuntimeError of its own, with no errno to tell it by.
LOW_SPACE_BYTES = 1 << 20
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)
FREE_SPACE = "free some space"  # what to do before resuming a run the disk stopped


class DiskFull(ExplainedError, OSError):
    """A write failed for want of room on its file system; the message names the file, the
    bytes free now and (``then``) what is left intact. An OSError, as the write's own error
    was, for handlers of failed writes."""

    def __init__(self, path: Path | str, free: int, then: str = "") -> None:
        self.path, self.free, self.then = Path(path), free, then
        super().__init__(f"no space left on device writing {path}; {free:,} bytes free"
                         + (f". {then}" if then else ""))

    def __reduce__(self):  # (pickled to a parent: keep the fields, not one joined string)
        return DiskFull, (self.path, self.free, self.then)


def free_bytes(path: Path | str) -> int:
    """Bytes free to this user on the file system that holds ``path`` (or would, for a path
    not made yet)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def out_of_space(exc: BaseException, path: Path | str) -> bool:
    """Whether ``exc``, raised writing ``path``, means the disk is full."""
    if isinstance(exc, OSError) and exc.errno in _NO_ROOM:
        return True
    if not isinstance(exc, (OSError, RuntimeError)):
        return False
    try:
        return free_bytes(path) < LOW_SPACE_BYTES
    except OSError:
        return False


@contextmanager
def telling_disk_full(path: Path | str,
                      cleanup: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Run a write of ``path``; if it fails, ``cleanup()`` (remove what it left half
    written) and raise :class:`DiskFull` when the disk was full, else the error as it is."""
    try:
        yield
    except BaseException as e:
        full = not isinstance(e, DiskFull) and out_of_space(e, path)  # (before cleanup frees)
        with suppress(OSError):  # (the error being raised is the one to tell)
            cleanup()
        if full:
            raise DiskFull(path, free_bytes(path)) from None
        raise


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename; a failed write
    leaves neither (a full disk: :class:`DiskFull`)."""
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    with telling_disk_full(path, lambda: tmp.unlink(missing_ok=True)):
        path.parent.mkdir(parents=True, exist_ok=True)  # (a folder needs room too)
        with tmp.open("wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)
