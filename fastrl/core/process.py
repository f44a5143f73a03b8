"""Helpers every child process uses: start-up, seeding, crash reports."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import random
import signal
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fastrl.core import jit
from fastrl.core.errors import ExplainedError
from fastrl.core.files import DiskFull, write_atomically
from fastrl.core.forkserver import STOP_SIGNALS, release_fork_server

PR_SET_PDEATHSIG, PR_SET_NAME = 1, 15
#: A child's exit status when a write of its failed on a full disk (ENOSPC's number): the
#: supervisor tells the run's end by it even where the crash report could not be written.
EXIT_DISK_FULL = 28


def become_child(parent_pid: int) -> None:
    """First thing a learner, worker or checkpoint evaluation does; ``parent_pid`` is the
    fork server that forked it (fastrl.core.forkserver).

    It ignores SIGINT and SIGTERM (a terminal's Ctrl-C or a service manager's SIGTERM reaches
    the whole process group; the supervisor turns them into a stop flag). The fork server
    ignores them already (fastrl.core.forkserver), so no child dies of one before this.
    It names itself after its role (:func:`name_process`), asks Linux to SIGKILL it when
    its parent dies, and lets the fork server go
    (release_fork_server): the server exits with the supervisor, so that a hung env can
    never outlive the run.
    """
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    # (the server may have been started with them blocked, and a fork inherits the mask; a
    # worker's own SIGTERM handler must see them)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    exit_with_parent(signal.SIGKILL)
    name_process(multiprocessing.current_process().name)
    release_fork_server()
    if os.getppid() != parent_pid:  # the server died before prctl took effect
        os._exit(1)
    jit.restart()  # (the server's compiling is not this child's)


def name_process(name: str) -> None:
    """Show ``name`` (its first 15 bytes: ``fastrl learner``, ``fastrl worker 3``) as this
    process's name in ps, top and /proc/PID/comm (PR_SET_NAME), where every child of the
    fork server is otherwise ``python``."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, name.encode()[:15])


def exit_with_parent(sig: int) -> None:
    """Have Linux send this process ``sig`` when its parent dies (PR_SET_PDEATHSIG)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


#: glibc mallopt() parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory() -> None:
    """Have this process's malloc (glibc) reuse freed blocks up to 32 MiB instead of asking
    the kernel for fresh pages each time.

    By default a block over 128 KiB is its own mmap, unmapped when freed: every large
    tensor an op allocates ([8192, 64] float activations are 2 MiB) arrives as fresh pages,
    each page-faulted in on first write, about 15% of a PPO update on an 8,192-sample batch.
    For a process of our own only (the learner): the setting is process-wide and lasts.
    """
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:  # not glibc: its own policy stays
        return
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # (glibc's maximum on 64-bit)
    mallopt(_M_TRIM_THRESHOLD, 256 << 20)


@contextmanager
def learner_torch(threads: int) -> Iterator[None]:
    """Run the learner's torch with ``threads`` intra-op threads and denormal floats
    flushed to zero; torch's defaults (a thread per core, denormals kept) afterwards.

    Threads: torch's default of one per core oversubscribes a machine that workers and
    other runs share, and trains slower, not faster. Denormals: Adam's second moments of
    tiny gradients (an output layer initialised at gain 0.01) fall below 1e-38, where every
    CPU op on them is many times slower; flushed, a PPO gradient step on CartPole takes
    ~15% less time. Values that small change nothing a network computes.
    """
    default = torch.get_num_threads()
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(default)


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (all devices) of this process."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def numpy_state(rng: Any = np.random) -> tuple:
    """The state of a numpy random state (default: the global one) as plain containers."""
    name, keys, pos, has_gauss, gauss = rng.get_state()
    return name, keys.tolist(), pos, has_gauss, gauss


def set_numpy_state(state: tuple, rng: Any = np.random) -> None:
    """Restore what :func:`numpy_state` returned (or ``get_state``'s own form)."""
    name, keys, pos, has_gauss, gauss = state
    rng.set_state((name, np.asarray(keys, np.uint32), pos, has_gauss, gauss))


def rng_state() -> dict:
    """This process's python, numpy, torch (and CUDA) RNG states, as plain containers and
    tensors (``torch.load(weights_only=True)`` reads them back)."""
    return {
        "python": random.getstate(),
        "numpy": numpy_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` returned."""
    random.setstate(state["python"])
    set_numpy_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def crash_report_path(run_dir: str | Path, who: str) -> Path:
    """Where child ``who`` ('learner', 'worker 3') leaves the report of its crash."""
    return Path(run_dir) / "errors" / f"{who.replace(' ', '-')}.txt"


def report_crash(run_dir: str, who: str, exc: BaseException, context: str = "") -> int:
    """Write what the supervisor will show of ``exc``: a ``context`` line (which env), then
    the message alone for an :class:`~fastrl.core.errors.ExplainedError` (a bad env, a full
    disk), the full traceback for anything else. Returns the exit status that tells the
    crash: :data:`EXIT_DISK_FULL` for a full disk, else 1. A full disk's report the disk
    has no room for is left out (the status tells it); any other report that cannot be
    written goes to stderr instead, so that no crash goes untold."""
    text = crash_text(exc, context)
    code = EXIT_DISK_FULL if isinstance(exc, DiskFull) else 1
    try:
        write_crash(run_dir, who, text)
    except OSError as e:
        if code != EXIT_DISK_FULL:
            print(f"fastrl {who}: cannot write its crash report ({e}):\n{text}",
                  file=sys.stderr)
    return code


def crash_text(exc: BaseException, context: str = "") -> str:
    """The report of ``exc`` that :func:`report_crash` writes."""
    if isinstance(exc, ExplainedError):
        text = f"{type(exc).__name__}: {exc}\n"
    else:
        text = "".join(traceback.format_exception(exc))
    return f"{context}\n{text}" if context else text


def write_crash(run_dir: str | Path, who: str, text: str) -> None:
    """Leave ``text`` as the report of child ``who``'s crash, for the supervisor."""
    write_atomically(crash_report_path(run_dir, who), text.encode())  # (never half of one)


def read_crash(run_dir: str | Path, who: str) -> str | None:
    """The traceback a crashed child left, if any."""
    path = crash_report_path(run_dir, who)
    return path.read_text() if path.exists() else None
