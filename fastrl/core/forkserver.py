"""The fork server that starts every child of a run (learner, workers, checkpoint
evaluations).

A child started with ``spawn`` is a fresh interpreter that imports torch and fastrl again:
over a second of CPU each, serialised on a small machine before the first env step. The
fork server is a fresh interpreter too (no CUDA context, no threads, nothing of the caller's
state), started once per supervisor process, that imports :data:`PRELOAD` once; each child
is then a ``fork`` of it, ready in milliseconds. ``python -m fastrl.train`` starts it before
importing torch itself, so that the two imports run side by side.

This module imports only the standard library: it runs before anything heavy is imported.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import forkserver, util
from multiprocessing.context import BaseContext
from pathlib import Path

#: What a terminal or a service manager sends to stop a run (to the whole process group).
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
#: What the fork server imports once: every child's entry module, and the numba kernels
#: every child calls, loaded (fastrl.runtime.preload).
PRELOAD = ("fastrl.runtime.preload",)
#: the name of a supervisor's multiprocessing temp folder: this + its pid + "-" + random
TEMP_PREFIX = "fastrl-mp-"


def child_context() -> BaseContext:
    """The multiprocessing context every child of a run is started with."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))  # (only read when the server starts)
    return ctx


def start_fork_server() -> int:
    """Start the fork server unless it is running; return its pid (the parent of every
    child, see :func:`fastrl.core.process.become_child`).

    Every spawn asks for the pid: once the server runs, this must not touch the stop
    signals, since a Ctrl-C that comes while they are being set aside can be lost (see
    :func:`_stop_signals_ignored`), and the run would never hear of it.
    """
    child_context()
    server = forkserver._forkserver  # (no public accessor)
    if not _running(server._forkserver_pid):
        _own_temp_dir()
        with _stop_signals_ignored(), _single_threaded_blas():
            forkserver.ensure_running()
    return server._forkserver_pid


def _own_temp_dir() -> None:
    """Give this process's multiprocessing temp folder (the fork server's socket lives
    there) a name with fastrl's prefix and this pid, after removing those of fastrl
    processes that are gone.

    Only a normal exit removes the folder (``pymp-*`` by default): a supervisor killed with
    -9 leaves it, and the next run's start is the first to know it is stale.
    ``multiprocessing.util.get_temp_dir`` reads the folder from the process's config, set
    here before it is first asked (it has no public setter).
    """
    config = mp.current_process()._config
    if config.get("tempdir") is not None:
        return
    for stale in Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*"):
        pid = stale.name[len(TEMP_PREFIX):].split("-")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    path = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-")
    util.Finalize(None, shutil.rmtree, args=(path, True), exitpriority=-100)
    config["tempdir"] = path


def process_alive(pid: int) -> bool:
    """Some process has pid ``pid``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _running(pid: int | None) -> bool:
    """Child ``pid`` has not exited (left unreaped: ``ensure_running`` reaps it)."""
    return pid is not None and os.waitid(
        os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None


@contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """Start the server (and so every child) with numpy's OpenBLAS on one thread, unless
    the caller's environment says otherwise.

    Each child is one thread of work by design (workers set torch to one thread too), and
    a worker's BLAS calls (fastrl.models.numpy_actor) are small: OpenBLAS's own threads,
    one per core, then only wait for cores the other processes of the run are using (a
    256x64x64 matmul took 27 us with them against 15 us without, the other core busy).
    """
    name = "OPENBLAS_NUM_THREADS"
    had = name in os.environ
    os.environ.setdefault(name, "1")
    try:
        yield
    finally:
        if not had:
            del os.environ[name]


@contextmanager
def _stop_signals_ignored() -> Iterator[None]:
    """Ignore :data:`STOP_SIGNALS` meanwhile, so that the fork server started now ignores
    them for good, and so do its children until ``become_child``.

    A terminal's Ctrl-C (or a service manager's SIGTERM) reaches the whole process group;
    the server must outlive it, since the supervisor turns it into a graceful stop. An
    ignored disposition is what survives the server's exec (Python resets the signal mask
    of the processes it starts). The signals stay blocked meanwhile: one that comes now is
    delivered to the caller's own handler afterwards, except one that comes in the
    microseconds between blocking and ignoring, which setting SIG_IGN discards: hence once
    per process, before the supervisor listens (:func:`start_fork_server`). Handlers can
    only be changed from the main thread; started from another, the server is not
    protected.
    """
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, signal.SIG_IGN) for s in STOP_SIGNALS} if main else {}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def release_fork_server() -> None:
    """In a child: close its copy of the fork server's "alive" pipe.

    The server runs while any process holds that pipe's write end, and every child gets
    one. Without it, only the supervisor holds the pipe: the server exits when the
    supervisor dies, and the child's parent-death signal (set by ``become_child``) then
    ends the child too, instead of leaving it running as an orphan.
    """
    server = forkserver._forkserver
    fd = getattr(server, "_forkserver_alive_fd", None)  # (no public accessor)
    if fd is not None:
        os.close(fd)
        server._forkserver_alive_fd = None
