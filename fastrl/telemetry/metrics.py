"""Where the learner's metrics end up: TensorBoard, a console progress line, and the run's
trackers (W&B, MLflow: fastrl.tracking), which get every TensorBoard scalar."""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from fastrl.config import LogConfig
from fastrl.core.files import DiskFull, free_bytes, out_of_space, telling_disk_full
from fastrl.core.timing import JIT, STAGES, format_table
from fastrl.telemetry.csvlog import CsvLog
from fastrl.tracking.tracking import Tracking

#: Every key of the metrics dictionary the learner reports every ``log.metrics_every_s``
#: (``RunResult.metrics``, ``Callback.on_update``), with its meaning; losses are means over
#: the updates since the last report. ``<stage>`` is one of fastrl.core.timing.STAGES, or
#: its JIT (seconds compiling numba kernels, inside the stages).
#: In TensorBoard a key without a ``/`` is ``train/<key>``, a loss key ``loss/<key>``.
METRICS: dict[str, str] = {
    # PPO and APPO
    "policy_loss": "PPO/APPO clipped surrogate loss",
    "value_loss": "PPO/APPO value loss (APPO: towards the V-trace targets)",
    "entropy": "policy entropy (PPO/APPO); SAC: -log pi of the sampled actions",
    "approx_kl": "PPO/APPO approximate KL between the behaviour and the new policy",
    "clip_frac": "PPO/APPO fraction of ratios outside the clip range",
    "grad_norm": "gradient norm before clipping (PPO, APPO, DQN)",
    "explained_variance": "PPO/APPO: how much of the returns' variance the value head explains",
    "lr": "PPO/APPO learning rate of the last update",
    "ring_occupancy": "PPO/APPO: published slots waiting per ring, after the last batch was "
                      "taken",
    "dropped_stale_slots": "PPO/APPO: slots dropped so far for lagging past "
                           "infra.max_policy_lag",
    # DQN / SAC
    "q_loss": "DQN: importance-weighted Huber TD loss; SAC: twin-Q MSE loss",
    "q_mean": "mean Q of the sampled (state, action) pairs",
    "td_abs_mean": "DQN: mean |TD error| of the batch",
    "actor_loss": "SAC actor loss",
    "alpha": "SAC entropy coefficient",
    "replay/fill": "replay buffer fill fraction",
    "replay/samples_per_insert": "transitions sampled per transition inserted so far",
    "replay/sample_age": "mean transitions inserted since the last batch's were",
    # every algorithm
    "policy_version": "learner updates so far (the weights version workers act with)",
    "policy_lag": "largest lag, in policy versions, of the transitions taken since the last "
                  "report (on-policy: when trained on; off-policy: when put in the replay)",
    "policy_lag_mean": "their mean lag",
    "policy_lag/histogram": "their lags as counts: entry k counts the transitions that lagged "
                            "k versions (TensorBoard: a histogram)",
    "episode/return_mean": "mean return of the episodes that ended in this batch/report",
    "episode/return_std": "their standard deviation",
    "episode/return_min": "their minimum",
    "episode/return_max": "their maximum",
    "episode/length_mean": "their mean length",
    "episode/count": "how many episodes ended",
    "supervisor/restarts": "worker restarts in this run so far",
    "supervisor/heartbeat_age_max_s": "age of the stalest live worker's heartbeat",
    "supervisor/worker_lag_max": "weights versions the most behind worker lags",
    "timing/learner/<stage>_s": "learner (serial: the whole process) seconds in <stage>",
    "timing/workers/<stage>_s": "mean over workers of their seconds in <stage> "
                                "(multiprocess runtime); <stage> jit: seconds compiling numba "
                                "kernels, inside the other stages",
}


def metric_documented(key: str) -> bool:
    """True when ``key`` is in :data:`METRICS` (``<stage>`` matching any stage name)."""
    if key in METRICS:
        return True
    parts = key.split("/")
    return len(parts) == 3 and parts[0] == "timing" and parts[2].endswith("_s") and \
        parts[2][:-2] in (*STAGES, JIT) and f"timing/{parts[1]}/<stage>_s" in METRICS


#: TensorBoard writer threads whose disk-full errors threading's excepthook keeps off the
#: console, with the folder they write (see :func:`quiet_disk_full`).
_QUIET_THREADS: dict[threading.Thread, Path] = {}


def quiet_disk_full(threads: set[threading.Thread], folder: Path) -> None:
    """Keep the traceback of a full disk that ends one of ``threads`` (TensorBoard's writer,
    writing ``folder``) off the console: the writer raises its thread's error again at its
    next call, where :class:`MetricsLogger` tells it in one line. Every other error, and
    every other thread's, goes to the hook that was there before."""
    _QUIET_THREADS.update(dict.fromkeys(threads, folder))
    shown = threading.excepthook
    if getattr(shown, "quiets_fastrl_threads", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        folder = _QUIET_THREADS.get(args.thread)
        if folder is None or not out_of_space(args.exc_value, folder):
            shown(args)

    hook.quiets_fastrl_threads = True
    threading.excepthook = hook


#: a group's mean return in an update's statistics (fastrl.learner.report)
GROUP_RETURN = re.compile(r"episode/([^/]+)/return_mean")


class MetricsLogger:
    """Writes update and evaluation metrics to TensorBoard and the console, and every ended
    training episode and every evaluation to ``episodes.csv`` / ``evals.csv`` in the run
    directory (fastrl.telemetry.csvlog); ``tracking`` (fastrl.tracking) gets every scalar
    TensorBoard does, at its step.

    Scalars go under their own names (``episode/return_mean``, ``eval/return_mean``,
    ``loss/policy_loss``, ``supervisor/restarts``, ...) with the env-step count as the x
    axis; ``episode/return`` holds each training episode's own return at the step it ended.
    A resumed run passes its checkpoint's ``start_step``: TensorBoard and the CSV files then
    discard whatever the interrupted run logged after that step, so no step appears twice.
    ``grouped``: the run's rows have groups (agent groups, population members), and
    ``episodes.csv`` a ``group`` column.
    """

    LOSS_KEYS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac",
                 "grad_norm", "explained_variance", "q_loss", "actor_loss")

    def __init__(self, run_dir: Path, cfg: LogConfig, total_steps: int,
                 start_step: int = 0, grouped: bool = False,
                 tracking: Tracking | None = None) -> None:
        self._tracking = tracking or None  # (None: no tracker is on)
        self._writer = None
        self._tb_dir = run_dir / "tb"
        self._tb_threads: set[threading.Thread] = set()
        if cfg.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            started = set(threading.enumerate())
            with telling_disk_full(self._tb_dir):
                self._writer = SummaryWriter(str(self._tb_dir), purge_step=start_step + 1
                                             if start_step else None)
            self._tb_threads = {t for t in set(threading.enumerate()) - started
                                if type(t).__module__.startswith("tensorboard.")}
            quiet_disk_full(self._tb_threads, self._tb_dir)
        self._progress = None
        if cfg.console:
            self._progress = Progress(
                TextColumn("[bold]fastrl"), BarColumn(), TextColumn("{task.completed:,} steps"),
                TextColumn("{task.fields[sps]:,.0f} SPS"),
                TextColumn("return {task.fields[ret]}"), TextColumn("{task.fields[health]}"),
                TimeElapsedColumn(), console=Console(stderr=True),
            )
            self._task = self._progress.add_task("train", total=total_steps, sps=0.0, ret="-",
                                                 health="", completed=start_step)
            self._progress.start()
        self._episodes = CsvLog(run_dir, "episodes.csv", start_step,
                                ("group",) if grouped else ())
        self._evals = CsvLog(run_dir, "evals.csv", start_step)
        self._t0 = time.monotonic()
        self._start_step = start_step
        self._first: tuple[float, int] | None = None  # (time, step) of the first update
        self.last_return: float | None = None
        self._group_returns: dict[str, float] = {}  # each group's last mean return
        self.steps_per_sec = 0.0

    def update(self, step: int, stats: dict[str, float]) -> None:
        """Log one learner update's statistics.

        Steps/sec counts from the first update, so process start-up does not dilute it (from
        the logger's creation until a second update exists).
        """
        now = time.monotonic()
        if self._first is None:
            self._first = (now, step)
        t_ref, step_ref = self._first if now > self._first[0] else (self._t0, self._start_step)
        self.steps_per_sec = (step - step_ref) / max(now - t_ref, 1e-9)
        if "episode/return_mean" in stats:
            self.last_return = stats["episode/return_mean"]
        self._group_returns.update({m[1]: v for m, v in ((GROUP_RETURN.fullmatch(k), v)
                                                        for k, v in stats.items()) if m})
        tagged = {f"loss/{key}" if key in self.LOSS_KEYS else (
            key if "/" in key else f"train/{key}"): value for key, value in stats.items()}
        tagged["train/steps_per_sec"] = self.steps_per_sec
        if self._writer:
            with self._tensorboard():
                for tag, counts in tagged.items():
                    if isinstance(counts, list):
                        self._histogram(tag, counts, step)
        self._scalars([(step, {tag: value for tag, value in tagged.items()
                               if not isinstance(value, list)})])
        if self._progress:
            restarts = stats.get("supervisor/restarts", 0)
            lag = stats.get("supervisor/worker_lag_max", 0)
            health = " ".join(([f"restarts {restarts:.0f}"] if restarts else []) +
                              ([f"lag {lag:.0f}"] if lag else []))
            self._progress.update(self._task, completed=step, sps=self.steps_per_sec,
                                  ret=self._return_shown(), health=health)

    def _return_shown(self) -> str:
        """The progress line's return: the last one reported; with groups (population
        members, agent groups), the median of each group's last, with the best and the
        worst."""
        if len(self._group_returns) > 1:
            ret = sorted(self._group_returns.values())
            return (f"{float(np.median(ret)):.1f} (best {ret[-1]:.1f}, "
                    f"worst {ret[0]:.1f})")
        return "-" if self.last_return is None else f"{self.last_return:.1f}"

    def episodes(self, episodes: dict[str, list]) -> None:
        """Log training episodes, each with its own ``step``, ``return``, ``length`` and
        ``time`` (and ``group``, where rows have groups: lists of equal length, in the order
        the episodes ended)."""
        columns = [episodes[name] for name in self._episodes.columns]
        self._episodes.write(zip(*columns))
        self._scalars([(step, {"episode/return": ret})
                       for step, ret in zip(episodes["step"], episodes["return"])])

    def _scalars(self, rows: list[tuple[int, dict[str, float]]]) -> None:
        """Scalars at their env steps, ``[(step, {tag: value}), ...]``, to TensorBoard and
        to the trackers."""
        if not rows:
            return
        if self._writer:
            with self._tensorboard():
                for step, values in rows:
                    for tag, value in values.items():
                        self._writer.add_scalar(tag, value, step)
        if self._tracking:
            self._tracking.scalars(rows)

    def _histogram(self, tag: str, counts: list[int], step: int) -> None:
        """``counts[k]`` occurrences of the integer ``k`` as a TensorBoard histogram."""
        values = np.arange(len(counts), dtype=np.float64)
        n = np.asarray(counts, np.float64)
        if n.sum() == 0:
            return
        present = values[n > 0]
        self._writer.add_histogram_raw(
            tag, min=present.min(), max=present.max(), num=n.sum(),
            sum=float((values * n).sum()), sum_squares=float((values ** 2 * n).sum()),
            bucket_limits=(values + 0.5).tolist(), bucket_counts=n.tolist(), global_step=step)

    def evaluation(self, step: int, result: dict[str, float], prefix: str = "eval") -> None:
        """Log one evaluation's results as ``<prefix>/<key>`` (``eval``: the learner's,
        ``eval_ckpt``: a checkpoint's, evaluated in its own process)."""
        self._evals.write([[step, time.time(), prefix,
                            *(result.get(k) for k in self._evals.columns[3:])]])
        self._scalars([(step, {f"{prefix}/{key}": value for key, value in result.items()})])
        if self._progress:
            spread = (f"best {result['best_return_mean']:.1f}, median "
                      f"{result['median_return_mean']:.1f}, worst "
                      f"{result['worst_return_mean']:.1f}; IQM {result['iqm_return']:.1f} "
                      f"[{result['iqm_return_ci_low']:.1f}, {result['iqm_return_ci_high']:.1f}]"
                      + (f"; {result['members_solved']:.0f} solved"
                         if "members_solved" in result else "")
                      ) if "iqm_return" in result else f"min {result['return_min']:.0f}"
            self._progress.console.print(
                f"{prefix} @ {step:,} steps: return {result['return_mean']:.1f} "
                f"± {result['return_std']:.1f} ({spread})", soft_wrap=True)

    def custom(self, step: int, scalars: dict[str, float]) -> None:
        """A callback's own scalars, as ``custom/<name>``."""
        self._scalars([(step, {f"custom/{key}": float(value)
                               for key, value in scalars.items()})])

    def timing(self, table: dict[str, dict[str, float]]) -> None:
        """Print the end-of-run table of time per stage and process (fastrl.core.timing) to
        stderr, with or without the progress line."""
        if not table:
            return
        text = "time per stage:\n" + format_table(table)
        if self._progress:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=sys.stderr, flush=True)

    def event(self, step: int, text: str, detail: str | None = None) -> None:
        """A supervisor event (a worker restarted, given up on): one line on the console
        always (stderr), the line and its ``detail`` (a traceback) in TensorBoard's text."""
        if self._progress:
            self._progress.console.print(f"supervisor @ {step:,} steps: {text}",
                                         markup=False, highlight=False, soft_wrap=True)
        else:
            print(f"fastrl supervisor @ {step:,} steps: {text}", file=sys.stderr, flush=True)
        if self._writer:
            body = text + ("\n\n    " + detail.rstrip().replace("\n", "\n    ")
                           if detail else "")
            with self._tensorboard():
                self._writer.add_text("supervisor/events", body, step)

    def checkpoint(self, step: int, path: str) -> None:
        """Note a written checkpoint on the console."""
        if self._progress:
            # soft_wrap: rich would break a long path onto a line of its own
            self._progress.console.print(f"checkpoint @ {step:,} steps: {path}",
                                         markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        """Flush TensorBoard and the CSV logs and end the progress line; a full disk raises
        :class:`~fastrl.core.files.DiskFull` once, after everything is closed."""
        if self._progress:
            self._progress.stop()
            self._progress = None
        try:
            if self._writer:
                with self._tensorboard():
                    self._writer.close()
        finally:
            self._writer = None
            for thread in self._tb_threads:
                _QUIET_THREADS.pop(thread, None)
            try:
                self._episodes.close()
            finally:
                self._evals.close()

    # --- TensorBoard on a full disk -----------------------------------------------------------
    @contextmanager
    def _tensorboard(self) -> Iterator[None]:
        """Calls to the TensorBoard writer: one that fails on a full disk raises
        :class:`~fastrl.core.files.DiskFull` naming the event file, and TensorBoard is
        written no more (its thread is gone, every later call would fail alike)."""
        try:
            yield
        except (OSError, RuntimeError) as e:
            if not out_of_space(e, self._tb_dir):
                raise
            writer, self._writer = self._writer, None
            with suppress(OSError, RuntimeError):  # (its last flush fails the same way)
                writer.close()
            files = sorted(self._tb_dir.glob("events.out.tfevents.*"),
                           key=lambda p: p.stat().st_mtime)
            raise DiskFull(files[-1] if files else self._tb_dir,
                           free_bytes(self._tb_dir)) from None
