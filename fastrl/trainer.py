"""``Trainer``: the embedded API that ``python -m fastrl.train`` is built on."""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import pickle
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from fastrl.callbacks import Callback
from fastrl.checkpoint import (
    Checkpoint,
    check_live,
    describe_latest,
    fork_run,
    load_for_resume,
    resume_target,
    set_aside_newer,
    write_fork,
)
from fastrl.config import (
    ConfigError,
    MainConfig,
    check_values,
    config_changes,
    config_hash,
    flat_config,
    load_config,
    to_yaml,
)
from fastrl.core.files import FREE_SPACE, DiskFull, telling_disk_full, write_atomically
from fastrl.core.main_guard import unguarded_call_site
from fastrl.envs.source import env_source, import_string
from fastrl.eval.policy import load_policy
from fastrl.export import export_policy
from fastrl.models.policy import param_shapes
from fastrl.plan import RunPlan, plan_run
from fastrl.resume import check_resumable, check_selfplay_kept, replay_shape, ring_changes
from fastrl.runtime.children import GRACEFUL_EXIT_S, KILL_WAIT_S
from fastrl.runtime.supervisor import RunResult, Supervisor
from fastrl.tracking.tracking import Tracking


def make_run_dir(cfg: MainConfig) -> Path:
    """Create a new run directory and save the resolved config and its hash in it.

    An existing run is never written over: a generated name gets a numeric suffix (the
    first free one, claimed atomically: two runs started in the same second get two
    folders), an explicit ``log.run_name`` that exists is an error.
    """
    parent = Path(cfg.log.run_dir)
    if cfg.log.run_name:
        names: Iterator[str] = iter([cfg.log.run_name])
    else:
        base = "{}_{}_s{}_{}".format(re.sub(r"[^A-Za-z0-9_.-]+", "-", cfg.env.id),
                                     cfg.algo.name, cfg.seed, time.strftime("%Y%m%d-%H%M%S"))
        names = itertools.chain([base], (f"{base}-{n}" for n in itertools.count(1)))
    run_dir = None
    try:
        parent.mkdir(parents=True, exist_ok=True)
        run_dir = _claim(parent, names)
        if run_dir is not None:
            save_config(run_dir, cfg)
    except OSError as e:
        if run_dir is not None:  # (ours, made just now: no empty run left behind)
            shutil.rmtree(run_dir, ignore_errors=True)
        raise ConfigError(f"config key 'log.run_dir={cfg.log.run_dir}': cannot write a run "
                          f"directory in {parent}: {e.strerror or e}") from None
    if run_dir is None:
        taken = parent / cfg.log.run_name
        raise ConfigError(f"config key 'log.run_name={cfg.log.run_name}': {taken} already "
                          f"exists; choose a new name, or continue it with --resume {taken}")
    return run_dir


def _claim(parent: Path, names: Iterator[str]) -> Path | None:
    """Create the first folder of ``names`` under ``parent`` that does not exist yet (None
    when every one does). ``mkdir`` is the check, atomic: no other process can claim the
    same folder."""
    for name in names:
        try:
            (parent / name).parent.mkdir(parents=True, exist_ok=True)  # (run_name=sweep/a)
            (parent / name).mkdir()
            return parent / name
        except FileExistsError:
            continue
    return None


def fork_dir(run_dir: Path, name: str | Path) -> Path:
    """The run directory ``--fork NAME`` makes: beside ``run_dir`` for a bare name, else the
    path given; refused where it exists."""
    name = Path(name)
    target = run_dir.parent / name if len(name.parts) == 1 else name
    if target.exists():
        raise ConfigError(f"--fork {name}: {target} exists already; a fork starts a run "
                          "directory of its own")
    return target


def check_writable(run_dir: Path) -> None:
    """Refuse, as bad input, a run directory to resume that this process cannot write in
    (a read-only file system, no permission, a full disk)."""
    probe = run_dir / f".write-check-{os.getpid()}"
    try:
        probe.write_bytes(b"fastrl")
        probe.unlink()
    except OSError as e:
        with contextlib.suppress(OSError):
            probe.unlink(missing_ok=True)
        raise ConfigError(f"--resume {run_dir}: cannot write in the run directory "
                          f"({e.strerror or e}); a resumed run writes checkpoints and logs "
                          "there") from None


def save_config(run_dir: Path, cfg: MainConfig) -> None:
    """The run's current config and its hash, as a run directory keeps them."""
    # (atomic: a full disk must not leave a resumable run without its config)
    write_atomically(run_dir / "config.yaml", to_yaml(cfg).encode())
    write_atomically(run_dir / "config_hash", (config_hash(cfg) + "\n").encode())


def _told_with_latest(e: DiskFull, run_dir: Path) -> DiskFull:
    """``e``, telling also the run's last intact checkpoint and how to resume from it."""
    return DiskFull(e.path, e.free, describe_latest(run_dir, FREE_SPACE))


def _recorded(config: MainConfig, key: str, ref: Any) -> None:
    """Write the import string of a factory or policy class passed as an object into the
    config (``env.fn``, ...) when it has one, so that the run directory alone can rebuild the
    run (``--resume``, ``fastrl.eval``, ``fastrl.export``)."""
    name = ref if isinstance(ref, str) else import_string(ref) if callable(ref) else None
    if name is not None:
        section, attr = key.split(".")
        setattr(getattr(config, section), attr, name)


def _check_picklable(what: str, obj: Any) -> None:
    """``spawn`` workers get ``obj`` pickled: refuse a lambda or a closure up front."""
    if obj is None or isinstance(obj, str):
        return
    try:
        pickle.dumps(obj)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise ConfigError(
            f"{what}={obj!r} cannot be sent to worker processes ({e}); pass a module-level "
            "function or class (defined under if __name__ == '__main__' guards in scripts), "
            "a functools.partial of one, or an import string 'package.module:name'") from None


def refuse_unguarded_main() -> None:
    """Exit with status 2 and one line when training is being started by the main module's
    top-level code outside the ``__main__`` guard (fastrl.core.main_guard): its child
    processes would each start training again, fail, and be restarted, with a traceback
    apiece."""
    site = unguarded_call_site()
    if site is not None:
        path, line = site
        print(f"fastrl: {path}, line {line}, starts training at the top level of the main "
              "module; every fastrl child process imports that module and would run it "
              'again: put that code under `if __name__ == "__main__":`', file=sys.stderr)
        raise SystemExit(2)


class Trainer:
    """Train the policy that ``config`` describes through workers, rings and a learner.

    ``env_fn`` (a Gymnasium-API env factory called as ``env_fn(**config.env.kwargs)``) or
    ``vector_env_fn`` (a batched simulator factory, ``vector_env_fn(seeds, **kwargs)``, see
    :class:`fastrl.envs.BatchedEnv`) replace ``gymnasium.make(config.env.id)``; each is a
    picklable callable or an import string ``'package.module:make_env'``. ``policy`` is a
    :class:`fastrl.BasePolicy` subclass (or its import string) or a ``torch.nn.Module`` that
    fits the algorithm's contract (see :func:`fastrl.models.base.check_policy`).
    ``callbacks`` receive the run's updates, evaluations and checkpoints
    (:class:`fastrl.Callback`). A trainer is a context manager; :meth:`close` stops a
    :meth:`fit` running in another thread and returns once its processes and shared memory
    are gone.

    >>> result = Trainer(load_config("configs/cartpole_ppo.yaml")).fit()  # doctest: +SKIP
    >>> result = Trainer.resume("runs/CartPole-v1_ppo_s1_20261202-120000").fit()  # +SKIP
    """

    def __init__(self, config: MainConfig | None = None, *,
                 env_fn: Callable[..., Any] | str | None = None,
                 vector_env_fn: Callable[..., Any] | str | None = None,
                 policy: Any = None, callbacks: Sequence[Callback] = ()) -> None:
        self.config = copy.deepcopy(config) if config is not None else MainConfig()
        for what, obj in (("env_fn", env_fn), ("vector_env_fn", vector_env_fn),
                          ("policy", policy)):
            _check_picklable(what, obj)
        _recorded(self.config, "env.fn", env_fn)
        _recorded(self.config, "env.vector_fn", vector_env_fn)
        _recorded(self.config, "algo.policy", policy)
        check_values(self.config)
        self._env = env_source(self.config.env, env_fn, vector_env_fn)
        self._policy = policy
        self.callbacks = list(callbacks)
        self._plan: RunPlan | None = None
        self._resume: tuple[Path, Checkpoint] | None = None
        self._supervisor: Supervisor | None = None
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._closed = False
        self._fit_thread: int | None = None

    @property
    def plan(self) -> RunPlan:
        """The run's resolved shape (env spaces, ring layout, devices), computed once; the env
        contract, the policy and the room in /dev/shm are checked here, before any process
        starts."""
        if self._plan is None:
            plan = plan_run(self.config, self._env, self._policy)
            plan.check_shared_memory()
            self._plan = plan
        return self._plan

    @classmethod
    def resume(cls, path: str | Path, overrides: list[str] = (), *,
               fork: str | Path | None = None,
               env_fn: Callable[..., Any] | str | None = None,
               vector_env_fn: Callable[..., Any] | str | None = None,
               policy: Any = None, callbacks: Sequence[Callback] = ()) -> Trainer:
        """A trainer that continues a run from a checkpoint: ``path`` is a run directory
        (its newest valid checkpoint, with the run's config) or one of its checkpoint
        folders (that checkpoint, with the config that wrote it), and ``overrides`` apply
        on top. It continues at the checkpoint's global step, in the same TensorBoard run
        and CSV files, from which what was logged after that step is dropped; checkpoints
        newer than the one resumed are set aside (``corrupt-<name>`` or
        ``superseded-<name>``, fastrl.checkpoint.set_aside_newer).

        With ``fork`` (a name beside the run directory, or a path) the run continues in
        a new run directory instead, which starts from the checkpoint and the run's history
        up to it, and records its parent (run, checkpoint, changed keys) in ``fork.json``
        and in the manifest of every checkpoint it writes; the parent run is left as it
        is.

        A checkpoint whose env or network differs from the config's, or a run directory
        that cannot be written, is refused (:class:`~fastrl.checkpoint.CheckpointError`,
        :class:`~fastrl.config.ConfigError`) before anything is written. What it skipped or
        set aside and every config change is printed to stderr and appended to the run
        directory's ``resume.log``.
        """
        run_dir, ckpt = resume_target(path)
        if not (run_dir / "config.yaml").is_file():
            raise ConfigError(f"--resume {run_dir}: not a fastrl run directory (no config.yaml)")
        notes: list[str] = []
        if ckpt is None:
            ckpt, notes = load_for_resume(run_dir)
            config = load_config(run_dir / "config.yaml", list(overrides))
        else:
            config = load_config(ckpt.path / "config.yaml", list(overrides))
        target = None if fork is None else fork_dir(run_dir, fork)
        check_writable(run_dir if target is None else target.parent)
        trainer = cls(config, env_fn=env_fn, vector_env_fn=vector_env_fn, policy=policy,
                      callbacks=callbacks)
        config, plan = trainer.config, trainer.plan
        check_resumable(ckpt, config.env.id, plan.obs_space, plan.act_space,
                        param_shapes(plan.policy()), config.algo.name, replay_shape(config))
        trained_with = load_config(ckpt.path / "config.yaml", saved=True)
        check_selfplay_kept(ckpt, trained_with.selfplay, config.selfplay)
        changes = config_changes(trained_with, config)
        if target is None:
            check_live(ckpt)
            notes += set_aside_newer(run_dir, ckpt)  # (accepted: the run writes checkpoints)
            notes.append(f"resuming {run_dir} from {ckpt.path.name} at global step "
                         f"{ckpt.global_step:,}; config changes: "
                         + ("; ".join(changes) if changes else "none"))
        else:
            parent, ckpt, run_dir = run_dir, fork_run(ckpt, target), target
            write_fork(run_dir, ckpt, parent, changes)
            notes.append(f"forking {parent} at {ckpt.path.name} (global step "
                         f"{ckpt.global_step:,}) into {run_dir}; config changes: "
                         + ("; ".join(changes) if changes else "none"))
        reshaped = ring_changes(ckpt, plan)
        if reshaped:
            notes.append("the checkpoint's unread slots and its workers' episodes do not fit "
                         f"this run's rings ({'; '.join(reshaped)}): the workers start fresh "
                         "episodes")
        if ckpt.global_step >= config.algo.total_steps:
            notes.append(f"the run already reached algo.total_steps={config.algo.total_steps:,}"
                         "; raise it to train further")
        try:
            with telling_disk_full(run_dir / "resume.log"), \
                    (run_dir / "resume.log").open("a") as log:
                for note in notes:
                    print(f"fastrl: {note}", file=sys.stderr)
                    log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {note}\n")
            save_config(run_dir, trainer.config)
        except DiskFull as e:  # (the checkpoint is as it was: the resume may be tried again)
            raise _told_with_latest(e, run_dir) from None
        trainer._resume = (run_dir, ckpt)
        return trainer

    @property
    def resumed_dir(self) -> Path | None:
        """The run directory :meth:`fit` continues (a resumed or forked run's); None for a
        new run, whose directory is made when it starts."""
        return None if self._resume is None else self._resume[0]

    def fit(self) -> RunResult:
        """Run to ``algo.total_steps`` (or the target return, a stop signal, :meth:`close`)
        and return what it produced; every process and segment is gone when it returns.

        Called from a script's top-level code outside ``if __name__ == "__main__":``, which
        every child process would run again, it prints one line naming the fix and exits
        with status 2 before anything starts (:func:`refuse_unguarded_main`).
        """
        refuse_unguarded_main()  # (every runtime starts children: the serial one evaluates
        # checkpoints in one with log.eval_on_checkpoint)
        with self._lock:
            if self._closed:
                raise RuntimeError("this Trainer was closed; make a new one to train again")
            if not self._idle.is_set():
                raise RuntimeError("this Trainer is already running fit()")
            plan = self.plan
            run_dir, ckpt = self._resume or (make_run_dir(self.config), None)
            self._resume = None  # a second fit() starts a new run
            tracking = Tracking(self.config.log, run_dir, flat_config(self.config))
            self._supervisor = Supervisor(self.config, run_dir, ckpt, plan, self.callbacks,
                                          tracking)
            self._fit_thread = threading.get_ident()
            self._idle.clear()
        failed = True
        try:
            result = self._supervisor.run()
            failed = False
            return result
        except DiskFull as e:  # (every child has stopped: the newest checkpoint is final)
            raise _told_with_latest(e, run_dir) from None
        finally:
            # (no export where no tracker is on, or every one failed)
            onnx = self._onnx_for_trackers(run_dir) if tracking and not failed else None
            tracking.finish([run_dir / "episodes.csv", run_dir / "evals.csv"],
                            [run_dir / "config.yaml", run_dir / "model.pt",
                             *([onnx] if onnx else []), *sorted(run_dir.glob("*.png"))],
                            failed)
            with self._lock:
                self._supervisor = None
                self._idle.set()

    def _onnx_for_trackers(self, run_dir: Path) -> Path | None:
        """The run's final policy exported to ``RUN_DIR/model.onnx`` for its trackers (a
        population's best member); None, said in one line, where it cannot be (no
        checkpoint, the ``export`` extra missing, a policy ONNX cannot hold)."""
        try:
            best = "best" if self.plan.population is not None else None
            loaded = load_policy(run_dir, self._env, self._policy, member=best)
            return export_policy(loaded, "onnx", run_dir / "model.onnx").artifact
        except Exception as e:  # (the trackers go without it; the run is done)
            first = next((line for line in str(e).splitlines() if line.strip()), "")
            print(f"fastrl: no ONNX export for the trackers ({type(e).__name__}: "
                  f"{first[:200]})", file=sys.stderr)
            return None

    def stop(self) -> None:
        """Ask a running :meth:`fit` to stop gracefully (final checkpoint, then it returns);
        safe from any thread and from a callback. Does nothing when no run is going."""
        with self._lock:
            running = self._supervisor if not self._idle.is_set() else None
        if running is not None:
            running.stop()

    def close(self, timeout_s: float = GRACEFUL_EXIT_S + KILL_WAIT_S) -> None:
        """Stop a :meth:`fit` running in another thread (gracefully, as Ctrl-C would) and
        wait up to ``timeout_s`` for it to free its processes and shared memory. Idempotent;
        a closed trainer cannot fit again."""
        with self._lock:
            self._closed = True
            running = self._supervisor if not self._idle.is_set() else None
        if running is not None:
            running.stop()
            if threading.get_ident() == self._fit_thread:
                return  # called from a callback: fit() returns once the run has stopped
            if not self._idle.wait(timeout_s):
                raise TimeoutError(f"the run did not stop within {timeout_s:g} s")

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
